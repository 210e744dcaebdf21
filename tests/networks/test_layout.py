"""How a rank-3 observation is laid out: the guess (the odd axis out is the channels,
PettingZoo's boards channels last), the line that says what was chosen, ``net_config``'s
``channels_last`` override, and CNN suggestions and defaults that fit the image they read."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
import torch
import yaml
from gymnasium import spaces

from distmarl.algorithms import IPPO, MADDPG
from distmarl.algorithms.common import observations
from distmarl.networks import EvolvableNetwork, NetConfigError, make_arch, resolve_net_config
from distmarl.networks.cnn_config import default_layers
from distmarl.networks.inputs import ImageInput, VectorInput, image_input, input_spec
from distmarl.networks.net_config import channels_last_of


def box(shape: tuple[int, ...], dtype=np.uint8, high: float = 255) -> spaces.Box:
    return spaces.Box(0, high, shape, dtype)


@pytest.mark.parametrize(("shape", "layout", "chw"), [
    ((8, 8, 111), "HWC", (111, 8, 8)),     # chess_v6
    ((5, 5, 17), "HWC", (17, 5, 5)),       # go_v5, board 5
    ((19, 19, 17), "HWC", (17, 19, 19)),   # go_v5, board 19
    ((6, 7, 2), "HWC", (2, 6, 7)),         # connect_four_v3
    ((13, 13, 5), "HWC", (5, 13, 13)),     # magent2 battle
    ((457, 120, 3), "HWC", (3, 457, 120)),  # pistonball
    ((457, 120, 1), "HWC", (1, 457, 120)),  # pistonball, colour-reduced
    ((457, 120, 12), "HWC", (12, 457, 120)),  # pistonball, 4 RGB frames stacked
    ((210, 160, 3), "HWC", (3, 210, 160)),  # atari-like
    ((84, 84, 4), "HWC", (4, 84, 84)),     # SuperSuit's stacked frames
    ((3, 210, 160), "CHW", (3, 210, 160)),  # channels first
    ((4, 84, 84), "CHW", (4, 84, 84)),
    ((111, 8, 8), "CHW", (111, 8, 8)),     # a board moved to channels first
    ((2, 6, 7), "CHW", (2, 6, 7)),
])
def test_the_axis_that_is_not_spatial_is_read_as_channels(shape, layout, chw) -> None:
    spec = input_spec(box(shape, np.int8, 1))
    assert isinstance(spec, ImageInput)
    assert (spec.layout, spec.chw) == (layout, chw)


def test_tictactoe_stays_a_vector_and_the_description_names_sides_and_channels() -> None:
    assert input_spec(box((3, 3, 2), np.int8, 1)) == VectorInput(18)
    chess = image_input(box((8, 8, 111), np.bool_, 1))
    assert chess.describe() == "image (8, 8, 111) read as channels last (8x8, 111 channels)"
    assert image_input(box((64, 48))).describe() == "image (64, 48) read as one channel (64x48, 1 channel)"


def test_real_chess_and_go_boards_are_read_channels_last() -> None:
    pytest.importorskip("chess")
    from pettingzoo.classic import chess_v6, go_v5

    for env, (h, w, c) in ((chess_v6.env(), (8, 8, 111)), (go_v5.env(board_size=5), (5, 5, 17))):
        agents = env.possible_agents
        obs_spaces = {a: env.observation_space(a) for a in agents}
        act_spaces = {a: env.action_space(a) for a in agents}
        algo = IPPO(obs_spaces, act_spaces, None, seed=0)
        reader = algo.readers[agents[0]]
        assert isinstance(reader.input, ImageInput) and reader.input.chw == (c, h, w)
        group = algo.group_of[agents[0]]
        assert algo.nets.online[f"policy/{group}"].encoder.spec.in_shape == (c, h, w)
        env.reset(seed=0)
        obs, *_ = env.last()
        batch = {k: v[None] for k, v in obs.items()}
        action = algo.act({agents[0]: batch}, explore=True)[agents[0]]
        assert obs["action_mask"][int(action[0])] == 1  # a legal move, from the board as read


BOARD = {"observation": box((8, 8, 111), np.bool_, 1), "action_mask": box((10,), np.int8, 1)}


def board_algo(net_config: dict | None, cls=IPPO) -> IPPO | MADDPG:
    obs = {a: spaces.Dict(BOARD) for a in ("white_0", "black_0")}
    act = {a: spaces.Discrete(10) for a in obs}
    return cls(obs, act, net_config, seed=0)


@pytest.mark.parametrize("cls", [IPPO, MADDPG])
def test_channels_last_in_net_config_overrides_the_guess_per_group(cls) -> None:
    guessed = board_algo(None, cls)
    assert guessed.readers["white_0"].input.chw == (111, 8, 8)  # type: ignore[union-attr]
    forced = board_algo({"white": {"channels_last": False}, "black": {}}, cls)
    assert forced.readers["white_0"].input.chw == (8, 8, 111)  # type: ignore[union-attr]
    assert forced.readers["black_0"].input.chw == (111, 8, 8)  # type: ignore[union-attr]
    everyone = board_algo({"channels_last": False, "latent_dim": 16}, cls)
    assert everyone.readers["black_0"].input.layout == "CHW"  # type: ignore[union-attr]


def test_channels_last_must_be_a_bool_and_stays_out_of_the_network_config() -> None:
    with pytest.raises(NetConfigError, match=r"net_config\['white'\]\['channels_last'\] must be "
                                             r"true or false .* got 'yes'"):
        board_algo({"white": {"channels_last": "yes"}, "black": {}})
    assert channels_last_of({"white_0": {"channels_last": True}, "black": {}},
                            ["white_0", "black_0"]) == {"white_0": True, "black_0": None}
    resolved = resolve_net_config({"channels_last": True}, ["a_0"])
    assert set(resolved["a_0"]) == {"latent_dim", "encoder_config", "head_config"}


def test_the_layout_chosen_is_said_once_per_group(caplog, monkeypatch) -> None:
    monkeypatch.setattr(observations, "_said", set())
    with caplog.at_level(logging.INFO, logger=observations.__name__):
        board_algo(None)
        board_algo(None)
        board_algo({"white": {"channels_last": False}, "black": {}})
    lines = [r.getMessage() for r in caplog.records]
    assert lines.count("agent group 'white': image (8, 8, 111) read as channels last "
                       "(8x8, 111 channels) (set channels_last in net_config to change)") == 1
    assert any(line.startswith("agent group 'black': image (8, 8, 111) read as channels last")
               for line in lines)
    assert ("agent group 'white': image (8, 8, 111) read as channels first (8x111, 8 channels), "
            "as net_config's channels_last says") in lines


def test_a_layout_no_rule_tells_is_a_warning(caplog, monkeypatch) -> None:
    monkeypatch.setattr(observations, "_said", set())
    obs = {"cube_0": box((8, 8, 8))}
    with caplog.at_level(logging.INFO, logger=observations.__name__):
        IPPO(obs, {"cube_0": spaces.Discrete(2)}, None, seed=0)
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "image (8, 8, 8) read as channels last" in record.getMessage()
    assert "a guess: set channels_last" in record.getMessage()


MLP = {"encoder_config": {"hidden_size": [64]}}


@pytest.mark.parametrize("shape", [(6, 7, 2), (84, 84, 3), (4, 4, 3), (33, 40, 3)])
def test_the_cnn_an_mlp_on_an_image_error_suggests_fits_and_builds(shape) -> None:
    image = input_spec(box(shape))
    with pytest.raises(NetConfigError) as err:
        resolve_net_config(MLP, ["a_0"], {"a_0": image})
    message = str(err.value)
    assert f"observes an image {shape} read as channels last" in message
    suggestion = re.search(r"encoder_config: (\{.*?\}), or leave", message)
    assert suggestion is not None, message
    encoder_config = yaml.safe_load(suggestion.group(1))
    cfg = resolve_net_config({"encoder_config": encoder_config}, ["a_0"], {"a_0": image})
    net = EvolvableNetwork.build(make_arch(image, 5, cfg["a_0"]), torch.Generator().manual_seed(0))
    assert net(torch.zeros(2, *shape, dtype=torch.uint8)).shape == (2, 5)
    if shape == (6, 7, 2):
        assert encoder_config["kernel_size"] == [3, 3] and encoder_config["stride_size"] == [1, 1]
    if shape == (84, 84, 3):
        assert encoder_config["kernel_size"] == [8, 4, 3]


@pytest.mark.parametrize("side", range(4, 48))
def test_default_layers_fit_every_image_a_cnn_reads(side) -> None:
    image = image_input(box((side, side + 3, 2)))
    cfg = resolve_net_config(None, ["a_0"], {"a_0": image})
    assert cfg["a_0"]["encoder_config"]["kernel_size"] == default_layers(image)["kernel_size"]
    arch = make_arch(image, 3, cfg["a_0"])
    assert min(arch.encoder.conv_shapes()[-1][1:]) >= 1  # type: ignore[union-attr]
