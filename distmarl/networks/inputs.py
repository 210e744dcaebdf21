"""What a network reads from an observation space, as plain data: a vector, an image, or a dict
of parts.

* :class:`VectorInput`: ``Box`` of rank 0-1 (or any rank when flattened), ``Discrete``
  (one-hot), ``MultiDiscrete`` (one-hot per entry), ``MultiBinary``: read flattened as float.
* :class:`ImageInput`: ``Box`` of rank 3 (channels last or first, see :func:`guess_channels_last`)
  or an integer ``Box`` of rank 2 (one channel, a colour-reduced frame): read by a CNN, kept in
  the env's dtype until the network's first operation scales it.
* :class:`DictInput`: ``Dict`` / ``Tuple`` of the above (a part per key), read by a multi-input
  encoder. PettingZoo's ``action_mask`` key is not an input: it goes to the action head.

:func:`input_spec` chooses; a space no encoder reads is an error naming where in the
observation it sits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from gymnasium import spaces

#: PettingZoo's key for the legal actions in a dict observation.
MASK_KEY = "action_mask"
#: The smallest image side a CNN reads; smaller grids are flattened into a vector.
MIN_IMAGE_SIDE = 4
#: What to do about a ``Sequence`` observation (a variable-length list of rows).
SEQUENCE_HINT = (
    "; a Sequence is a variable-length list of rows, which networks cannot read: give the env "
    "a fixed-size observation instead (knights_archers_zombies_v11: env.kwargs obs_method "
    "'vector' or 'vector-masked', padded to a fixed number of rows, instead of "
    "'vector-sequence'; v10: sequence_space: false)")


@dataclass(frozen=True)
class VectorInput:
    """A flat float vector of width ``dim``."""

    dim: int

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form."""
        return {"kind": "vector", "dim": self.dim}


@dataclass(frozen=True)
class ImageInput:
    """An image: ``shape`` as the env gives it, ``layout`` how to read it, ``scale``/``offset``
    mapping raw values into about ``[0, 1]``."""

    shape: tuple[int, ...]
    layout: Literal["HWC", "CHW", "HW"]
    scale: float
    offset: float

    @property
    def chw(self) -> tuple[int, int, int]:
        """``(C, H, W)``: the image as the convolutions see it."""
        if self.layout == "HWC":
            h, w, c = self.shape
            return c, h, w
        if self.layout == "HW":
            h, w = self.shape
            return 1, h, w
        c, h, w = self.shape
        return c, h, w

    def describe(self) -> str:
        """How the image is read, for messages: ``image (8, 8, 111) read as channels last (8x8,
        111 channels)``."""
        c, h, w = self.chw
        how = {"HWC": "channels last", "CHW": "channels first", "HW": "one channel"}[self.layout]
        return f"image {self.shape} read as {how} ({h}x{w}, {c} channel{'s' * (c != 1)})"

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form."""
        return {"kind": "image", "shape": list(self.shape), "layout": self.layout,
                "scale": self.scale, "offset": self.offset}


@dataclass(frozen=True)
class DictInput:
    """Named parts (``Dict`` keys, or ``Tuple`` indices as strings), in a fixed order."""

    parts: tuple[tuple[str, VectorInput | ImageInput], ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form."""
        return {"kind": "dict", "parts": [[k, p.to_dict()] for k, p in self.parts]}


InputSpec = VectorInput | ImageInput | DictInput


class UnsupportedSpaceError(TypeError):
    """An observation space (or a part of one) that no encoder reads."""


def input_spec(space: spaces.Space, where: str = "observation",
               channels_last: bool | None = None, flatten: bool = False) -> InputSpec:
    """What a network reads from ``space``. ``channels_last`` overrides the layout guess for
    rank-3 images; ``flatten`` reads images as vectors (an MLP over pixels)."""
    if isinstance(space, spaces.Dict):
        items = [(str(k), s) for k, s in space.spaces.items() if k != MASK_KEY]
        return _dict_input(items, space, where, channels_last, flatten)
    if isinstance(space, spaces.Tuple):
        return _dict_input([(str(i), s) for i, s in enumerate(space.spaces)], space, where,
                           channels_last, flatten)
    return leaf_input(space, where, channels_last, flatten)


def _dict_input(items: list[tuple[str, spaces.Space]], space: spaces.Space, where: str,
                channels_last: bool | None, flatten: bool) -> InputSpec:
    if not items:
        raise UnsupportedSpaceError(f"{where}: {space} has no part a network could read")
    if len(items) == 1:  # PettingZoo's {observation, action_mask}: the observation itself
        key, sub = items[0]
        return leaf_input(sub, f"{where}[{key!r}]", channels_last, flatten)
    return DictInput(tuple((k, leaf_input(s, f"{where}[{k!r}]", channels_last, flatten))
                           for k, s in items))


def leaf_input(space: spaces.Space, where: str, channels_last: bool | None = None,
               flatten: bool = False) -> VectorInput | ImageInput:
    """The input for one non-nested space."""
    if isinstance(space, spaces.Box):
        if not flatten and is_image(space, channels_last):
            return image_input(space, channels_last)
        return VectorInput(int(np.prod(space.shape)))
    if isinstance(space, spaces.Discrete):
        return VectorInput(int(space.n))
    if isinstance(space, spaces.MultiDiscrete):
        return VectorInput(int(np.sum(space.nvec)))
    if isinstance(space, spaces.MultiBinary):
        return VectorInput(int(np.prod(space.shape)))
    hint = SEQUENCE_HINT if isinstance(space, spaces.Sequence) else ""
    raise UnsupportedSpaceError(
        f"{where} is {space}, which no encoder reads; encoders take Box (a vector, or an image "
        f"of rank 2 or 3), Discrete, MultiDiscrete, MultiBinary, and Dict or Tuple of them{hint}")


def is_image(space: spaces.Box, channels_last: bool | None = None) -> bool:
    """Rank 3, or rank 2 with an integer dtype (a single-channel frame; a float matrix is a
    vector to flatten), with both spatial sides at least :data:`MIN_IMAGE_SIDE` (a 3x3 board
    is read better flat)."""
    rank = len(space.shape)
    if rank == 2 and np.issubdtype(space.dtype, np.integer):
        return min(space.shape) >= MIN_IMAGE_SIDE
    if rank == 3:
        _, h, w = image_input(space, channels_last).chw
        return min(h, w) >= MIN_IMAGE_SIDE
    return False


def image_input(space: spaces.Box, channels_last: bool | None = None) -> ImageInput:
    """An image's layout (``channels_last`` when given, else :func:`guess_channels_last`) and
    the scaling from its bounds."""
    shape = tuple(int(s) for s in space.shape)
    if len(shape) == 2:
        layout: Literal["HWC", "CHW", "HW"] = "HW"
    else:
        last = channels_last if channels_last is not None else guess_channels_last(shape)
        layout = "HWC" if last else "CHW"
    scale, offset = _scaling(space)
    return ImageInput(shape, layout, scale, offset)


def guess_channels_last(shape: tuple[int, ...]) -> bool:
    """Whether a rank-3 image ``shape`` has its channels last. Channels are the axis that is
    not spatial:

    * two equal sides and a third that differs: the odd one is the channels (chess's
      ``(8, 8, 111)`` and go's ``(5, 5, 17)``: last; ``(4, 84, 84)``: first);
    * otherwise channels first only when the first axis is the smallest of the three
      (``(3, 210, 160)``, ``(2, 6, 7)``), else channels last, PettingZoo's and SuperSuit's
      convention (connect four's ``(6, 7, 2)``, pistonball's ``(457, 120, 3)``).

    :func:`ambiguous_layout` names the shapes where this is a guess."""
    a, b, c = shape
    if a == b != c:
        return True
    if b == c != a:
        return False
    return not (a < b and a < c)


def ambiguous_layout(shape: tuple[int, ...]) -> bool:
    """Rank-3 shapes whose layout no rule tells: three equal sides, or equal first and last
    sides around a different middle one (``(8, 8, 8)``, ``(5, 3, 5)``)."""
    return len(shape) == 3 and shape[0] == shape[2]


def _scaling(space: spaces.Box) -> tuple[float, float]:
    """``x * scale + offset`` maps ``[low, high]`` to ``[0, 1]`` when the bounds are finite and
    the same everywhere; otherwise the values are read as they are."""
    low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
    lo, hi = float(low.min()), float(high.max())
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi <= lo:
        return 1.0, 0.0
    if (low != lo).any() or (high != hi).any() or (lo == 0.0 and hi == 1.0):
        return 1.0, 0.0
    return 1.0 / (hi - lo), -lo / (hi - lo)
