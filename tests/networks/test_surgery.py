"""Every mutation keeps the trained weights on the overlap, and outputs where it promises to."""

from __future__ import annotations

import pytest
import torch

from distmarl.networks import EvolvableMLP, EvolvableNetwork, MLPSpec, make_arch, resolve_net_config
from distmarl.networks import surgery as mut


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def mlp(hidden=(32, 24), activation: str = "ReLU", **kw) -> EvolvableMLP:
    return EvolvableMLP(MLPSpec(5, 3, tuple(hidden), activation=activation, **kw), gen(1))


def x_batch() -> torch.Tensor:
    return torch.randn(16, 5, generator=gen(2))


def assert_overlap_kept(old: torch.nn.Module, new: torch.nn.Module, source: dict) -> int:
    """Each kept parameter equals the old one on the leading overlap; returns how many were kept."""
    old_p, kept = dict(old.named_parameters()), 0
    for name, p in new.named_parameters():
        if source[name] is None:
            continue
        q = old_p[source[name]]
        idx = tuple(slice(0, min(a, b)) for a, b in zip(p.shape, q.shape))
        assert torch.equal(p[idx], q[idx]), name
        kept += 1
    return kept


def test_seeded_build_is_reproducible_and_output_vanish_shrinks_the_last_layer() -> None:
    a, b = mlp(), mlp()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    v = mlp(output_vanish=True)
    assert torch.allclose(v.linears[-1].weight, a.linears[-1].weight * 0.1)
    assert torch.equal(v.linears[0].weight, a.linears[0].weight)


def test_add_layer_is_identity_initialised_and_preserves_relu_outputs() -> None:
    net, x = mlp(), x_batch()
    out = mut.add_layer(net, gen(), preserve_output=True)
    assert out.net.spec.hidden_size == (32, 24, 24)
    assert out.info == {"op": "add_layer", "hidden_size_before": [32, 24], "hidden_size": [32, 24, 24],
                        "output_preserved": True, "layer": 2}
    assert torch.equal(out.net.linears[2].weight, torch.eye(24))
    assert out.source["linears.2.weight"] is None
    assert out.source["linears.3.weight"] == "linears.2.weight"
    assert assert_overlap_kept(net, out.net, out.source) == 6
    torch.testing.assert_close(out.net(x), net(x), rtol=1e-6, atol=1e-6)
    assert net.spec.hidden_size == (32, 24)  # the old network is untouched


def test_add_layer_with_tanh_keeps_weights_but_says_output_not_preserved() -> None:
    net = mlp(activation="Tanh")
    out = mut.add_layer(net, gen(), preserve_output=True)
    assert out.info["output_preserved"] is False
    assert assert_overlap_kept(net, out.net, out.source) == 6
    assert not torch.equal(out.net(x_batch()), net(x_batch()))


def test_add_layer_without_preservation_draws_the_new_layer() -> None:
    out = mut.add_layer(mlp(), gen(), preserve_output=False)
    assert not torch.equal(out.net.linears[2].weight, torch.eye(24))
    assert out.info["output_preserved"] is False


def test_add_nodes_zero_outgoing_weights_preserve_outputs() -> None:
    net, x = mlp(activation="GELU"), x_batch()
    out = mut.add_nodes(net, layer=0, num_nodes=16, generator=gen(), preserve_output=True)
    assert out.net.spec.hidden_size == (48, 24)
    assert out.info["num_nodes"] == 16 and out.info["output_preserved"] is True
    assert torch.count_nonzero(out.net.linears[1].weight[:, 32:]) == 0
    assert torch.count_nonzero(out.net.linears[0].weight[32:]) > 0  # new incoming weights drawn
    assert assert_overlap_kept(net, out.net, out.source) == 6
    torch.testing.assert_close(out.net(x), net(x), rtol=1e-6, atol=1e-6)


def test_add_nodes_without_preservation_changes_outputs_but_keeps_overlap() -> None:
    net = mlp()
    out = mut.add_nodes(net, layer=1, num_nodes=8, generator=gen(), preserve_output=False)
    assert out.net.spec.hidden_size == (32, 32)
    assert assert_overlap_kept(net, out.net, out.source) == 6
    assert not torch.equal(out.net(x_batch()), net(x_batch()))


def test_layer_norm_makes_growth_unpreserving_and_is_reported() -> None:
    net = mlp(layer_norm=True)
    assert mut.add_nodes(net, 0, 16, gen()).info["output_preserved"] is False
    grown = mut.add_layer(net, gen())
    assert grown.info["output_preserved"] is False
    assert grown.source["norms.2.weight"] is None and grown.source["norms.1.weight"] == "norms.1.weight"


def test_remove_nodes_keeps_the_leading_units() -> None:
    net = mlp()
    out = mut.remove_nodes(net, layer=0, num_nodes=8)
    assert out.net.spec.hidden_size == (24, 24)
    assert torch.equal(out.net.linears[0].weight, net.linears[0].weight[:24])
    assert torch.equal(out.net.linears[1].weight, net.linears[1].weight[:, :24])
    assert assert_overlap_kept(net, out.net, out.source) == 6


def test_remove_layer_keeps_earlier_layers_and_the_output_overlap() -> None:
    net = mlp()
    out = mut.remove_layer(net)
    assert out.net.spec.hidden_size == (32,)
    assert out.source == {"linears.0.weight": "linears.0.weight", "linears.0.bias": "linears.0.bias",
                          "linears.1.weight": "linears.2.weight", "linears.1.bias": "linears.2.bias"}
    assert torch.equal(out.net.linears[1].weight[:, :24], net.linears[2].weight)
    assert assert_overlap_kept(net, out.net, out.source) == 4


def test_change_activation_keeps_every_weight() -> None:
    net = mlp()
    out = mut.change_activation(net, "ELU")
    assert isinstance(out.net.act, torch.nn.ELU) and out.net.spec.activation == "ELU"
    assert assert_overlap_kept(net, out.net, out.source) == 6
    assert all(torch.equal(p, q) for p, q in zip(net.parameters(), out.net.parameters()))


def test_bounds_clip_node_counts_and_refuse_layers() -> None:
    spec = dict(max_hidden_layers=2, min_mlp_nodes=20, max_mlp_nodes=40)
    net = mlp(**spec)
    assert mut.add_nodes(net, 0, 64, gen()).info["num_nodes"] == 8  # 32 -> 40
    assert mut.remove_nodes(net, 5, 64).info == {
        "op": "remove_nodes", "hidden_size_before": [32, 24], "hidden_size": [32, 20],
        "output_preserved": False, "layer": 1, "num_nodes": 4}  # layer clamped to the last one
    with pytest.raises(ValueError, match="max_hidden_layers=2"):
        mut.add_layer(net, gen())
    with pytest.raises(ValueError, match="min_hidden_layers=1"):
        mut.remove_layer(mlp(hidden=(32,)))
    with pytest.raises(ValueError, match="max_mlp_nodes=40"):
        mut.add_nodes(mlp(hidden=(40,), **spec), 0, 16, gen())


def network(extra_dim: int = 4) -> EvolvableNetwork:
    cfg = resolve_net_config({"latent_dim": 16, "encoder_config": {"hidden_size": [32]},
                              "head_config": {"hidden_size": [32]}}, ["a_0"])["a_0"]
    return EvolvableNetwork.build(make_arch(6, 2, cfg, extra_dim=extra_dim), gen(3))


@pytest.mark.parametrize("part", ["encoder", "head"])
def test_network_growth_preserves_outputs_and_leaves_the_other_part_alone(part: str) -> None:
    net = network()
    x, extra = torch.randn(8, 6, generator=gen(4)), torch.randn(8, 4, generator=gen(5))
    other = "head" if part == "encoder" else "encoder"
    for out in (net.mutate(part, "add_layer", 0, 16, 0), net.mutate(part, "add_nodes", 0, 16, 0)):
        assert out.info["part"] == part and out.info["output_preserved"] is True
        torch.testing.assert_close(out.net(x, extra), net(x, extra), rtol=1e-6, atol=1e-6)
        assert assert_overlap_kept(net, out.net, out.source) == 8
        new_other, old_other = out.net.part(other), net.part(other)
        assert all(torch.equal(p, q) and p.data_ptr() != q.data_ptr()
                   for p, q in zip(new_other.parameters(), old_other.parameters()))


def test_network_change_activation_switches_both_parts() -> None:
    out = network().change_activation("Tanh")
    assert out.net.encoder.spec.activation == out.net.head.spec.activation == "Tanh"
    assert out.info["activation_before"] == "ReLU" and out.info["part"] == "both"
    assert all(v is not None for v in out.source.values()) and len(out.source) == 8


def test_network_arch_round_trips_as_plain_data() -> None:
    net = network()
    arch = net.arch.to_dict()
    assert arch["extra_dim"] == 4 and arch["head"]["in_dim"] == 20 and arch["encoder"]["out_dim"] == 16
    rebuilt = EvolvableNetwork.build(type(net.arch).from_dict(arch), gen(9))
    assert rebuilt.arch == net.arch
    with pytest.raises(ValueError, match="extra input of width 4"):
        net(torch.zeros(1, 6))
