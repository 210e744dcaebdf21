"""Where runs are kept: a local or shared folder, or an object store, through ``pyarrow.fs``.

``tracking.storage`` (``--storage``) names it: a path (``/mnt/shared/runs``), or a URI of an
object store (``s3://bucket/runs``, ``gs://bucket/runs``, ``hdfs://namenode/runs``). A run
is written in its local run directory as always and copied there as it goes (each checkpoint
once written, everything else at the end; :class:`~distmarl.runtime.records.mirror.Mirror`),
to ``<storage>/<run name>/``. Credentials and endpoints come from the environment, as pyarrow
and the cloud SDKs read them (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``,
``GOOGLE_APPLICATION_CREDENTIALS``, ...); nothing here writes them anywhere.

Object stores have no rename, so a checkpoint is copied file by file with its
``manifest.json`` last (:meth:`Storage.put_checkpoint`): a checkpoint without its manifest is
half-written, and readers skip it (:meth:`Storage.checkpoints`).

    store = Storage("s3://bucket/runs").child("20261202-101500-speaker")
    store.put_checkpoint(Path("runs/.../checkpoints/step-000000012345"))
    local = store.fetch_checkpoint(None, Path(tmp))  # the latest complete one
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlparse

from pyarrow import fs as pafs

from distmarl.checkpoint import MANIFEST, PREFIX

log = logging.getLogger(__name__)

#: schemes of object stores and remote filesystems that pyarrow reaches
REMOTE_SCHEMES = ("s3", "gs", "gcs", "hdfs")
#: words of URI query parameters that carry credentials (refused: they belong in the environment)
SECRET_PARAMS = ("key", "secret", "token", "password", "credential")
#: bytes per read or write of a copied file
BLOCK = 8 << 20

T = TypeVar("T")


class StorageError(ValueError):
    """Storage that cannot be used: an unknown scheme, a bucket that does not exist, no
    credentials, or a store that cannot be reached."""


def is_remote(value: str | Path) -> bool:
    """Whether ``value`` names an object store or remote filesystem (``s3://...``), not a
    local path."""
    return urlparse(str(value)).scheme in REMOTE_SCHEMES


class Storage:
    """The folder ``uri`` names (a path, or ``s3://`` / ``gs://`` / ``hdfs://``); calls that
    fail on a store are tried ``attempts`` times, waiting ``backoff_s`` doubling between
    tries."""

    def __init__(self, uri: str | Path, *, attempts: int = 4, backoff_s: float = 0.5) -> None:
        self.uri = str(uri).rstrip("/")
        parsed = urlparse(self.uri)
        scheme = parsed.scheme
        if parsed.username or parsed.password or any(
                word in parsed.query.lower() for word in SECRET_PARAMS):
            raise StorageError("storage URI carries credentials, which would be written into "
                               "the run's config and MLflow: give them in the environment "
                               "(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, "
                               "GOOGLE_APPLICATION_CREDENTIALS, ...)")
        if scheme and scheme not in (*REMOTE_SCHEMES, "file"):
            raise StorageError(f"storage {self.uri!r}: unknown scheme {scheme}:// (use a path, "
                               "s3://, gs:// or hdfs://)")
        try:
            self.fs, self.root = pafs.FileSystem.from_uri(
                self.uri if scheme else str(Path(self.uri).resolve()))
        except (OSError, ValueError, TypeError) as err:
            raise StorageError(f"storage {self.uri!r}: {err}") from None
        self.attempts, self.backoff_s = attempts, backoff_s
        self.remote = bool(scheme) and scheme != "file"

    def child(self, name: str) -> Storage:
        """The folder ``name`` inside this one."""
        out = Storage.__new__(Storage)
        out.__dict__.update(self.__dict__)
        out.uri, out.root = f"{self.uri}/{name}", f"{self.root}/{name}"
        return out

    def check(self) -> None:
        """Raise :class:`StorageError` naming the problem where the storage cannot be written:
        the bucket does not exist, the store cannot be reached or refuses the credentials."""
        if not self.remote:
            try:
                self.fs.create_dir(self.root, recursive=True)
            except OSError as err:
                raise StorageError(f"storage {self.uri!r}: cannot create the folder: {err}"
                                   ) from None
            return
        bucket = self.root.split("/", 1)[0]
        try:
            info = self.fs.get_file_info(bucket)
        except OSError as err:
            raise StorageError(f"storage {self.uri!r} cannot be reached: {err} (credentials "
                               "and endpoints come from the environment)") from None
        if info.type == pafs.FileType.NotFound:
            raise StorageError(f"storage {self.uri!r}: bucket {bucket!r} does not exist")

    # ------------------------------------------------------------------ files
    def put_file(self, local: Path, rel: str) -> int:
        """Copy the file ``local`` to ``rel`` (inside this folder); its bytes."""
        def put() -> int:
            target = _join(self.root, rel)
            self.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
            with local.open("rb") as src, self.fs.open_output_stream(target) as out:
                shutil.copyfileobj(src, out, BLOCK)
            return local.stat().st_size
        return self._retried(put, f"writing {rel}")

    def get_file(self, rel: str, local: Path) -> None:
        """Copy ``rel`` (inside this folder) to the file ``local``."""
        def get() -> None:
            local.parent.mkdir(parents=True, exist_ok=True)
            with self.fs.open_input_stream(_join(self.root, rel)) as src, local.open("wb") as out:
                shutil.copyfileobj(src, out, BLOCK)
        self._retried(get, f"reading {rel}")

    def names(self, rel: str = "") -> list[str]:
        """The names in the folder ``rel`` (none where it does not exist)."""
        return sorted(i.base_name for i in self._listing(rel, recursive=False))

    def files(self, rel: str = "") -> list[str]:
        """Every file under the folder ``rel``, recursively, as paths relative to it."""
        path = _join(self.root, rel)
        return sorted(i.path[len(path) + 1:] for i in self._listing(rel, recursive=True)
                      if i.type == pafs.FileType.File)

    def _listing(self, rel: str, recursive: bool) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(_join(self.root, rel), allow_not_found=True,
                                     recursive=recursive)
        return list(self._retried(lambda: self.fs.get_file_info(selector),
                                  f"listing {rel or '.'}"))

    def put_tree(self, local: Path, skip: tuple[str, ...] = ()) -> int:
        """Copy every file under the folder ``local`` here (but those under its top-level
        folders ``skip``); the bytes copied."""
        copied = 0
        for path in sorted(p for p in local.rglob("*") if p.is_file()):
            rel = path.relative_to(local)
            if rel.parts[0] not in skip:
                copied += self.put_file(path, rel.as_posix())
        return copied

    def delete(self, rel: str) -> None:
        """Delete the folder ``rel`` and everything in it."""
        self._retried(lambda: self.fs.delete_dir(_join(self.root, rel)), f"deleting {rel}")

    # ------------------------------------------------------------------ checkpoints
    def put_checkpoint(self, folder: Path, rel: str = "checkpoints") -> int:
        """Copy the checkpoint ``folder`` to ``rel/<its name>``, its manifest last; the
        bytes copied."""
        files = sorted(p for p in folder.iterdir() if p.name != MANIFEST)
        copied = sum(self.put_file(p, _join(rel, folder.name, p.name)) for p in files)
        return copied + self.put_file(folder / MANIFEST, _join(rel, folder.name, MANIFEST))

    def checkpoints(self, rel: str = "checkpoints") -> list[str]:
        """The complete checkpoints under ``rel`` (those with their manifest), oldest first."""
        steps = [n for n in self.names(rel) if n.startswith(PREFIX)]
        return [n for n in steps if MANIFEST in self.names(_join(rel, n))]

    def fetch_checkpoint(self, name: str | None, local: Path, rel: str = "checkpoints"
                         ) -> Path:
        """Copy checkpoint ``name`` (None: the latest complete one) to ``local/<name>``; its
        local folder. :class:`StorageError` where there is none."""
        done = self.checkpoints(rel)
        if name is None and not done:
            raise StorageError(f"{self.uri}: no complete checkpoint under {rel or '.'}/")
        name = done[-1] if name is None else name
        if name not in done:
            raise StorageError(f"{self.uri}: no complete checkpoint {_join(rel, name)}")
        return self._copy_folder(_join(rel, name), local / name)

    def fetch_any_checkpoint(self, local: Path) -> Path:
        """This folder as a checkpoint is named on the command line: a checkpoint folder, a
        run's ``checkpoints/`` folder (its latest) or a run folder (its latest), copied to
        ``local``; the local checkpoint folder."""
        names = self.names()
        if MANIFEST in names:
            return self._copy_folder("", local / self.root.rsplit("/", 1)[-1])
        if any(n.startswith(PREFIX) for n in names):
            return self.fetch_checkpoint(None, local, "")
        return self.fetch_checkpoint(None, local)

    def _copy_folder(self, rel: str, local: Path) -> Path:
        """Copy the files of the folder ``rel`` (not its subfolders) into ``local``."""
        for file in self.names(rel):
            self.get_file(_join(rel, file), local / file)
        return local

    def fetch_run(self, local: Path) -> Path:
        """Copy this run folder to ``local``: everything but its checkpoints, and its latest
        complete checkpoint (what a resume needs); the local checkpoint folder."""
        for rel in self.files():
            if not rel.startswith("checkpoints/"):
                self.get_file(rel, local / rel)
        return self.fetch_checkpoint(None, local / "checkpoints")

    def _retried(self, call: Callable[[], T], what: str) -> T:
        delay = self.backoff_s
        for attempt in range(1, self.attempts + 1):
            try:
                return call()
            except OSError as err:
                if attempt == self.attempts:
                    raise StorageError(f"{self.uri}: {what} failed {attempt} times: {err}"
                                       ) from err
                log.warning("%s: %s failed (%s); trying again in %.1f s", self.uri, what, err,
                            delay)
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")


def _join(*parts: str) -> str:
    """``parts`` joined by ``/``, empty ones left out."""
    return "/".join(p.strip("/") if i else p.rstrip("/") for i, p in enumerate(parts) if p)


def fetched_checkpoint(value: str | Path, local: Path) -> Path:
    """The checkpoint ``value`` names as a local path: itself, or (an object store's URI)
    copied to ``local`` first (:meth:`Storage.fetch_any_checkpoint`)."""
    if not is_remote(value):
        return Path(value)
    storage = Storage(value)
    storage.check()
    return storage.fetch_any_checkpoint(local)
