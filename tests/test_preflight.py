"""Config problems only the env and the algorithm can see are caught before Ray starts.
One row per case: add rows freely."""

from __future__ import annotations

from pathlib import Path

import pytest

from distmarl.config import ConfigError, load_config
from distmarl.factory import preflight

TINY = Path(__file__).resolve().parents[1] / "examples" / "configs" / "tiny.yaml"

#: tiny.yaml with IPPO members: fragments of 16 steps * 2 envs, 2 members of 1 worker
ON_POLICY = ["algorithm.name=IPPO", "algorithm.hp={learn_step: 16}",
             "evolution.hp_config={lr: {min: 0.0001, max: 0.01}}"]

BAD = [
    ("unknown env", ["env.spec=mpe2:nothing_v1"], ["env.spec 'mpe2:nothing_v1'", "has no 'nothing_v1'"]),
    ("missing package", ["env.spec=not_a_package_xyz:env"], ["not_a_package_xyz"]),
    ("net_config for no such group", ["algorithm.net_config.bob.encoder_config.hidden_size=[3]"],
     ["bob", "speaker_0", "listener_0"]),
    ("on-policy with a rate limit", [*ON_POLICY, "buffer.samples_per_insert=4"],
     ["buffer.samples_per_insert must be null", "IPPO"]),
    ("on-policy fragments overflow the buffer", [*ON_POLICY, "buffer.capacity=100"],
     ["buffer.capacity 100 is too small for IPPO", "at least 256"]),
]


@pytest.mark.parametrize("case,sets,words", BAD, ids=[b[0] for b in BAD])
def test_preflight_names_the_problem(case, sets, words) -> None:
    cfg = load_config(TINY, sets)
    with pytest.raises(ConfigError) as err:
        preflight(cfg)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_preflight_returns_the_env_spaces() -> None:
    obs, act, state = preflight(load_config(TINY))
    assert {a: s.shape for a, s in obs.items()} == {"speaker_0": (3,), "listener_0": (11,)}
    assert {a: s.shape for a, s in act.items()} == {"speaker_0": (3,), "listener_0": (5,)}
    assert state.shape == (14,)  # mpe2's env.state(): the agents' observations side by side
