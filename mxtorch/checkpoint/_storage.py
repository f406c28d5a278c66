"""A checkpoint folder on any file system fsspec reaches: plain paths and ``file://`` (written
with :func:`mxtorch.checkpoint_io.atomic_write_bytes`: temporary file, fsync, rename), and any
other protocol (``memory://``, ``s3://`` with s3fs ...) through fsspec's own calls, where a file
that must appear whole (the manifest) is written under a temporary name and then moved."""

from __future__ import annotations

import os
from typing import Any

from ..checkpoint_io import atomic_write_bytes

__all__ = ["Storage"]


class Storage:
    """Files under one root folder, by names relative to it (``'step-10/manifest.json'``)."""

    def __init__(self, uri: str | os.PathLike[str]) -> None:
        import fsspec
        from fsspec.implementations.local import LocalFileSystem

        self.uri = os.fspath(uri)
        fs, root = fsspec.core.url_to_fs(self.uri)
        self.fs: Any = fs
        self.root = root.rstrip("/") or "/"
        self.local = isinstance(fs, LocalFileSystem)

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if self.root != "/" else f"/{rel}"

    def describe(self, rel: str) -> str:
        """``rel`` as the user would name it (the URI they gave, plus the relative name)."""
        return f"{self.uri.rstrip('/')}/{rel}"

    def write(self, rel: str, data: bytes) -> None:
        """Write one file of a checkpoint (durable on local disks before the manifest is)."""
        p = self.path(rel)
        if self.local:
            atomic_write_bytes(p, data)
            return
        self.fs.makedirs(p.rsplit("/", 1)[0], exist_ok=True)
        self.fs.pipe_file(p, data)

    def commit(self, rel: str, data: bytes) -> None:
        """Make ``rel`` appear whole or not at all: the manifest, written last."""
        p = self.path(rel)
        if self.local:
            atomic_write_bytes(p, data)
            return
        tmp = p + ".tmp"
        self.fs.makedirs(p.rsplit("/", 1)[0], exist_ok=True)
        self.fs.pipe_file(tmp, data)
        self.fs.mv(tmp, p)

    def read(self, rel: str, max_bytes: int | None = None) -> bytes:
        """The bytes of ``rel``; with ``max_bytes``, at most ``max_bytes + 1`` of them are read (a
        caller that gets more knows the file is larger than it may be, without reading it all)."""
        if max_bytes is None:
            return bytes(self.fs.cat_file(self.path(rel)))
        with self.fs.open(self.path(rel), "rb") as f:
            return bytes(f.read(max_bytes + 1))

    def size(self, rel: str) -> int:
        """The size of the file ``rel`` in bytes (FileNotFoundError when it is absent)."""
        return int(self.fs.size(self.path(rel)))

    def escapes(self, rel: str) -> str | None:
        """Why the file ``rel`` may not be read as part of the folder (a link leading outside the
        root, not a regular file), or None when it may.  Only local disks have links."""
        if not self.local:
            return None
        p = self.path(rel)
        real, root = os.path.realpath(p), os.path.realpath(self.root)
        if os.path.commonpath([real, root]) != root:
            return f"it leads to {real!r}, outside {self.uri!r}"
        if os.path.exists(p) and not os.path.isfile(p):  # a device or a pipe would never end
            return "it is not a regular file"
        return None

    def exists(self, rel: str) -> bool:
        return bool(self.fs.exists(self.path(rel)))

    def listdir(self, rel: str = "") -> list[str]:
        """Names (not paths) of the entries in ``rel`` (the root by default); [] when it is absent."""
        p = self.path(rel) if rel else self.root
        try:
            entries = self.fs.ls(p, detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted({str(e).rstrip("/").rsplit("/", 1)[-1] for e in entries} - {""})

    def remove(self, rel: str) -> None:
        """Remove a file (or a folder and everything in it); absent ones are fine."""
        p = self.path(rel)
        try:
            if self.fs.isdir(p):
                self.fs.rm(p, recursive=True)
            elif self.fs.exists(p):
                self.fs.rm(p)
        except FileNotFoundError:
            pass
