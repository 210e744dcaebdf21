"""Checkpoints: every member's state, the coordinator's state and a buffer snapshot, as data.

Layout of ``RUN_DIR/checkpoints/step-000000012345/``::

    manifest.json        sha256 and size of every file below, the step, the format version
    meta.json            coordinator state: counters, generation, fitness, lineage, RNG states,
                         MLflow run ids, the resolved config (JSON)
    member-0.pt ...      each member's ``state_dict()`` (torch.save; read with weights_only=True)
    buffer.arrow         the replay buffer (Arrow IPC, see distmarl.buffers.io); with replay
                         shards, buffer-0.arrow, buffer-1.arrow ... one per shard
    snapshot-3.pt ...    a league's frozen snapshots: ``get_weights()`` output, arrays as tensors

A checkpoint is written into a temporary folder and renamed into place, so a crash never leaves
half a checkpoint under a real name; the last ``keep_last`` are kept (and any the caller
protects: the best). Loading checks every
checksum first and names the file that does not match. Nothing is ever unpickled.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from distmarl import tree
from distmarl.buffers.io import read_state, write_state

FORMAT_VERSION = 1
PREFIX = "step-"
#: a checkpoint's file written last: a folder without it is not a checkpoint (yet)
MANIFEST = "manifest.json"


class CheckpointError(ValueError):
    """A checkpoint that is missing, truncated, corrupted or of another format."""


@dataclass
class Checkpoint:
    path: Path
    step: int
    meta: dict[str, Any]
    members: list[dict[str, Any]]
    #: each replay shard's state, in shard order (None: the checkpoint holds no buffer)
    buffer_state: list[dict[str, Any]] | None
    #: a league's snapshots' weights by snapshot id (``snapshot/3``), arrays as numpy
    snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


#: the replay buffer's file in a checkpoint directory (one shard)
BUFFER_FILE = "buffer.arrow"


def buffer_files(shards: int) -> list[str]:
    """The replay buffer's files in a checkpoint directory, one per shard."""
    return [BUFFER_FILE] if shards == 1 else [f"buffer-{s}.arrow" for s in range(shards)]


def is_buffer_file(name: str) -> bool:
    """Whether a checkpoint's file ``name`` holds replay rows (a shard's)."""
    return name == BUFFER_FILE or (name.startswith("buffer-") and name.endswith(".arrow"))


def stored_buffer_files(path: Path) -> list[Path]:
    """A checkpoint folder's buffer files, in shard order (none: it holds no buffer)."""
    if (path / BUFFER_FILE).exists():
        return [path / BUFFER_FILE]
    shards = sorted(path.glob("buffer-*.arrow"),
                    key=lambda p: int(p.stem.removeprefix("buffer-")))
    return shards


def save_checkpoint(root: Path, step: int, meta: dict[str, Any], members: list[dict[str, Any]],
                    buffer_state: list[dict[str, Any]] | None = None, keep_last: int = 3,
                    snapshots: dict[str, dict[str, Any]] | None = None,
                    protect: set[str] | frozenset[str] = frozenset()) -> Path:
    """Write a checkpoint for ``step`` under ``root`` atomically; returns its folder. The last
    ``keep_last`` are kept, and those named in ``protect``. ``snapshots``: a league's frozen
    weights by snapshot id (``snapshot/<k>``)."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / folder_name(step)
    tmp = root / f".tmp-{folder_name(step)}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1, default=_json_default))
    for i, state in enumerate(members):
        torch.save(state, tmp / f"member-{i}.pt")
    for name, shard in zip(buffer_files(len(buffer_state or [])), buffer_state or []):
        write_state(shard, tmp / name)
    for sid, weights in (snapshots or {}).items():
        torch.save(_tensors(weights), tmp / f"{_snapshot_file(sid)}.pt")
    files = {p.name: {"sha256": _sha256(p), "bytes": p.stat().st_size}
             for p in sorted(tmp.iterdir())}
    manifest = {"format": FORMAT_VERSION, "step": step, "members": len(members), "files": files}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
    _fsync_dir(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(root)
    prune(root, keep_last, protect)
    return final


def folder_name(step: int) -> str:
    """A checkpoint's folder name at ``step`` (``step-000000012345``)."""
    return f"{PREFIX}{step:012d}"


def _snapshot_file(sid: str) -> str:
    """``snapshot/3`` -> ``snapshot-3`` (checked: a league's ids are ``snapshot/<k>``)."""
    kind, _, k = sid.partition("/")
    if kind != "snapshot" or not k.isdigit():
        raise ValueError(f"a league snapshot id is snapshot/<number>, got {sid!r}")
    return f"snapshot-{k}"


def _tensors(obj: Any) -> Any:
    """Numpy arrays inside ``obj`` as tensors (``torch.load(weights_only=True)`` reads them)."""
    return tree.map(_tensor, obj)


def _tensor(x: Any) -> Any:
    if not isinstance(x, np.ndarray):
        return x
    arr = x if x.flags.writeable else x.copy()  # a copy when read-only (object-store arrays)
    return torch.from_numpy(np.ascontiguousarray(arr))


def _arrays(obj: Any) -> Any:
    """The inverse of :func:`_tensors`."""
    return tree.map(lambda x: x.numpy() if isinstance(x, torch.Tensor) else x, obj)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def list_checkpoints(root: Path) -> list[Path]:
    """Complete checkpoints under ``root``, oldest first."""
    if not root.exists():
        return []
    return sorted(p for p in root.iterdir()
                  if p.is_dir() and p.name.startswith(PREFIX) and (p / MANIFEST).exists())


def prune(root: Path, keep_last: int, protect: set[str] | frozenset[str] = frozenset()) -> None:
    """Delete the checkpoints under ``root`` but the last ``keep_last`` and those named in
    ``protect``."""
    for old in list_checkpoints(root)[:-keep_last] if keep_last > 0 else []:
        if old.name not in protect:
            shutil.rmtree(old, ignore_errors=True)


def verify(path: Path) -> dict[str, Any]:
    """Check the manifest and every file's size and checksum; returns the manifest."""
    manifest_path = path / MANIFEST
    if not manifest_path.exists():
        raise CheckpointError(f"checkpoint {path} has no manifest.json (incomplete or not a checkpoint)")
    try:
        manifest = json.loads(manifest_path.read_text())
    except json.JSONDecodeError as err:
        raise CheckpointError(f"checkpoint manifest {manifest_path} is corrupted: {err}") from None
    if manifest.get("format") != FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {path} has format {manifest.get('format')}, "
                              f"this distmarl reads {FORMAT_VERSION}")
    for name, info in manifest["files"].items():
        file = path / name
        if not file.exists():
            raise CheckpointError(f"checkpoint file {file} is missing")
        size = file.stat().st_size
        if size != info["bytes"]:
            raise CheckpointError(f"checkpoint file {file} is truncated or changed: {size} bytes, "
                                  f"manifest says {info['bytes']}")
        if _sha256(file) != info["sha256"]:
            raise CheckpointError(f"checksum mismatch in checkpoint file {file}: it is corrupted")
    return manifest


def resolve(path: Path) -> Path:
    """The checkpoint folder ``path`` names: itself, or the latest under a ``checkpoints/``
    root."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint {path} does not exist")
    if not (path / MANIFEST).exists() and list_checkpoints(path):
        path = list_checkpoints(path)[-1]
    return path


def read_meta(path: Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """``(folder, manifest, meta)`` of the checkpoint ``path`` names (see :func:`resolve`):
    the two JSON files only, no checksums and no tensors, so a resume can check its config
    against the checkpoint in a moment."""
    path = resolve(path)
    try:
        manifest = json.loads((path / MANIFEST).read_text())
        meta = json.loads((path / "meta.json").read_text())
    except FileNotFoundError as err:
        raise CheckpointError(f"checkpoint {path} is incomplete: {err.filename} is missing"
                              ) from None
    except json.JSONDecodeError as err:
        raise CheckpointError(f"checkpoint {path} has a corrupted JSON file: {err}") from None
    return path, manifest, meta


def load_checkpoint(path: Path, with_buffer: bool = True) -> Checkpoint:
    """Read a checkpoint folder (or the latest under a ``checkpoints/`` root) as data."""
    path = resolve(path)
    manifest = verify(path)
    meta = json.loads((path / "meta.json").read_text())
    members = [torch.load(path / f"member-{i}.pt", weights_only=True, map_location="cpu")
               for i in range(manifest["members"])]
    files = stored_buffer_files(path) if with_buffer else []
    buffer_state = [read_state(f) for f in files] if files else None
    snapshots = {f"snapshot/{p.stem.removeprefix('snapshot-')}":
                 _arrays(torch.load(p, weights_only=True, map_location="cpu"))
                 for p in sorted(path.glob("snapshot-*.pt"))}
    return Checkpoint(path, int(manifest["step"]), meta, members, buffer_state, snapshots)


def agent_spaces(obs_spaces: Mapping[str, Any], act_spaces: Mapping[str, Any]
                 ) -> dict[str, dict[str, str]]:
    """Each agent's observation and action space as text (``Box(-inf, inf, (3,), float32)``),
    in the env's agent order: what a checkpoint records of the env."""
    return {a: {"observation": str(obs_spaces[a]), "action": str(act_spaces[a])}
            for a in obs_spaces}
