"""The multi-input encoder and the mutation operators over every encoder kind."""

from __future__ import annotations

import pytest
import torch

from distmarl.networks import encoders as enc
from distmarl.networks.cnn import CNNSpec, EvolvableCNN
from distmarl.networks.mlp import MLPSpec
from distmarl.networks.multi_input import MultiInputEncoder, MultiInputSpec


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


CNN = CNNSpec(in_shape=(3, 16, 16), out_dim=8, channel_size=(16,), kernel_size=(3,),
              stride_size=(2,), layout="HWC", scale=1 / 255, max_hidden_layers=3)
MLP = MLPSpec(in_dim=2, out_dim=4, hidden_size=(16,), activate_output=True)
MULTI = MultiInputSpec((("camera", CNN), ("speed", MLP)))


def obs(n: int = 5) -> dict[str, torch.Tensor]:
    return {"camera": torch.randint(0, 256, (n, 16, 16, 3), generator=gen(1), dtype=torch.uint8),
            "speed": torch.randn(n, 2, generator=gen(2))}


def test_multi_input_concatenates_parts_and_round_trips() -> None:
    net = MultiInputEncoder(MULTI, gen())
    out = net(obs())
    assert out.shape == (5, 12) and MULTI.out_dim == 12
    torch.testing.assert_close(out[:, :8], net.part("camera")(obs()["camera"]))
    assert enc.encoder_spec_from_dict(MULTI.to_dict()) == MULTI
    assert enc.encoder_spec_from_dict(MLP.to_dict()) == MLP  # an MLP's plain form has no kind
    assert enc.encoder_spec_from_dict(CNN.to_dict()) == CNN
    with pytest.raises(ValueError, match="repeat"):
        MultiInputSpec((("a", MLP), ("a", MLP)))


@pytest.mark.parametrize("op", enc.OPS)
def test_every_operator_changes_a_cnn_and_the_same_seed_changes_it_alike(op: str) -> None:
    two = CNN.with_layers((16, 16), (3, 3), (2, 1), (0, 0))
    base = two if op == "remove_layer" else CNN
    net = EvolvableCNN(base, gen())
    assert enc.can_apply(op, base, 0)
    a = enc.apply(net, op, 0, 32, seed=11, preserve_output=True)
    b = enc.apply(net, op, 0, 32, seed=11, preserve_output=True)
    assert a.net.spec == b.net.spec != base
    assert a.net(obs()["camera"]).shape == (5, 8)


def test_cnn_grow_and_shrink_choose_among_channels_kernel_and_stride() -> None:
    net = EvolvableCNN(CNN, gen())
    seen = {enc.apply(net, "add_nodes", 0, 16, seed=s, preserve_output=True).info["op"]
            for s in range(30)}
    assert seen == {"add_nodes", "change_kernel", "change_stride"}
    grown = enc.apply(net, "add_nodes", 0, 16, seed=0, preserve_output=True)
    if grown.info["op"] == "add_nodes":
        assert grown.net.spec.channel_size == (24,)  # 16 nodes -> 8 channels


def test_multi_input_mutation_changes_one_part_and_keeps_the_other() -> None:
    net = MultiInputEncoder(MULTI, gen())
    result = enc.apply(net, "add_layer", 0, 16, seed=3, preserve_output=True)
    changed = result.info["input"]
    kept = "speed" if changed == "camera" else "camera"
    assert result.net.spec.part(kept) == MULTI.part(kept)
    for name, p in result.net.part(kept).named_parameters():
        assert torch.equal(p, dict(net.part(kept).named_parameters())[name])
        assert result.source[f"parts.{kept}.{name}"] == f"parts.{kept}.{name}"
    torch.testing.assert_close(result.net(obs()), net(obs()))  # ReLU: the new layer is exact
    act = enc.change_activation(net, "ELU")
    assert act.net.spec.activation == "ELU"
    assert all(p.activation == "ELU" for _, p in act.net.spec.parts)


def test_operators_at_their_bounds_say_so() -> None:
    one = CNN.with_layers((16,), (3,), (2,), (0,))
    assert not enc.can_apply("remove_layer", one, 0)
    with pytest.raises(ValueError, match="does not fit"):
        enc.apply(EvolvableCNN(one, gen()), "remove_layer", 0, 16, 0, True)
    with pytest.raises(ValueError, match="unknown encoder operation"):
        enc.apply(EvolvableCNN(one, gen()), "grow", 0, 16, 0, True)
