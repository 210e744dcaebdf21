"""SuperSuit preprocessing from config: parsing, errors that name the entry, and the frames a
preprocessed pistonball gives (the same as SuperSuit applied by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.config import ConfigError, load_config
from distmarl.envs import EnvSpecError, make_env, make_vector_env, parse_wrappers
from distmarl.factory import env_spaces, preflight

supersuit = pytest.importorskip("supersuit")
pytest.importorskip("pymunk")

PISTONBALL = "pettingzoo.butterfly:pistonball_v6"
FRAMES = [{"color_reduction": {"mode": "B"}}, {"resize": {"x_size": 32, "y_size": 24}},
          {"frame_stack": 3}]


def test_entries_parse_to_supersuit_calls() -> None:
    specs = parse_wrappers([*FRAMES, "flatten", {"clip_reward_v0": [-1, 1]}])
    assert [(s.name, s.function) for s in specs] == [
        ("color_reduction", "color_reduction_v0"), ("resize", "resize_v1"),
        ("frame_stack", "frame_stack_v1"), ("flatten", "flatten_v0"),
        ("clip_reward_v0", "clip_reward_v0")]
    assert specs[1].kwargs == (("x_size", 32), ("y_size", 24)) and specs[2].args == (3,)
    assert specs[4].args == (-1, 1)


@pytest.mark.parametrize(("entries", "message"), [
    ([{"frame_stak": 4}], r"env.wrappers\[0\]: unknown wrapper 'frame_stak'; did you mean "
                          r"'frame_stack'\?"),
    ([{"resize": {"width": 64}}], r"env.wrappers\[0\] resize: .*'width'.*resize_v1 takes "
                                  r"x_size, y_size, linear_interp=True"),
    ([{"resize": {"x_size": 64}}], r"resize: missing a required argument: 'y_size'"),
    (["flatten", {"frame_skip": {"frames": 2}}], r"env.wrappers\[1\] frame_skip: .*'frames'.*"
                                                 r"frame_skip_v0 takes num_frames"),
    ([{"resize": 64, "frame_stack": 4}], r"env.wrappers\[0\] must be a wrapper name or"),
])
def test_bad_entries_name_the_entry_and_the_argument(entries, message: str) -> None:
    with pytest.raises(EnvSpecError, match=message):
        parse_wrappers(entries)


def test_preprocessed_pistonball_gives_stacked_uint8_frames_as_supersuit_does() -> None:
    env = make_env(PISTONBALL, wrappers=parse_wrappers(FRAMES), n_pistons=3, max_cycles=10)
    space = env.observation_space("piston_0")
    assert space.shape == (24, 32, 3) and space.dtype == np.uint8
    from pettingzoo.butterfly import pistonball_v6
    by_hand = supersuit.frame_stack_v1(supersuit.resize_v1(supersuit.color_reduction_v0(
        pistonball_v6.parallel_env(n_pistons=3, max_cycles=10), mode="B"), 32, 24), 3)
    obs, _ = env.reset(seed=3)
    ref, _ = by_hand.reset(seed=3)
    for _ in range(3):
        actions = {a: np.ones(1, np.float32) * 0.5 for a in env.agents}
        obs = env.step(actions)[0]
        ref = by_hand.step(actions)[0]
    assert all(np.array_equal(obs[a], ref[a]) for a in ref)
    venv = make_vector_env(PISTONBALL, 2, mode="sync", seed=0, wrappers=parse_wrappers(FRAMES),
                           n_pistons=3, max_cycles=10)
    try:
        vobs, _ = venv.reset(seed=0)
        assert vobs["piston_1"].shape == (2, 24, 32, 3) and vobs["piston_1"].dtype == np.uint8
    finally:
        venv.close()


def test_config_path_checks_wrappers_before_anything_starts(tmp_path) -> None:
    path = tmp_path / "pistonball.yaml"
    path.write_text(f"""
name: pistonball
env:
  spec: "{PISTONBALL}"
  kwargs: {{n_pistons: 3, max_cycles: 10}}
  wrappers: [{{color_reduction: {{mode: B}}}}, {{resize: {{x_size: 32, y_size: 24}}}},
             {{frame_stack: 3}}]
algorithm: {{name: IPPO}}
""")
    cfg = load_config(path)
    assert env_spaces(cfg.env).observation["piston_0"].shape == (24, 32, 3)
    assert preflight(cfg).observation["piston_2"].dtype == np.uint8  # a CNN by default
    with pytest.raises(ConfigError, match=r"env.wrappers\[0\] resize: .*'x'"):
        preflight(load_config(path, ["env.wrappers=[{resize: {x: 32}}]"]))
    with pytest.raises(ConfigError, match=r"observes an image \(24, 32, 3\).*set a CNN config"):
        preflight(load_config(path, ["algorithm.net_config={encoder_config: {hidden_size: [64]}}"]))
