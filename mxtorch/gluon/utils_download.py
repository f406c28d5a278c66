"""``mx.gluon.utils.download``: fetch a file over HTTP(S) when the user asks for it (mxtorch itself
never downloads: data sets and pretrained weights are read from local folders).

The body is streamed to a temporary file beside the target and renamed into place, so readers
never see a partial file and concurrent downloads of one file (several processes) leave one
complete copy.  ``sha1_hash`` checks the result; ``max_bytes`` bounds what is written.
"""

from __future__ import annotations

import logging
import os
import uuid
import warnings
from typing import Any

from ..base import MXNetError

__all__ = ["download", "check_sha1"]

_log = logging.getLogger(__name__)


def check_sha1(filename: str, sha1_hash: str) -> bool:
    """True if the file's SHA-1 equals ``sha1_hash``."""
    import hashlib

    h = hashlib.sha1()
    with open(filename, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest() == sha1_hash


def _target(url: str, path: str | None) -> str:
    name = url.split("/")[-1]
    if path is None:
        return name
    path = os.path.expanduser(path)
    return os.path.join(path, name) if os.path.isdir(path) else path


def _fetch(url: str, fname: str, verify_ssl: bool, max_bytes: int | None) -> str:
    """Stream ``url`` into a temporary file next to ``fname``; its path."""
    import requests  # only code that downloads needs it

    r: Any = requests.get(url, stream=True, verify=verify_ssl)
    if r.status_code != 200:
        raise MXNetError(f"download: {url} answered HTTP {r.status_code}")
    tmp = f"{fname}.{uuid.uuid4()}"
    written = 0
    try:
        with open(tmp, "wb") as f:
            for chunk in r.iter_content(chunk_size=1 << 16):
                written += len(chunk)
                if max_bytes is not None and written > max_bytes:
                    raise MXNetError(f"download: {url} sent more than max_bytes={max_bytes} bytes")
                f.write(chunk)
    except BaseException:
        os.remove(tmp)
        raise
    return tmp


def download(url: str, path: str | None = None, overwrite: bool = False, sha1_hash: str | None = None,
             retries: int = 5, verify_ssl: bool = True, max_bytes: int | None = None) -> str:
    """Download ``url`` to ``path`` (a file, or a folder to put the URL's file name in; default
    the current folder) and return the file's path.  An existing file is kept unless
    ``overwrite`` or its SHA-1 differs from ``sha1_hash``.  Failed attempts are retried
    ``retries`` times; ``verify_ssl=False`` skips certificate checks (with a warning)."""
    if retries < 0:
        raise ValueError(f"download: retries must be >= 0, got {retries}")
    if not verify_ssl:
        warnings.warn("Unverified HTTPS request is being made (verify_ssl=False). Adding certificate "
                      "verification is strongly advised.", stacklevel=2)
    fname = _target(url, path)
    if not (overwrite or not os.path.exists(fname) or (sha1_hash and not check_sha1(fname, sha1_hash))):
        return fname
    folder = os.path.dirname(os.path.abspath(fname))
    os.makedirs(folder, exist_ok=True)
    attempts = retries + 1
    while True:
        try:
            _log.info("downloading %s from %s", fname, url)
            tmp = _fetch(url, fname, verify_ssl, max_bytes)
            if sha1_hash and not check_sha1(tmp, sha1_hash):
                os.remove(tmp)
                raise MXNetError(f"download: {url} arrived with a SHA-1 other than {sha1_hash}: the "
                                 "file on the server may have changed, or the transfer was damaged")
            os.replace(tmp, fname)  # atomic: a concurrent reader sees the old file or the new one
            return fname
        except Exception as e:
            attempts -= 1
            if attempts <= 0:
                raise
            _log.warning("download of %s failed (%s), retrying: %d attempt(s) left", url, e, attempts)
