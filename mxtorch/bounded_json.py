"""One reader for every JSON document mxtorch takes from a file or a peer, bounded before it parses.

``json.loads`` of hostile bytes fails in ways its callers do not expect: 100 kB of ``[`` raise
``RecursionError``, a binary file ``UnicodeDecodeError``, and a document nested a few hundred
levels deep parses but then overflows the stack of whatever walks it.  :func:`loads` checks the
size and the nesting depth *before* ``json.loads`` runs (the depth with a few passes of C-speed
bytes operations and a chunked numpy prefix sum: linear time, bounded memory), catches what
``json.loads`` can still raise, checks the top-level type, and raises the caller's own error
class with a one-line message naming the source::

    meta = bounded_json.loads(frame, "a message from worker 3", ProtocolError, expect=dict)

Every limit is a keyword with a documented default; callers that know their documents are small
(wire control frames, manifests) pass smaller ones.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from .base import MXNetError

__all__ = ["MAX_BYTES", "MAX_DEPTH", "loads", "nesting_depth"]

MAX_BYTES = 64 << 20
"""Default size limit of one document (64 MiB: far above any symbol file or manifest)."""
MAX_DEPTH = 64
"""Default nesting limit (MXNet graphs nest 4 deep; Python recursion over 64 levels is safe)."""

# every byte except the four brackets and the quote: deleted before the depth scan
_NOT_STRUCTURAL = bytes(b for b in range(256) if b not in b'"[]{}')
_CHUNK = 1 << 20
_TYPE_NAMES = {dict: "an object", list: "an array", str: "a string", int: "an integer",
               float: "a number", bool: "a boolean", type(None): "null"}


def nesting_depth(raw: bytes, stop_above: int | None = None) -> int:
    """The deepest nesting of arrays and objects in the JSON text ``raw`` (brackets inside strings
    do not count; a malformed text gets a depth at least as deep as what a parser would reach).
    With ``stop_above``, the scan may stop at the first depth found above it."""
    if b"[" not in raw and b"{" not in raw:
        return 0
    # Escapes first, left to right as a JSON scanner reads them: an escaped backslash, then an
    # escaped quote; what remains of the quotes delimits strings, and the even-numbered pieces
    # between quotes are outside every string.
    s = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURAL)
    outside = b"".join(s.split(b'"')[::2])
    depth = best = 0
    for start in range(0, len(outside), _CHUNK):
        arr = np.frombuffer(outside, dtype=np.uint8, count=min(_CHUNK, len(outside) - start), offset=start)
        # '[' 0x5B and '{' 0x7B have bit 1 set, ']' 0x5D and '}' 0x7D do not: +1 / -1 per bracket
        steps = ((arr >> 1) & 1).astype(np.int32) * 2 - 1
        levels = np.cumsum(steps, dtype=np.int64) + depth
        best = max(best, int(levels.max()))
        depth = int(levels[-1])
        if stop_above is not None and best > stop_above:
            break
    return best


def _type_name(t: type) -> str:
    return _TYPE_NAMES.get(t, t.__name__)


def loads(data: bytes | bytearray | memoryview | str, source: str, error: type[Exception] = MXNetError, *,
          max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH, expect: type | None = None) -> Any:
    """The JSON value of ``data`` (UTF-8 bytes or text), or ``error`` (one line naming ``source``).

    Refused before parsing: more than ``max_bytes`` bytes, bytes that are not UTF-8, nesting
    deeper than ``max_depth``.  Refused after: malformed JSON (``json.loads``'s ``ValueError``,
    including integers of more than 4300 digits), and, with ``expect``, a top-level value of
    another type.  Only ``error`` is raised, whatever the input.
    """
    if isinstance(data, str):
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError as e:
            raise error(f"{source}: not valid JSON text ({e.reason} at character {e.start})") from None
    elif isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
    else:  # bytes(n) of an int would allocate n bytes
        raise error(f"{source}: expected JSON text or bytes, got {type(data).__name__}")
    if len(raw) > max_bytes:
        raise error(f"{source}: a JSON document of {len(raw)} bytes is larger than the limit of {max_bytes} "
                    "bytes (corrupt or not what it claims to be?)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{source}: not a JSON text (byte 0x{raw[e.start]:02X} at offset {e.start} is not UTF-8; "
                    "a binary file?)") from None
    depth = nesting_depth(raw, stop_above=max_depth)
    if depth > max_depth:
        raise error(f"{source}: JSON nested at least {depth} levels deep; at most {max_depth} are accepted "
                    "(corrupt or hostile input)")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError, MemoryError) as e:
        raise error(f"{source} is not valid JSON (truncated or corrupt?): {str(e)[:200]}") from None
    if expect is not None and not isinstance(value, expect):
        raise error(f"{source}: the JSON document holds {_type_name(type(value))}, expected "
                    f"{_type_name(expect)}")
    return value
