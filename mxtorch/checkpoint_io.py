"""The one way mxtorch writes a file: crash-safe and atomic.

:func:`atomic_write_bytes` writes to a temporary file in the destination folder, flushes and
fsyncs it, renames it over the destination (``os.replace``, atomic on POSIX and Windows), then
fsyncs the folder so that the rename itself survives a power cut.  A crash or an error at any
point leaves the old file (or no file) whole and no temporary file behind.  Every file mxtorch
writes (parameters, trainer and optimizer states, snapshots, ``nd.save``, metrics, cluster state)
goes through it; formats that a library writes (safetensors) are serialized to bytes first.
"""

from __future__ import annotations

import errno
import os
import tempfile

__all__ = ["atomic_write_bytes", "atomic_write_text"]

_NO_DIR_FSYNC = (errno.EINVAL, errno.ENOTSUP, errno.EBADF, errno.EACCES, errno.EISDIR)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data``; a crash leaves either the old or the new file whole."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.tmp-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    """:func:`atomic_write_bytes` for text."""
    atomic_write_bytes(path, text.encode(encoding))


def _fsync_dir(folder: str) -> None:
    """Make the rename durable; file systems and platforms that cannot fsync a folder are skipped."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # e.g. Windows: folders cannot be opened; the rename is durable there
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in _NO_DIR_FSYNC:
            raise
    finally:
        os.close(fd)
