"""The CNN encoder: shapes per layout, uint8 scaling, geometry errors, and mutations that keep
the weights that still fit (and the output where they promise to)."""

from __future__ import annotations

import pytest
import torch

from distmarl.networks import cnn_surgery as cs
from distmarl.networks.cnn import CNNSpec, EvolvableCNN


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def spec(**kw) -> CNNSpec:
    base = dict(in_shape=(4, 32, 32), out_dim=16, channel_size=(16, 32), kernel_size=(4, 3),
                stride_size=(2, 1), layout="HWC", scale=1 / 255)
    return CNNSpec(**{**base, **kw})


def frames(n: int = 6, shape=(32, 32, 4), seed: int = 3) -> torch.Tensor:
    return torch.randint(0, 256, (n, *shape), generator=gen(seed), dtype=torch.uint8)


@pytest.mark.parametrize(("layout", "shape", "in_shape"), [
    ("HWC", (32, 32, 4), (4, 32, 32)),
    ("CHW", (4, 32, 32), (4, 32, 32)),
    ("HW", (32, 32), (1, 32, 32)),
])
def test_forward_shape_per_layout(layout: str, shape: tuple, in_shape: tuple) -> None:
    net = EvolvableCNN(spec(layout=layout, in_shape=in_shape), gen())
    out = net(frames(shape=shape))
    assert out.shape == (6, 16) and out.dtype == torch.float32
    # 32 -> (32 - 4) // 2 + 1 = 15 -> 13: the linear reads 32 * 13 * 13 features
    assert net.spec.conv_shapes() == [(16, 15, 15), (32, 13, 13)]
    assert net.linear.in_features == 32 * 13 * 13


def test_channels_last_equals_channels_first_and_uint8_equals_scaled_float() -> None:
    hwc = EvolvableCNN(spec(), gen())
    chw = EvolvableCNN(spec(layout="CHW"), gen())
    raw = EvolvableCNN(spec(layout="CHW", scale=1.0), gen())
    x = frames()
    x_chw = x.permute(0, 3, 1, 2).contiguous()
    torch.testing.assert_close(hwc(x), chw(x_chw))
    torch.testing.assert_close(hwc(x), raw(x_chw.float() / 255))


def test_seeded_build_is_reproducible_and_spec_round_trips() -> None:
    a, b = EvolvableCNN(spec(), gen(7)), EvolvableCNN(spec(), gen(7))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    d = a.spec.to_dict()
    assert d["kind"] == "cnn" and d["channel_size"] == [16, 32]
    assert CNNSpec.from_dict(d) == a.spec


def test_geometry_that_leaves_no_output_names_the_layer() -> None:
    with pytest.raises(ValueError, match=r"conv layer 1 \(kernel 8, stride 4.*7x7"):
        spec(in_shape=(1, 16, 16), kernel_size=(3, 8), stride_size=(2, 4))
    with pytest.raises(ValueError, match="kernel_size has 1 entries, channel_size has 2"):
        spec(kernel_size=(3,))


def kept_positions(old: EvolvableCNN, new: EvolvableCNN) -> None:
    """The linear layer keeps each (channel, row, column) weight on the overlap of the maps."""
    oc, oh, ow = old.spec.conv_shapes()[-1]
    nc, nh, nw = new.spec.conv_shapes()[-1]
    o = old.linear.weight.view(-1, oc, oh, ow)
    n = new.linear.weight.view(-1, nc, nh, nw)
    c, h, w = min(oc, nc), min(oh, nh), min(ow, nw)
    assert torch.equal(n[:, :c, :h, :w], o[:, :c, :h, :w])


def test_add_conv_and_add_channels_keep_the_output_exactly() -> None:
    net = EvolvableCNN(spec(), gen())
    x = frames()
    grown = cs.add_conv(net, gen(1))
    assert grown.net.spec.channel_size == (16, 32, 32) and grown.info["output_preserved"]
    assert grown.source["convs.2.weight"] is None and grown.source["convs.1.weight"] == "convs.1.weight"
    torch.testing.assert_close(grown.net(x), net(x))
    for layer in (0, 1):
        wider = cs.add_channels(net, layer, 8, gen(2))
        assert wider.net.spec.channel_size[layer] == net.spec.channel_size[layer] + 8
        torch.testing.assert_close(wider.net(x), net(x))
        old_w = net.conv_layers()[layer].weight
        assert torch.equal(wider.net.conv_layers()[layer].weight[: old_w.shape[0]], old_w)


def test_remove_conv_and_channels_keep_the_overlap() -> None:
    net = EvolvableCNN(spec(channel_size=(16, 32, 32), kernel_size=(4, 3, 3), stride_size=(2, 1, 1)),
                       gen())
    fewer = cs.remove_conv(net)
    assert fewer.net.spec.depth == 2
    assert torch.equal(fewer.net.conv_layers()[1].weight, net.conv_layers()[1].weight)
    kept_positions(net, fewer.net)
    narrower = cs.remove_channels(net, 0, 8)
    assert narrower.net.spec.channel_size == (8, 32, 32)
    assert torch.equal(narrower.net.conv_layers()[1].weight, net.conv_layers()[1].weight[:, :8])
    with pytest.raises(ValueError, match="min_channel_size=8"):
        cs.remove_channels(narrower.net, 0, 8)


def test_change_kernel_keeps_the_centre_and_the_linear_positions() -> None:
    net = EvolvableCNN(spec(), gen())
    bigger = cs.change_kernel(net, 1, 5)
    w_old, w_new = net.conv_layers()[1].weight, bigger.net.conv_layers()[1].weight
    assert w_new.shape[-2:] == (5, 5)
    assert torch.equal(w_new[..., 1:4, 1:4], w_old)  # the old 3x3 in the middle of the 5x5
    kept_positions(net, bigger.net)
    smaller = cs.change_kernel(net, 0, 2)
    assert torch.equal(smaller.net.conv_layers()[0].weight, net.conv_layers()[0].weight[..., 1:3, 1:3])
    assert bigger.net(frames()).shape == (6, 16)


def test_stride_and_kernel_choices_keep_every_map_non_empty() -> None:
    s = spec(in_shape=(1, 12, 12), kernel_size=(3, 3), stride_size=(2, 1))  # 12 -> 5 -> 3
    assert 9 not in cs.kernel_choices(s, 1)  # 9 > 5
    assert cs.kernel_choices(s, 1) == [1, 2, 4, 5]
    assert cs.stride_choices(s, 0) == [1, 3, 4]  # stride 4: 12 -> 3 -> 1
    net = EvolvableCNN(s, gen())
    faster = cs.change_stride(net, 0, 1)
    assert torch.equal(faster.net.conv_layers()[0].weight, net.conv_layers()[0].weight)
    kept_positions(net, faster.net)
    with pytest.raises(ValueError, match="cannot take kernel 9"):
        cs.change_kernel(net, 1, 9)


def test_layer_bounds_are_enforced() -> None:
    net = EvolvableCNN(spec(channel_size=(16,), kernel_size=(4,), stride_size=(2,),
                            max_hidden_layers=2), gen())
    with pytest.raises(ValueError, match="min_hidden_layers"):
        cs.remove_conv(net)
    two = cs.add_conv(net, gen()).net
    with pytest.raises(ValueError, match="max_hidden_layers=2"):
        cs.add_conv(two, gen())
