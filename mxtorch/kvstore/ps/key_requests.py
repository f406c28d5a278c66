"""What a parameter server checks and decodes in the key requests workers send: the slice an
INIT describes (its shape, dtype, storage type and worker group must agree with every earlier
INIT of it), a PUSH's value (dense, compressed or row-sparse), the row ids of row-sparse pushes
and ROW_PULLs, and the dtype of a narrower pull.  Functions of the request and the key slice
(a slice's first INIT adds it to the table); :class:`~.server.ParameterServer` acts on what they
return.  A bad request raises :class:`~mxtorch.kvstore.base.KVStoreError` or
:class:`~.protocol.ProtocolError`, which the server answers with an ERROR.
"""

from __future__ import annotations

from typing import Any

import torch

from ...compression import CompressionError
from ..base import Key, KVStoreError
from . import protocol as P
from .codec import decode_push
from .protocol import Flag, Message, ProtocolError
from .rows import Rows
from .shard import LOW_PRECISION, KeyShard

__all__ = ["init_slice", "decode_push_request", "decode_rows", "row_ids", "narrow_dtype"]


def init_slice(shards: dict[tuple[Key, int], KeyShard], msg: Message, worker: int,
               num_workers: int) -> KeyShard:
    """The key slice the INIT ``msg`` from ``worker`` names, made (and added to ``shards``) at its
    first INIT; later INITs must describe it alike, and a worker inits a slice once."""
    m = msg.meta or {}
    try:
        shape = tuple(int(s) for s in m["shape"])
        dtype = P.dtype_from_name(m["dtype"])
        num_shards, offset, numel = int(m["num_shards"]), int(m["offset"]), int(m["numel"])
        kind = str(m.get("kind", "dense"))
        group = m.get("workers")
        workers = None if group is None else frozenset(int(w) for w in group)
        prefix = m.get("prefix")
        index = None if prefix is None else P.key_from_json(m["index"])
    except (KeyError, TypeError, ValueError):
        raise ProtocolError("malformed INIT message") from None
    if prefix is not None and (not isinstance(prefix, str) or workers is None):
        raise ProtocolError("INIT names a key prefix without a worker group, or a prefix that is not a str")
    if workers is not None and (worker not in workers or
                                not all(0 <= w < num_workers for w in workers)):
        raise ProtocolError(f"INIT from worker {worker} names the worker group {sorted(workers)}, which "
                            f"must contain it and only ranks 0..{num_workers - 1}")
    if msg.key is None:
        raise ProtocolError("INIT without a key")
    if kind not in ("dense", "row_sparse"):
        raise ProtocolError(f"INIT of unknown kind {kind!r}")
    desc = (shape, dtype, num_shards, offset, numel, kind)
    sh = shards.get((msg.key, msg.shard))
    if sh is None:
        sh = KeyShard(msg.key, msg.shard, num_shards, shape, dtype, offset, numel, kind)
        sh.workers, sh.group, sh.index = workers, prefix, index
        shards[(msg.key, msg.shard)] = sh
    elif (sh.shape, sh.dtype, sh.num_shards, sh.offset, sh.numel, sh.kind) != desc:
        raise KVStoreError(
            f"{sh.describe()}: worker {worker} initializes it as {kind} shape {shape} "
            f"{P.dtype_name(dtype)} (slice {offset}+{numel}), but it already is {sh.kind} shape "
            f"{sh.shape} {P.dtype_name(sh.dtype)} (slice {sh.offset}+{sh.numel}): every worker must init "
            "the same keys with the same shapes, dtypes and storage types, in the same order")
    elif sh.workers != workers or (sh.group, sh.index) != (prefix, index):
        def show(g: frozenset[int] | None, group: str | None) -> str:
            return "every worker" if g is None else f"workers {sorted(g)} (key prefix {group!r})"

        raise KVStoreError(f"{sh.describe()}: worker {worker} initializes it for {show(workers, prefix)}, "
                           f"but it is already the key of {show(sh.workers, sh.group)}: a key belongs to one "
                           "group of workers (give each group's keys their own names)")
    if worker in sh.inited_by and sh.value is not None and not sh.restored:  # restored: an INIT sent again
        raise KVStoreError(f"{sh.describe()} was already initialized by worker {worker}: init each key "
                           "once")
    return sh


def decode_push_request(sh: KeyShard, msg: Message, worker: int, decoder: Any,
                        server_rank: int) -> torch.Tensor | Rows:
    """What a PUSH from ``worker`` carries: the dense value, its compressed payloads decoded with
    ``decoder`` (the compressor the worker declared, None if none), or rows (row-sparse)."""
    if msg.flags & Flag.ROW_SPARSE:
        return decode_rows(sh, msg, worker)
    if msg.flags & Flag.COMPRESSED:
        if decoder is None:
            raise KVStoreError(f"{sh.describe()}: worker {worker} pushed a compressed value but has not "
                               f"declared a compressor to server {server_rank} "
                               "(kv.set_gradient_compression)")
        try:
            return decode_push(decoder, msg.tensors, sh.value_shape, sh.dtype)
        except (CompressionError, RuntimeError, ValueError) as e:
            raise KVStoreError(f"{sh.describe()}: server {server_rank} cannot decode worker {worker}'s "
                               f"{decoder.name} payload: {e}") from e
    if len(msg.tensors) != 1:
        raise ProtocolError(f"PUSH carries {len(msg.tensors)} tensors, expected 1")
    grad = msg.tensors[0]
    if tuple(grad.shape) != sh.value_shape or grad.dtype != sh.dtype:
        raise KVStoreError(
            f"{sh.describe()}: worker {worker} pushed shape {tuple(grad.shape)} "
            f"{P.dtype_name(grad.dtype)}, "
            f"but the key holds {sh.value_shape} {P.dtype_name(sh.dtype)}: push values of the shape and "
            "dtype the key was initialized with")
    return grad


def row_ids(sh: KeyShard, ids: torch.Tensor, worker: int) -> torch.Tensor:
    """Validated row ids of a row-sparse push or ROW_PULL (int64, sorted, unique, in range)."""
    if not sh.shape:
        raise KVStoreError(f"{sh.describe()} is a scalar: it has no rows (worker {worker})")
    if ids.dtype != torch.int64 or ids.dim() != 1:
        raise ProtocolError(f"row ids must be a 1-D int64 tensor, got {tuple(ids.shape)} {ids.dtype}")
    if ids.numel():
        if int(ids[0]) < 0 or int(ids[-1]) >= sh.shape[0] or \
                (ids.numel() > 1 and not bool((ids[1:] > ids[:-1]).all())):
            raise KVStoreError(f"{sh.describe()}: worker {worker} sent row ids that are not sorted, "
                               f"unique and within 0..{sh.shape[0] - 1}")
    return ids


def decode_rows(sh: KeyShard, msg: Message, worker: int) -> Rows:
    if msg.flags & Flag.COMPRESSED or len(msg.tensors) != 2:
        raise ProtocolError("a row-sparse PUSH carries [row ids, rows], uncompressed")
    ids, values = msg.tensors
    ids = row_ids(sh, ids, worker)
    expected = (ids.numel(), *sh.shape[1:])
    if tuple(values.shape) != expected or values.dtype != sh.dtype:
        raise KVStoreError(f"{sh.describe()}: worker {worker} pushed rows of shape {tuple(values.shape)} "
                           f"{P.dtype_name(values.dtype)}, expected {expected} {P.dtype_name(sh.dtype)} "
                           "(one row of the key per row id)")
    return Rows(ids, values.reshape(ids.numel(), sh.row))


def narrow_dtype(sh: KeyShard, code: int) -> torch.dtype | None:
    """The dtype a narrower pull asks for (None: the key is not float32, it travels as it is)."""
    narrow = P.dtype_from_code(code)
    if narrow not in LOW_PRECISION:
        raise ProtocolError(f"a narrower pull must ask for float16 or bfloat16, not {narrow}")
    return narrow if sh.dtype == torch.float32 else None
