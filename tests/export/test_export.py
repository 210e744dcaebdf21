"""An exported policy acts as the member did in training: every algorithm, vector, image and
masked dict observations, TorchScript (torch alone) and ONNX (onnxruntime alone)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from distmarl.algorithms import IPPO, MADDPG, MAPPO, MATD3
from distmarl.export import export_policy, load

ALGOS = {"MADDPG": MADDPG, "MATD3": MATD3, "IPPO": IPPO, "MAPPO": MAPPO}
VECTOR = spaces.Box(-np.inf, np.inf, (5,), np.float32)
FRAME = spaces.Box(0, 255, (10, 10, 2), np.uint8)
MASKED = spaces.Dict({"observation": spaces.Box(-np.inf, np.inf, (6,), np.float32),
                      "action_mask": spaces.Box(0, 1, (4,), np.int8)})
#: per observation kind: observation spaces, action spaces, network config
KINDS: dict[str, tuple[dict, dict, dict]] = {
    "vector": ({"a_0": VECTOR, "b_0": VECTOR},
               {"a_0": spaces.Box(-2.0, 2.0, (3,), np.float32),
                "b_0": spaces.Discrete(4, start=1)},
               {"latent_dim": 16, "encoder_config": {"hidden_size": [32]},
                "head_config": {"hidden_size": [32]}}),
    "image": ({"a_0": FRAME, "b_0": FRAME},
              {"a_0": spaces.Box(-1.0, 1.0, (2, 1), np.float32), "b_0": spaces.Discrete(3)},
              {"latent_dim": 16,
               "encoder_config": {"channel_size": [8], "kernel_size": [3], "stride_size": [2]},
               "head_config": {"hidden_size": [16]}}),
    "masked": ({"a_0": MASKED, "a_1": MASKED},
               {"a_0": spaces.Discrete(4), "a_1": spaces.Discrete(4)},
               {"latent_dim": 16, "encoder_config": {"hidden_size": [32]},
                "head_config": {"hidden_size": [32]}}),
}
ROWS = 1000


def observations(kind: str, rng: np.random.Generator) -> dict[str, Any]:
    """``ROWS`` observations per agent: vectors with a few NaNs, random frames, or masked
    dicts with some rows that allow nothing (every action then counts legal)."""
    obs_spaces = KINDS[kind][0]
    if kind == "image":
        return {a: rng.integers(0, 256, (ROWS, 10, 10, 2), dtype=np.uint8) for a in obs_spaces}
    out: dict[str, Any] = {}
    for a in obs_spaces:
        x = rng.standard_normal((ROWS, 6 if kind == "masked" else 5)).astype(np.float32) * 3
        x[rng.random(x.shape) < 0.01] = np.nan
        if kind == "masked":
            mask = (rng.random((ROWS, 4)) < 0.5).astype(np.int8)
            out[a] = {"observation": x, "action_mask": mask}
        else:
            out[a] = x
    return out


#: ``(algorithm, observation kind, format)``: every algorithm and every kind in each format
#: (the actor an algorithm exports and the kind's encoder and mask are independent parts)
CASES = [("MADDPG", "vector", "torchscript"), ("MATD3", "image", "torchscript"),
         ("IPPO", "masked", "torchscript"), ("MAPPO", "vector", "torchscript"),
         ("MADDPG", "masked", "onnx"), ("MATD3", "vector", "onnx"), ("IPPO", "image", "onnx"),
         ("MAPPO", "masked", "onnx")]


@pytest.mark.parametrize(("algo", "kind", "fmt"), CASES, ids=["-".join(c) for c in CASES])
def test_exported_actions_are_the_members_own(algo: str, kind: str, fmt: str,
                                              tmp_path: Path) -> None:
    obs_spaces, act_spaces, net = KINDS[kind]
    member = ALGOS[algo](obs_spaces, act_spaces, net, seed=3)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # weights away from the initial ones (PPO's heads start near zero)
        for a in obs_spaces:
            for p in member.acting_network(a).parameters():
                p.add_(0.3 * torch.randn(p.shape, generator=gen))
    policy = load(export_policy(member, tmp_path / "policy", fmt))  # type: ignore[arg-type]
    obs = observations(kind, np.random.default_rng(7))
    want = member.act(obs, explore=False)
    got = policy.act(obs)
    assert set(got) == set(want)
    for a in want:
        assert got[a].shape == want[a].shape and got[a].dtype == want[a].dtype
        if isinstance(act_spaces[a], spaces.Discrete):
            assert np.array_equal(got[a], want[a]), a
            assert len(np.unique(got[a])) > 1  # a policy that tells observations apart
        else:
            np.testing.assert_allclose(got[a], want[a], rtol=1e-5, atol=1e-6)
    if kind == "masked":  # a legal action wherever one is allowed
        for a, x in obs.items():
            allowed = x["action_mask"].any(axis=1)
            assert x["action_mask"][np.arange(ROWS), got[a]][allowed].all()


def test_distmarl_export_writes_a_trained_members_policy(tmp_path: Path, capsys) -> None:
    """A tiny run's checkpoint, exported by the command as ONNX, acts as its elite does;
    a member that is not there and a missing checkpoint are named."""
    import json

    from distmarl.cli import main
    from distmarl.collect.evaluation import load_member
    from distmarl.config import load_config
    from distmarl.runtime.driver.trainer import train

    tiny = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.yaml"
    cfg = load_config(tiny, [f"tracking.directory={tmp_path}", "tracking.mlflow=false",
                             "training.max_steps_per_member=400"])
    train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    checkpoints = tmp_path / "run" / "checkpoints"
    assert main(["export", str(checkpoints), str(tmp_path / "out"), "--format", "onnx"]) == 0
    said = json.loads(capsys.readouterr().out)
    _, elite, index, _ = load_member(checkpoints)
    assert said["member"] == index and said["format"] == "onnx"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        ["policy.json", *(f"{a}.onnx" for a in elite.agents)])
    policy = load(tmp_path / "out")
    rng = np.random.default_rng(0)
    obs = {a: rng.standard_normal((ROWS, *s.shape)).astype(np.float32)
           for a, s in elite.observation_spaces.items()}
    want, got = elite.act(obs, explore=False), policy.act(obs)
    for a in want:
        np.testing.assert_allclose(got[a], want[a], rtol=1e-5, atol=1e-6)
    readme = readme_act(tmp_path / "out")  # the docs' 10 lines, onnxruntime alone
    for a, x in readme(obs).items():
        np.testing.assert_allclose(x, want[a], rtol=1e-5, atol=1e-6)
    one = policy.act({a: x[0] for a, x in obs.items()})  # one observation: one action
    assert {a: x.shape for a, x in one.items()} == {a: x.shape[1:] for a, x in want.items()}

    assert main(["export", str(checkpoints), str(tmp_path / "x"), "--member", "7"]) == 2
    assert "--member 7 is not a member" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "nowhere"), str(tmp_path / "y")]) == 2
    assert "nowhere" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="not an exported policy"):
        load(tmp_path / "run")


def readme_act(out: Path) -> Any:
    """The docs' onnxruntime snippet, run on the export in ``out``: its ``act``."""
    import re

    readme = (Path(__file__).resolve().parents[2] / "docs" / "use_trained.md").read_text()
    [code] = [c for c in re.findall(r"```python\n(.*?)```", readme, re.S)
              if "onnxruntime.InferenceSession" in c]
    assert 'out = "policy"' in code
    scope: dict[str, Any] = {}
    exec(code.replace('out = "policy"', f"out = {str(out)!r}"), scope)
    return scope["act"]
