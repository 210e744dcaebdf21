"""n-step rows: windows cut at episode ends and at each agent's termination, the same rows
however the stream is chunked, rewards undiscounted with their window's length."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.collect.nstep import N_STEPS_FIELD, NStepWindow

AGENTS = ["a", "b"]


def stream(steps: int, envs: int, seed: int = 0) -> tuple[dict, np.ndarray]:
    """One-step rows of ``steps`` vector steps: obs / next_obs hold ``(step, env)`` ids,
    rewards are ``100 * step + env`` (+ 0.5 for agent b), agent b terminates now and then,
    episodes end now and then."""
    rng = np.random.default_rng(seed)
    s, e = np.meshgrid(np.arange(steps), np.arange(envs), indexing="ij")
    ended = rng.random((steps, envs)) < 0.2
    term_b = (rng.random((steps, envs)) < 0.15) | ended
    rows: dict = {f: {} for f in ("obs", "action", "reward", "next_obs", "terminated",
                                  "truncated", "active")}
    for a in AGENTS:
        rows["obs"][a] = {"observation": np.stack([s, e], -1).reshape(-1, 2).astype(np.float32),
                          "action_mask": np.ones((steps * envs, 3), dtype=np.int8)}
        rows["next_obs"][a] = {"observation": rows["obs"][a]["observation"] + 0.5,
                               "action_mask": rows["obs"][a]["action_mask"]}
        rows["action"][a] = (s * 10 + e).reshape(-1).astype(np.int64)
        rows["reward"][a] = (100.0 * s + e + (0.5 if a == "b" else 0.0)).reshape(-1)
        rows["terminated"][a] = (term_b if a == "b" else ended & (s % 2 == 0)).reshape(-1)
        rows["truncated"][a] = (ended & (s % 2 == 1)).reshape(-1)
        rows["active"][a] = np.ones(steps * envs, dtype=bool)
    return rows, ended


def slice_steps(rows: dict, ended: np.ndarray, lo: int, hi: int, envs: int):
    def cut(x):
        if isinstance(x, dict):
            return {k: cut(v) for k, v in x.items()}
        return x[lo * envs:hi * envs]
    return {f: {a: cut(v) for a, v in per.items()} for f, per in rows.items()}, ended[lo:hi]


def key(out: dict, i: int) -> tuple:
    return tuple(out["obs"]["a"]["observation"][i])


def test_hand_checked_windows_cut_at_the_episode_end_and_the_agents_termination() -> None:
    envs, n = 1, 3
    rows, ended = stream(6, envs)
    ended[:] = False
    ended[3] = True  # the episode ends at step 3
    rows["terminated"]["b"][:] = False
    rows["terminated"]["b"][1] = True  # b terminates at step 1 (a still plays)
    rows["terminated"]["a"][:] = False
    rows["truncated"]["a"][:] = False
    w = NStepWindow(n, envs)
    out = w.add(rows, ended)
    # windows: 0-2, 1-3, 2-3, 3-3 complete; 4 and 5 wait for later steps
    assert [key(out, i)[0] for i in range(len(out["action"]["a"]))] == [0, 1, 2, 3]
    np.testing.assert_array_equal(out[N_STEPS_FIELD]["a"], [3, 3, 2, 1])
    np.testing.assert_allclose(out["reward"]["a"], [[0, 100, 200], [100, 200, 300],
                                                    [200, 300, 0], [300, 0, 0]])
    # b's rewards stop after its own termination at step 1, and it terminated in windows 0, 1
    np.testing.assert_allclose(out["reward"]["b"][:2], [[0.5, 100.5, 0], [100.5, 0, 0]])
    np.testing.assert_array_equal(out["terminated"]["b"], [True, True, False, False])
    np.testing.assert_allclose(out["next_obs"]["a"]["observation"][:, 0], [2.5, 3.5, 3.5, 3.5])
    assert w.pending == 2


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("chunk", [1, 2, 4, 7])
def test_any_chunking_gives_the_rows_of_the_whole_stream(n: int, chunk: int) -> None:
    envs, steps = 3, 28
    rows, ended = stream(steps, envs, seed=n)
    whole = NStepWindow(n, envs).add(rows, ended)
    w = NStepWindow(n, envs)
    parts = [w.add(*slice_steps(rows, ended, lo, min(steps, lo + chunk), envs))
             for lo in range(0, steps, chunk)]
    got = {key(p, i): (p, i) for p in parts for i in range(len(p["action"]["a"]))}
    assert len(got) == len(whole["action"]["a"])  # each row once
    for i in range(len(whole["action"]["a"])):
        p, j = got[key(whole, i)]
        for f in ("reward", "terminated", "truncated", N_STEPS_FIELD, "action"):
            for a in AGENTS:
                np.testing.assert_array_equal(p[f][a][j], whole[f][a][i])
        np.testing.assert_array_equal(p["next_obs"]["b"]["observation"][j],
                                      whole["next_obs"]["b"]["observation"][i])
    # every step leaves exactly once: those still waiting are the last n - 1 steps' rows
    assert len(got) + w.pending == steps * envs
    assert w.pending <= (n - 1) * envs


def test_one_step_windows_pass_rows_through() -> None:
    rows, ended = stream(5, 2)
    out = NStepWindow(1, 2).add(rows, ended)
    np.testing.assert_array_equal(out["reward"]["a"][:, 0], rows["reward"]["a"])
    np.testing.assert_array_equal(out["terminated"]["b"], rows["terminated"]["b"])
    assert (out[N_STEPS_FIELD]["a"] == 1).all()


def test_n_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="n_step must be >= 1, got 0"):
        NStepWindow(0, 2)
