"""net_config resolution: AgileRL's three forms, defaults, and errors that name agents and groups."""

from __future__ import annotations

import pytest

from distmarl.networks import NetConfigError, resolve_net_config

AGENTS = ["speaker_0", "listener_0", "listener_1"]


def test_none_and_empty_give_the_defaults_to_every_agent() -> None:
    for cfg in (None, {}):
        out = resolve_net_config(cfg, AGENTS)
        assert list(out) == AGENTS
        assert out["speaker_0"] == {
            "latent_dim": 32,
            "encoder_config": {"hidden_size": [64], "activation": "ReLU", "min_hidden_layers": 1,
                               "max_hidden_layers": 3, "min_mlp_nodes": 16, "max_mlp_nodes": 500,
                               "layer_norm": False, "output_vanish": True},
            "head_config": {"hidden_size": [64], "activation": "ReLU", "min_hidden_layers": 1,
                            "max_hidden_layers": 3, "min_mlp_nodes": 16, "max_mlp_nodes": 500,
                            "layer_norm": False, "output_vanish": True},
        }


def test_one_config_for_all_agents_is_copied_per_agent() -> None:
    cfg = {"latent_dim": 16, "encoder_config": {"hidden_size": [32, 32], "activation": "Tanh"}}
    out = resolve_net_config(cfg, AGENTS)
    assert all(out[a]["encoder_config"]["hidden_size"] == [32, 32] for a in AGENTS)
    assert all(out[a]["latent_dim"] == 16 for a in AGENTS)
    assert out["speaker_0"]["head_config"]["hidden_size"] == [64]
    out["speaker_0"]["encoder_config"]["hidden_size"].append(8)  # copies, not shared
    assert out["listener_0"]["encoder_config"]["hidden_size"] == [32, 32]
    assert cfg["encoder_config"]["hidden_size"] == [32, 32]


def test_per_group_config() -> None:
    cfg = {"speaker": {"latent_dim": 8}, "listener": {"latent_dim": 24}}
    out = resolve_net_config(cfg, AGENTS)
    assert [out[a]["latent_dim"] for a in AGENTS] == [8, 24, 24]


def test_per_agent_config_and_mixing_agents_with_groups() -> None:
    per_agent = {"speaker_0": {"latent_dim": 8}, "listener_0": {"latent_dim": 16},
                 "listener_1": {"latent_dim": 24}}
    assert [resolve_net_config(per_agent, AGENTS)[a]["latent_dim"] for a in AGENTS] == [8, 16, 24]
    mixed = {"speaker_0": {"latent_dim": 8}, "listener": {"latent_dim": 24}}
    assert [resolve_net_config(mixed, AGENTS)[a]["latent_dim"] for a in AGENTS] == [8, 24, 24]


def _error(cfg: dict) -> str:
    with pytest.raises(NetConfigError) as info:
        resolve_net_config(cfg, AGENTS)
    return str(info.value)


LISTING = "The env's agents: ['speaker_0', 'listener_0', 'listener_1']; groups: ['speaker', 'listener']."


def test_unknown_key_lists_agents_and_groups() -> None:
    msg = _error({"speaker": {}, "listner": {}})
    assert "['listner'] match no agent or group" in msg and LISTING in msg


def test_network_keys_mixed_with_agent_keys() -> None:
    msg = _error({"latent_dim": 8, "speaker_0": {}})
    assert "mixes network keys ['latent_dim'] with agent/group keys ['speaker_0']" in msg
    assert LISTING in msg


def test_agent_configured_by_both_its_name_and_its_group() -> None:
    msg = _error({"speaker": {}, "listener": {}, "listener_1": {}})
    assert "agent 'listener_1' is configured twice (by ['listener', 'listener_1'])" in msg
    assert LISTING in msg


def test_agent_left_out() -> None:
    msg = _error({"speaker": {}, "listener_0": {}})
    assert "no entry for agent 'listener_1' (nor its group 'listener')" in msg and LISTING in msg


@pytest.mark.parametrize(("cfg", "fragment"), [
    ({"encoder_config": {"hidden": [4]}}, "net_config['encoder_config']: unknown keys ['hidden']"),
    ({"latent_dim": 0}, "net_config['latent_dim'] must be a positive int, got 0"),
    ({"head_config": {"hidden_size": [8]}}, "has sizes outside [16, 500]"),
    ({"head_config": {"hidden_size": [32] * 4}}, "has 4 layers, outside [1, 3]"),
    ({"head_config": {"activation": "Swish"}}, "['activation']='Swish'; choose from"),
    ({"head_config": {"hidden_size": 64}}, "must be a list of ints, got 64"),
    ({"speaker": {"dropout": 0.1}, "listener": {}}, "net_config['speaker']: unknown keys ['dropout']"),
])
def test_invalid_values(cfg: dict, fragment: str) -> None:
    assert fragment in _error(cfg)
