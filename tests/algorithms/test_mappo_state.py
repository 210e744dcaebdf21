"""MAPPO's value networks on the env's global state: ``[own obs, env.state()]`` when built with
a ``state_space`` and ``global_state`` on; the joint observation otherwise. The collector records
the state and the true next state; learning reads them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from distmarl.algorithms import IPPO, MAPPO, ON_POLICY_FIELDS
from distmarl.collect import Collector, fragment_to_batch
from distmarl.config import load_config
from distmarl.envs import make_vector_env
from distmarl.factory import env_spaces, make_algorithm, rollout_spec
from distmarl.types import STATE_FIELDS, RolloutSpec
from tests.algorithms.ppo_helpers import NET

SPREAD = dict(continuous_actions=True, max_cycles=5)
SPREAD_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "configs" / "spread_mappo.yaml"


def spread(num_envs: int = 2, global_state: bool = True):
    return make_vector_env("mpe2:simple_spread_v3", num_envs, mode="sync", seed=0,
                           global_state=global_state, **SPREAD)


def spaces_of(venv) -> tuple[dict, dict]:
    return ({a: venv.single_observation_space(a) for a in venv.possible_agents},
            {a: venv.single_action_space(a) for a in venv.possible_agents})


def value_in(algo, group: str = "agent") -> int:
    return algo.value_net(group).arch.encoder.in_dim


def test_value_input_is_own_obs_and_state_or_the_joint_obs() -> None:
    with spread() as venv:
        obs_sp, act_sp = spaces_of(venv)
        with_state = MAPPO(obs_sp, act_sp, NET, seed=0, state_space=venv.state_space)
        joint = MAPPO(obs_sp, act_sp, NET, hp={"global_state": False}, seed=0,
                      state_space=venv.state_space)
        no_space = MAPPO(obs_sp, act_sp, NET, seed=0)
    assert with_state.spec.global_state and value_in(with_state) == 18 + 54
    assert with_state.spec.fields == (*ON_POLICY_FIELDS, *STATE_FIELDS)
    for algo in (joint, no_space):
        assert not algo.spec.global_state and value_in(algo) == 3 * 18
        assert algo.spec.fields == ON_POLICY_FIELDS
    assert value_in(IPPO(obs_sp, act_sp, NET, seed=0)) == 18


def test_values_read_the_state_and_acting_without_it_is_refused() -> None:
    with spread() as venv:
        obs, infos = venv.reset(seed=0)
        algo = MAPPO(*spaces_of(venv), NET, seed=0, state_space=venv.state_space)
    with pytest.raises(ValueError, match="global_state=True"):
        algo.act_with_info(obs)
    _, extras = algo.act_with_info(obs, state=infos["state"])
    own = torch.as_tensor(obs["agent_1"])
    expect = algo.values("agent", torch.cat([own, torch.as_tensor(infos["state"])], dim=1))
    np.testing.assert_allclose(extras["value"]["agent_1"], expect.detach().numpy(), rtol=1e-6)
    _, moved = algo.act_with_info(obs, state=infos["state"] + 1.0)  # same obs, other state
    assert not np.allclose(moved["value"]["agent_1"], extras["value"]["agent_1"])
    algo.act(obs)  # acting alone needs no state


def test_collected_fragments_carry_state_and_next_values_and_learn() -> None:
    with spread() as venv:
        algo = MAPPO(*spaces_of(venv), NET, seed=0, state_space=venv.state_space)
        data = Collector(venv, algo, seed=0).collect(7).data
    assert list(data) == [*ON_POLICY_FIELDS, *STATE_FIELDS]
    agents = ["agent_0", "agent_1", "agent_2"]
    expect = np.concatenate([data["obs"][a] for a in agents], axis=1)  # spread's state
    for a in agents:  # the same rows under every agent
        np.testing.assert_allclose(data["state"][a], expect)
    # inside an episode a row's next value is the next step's value (of its obs and state);
    # rows 8, 9 (step 4) end the 5-step episodes: theirs is the value of the final observation
    # and state, not of the reset ones the next step's rows start from
    nv, v = data["next_value"]["agent_0"], data["value"]["agent_0"]
    np.testing.assert_array_equal(nv[:8], v[2:10])
    assert not np.allclose(nv[8:10], v[10:12])
    batch = fragment_to_batch(data, num_envs=2)
    before = {k: v.clone() for k, v in algo.value_net("agent").state_dict().items()}
    metrics = algo.learn(batch)
    assert np.isfinite(metrics["loss/value/agent"])
    assert any(not torch.equal(v, algo.value_net("agent").state_dict()[k])
               for k, v in before.items())
    for f in STATE_FIELDS:
        del batch[f]
    with pytest.raises(KeyError, match="lacks the fields"):
        algo.learn(batch)


def test_a_collector_needs_a_venv_that_records_the_state() -> None:
    with spread() as recording:
        algo = MAPPO(*spaces_of(recording), NET, seed=0, state_space=recording.state_space)
    with spread(global_state=False) as venv, pytest.raises(ValueError, match="global_state=True"):
        Collector(venv, algo, seed=0)


def test_global_state_is_fixed_and_survives_clone_and_state_dict() -> None:
    with spread() as venv:
        algo = MAPPO(*spaces_of(venv), NET, seed=0, state_space=venv.state_space)
    with pytest.raises(ValueError, match="global_state is fixed"):
        algo.set_hyperparameter("global_state", False)
    algo.set_hyperparameter("global_state", True)  # unchanged: allowed
    twin = algo.clone()
    assert twin.spec.global_state and value_in(twin) == 72
    for k, v in algo.value_net("agent").state_dict().items():
        assert torch.equal(v, twin.value_net("agent").state_dict()[k])
    assert twin.state_dict()["value_input"] == "own_obs+state"
    joint = MAPPO(*spaces_of(venv), NET, seed=0)
    with pytest.raises(ValueError, match=r"read own_obs\+state, this MAPPO's read joint_obs; "
                                         r"build it with algorithm.hp.global_state=true"):
        joint.load_state_dict(algo.state_dict())
    old = {k: v for k, v in joint.state_dict().items() if k != "value_input"}  # before the key
    with pytest.raises(ValueError, match="global_state=false"):
        algo.load_state_dict(old)
    joint.load_state_dict(old)
    with pytest.raises(ValueError, match="state_space must be a gymnasium Box"):
        MAPPO(*spaces_of(venv), NET, seed=0, state_space="(54,)")
    with pytest.raises(ValueError, match="IPPO has no hyperparameter 'global_state'"):
        IPPO(*spaces_of(venv), NET, hp={"global_state": True}, seed=0)


def test_the_factory_gives_the_state_to_mappo_only_when_asked() -> None:
    cfg = load_config(SPREAD_CONFIG, [])
    spaces = env_spaces(cfg.env)
    assert spaces.state.shape == (54,)
    assert rollout_spec(cfg, spaces) == RolloutSpec(on_policy=True, global_state=True)
    assert make_algorithm(cfg.algorithm, spaces).spec.global_state
    assert rollout_spec(cfg, spaces).fields[-1:] == STATE_FIELDS
    off = load_config(SPREAD_CONFIG, ["algorithm.hp.global_state=false"])
    assert not rollout_spec(off, spaces).global_state
    assert not make_algorithm(off.algorithm, spaces).spec.global_state
    ippo = load_config(SPREAD_CONFIG, ["algorithm.name=IPPO"])
    assert not rollout_spec(ippo, spaces).global_state
    assert not rollout_spec(cfg, spaces[:2]).global_state  # no state space known
    assert rollout_spec(ippo, spaces).fields == ON_POLICY_FIELDS
