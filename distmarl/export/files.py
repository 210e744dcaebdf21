"""Writing a member's greedy policy out, and loading it back with torch or onnxruntime alone.

An export is a folder: ``policy.json`` (the format, and per agent its file, observation dtype
and shape, whether it takes an action mask) and one file per agent, ``<agent>.pt``
(TorchScript) or ``<agent>.onnx`` (ONNX, inputs ``obs`` and, masked, ``action_mask``, output
``action``, the batch axis dynamic). :func:`load` gives an :class:`ExportedPolicy` whose
``act(obs)`` takes what a PettingZoo ``ParallelEnv`` (or a vector env) gives, per agent
``(B, *obs_shape)`` or a dict with ``observation`` and ``action_mask``, and returns actions
as the env takes them.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from distmarl.export.actor import GreedyActor, greedy_actor, observation_and_mask

Format = Literal["torchscript", "onnx"]
FORMATS: tuple[Format, ...] = ("torchscript", "onnx")
MANIFEST = "policy.json"
SUFFIX = {"torchscript": ".pt", "onnx": ".onnx"}


def export_policy(algo: Any, out: Path, fmt: Format) -> Path:
    """Every agent of ``algo`` written to the folder ``out`` (created) in ``fmt``; ``out``."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: one of {', '.join(FORMATS)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    agents: dict[str, Any] = {}
    for agent in algo.agents:
        actor, feed = greedy_actor(algo, agent)
        name = f"{agent}{SUFFIX[fmt]}"
        example = _example(feed)
        if fmt == "torchscript":
            torch.jit.trace(actor, example).save(str(out / name))
        else:
            _to_onnx(actor, example, out / name)
        agents[agent] = {"file": name, **feed}
    (out / MANIFEST).write_text(json.dumps({"format": fmt, "agents": agents}, indent=1))
    return out


def _example(feed: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
    """Two rows of zero observations (and all-legal masks) to trace with."""
    obs = torch.zeros(2, *feed["obs_shape"], dtype=_torch_dtype(feed["obs_dtype"]))
    return (obs, torch.ones(2, feed["mask_size"])) if feed["masked"] else (obs,)


def _to_onnx(actor: GreedyActor, example: tuple[torch.Tensor, ...], path: Path) -> None:
    import importlib.util

    missing = [m for m in ("onnx", "onnxscript") if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(f"writing ONNX needs {' and '.join(missing)}: pip install "
                         "'distmarl[export]' (or write --format torchscript)")
    batch = torch.export.Dim("batch")
    names = ["obs", "action_mask"][:len(example)]
    shapes = dict(zip(["obs", "mask"], [{0: batch}] * len(example), strict=False))
    with warnings.catch_warnings():  # the exporter's notes on its own internals
        warnings.simplefilter("ignore")
        torch.onnx.export(actor, example, str(path), input_names=names,
                          output_names=["action"], dynamic_shapes=shapes, dynamo=True,
                          external_data=False,
                          verbose=False)


def _torch_dtype(name: str) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=name)).dtype


class ExportedPolicy:
    """A loaded export: ``act(obs)`` -> actions per agent (numpy)."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        if not (path / MANIFEST).is_file():
            raise FileNotFoundError(f"{path}: not an exported policy (no {MANIFEST}); write "
                                    "one with `distmarl export`")
        manifest = json.loads((path / MANIFEST).read_text())
        self.format: Format = manifest["format"]
        self.agents: dict[str, dict[str, Any]] = manifest["agents"]
        self._run = {a: _runner(self.format, path / spec["file"])
                     for a, spec in self.agents.items()}

    def act(self, obs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Greedy actions of the agents in ``obs``: per agent ``(B, *obs_shape)``, or a dict
        with ``observation`` and ``action_mask`` ``(B, n)`` (a masked agent without one may
        take any action)."""
        unknown = sorted(set(obs) - set(self.agents))
        if unknown:
            raise KeyError(f"agents {unknown} are not in this policy: {sorted(self.agents)}")
        out = {}
        for agent, x in obs.items():
            spec = self.agents[agent]
            o, mask = observation_and_mask(x)
            o = np.asarray(o, dtype=spec["obs_dtype"])
            if o.ndim == len(spec["obs_shape"]):  # one observation, not a batch
                return_one, o = True, o[None]
                mask = None if mask is None else np.asarray(mask)[None]
            else:
                return_one = False
            inputs = [o]
            if spec["masked"]:
                inputs.append(np.ones((len(o), spec["mask_size"]), np.float32) if mask is None
                              else np.asarray(mask, np.float32).reshape(len(o), -1))
            action = self._run[agent](inputs)
            out[agent] = action[0] if return_one else action
        return out


def _runner(fmt: Format, path: Path) -> Any:
    """A callable from input arrays to the action array, for one agent's file."""
    if fmt == "torchscript":
        module = torch.jit.load(str(path))

        def run_torchscript(inputs: list[np.ndarray]) -> np.ndarray:
            with torch.no_grad():
                return module(*[torch.from_numpy(np.ascontiguousarray(x))
                                for x in inputs]).numpy()
        return run_torchscript
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def run_onnx(inputs: list[np.ndarray]) -> np.ndarray:
        return session.run(None, dict(zip(names, inputs, strict=True)))[0]
    return run_onnx


def load(path: str | Path) -> ExportedPolicy:
    """The exported policy in the folder ``path`` (see the module)."""
    return ExportedPolicy(Path(path))
