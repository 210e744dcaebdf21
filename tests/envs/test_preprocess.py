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


SPREAD = "mpe2:simple_spread_v3"  # three agents, each observing 18 floats


def _config_env(tmp_path, wrappers: str):
    """The env a YAML config's ``env`` section builds (parsed as ``load_config`` reads it)."""
    path = tmp_path / "spread.yaml"
    path.write_text(f"""
name: spread
env:
  spec: "{SPREAD}"
  kwargs: {{N: 3, max_cycles: 25, continuous_actions: false}}
  wrappers: {wrappers}
algorithm: {{name: IPPO}}
""")
    cfg = load_config(path)
    return make_env(cfg.env.spec, wrappers=parse_wrappers(cfg.env.wrappers), **cfg.env.kwargs)


def _raw_spread():
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(N=3, max_cycles=25, continuous_actions=False)


def test_yaml_lists_become_the_tuples_supersuit_checks_for() -> None:
    specs = parse_wrappers([{"reshape": {"shape": [3, 6]}}, {"frame_skip": [[2, 4]]},
                            {"frame_skip_v0": {"num_frames": [1, 3]}}])
    assert specs[0].kwargs == (("shape", (3, 6)),)
    assert specs[1].args == ((2, 4),) and specs[2].kwargs == (("num_frames", (1, 3)),)
    hash(specs)  # plain, hashable data
    with pytest.raises(EnvSpecError, match=r"frame_skip: \[2, 4\] would be num_frames=2, "
                                           r"default_action=4; .*num_frames: \[2, 4\]"):
        parse_wrappers([{"frame_skip": [2, 4]}])


def test_reshape_from_yaml_steps_and_equals_supersuit(tmp_path) -> None:
    """SuperSuit's own reshape test (``test/aec_mock_test.py::test_reshape``) asserts the
    observation has the new shape and equals the original observation reshaped."""
    env = _config_env(tmp_path, "[{reshape: {shape: [3, 6]}}]")
    by_hand = supersuit.reshape_v0(_raw_spread(), (3, 6))
    raw = _raw_spread()
    assert env.observation_space("agent_0").shape == (3, 6)
    obs, _ = env.reset(seed=5)
    ref, _ = by_hand.reset(seed=5)
    base, _ = raw.reset(seed=5)
    for step in range(4):
        actions = {a: (step + i) % 5 for i, a in enumerate(env.agents)}
        if step:
            obs, ref, base = (e.step(actions)[0] for e in (env, by_hand, raw))
        for a in env.agents:
            assert obs[a].shape == (3, 6)
            assert np.array_equal(obs[a], base[a].reshape([3, 6]))
            assert np.array_equal(obs[a], ref[a])


def test_frame_skip_range_from_yaml_steps_and_equals_supersuit(tmp_path) -> None:
    """SuperSuit supports ``frame_skip_v0`` on parallel envs (its ``frame_skip_par``): each
    step repeats the action a number of frames drawn from ``[low, high]`` by the env's own
    generator and sums the rewards. From YAML it matches SuperSuit applied by hand."""
    env = _config_env(tmp_path, "[{frame_skip: {num_frames: [2, 4]}}]")
    by_hand = supersuit.frame_skip_v0(_raw_spread(), (2, 4))
    obs, _ = env.reset(seed=7)
    ref, _ = by_hand.reset(seed=7)
    assert all(np.array_equal(obs[a], ref[a]) for a in ref)
    for step in range(5):
        actions = {a: (step + i) % 5 for i, a in enumerate(env.agents)}
        got, want = env.step(actions), by_hand.step(actions)
        for a in want[0]:
            assert np.array_equal(got[0][a], want[0][a]) and got[1][a] == want[1][a]
    # a fixed count: one wrapped step is that many raw steps, rewards summed
    fixed = _config_env(tmp_path, "[{frame_skip: {num_frames: [3, 3]}}]")
    raw = _raw_spread()
    fixed.reset(seed=1)
    raw.reset(seed=1)
    actions = {a: 1 for a in raw.agents}
    obs, rew = fixed.step(actions)[:2]
    total = {a: 0.0 for a in raw.agents}
    for _ in range(3):
        raw_obs, raw_rew = raw.step(actions)[:2]
        total = {a: total[a] + raw_rew[a] for a in total}
    assert all(np.array_equal(obs[a], raw_obs[a]) for a in raw.agents)
    assert all(rew[a] == pytest.approx(total[a]) for a in raw.agents)
