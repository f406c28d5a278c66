"""Server snapshots: one safetensors file per server, written atomically.

``<MXTORCH_PS_SNAPSHOT_DIR>/server-<rank>.safetensors`` holds every value slice and every
optimizer-state tensor of the server; its safetensors metadata entry ``mxtorch.ps`` is a JSON
document describing them (keys, shapes, dtypes, versions, the optimizer declaration, update
counts; besides the job's optimizer, ``group_optimizers``: ``[[key prefix, declaration and
states], ...]``, one per worker group whose optimizer runs on the servers, and each slice's
group prefix and index; snapshots without them load as before).  The file is written to a
temporary name and renamed, so a crash leaves the previous snapshot whole.  Reading never
unpickles: safetensors for tensors, JSON for the rest.

A restarted server (same ``DMLC_SERVER_ID``) loads its snapshot, replays the write-ahead log
written since (:mod:`.wal`, :mod:`.recovery`; the snapshot's ``wal_generation`` names the log
that follows it) and serves from there: nothing a worker was told of is lost (workers send the
requests they still wait on again; :mod:`.shard` counts each push once).  With the log off
(``MXTORCH_PS_WAL=0``) the updates after the snapshot are lost: automatic snapshots come once
every slice completed ``MXTORCH_PS_SNAPSHOT_EVERY`` more rounds, so a server killed in the middle
of a step then loses the rounds of that step its slices completed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

import torch

from ... import bounded_json
from ...checkpoint_io import atomic_write_bytes
from ..base import KVStoreError
from . import protocol as P
from .shard import KeyShard

__all__ = ["SNAPSHOT_FORMAT", "snapshot_path", "write_snapshot", "read_snapshot", "pack_shards",
           "unpack_shards", "state_tensors"]

SNAPSHOT_FORMAT = "mxtorch.ps.snapshot/1"
_META_KEY = "mxtorch.ps"


def snapshot_path(folder: str, rank: int) -> str:
    return os.path.join(folder, f"server-{rank}.safetensors")


def write_snapshot(path: str, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
    """Write ``tensors`` and the JSON ``meta`` to ``path`` atomically."""
    from safetensors.torch import save

    data = {name: t.detach().cpu().contiguous() for name, t in tensors.items()}
    blob = save(data, metadata={_META_KEY: json.dumps({"format": SNAPSHOT_FORMAT, **meta})})
    atomic_write_bytes(path, blob)


def read_snapshot(path: str) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The (meta, tensors) of a snapshot written by :func:`write_snapshot`; :class:`KVStoreError`
    naming the file for one that is unreadable, corrupt or not a snapshot."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    try:
        with safe_open(path, framework="pt") as f:
            raw = (f.metadata() or {}).get(_META_KEY)
        tensors = load_file(path)
    except Exception as e:  # safetensors raises its own error type for a corrupt file
        raise KVStoreError(f"cannot read the server snapshot {path}: {e}") from e
    meta = None if raw is None else bounded_json.loads(raw, f"the server snapshot {path}", KVStoreError)
    if not isinstance(meta, dict) or meta.get("format") != SNAPSHOT_FORMAT:
        raise KVStoreError(f"{path} is not an mxtorch parameter-server snapshot ({SNAPSHOT_FORMAT})")
    return meta, tensors


def pack_shards(shards: Iterable[KeyShard]) -> tuple[list[dict[str, Any]], dict[str, torch.Tensor]]:
    """The JSON records of the key slices that hold a value, and their tensors (``value/<i>``)."""
    tensors: dict[str, torch.Tensor] = {}
    records = []
    for i, sh in enumerate(shards):
        if sh.value is None:
            continue
        tensors[f"value/{i}"] = sh.value
        records.append({"key": P.key_to_json(sh.key), "shard": sh.shard, "num_shards": sh.num_shards,
                        "shape": list(sh.shape), "dtype": P.dtype_name(sh.dtype), "offset": sh.offset,
                        "numel": sh.numel, "kind": sh.kind, "version": sh.version, "tensor": f"value/{i}",
                        "workers": None if sh.workers is None else sorted(sh.workers),
                        "group": sh.group, "index": None if sh.index is None else P.key_to_json(sh.index)})
    return records, tensors


def unpack_shards(meta: dict[str, Any], tensors: dict[str, torch.Tensor], num_workers: int) -> list[KeyShard]:
    """The key slices :func:`pack_shards` described, with their values, versions and worker sets;
    every worker of a slice counts as having initialized it."""
    try:
        return _unpack_shards(meta, tensors, num_workers)
    except KVStoreError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError) as e:
        raise KVStoreError(f"a server snapshot describes its key slices wrongly ({type(e).__name__}: "
                           f"{str(e)[:200]})") from e


def _unpack_shards(meta: dict[str, Any], tensors: dict[str, torch.Tensor],
                   num_workers: int) -> list[KeyShard]:
    out = []
    for s in meta.get("shards", []):
        sh = KeyShard(P.key_from_json(s["key"]), int(s["shard"]), int(s["num_shards"]),
                      tuple(int(d) for d in s["shape"]), P.dtype_from_name(s["dtype"]), int(s["offset"]),
                      int(s["numel"]), str(s.get("kind", "dense")))
        sh.value = tensors[s["tensor"]].view(sh.value_shape)
        sh.version = int(s["version"])
        group = s.get("workers")
        sh.workers = None if group is None else frozenset(int(w) for w in group)
        sh.group = s.get("group")  # absent in older snapshots: no group optimizers then
        sh.index = None if s.get("index") is None else P.key_from_json(s["index"])
        sh.inited_by = set(range(num_workers)) if sh.workers is None else set(sh.workers)
        out.append(sh)
    return out


def state_tensors(tensors: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The optimizer-state tensors of a snapshot (``state/<j>``), in order."""
    names = sorted((k for k in tensors if k.startswith("state/")), key=lambda k: int(k.split("/")[1]))
    return [tensors[n] for n in names]
