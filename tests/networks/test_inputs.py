"""Which encoder input each observation space gets, and errors that name the part no encoder reads."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from distmarl.networks.inputs import (
    DictInput,
    ImageInput,
    UnsupportedSpaceError,
    VectorInput,
    input_spec,
)


def frame(shape: tuple[int, ...], dtype=np.uint8, high: float = 255) -> spaces.Box:
    return spaces.Box(0, high, shape, dtype)


def test_vectors_and_discrete_spaces_are_flat_widths() -> None:
    assert input_spec(spaces.Box(-1, 1, (11,), np.float32)) == VectorInput(11)
    assert input_spec(spaces.Box(-1, 1, (3, 4), np.float32)) == VectorInput(12)  # float matrix
    assert input_spec(spaces.Discrete(5)) == VectorInput(5)
    assert input_spec(spaces.MultiDiscrete([3, 4])) == VectorInput(7)
    assert input_spec(spaces.MultiBinary(6)) == VectorInput(6)


@pytest.mark.parametrize(("shape", "layout", "chw"), [
    ((64, 64, 4), "HWC", (4, 64, 64)),     # SuperSuit's stacked frames
    ((457, 120, 3), "HWC", (3, 457, 120)),  # pistonball
    ((4, 84, 84), "CHW", (4, 84, 84)),
    ((64, 48), "HW", (1, 64, 48)),          # colour-reduced, unstacked
])
def test_images_get_their_layout_and_uint8_scaling(shape, layout, chw) -> None:
    spec = input_spec(frame(shape))
    assert isinstance(spec, ImageInput)
    assert (spec.layout, spec.chw) == (layout, chw)
    assert spec.scale == pytest.approx(1 / 255) and spec.offset == 0.0


def test_layout_override_flatten_and_scaling_from_bounds() -> None:
    space = frame((6, 7, 2), np.int8, high=1)  # connect four's board: already 0/1
    spec = input_spec(space)
    assert isinstance(spec, ImageInput) and spec.layout == "HWC"
    assert (spec.scale, spec.offset) == (1.0, 0.0)
    assert input_spec(frame((8, 9, 10)), channels_last=False).layout == "CHW"  # type: ignore[union-attr]
    assert input_spec(space, channels_last=False) == VectorInput(84)  # 6 channels of 7x2: too thin
    assert input_spec(frame((3, 3, 2), np.int8, 1)) == VectorInput(18)  # tictactoe: read flat
    assert input_spec(frame((64, 64, 4)), flatten=True) == VectorInput(64 * 64 * 4)
    signed = input_spec(spaces.Box(-1.0, 1.0, (8, 8, 3), np.float32))
    assert isinstance(signed, ImageInput)
    assert signed.scale * 1.0 + signed.offset == pytest.approx(1.0)
    assert signed.scale * -1.0 + signed.offset == pytest.approx(0.0)
    unbounded = input_spec(spaces.Box(-np.inf, np.inf, (8, 8, 3), np.float32))
    assert (unbounded.scale, unbounded.offset) == (1.0, 0.0)  # type: ignore[union-attr]


def test_pettingzoo_mask_dict_reads_its_observation_and_dicts_read_every_part() -> None:
    board = spaces.Dict({"observation": frame((6, 7, 2), np.int8, 1),
                         "action_mask": spaces.Box(0, 1, (7,), np.int8)})
    assert isinstance(input_spec(board), ImageInput)
    mixed = spaces.Dict({"camera": frame((32, 32, 3)), "speed": spaces.Box(-1, 1, (2,)),
                         "action_mask": spaces.Box(0, 1, (4,), np.int8)})
    spec = input_spec(mixed)
    assert isinstance(spec, DictInput)
    assert [k for k, _ in spec.parts] == ["camera", "speed"]
    assert spec.parts[1][1] == VectorInput(2)
    tup = input_spec(spaces.Tuple((spaces.Discrete(3), spaces.Box(-1, 1, (4,)))))
    assert tup == DictInput((("0", VectorInput(3)), ("1", VectorInput(4))))


def test_a_space_no_encoder_reads_is_named_with_its_place() -> None:
    nested = spaces.Dict({"pos": spaces.Box(-1, 1, (2,)), "name": spaces.Text(8)})
    with pytest.raises(UnsupportedSpaceError, match=r"agent 'a_0'\['name'\] is Text"):
        input_spec(nested, "agent 'a_0'")
    with pytest.raises(UnsupportedSpaceError, match="no part a network could read"):
        input_spec(spaces.Dict({"action_mask": spaces.Box(0, 1, (3,), np.int8)}))


def test_a_sequence_observation_is_refused_with_the_fixed_size_alternative() -> None:
    rows = spaces.Sequence(spaces.Box(-1.0, 1.0, (11,), np.float64), stack=True)
    with pytest.raises(UnsupportedSpaceError) as err:
        input_spec(rows, "agent 'archer_0''s observation")
    message = str(err.value)
    assert message.startswith("agent 'archer_0''s observation is Sequence(")
    assert "obs_method 'vector' or 'vector-masked'" in message and "sequence_space: false" in message
    with pytest.raises(UnsupportedSpaceError, match="Text") as other:
        input_spec(spaces.Text(8))
    assert "Sequence is a variable-length" not in str(other.value)
