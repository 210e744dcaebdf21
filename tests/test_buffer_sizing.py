"""The buffer's size by family and the memory it will take: on-policy rings sized from the
fragments they must hold (unless ``buffer.capacity`` is set), the bytes per row estimated from
the env's spaces (checked against a real buffer filled by a real collector on a 100-agent env
of magent2 battle's view), and a preflight error when the ring cannot fit the machine."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from distmarl.buffers import MultiAgentReplayBuffer
from distmarl.collect import Collector
from distmarl.config import ConfigError, ExperimentConfig, load_config
from distmarl.config.replay import REPLAY_CAPACITY
from distmarl.envs.footprint import buffer_memory_problem, machine_memory, row_bytes
from distmarl.factory import (
    buffer_kwargs,
    check_buffer_memory,
    env_spaces,
    make_algorithm,
    make_venv,
    preflight,
    rollout_spec,
)

TINY = Path(__file__).resolve().parents[1] / "examples" / "configs" / "tiny.yaml"
#: tiny.yaml on the 100-agent toy env, with the buffer section left to its defaults
CROWD = ["env.spec=tests.envs.toy_envs:CrowdEnv", "env.kwargs={}", "algorithm.net_config={}",
         "buffer={}"]
#: IPPO members: fragments of 16 steps * 2 envs, 2 members of 1 worker
IPPO = ["algorithm.name=IPPO", "algorithm.hp={learn_step: 16}",
        "evolution.hp_config={lr: {min: 0.0001, max: 0.01}}"]


def crowd(*sets: str) -> ExperimentConfig:
    return load_config(TINY, [*CROWD, *sets])


def test_on_policy_capacity_left_out_holds_twice_the_fragments_in_flight() -> None:
    cfg = crowd(*IPPO)
    # 2 members * (1 worker + 1) fragments * 16 steps * 2 envs, twice
    assert cfg.buffer.capacity == 2 * 4 * 16 * 2 == 256
    wider = crowd(*IPPO, "population.workers_per_member=3", "env.num_envs=4",
                  "evolution.hp_config={learn_step: {min: 8, max: 40, dtype: int}}")
    assert wider.buffer.capacity == 2 * (2 * 4) * 40 * 4
    again = ExperimentConfig.model_validate(yaml.safe_load(cfg.to_yaml()))
    assert again.buffer.capacity == 256  # what `config show` and `submit` write reads the same


def test_a_capacity_the_user_sets_is_kept_and_replay_keeps_its_default() -> None:
    assert crowd(*IPPO, "buffer.capacity=5000").buffer.capacity == 5000
    assert crowd().buffer.capacity == REPLAY_CAPACITY  # MADDPG
    with pytest.raises(ConfigError, match=r"buffer\.capacity 100 is too small for IPPO: 4 "
                                          r"fragments of up to 16 steps \* 2 envs can wait unread; "
                                          r"use at least 256 \(or leave buffer\.capacity out\)"):
        preflight(crowd(*IPPO, "buffer.capacity=100"))


#: MADDPG's critics read every agent's view: 6 agents keep building them quick
FEW = ["env.kwargs={n_agents: 6}", "replay.n_step=1", "buffer.capacity=64"]


@pytest.mark.parametrize(("sets", "agents"), [(IPPO, 100), (FEW, 6)], ids=["IPPO", "MADDPG"])
def test_row_bytes_match_a_real_buffer_of_agents_with_13x13x5_views(sets, agents) -> None:
    cfg = crowd(*sets)
    spaces = env_spaces(cfg.env)
    assert len(spaces.observation) == agents
    spec = rollout_spec(cfg, spaces)
    fields = spec.fields
    estimate = row_bytes(fields, spaces.observation, spaces.action)
    algo = make_algorithm(cfg.algorithm, spaces, seed=0)
    venv = make_venv(cfg.env, seed=0)
    try:
        rollout = Collector(venv, algo, seed=0).collect(3)
    finally:
        venv.close()
    buffer = MultiAgentReplayBuffer(**buffer_kwargs(cfg, list(spaces.observation), spec))
    buffer.add(rollout.data)
    real = buffer.stats()["bytes"] / cfg.buffer.capacity
    assert estimate == pytest.approx(real, rel=0.02)
    obs_per_agent = 13 * 13 * 5 * 4
    assert estimate > agents * obs_per_agent * (2 if "next_obs" in fields else 1)


def test_on_policy_default_fits_where_a_replay_sized_ring_would_not() -> None:
    cfg = crowd(*IPPO)
    spaces = env_spaces(cfg.env)
    check_buffer_memory(cfg, spaces)  # 256 rows of about 340 KB
    nbytes = row_bytes(rollout_spec(cfg, spaces).fields, spaces.observation, spaces.action)
    assert 256 * nbytes < 0.2e9 < REPLAY_CAPACITY * nbytes
    with pytest.raises(ValueError) as err:
        check_buffer_memory(cfg, spaces, memory=50 * nbytes)
    message = str(err.value)
    assert message.startswith("buffer.capacity 256 rows x about 340.")
    assert "at most 50 rows fit; IPPO needs 256 rows (2 x 4 fragments of 16 steps x 2 envs): " \
           "lower algorithm.hp.learn_step, env.num_envs or population.workers_per_member" in message


@pytest.mark.parametrize(("sets", "agents"), [(IPPO, 100), (["env.kwargs={n_agents: 4}"], 4)],
                         ids=["IPPO", "MADDPG"])
def test_a_capacity_beyond_the_machine_is_a_preflight_error(sets, agents) -> None:
    rows = 4 * machine_memory() // (agents * 3_000) + 1  # > 4x the machine: >= 3 KB per agent
    with pytest.raises(ConfigError) as err:
        preflight(crowd(*sets, f"buffer.capacity={rows}"))
    message = str(err.value)
    assert f"buffer.capacity {rows} rows x about " in message
    assert f"(one env step of {agents} agents)" in message
    assert "more than this machine's memory" in message


def test_memory_problem_names_rows_sizes_and_what_fits() -> None:
    assert buffer_memory_problem(10, 100, 1000, 2) is None
    assert buffer_memory_problem(3_800_000, 16_000, 32 * 10**9, 4) == (
        "buffer.capacity 3800000 rows x about 16.0 KB per row (one env step of 4 agents) = "
        "60.8 GB, more than this machine's memory (32.0 GB); at most 2000000 rows fit")
