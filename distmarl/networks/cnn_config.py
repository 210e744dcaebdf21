"""``encoder_config`` for image observations (AgileRL's ``CnnNetConfig`` names), validated and
completed against the image it will read.

::

    {"channel_size": [32, 64], "kernel_size": [8, 4], "stride_size": [4, 2],
     "activation": "ReLU", "min_hidden_layers": 1, "max_hidden_layers": 4,
     "min_channel_size": 8, "max_channel_size": 256, "max_kernel_size": 9, "max_stride": 4}

Left out, the conv layers default by image size: Nature DQN's three layers (32/64/64 channels,
kernels 8/4/3, strides 4/2/1) for images of :data:`NATURE_MIN_SIDE` pixels a side or more, two
layers of 32 channels with stride 1 and kernels of 3 (less where the image is too small for
3) for smaller ones (a 6x7 board). Either way each layer's output is at least 1x1.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from distmarl.networks.cnn import CNNSpec
from distmarl.networks.inputs import ImageInput
from distmarl.networks.mlp import ACTIVATIONS

DEFAULT_CNN_BOUNDS: dict[str, Any] = {
    "activation": "ReLU",
    "min_hidden_layers": 1,
    "max_hidden_layers": 4,
    "min_channel_size": 8,
    "max_channel_size": 256,
    "max_kernel_size": 9,
    "max_stride": 4,
}
LAYER_KEYS: tuple[str, ...] = ("channel_size", "kernel_size", "stride_size")
CNN_KEYS: tuple[str, ...] = (*LAYER_KEYS, *DEFAULT_CNN_BOUNDS)
#: Keys only a CNN config has (``activation`` and the layer bounds are shared with the MLP's).
CNN_ONLY_KEYS: frozenset[str] = frozenset(CNN_KEYS) - {"activation", "min_hidden_layers",
                                                       "max_hidden_layers"}


#: The smallest image side Nature DQN's layers fit (36 -> 8 -> 3 -> 1).
NATURE_MIN_SIDE = 36


class CNNConfigError(ValueError):
    """An invalid CNN ``encoder_config``."""


def default_layers(image: ImageInput) -> dict[str, list[int]]:
    """Conv layers for an image when the config gives none; they fit it (see the module)."""
    _, h, w = image.chw
    side = min(h, w)
    if side >= NATURE_MIN_SIDE:
        return {"channel_size": [32, 64, 64], "kernel_size": [8, 4, 3], "stride_size": [4, 2, 1]}
    kernels = []
    for _ in range(2):
        kernels.append(max(1, min(3, side)))
        side -= kernels[-1] - 1
    return {"channel_size": [32, 32], "kernel_size": kernels, "stride_size": [1, 1]}


def complete_cnn_config(cfg: Mapping[str, Any] | None, where: str,
                        image: ImageInput) -> dict[str, Any]:
    """Validate a CNN config against ``image`` and fill in defaults (layers by image size)."""
    cfg = dict(cfg or {})
    unknown = sorted(set(cfg) - set(CNN_KEYS))
    if unknown:
        raise CNNConfigError(f"{where}: unknown keys {unknown} for an image encoder; allowed: "
                             f"{list(CNN_KEYS)}")
    given = [k for k in LAYER_KEYS if k in cfg]
    if given and len(given) < len(LAYER_KEYS):
        missing = [k for k in LAYER_KEYS if k not in cfg]
        raise CNNConfigError(f"{where} gives {given} but not {missing}: give all three "
                             "(one entry per conv layer), or none for the default layers")
    layers = {k: cfg[k] for k in LAYER_KEYS} if given else default_layers(image)
    out = {"kind": "cnn", **copy.deepcopy(DEFAULT_CNN_BOUNDS), **copy.deepcopy(cfg),
           **copy.deepcopy(layers)}
    for key in LAYER_KEYS:
        out[key] = _positive_ints(out[key], f"{where}['{key}']")
    for key in DEFAULT_CNN_BOUNDS:
        if key != "activation" and (not isinstance(out[key], int) or isinstance(out[key], bool)
                                    or out[key] < 1):
            raise CNNConfigError(f"{where}['{key}'] must be an int >= 1, got {out[key]!r}")
    if out["activation"] not in ACTIVATIONS:
        raise CNNConfigError(f"{where}['activation']={out['activation']!r}; "
                             f"choose from {list(ACTIVATIONS)}")
    try:
        cnn_spec(out, image, out_dim=1)
    except ValueError as e:
        raise CNNConfigError(f"{where} for an {image.describe()}: {e}") from e
    return out


def cnn_spec(cfg: Mapping[str, Any], image: ImageInput, out_dim: int) -> CNNSpec:
    """The spec of a CNN reading ``image`` from a completed config."""
    n = len(cfg["channel_size"])
    if not cfg["min_hidden_layers"] <= n <= cfg["max_hidden_layers"]:
        raise ValueError(f"{n} conv layers, outside [{cfg['min_hidden_layers']}, "
                         f"{cfg['max_hidden_layers']}] (min_hidden_layers, max_hidden_layers)")
    return CNNSpec(
        in_shape=image.chw, out_dim=out_dim, channel_size=tuple(cfg["channel_size"]),
        kernel_size=tuple(cfg["kernel_size"]), stride_size=tuple(cfg["stride_size"]),
        layout=image.layout, scale=image.scale, offset=image.offset,
        **{k: cfg[k] for k in DEFAULT_CNN_BOUNDS})


def _positive_ints(value: Any, where: str) -> list[int]:
    if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value):
        raise CNNConfigError(f"{where} must be a non-empty list of positive ints, got {value!r}")
    return list(value)
