"""Value normalisation: exact running moments, normalised targets, values in return units."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from distmarl.algorithms.onpolicy.fragment import clean_fragment
from distmarl.algorithms.onpolicy.value_norm import RunningMoments
from distmarl.config.hparams import check_hp_value
from tests.algorithms.ppo_helpers import fragment, make, observations


def test_running_moments_match_numpy_over_uneven_chunks() -> None:
    rng = np.random.default_rng(0)
    chunks = [rng.normal(-40.0, 7.0, n) for n in (5, 1, 0, 300, 17)]
    moments = RunningMoments()
    x = torch.arange(3.0)
    assert torch.equal(moments.denormalise(x), x)  # identity before any sample
    for c in chunks:
        moments.update(torch.as_tensor(c, dtype=torch.float32))
    every = np.concatenate(chunks).astype(np.float32).astype(np.float64)
    assert moments.count == every.size == 323
    assert moments.mean == pytest.approx(every.mean(), rel=1e-12)
    assert moments.var == pytest.approx(every.var(), rel=1e-9)
    assert torch.allclose(moments.denormalise(moments.normalise(x)), x, atol=1e-5)
    other = RunningMoments()
    other.load_state_dict({k: np.float64(v) for k, v in moments.state_dict().items()})
    assert other.state_dict() == moments.state_dict()


def test_a_constant_target_does_not_divide_by_zero() -> None:
    moments = RunningMoments()
    moments.update(torch.full((10,), 3.0))
    assert moments.var == 0.0 and moments.std > 0
    assert torch.equal(moments.normalise(torch.tensor([3.0])), torch.tensor([0.0]))


@pytest.mark.parametrize("algo", ["IPPO", "MAPPO"])
def test_learn_takes_in_each_groups_active_targets(algo: str) -> None:
    agent = make(algo, "mixed", seed=3, batch_size=16, update_epochs=1)
    batch = fragment(agent, t=6, e=2, seed=4)
    batch["active"]["agent_1"][:, 1] = False  # some inactive rows are not targets
    reference = agent.clone()
    frag = clean_fragment(batch, reference.readers,
                          {a: reference.heads[g] for a, g in reference.group_of.items()},
                          reference.device)
    _, target = reference._advantages(frag)
    agent.learn(batch)
    for group, members in agent.groups.items():
        t = torch.cat([target[a][frag[a].active] for a in members]).double().numpy()
        m = agent.value_moments[group]
        assert m.count == t.size
        assert m.mean == pytest.approx(t.mean(), rel=1e-9)
        assert m.var == pytest.approx(t.var(), rel=1e-6)
    assert agent.value_moments["agent"].count == 6 * 2 * 3 - 6


def test_values_are_in_return_units() -> None:
    agent = make("MAPPO", "box", seed=2)
    obs = observations(4, seed=1)
    _, before = agent.act_with_info(obs, explore=False)
    moments = agent.value_moments["agent"]
    moments.mean, moments.var, moments.count = -50.0, 100.0, 1.0
    _, after = agent.act_with_info(obs, explore=False)
    for a in ("agent_0", "agent_1", "agent_2"):
        assert np.allclose(after["value"][a], before["value"][a] * 10.0 - 50.0, atol=1e-4)
    assert np.array_equal(after["value"]["speaker_0"], before["value"]["speaker_0"])
    off = make("MAPPO", "box", seed=2, value_norm=False)
    off.value_moments["agent"].load_state_dict(moments.state_dict())  # ignored when off
    _, raw = off.act_with_info(obs, explore=False)
    assert np.array_equal(raw["value"]["agent_0"], before["value"]["agent_0"])


def test_value_network_fits_normalised_targets() -> None:
    """Rewards of about -100 a step: with normalisation the value network's raw outputs stay
    O(1) while the values (denormalised) reach the targets' scale."""
    agent = make("IPPO", "box", seed=5, batch_size=48, update_epochs=8, lr=3e-3)
    for k in range(6):
        batch = fragment(agent, t=6, e=2, seed=10 + k)
        batch["reward"] = {a: r - 100.0 for a, r in batch["reward"].items()}
        agent.learn(batch)
    m = agent.value_moments["agent"]
    assert m.mean < -150.0  # gamma 0.99, at most 5 steps to an episode end
    obs = torch.as_tensor(observations(64, seed=3)["agent_0"])
    with torch.no_grad():
        raw = agent.value_net("agent")(obs).squeeze(-1)
        values = agent.values("agent", obs)
    assert raw.abs().mean() < 3.0
    assert values.mean() < -100.0


def test_value_norm_is_a_bool_fixed_at_build_time() -> None:
    with pytest.raises(ValueError, match="value_norm must be true or false, got 1"):
        check_hp_value("IPPO", "value_norm", 1)
    agent = make("IPPO", "box")
    assert agent.hp["value_norm"] is True
    agent.set_hyperparameter("value_norm", True)  # unchanged is fine
    with pytest.raises(ValueError, match="value_norm is fixed"):
        agent.set_hyperparameter("value_norm", False)
    assert agent.hp["value_norm"] is True


def test_a_state_without_moments_is_refused_by_name() -> None:
    agent = make("IPPO", "box")
    state = agent.state_dict()
    state["format"] = 1
    del state["value_norm"]
    other = make("IPPO", "box", seed=1)
    before = other.state_dict()
    with pytest.raises(ValueError, match=r"format 1.*reads format 2"):
        other.load_state_dict(state)
    assert other.learn_steps == before["learn_steps"]
