"""'allreduce' ('horovod', 'nccl'): workers sum their values with torch.distributed collectives.

There is no server and no stored value: ``pushpull`` sums a key's value over every worker
(and over the list of local values, if several) and ``broadcast`` copies rank 0's value to
every worker, as MXNet's horovod store does.  Each worker then runs the optimizer itself.
``'nccl'`` insists on CUDA and NCCL; the other names use gloo for CPU tensors and NCCL for
CUDA tensors when the GPUs allow.

Cost model.  A single tensor is reduced in place by exactly one ``all_reduce``.  A list of
keys packs its small tensors (below :data:`ALONE_BYTES`) into flat buckets, one copy in and
one out, because on gloo every collective costs milliseconds of latency while a copy costs
a tenth of a millisecond per megabyte.  Gradients go further (:meth:`attach_gradient_hooks`):
each one is copied into its bucket as soon as autograd has accumulated it, and a bucket's
reduction starts while the rest of the backward pass runs, as in DDP.

Safety.  The first time a key is used (and whenever its shape or dtype changes) the workers
compare its shape and dtype with one small ``all_gather``; a mismatch raises on every rank,
naming each differing rank.  Every
collective is bounded by the process group's timeout (``MXTORCH_DIST_TIMEOUT``), so a dead
or stuck peer ends in a :class:`KVStoreError`, never a hang.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
import torch.distributed as dist

from ..distributed import group
from ..distributed.env import DistributedConfigError
from .base import Capability, Key, KVStoreBase, KVStoreError, Value, register_factory
from .local import _key_list, _row_sparse_sum, _tensors, _write

__all__ = ["AllreduceKVStore", "ALONE_BYTES", "DEFAULT_BUCKET_BYTES", "GradientSource"]

ALONE_BYTES = 4 << 20
"""Tensors of a list at least this large are reduced in place on their own, not bucketed."""
DEFAULT_BUCKET_BYTES = 25 << 20
"""Default size cap of a gradient bucket (DDP's default)."""

# Stable codes for dtypes in the shape/dtype descriptors that workers compare.
_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128,
)
_DTYPE_CODE = {d: i for i, d in enumerate(_DTYPES)}


class _HasGrads(Protocol):
    """What a gluon Parameter offers for gradient synchronization (duck-typed)."""

    @property
    def grad_req(self) -> str: ...

    def list_data(self) -> list[torch.nn.Parameter]: ...


GradientSource = torch.Tensor | _HasGrads
"""A gluon ``Parameter`` (all its contexts) or a plain tensor that requires grad."""


class AllreduceKVStore(KVStoreBase):
    """Sum values over workers with all-reduce; see the module docstring for semantics and cost.

    Creating it joins the process group (:func:`mxtorch.distributed.init`), so the process
    must have been launched as part of a job (``mxtorch launch``, torchrun, mpirun, srun).
    """

    def __init__(self, name: str = "allreduce", backend: str | None = None) -> None:
        self._type = name
        if name == "nccl":
            if not (torch.cuda.is_available() and dist.is_nccl_available()):
                raise KVStoreError(
                    f"KVStore 'nccl' needs CUDA GPUs and a torch build with NCCL; this process sees "
                    f"{torch.cuda.device_count()} GPU(s) and NCCL is "
                    f"{'available' if dist.is_nccl_available() else 'not built in'}: use kvstore='allreduce' "
                    "(gloo on CPU), or run on GPU machines"
                )
            backend = backend or "cpu:gloo,cuda:nccl"
        try:
            self._info = group.init(backend)
        except DistributedConfigError as e:
            raise DistributedConfigError(f"KVStore {name!r}: {e}") from e
        self._verified: dict[Key, tuple[tuple[int, ...], torch.dtype]] = {}
        self._grad_sync: _GradientSync | None = None
        self._hooks_wanted = False
        self._bucket_bytes = DEFAULT_BUCKET_BYTES
        self._compressor: Any = None
        self.wire_bytes_sent = 0
        """Payload bytes this worker sent through compressed pushpulls (for benchmarks)."""

    # ---- description -----------------------------------------------------------------
    @property
    def type(self) -> str:
        return self._type

    @property
    def rank(self) -> int:
        return self._info.rank

    @property
    def num_workers(self) -> int:
        return self._info.world_size

    @property
    def local_rank(self) -> int:
        return self._info.local_rank

    def is_capable(self, capability: str) -> bool:
        if capability == Capability.OVERLAP:
            return self._compressor is None  # compressed reduction runs at step time
        return capability in (Capability.DISTRIBUTED, Capability.GRADIENT_COMPRESSION)

    def set_gradient_compression(self, compression_params: Any) -> None:
        """Compress every floating-point pushpull: ``{'type': '2bit', 'threshold': 0.5}``, ...

        Each worker compresses its own value (error-feedback residuals stay with the worker,
        per key), the packed payloads are all-gathered — packed 2bit/1bit words and top-k
        indices cannot be summed on the wire — and every worker decompresses and sums them:
        wire bytes per worker are the payload's (1/16 of fp32 for 2bit) times
        ``num_workers - 1``.  Payloads that do add up (``fp16``, ``bf16``: the compressor's
        ``summable``) are all-reduced in their own dtype instead, as Horovod does, and
        decompressed once: 2(n-1)/n of a payload per worker.  A ``collective`` compressor
        (``powersgd``) runs its own exchange through all-reduces (``collective_sum``).
        """
        from .. import compression

        self._compressor = compression.create(compression_params)
        self.close()

    @property
    def compressor(self) -> Any:
        return self._compressor

    # ---- the KVStore interface ---------------------------------------------------------
    def init(self, key: Key | Sequence[Key], value: Value | Sequence[Value]) -> None:
        """Give every worker rank 0's value, in place (nothing is stored)."""
        self.broadcast(key, value, out=value)

    def push(self, key: Key | Sequence[Key], value: Value | Sequence[Value], priority: int = 0) -> None:
        raise KVStoreError(self._no_storage("push"))

    def pull(self, key: Key | Sequence[Key], out: Value | Sequence[Value] | None = None,
             priority: int = 0, ignore_sparse: bool = True) -> None:
        raise KVStoreError(self._no_storage("pull"))

    def _no_storage(self, op: str) -> str:
        return (f"KVStore {self._type!r} stores nothing, so {op} is not meaningful: use pushpull(key, value, "
                "out) to sum a value over workers, or broadcast(key, value, out) to copy rank 0's value")

    def pushpull(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
                 out: Value | Sequence[Value] | None = None, priority: int = 0) -> None:
        """Sum ``value`` over workers (and over its list, if several) into ``out`` (default: ``value``).

        Row_sparse values (torch COO tensors with one sparse dimension) are summed by rows and
        never densified: every worker all-gathers the others' row ids and rows and adds them
        up (wire bytes: the rows each worker holds; gradient compression does not apply).
        """
        keys, values, _ = _key_list(key, value)
        outs = [None] * len(keys) if out is None else _key_list(key, out)[1]
        sparse_at = [i for i, v in enumerate(values) if _holds_sparse(v)]
        if sparse_at:
            self._sparse_pushpull([keys[i] for i in sparse_at], [values[i] for i in sparse_at],
                                  [outs[i] for i in sparse_at])
            dense_at = sorted(set(range(len(keys))) - set(sparse_at))
            if not dense_at:
                return
            keys = [keys[i] for i in dense_at]
            values = [values[i] for i in dense_at]
            outs = [outs[i] for i in dense_at]
        if self._compressor is not None:
            self._compressed_pushpull(keys, values, outs)
            return
        jobs: list[_Job] = []
        with torch.no_grad():
            for k, srcs, dsts in self._operands(keys, values, outs):
                jobs.append(_Job.of(k, _sum_buffer(srcs, dsts), dsts))
            self._verify("pushpull", [(j.key, j.buf) for j in jobs])
            self._run("pushpull", jobs, _reduce)

    def _operands(self, keys: list[Key], values: list[Any],
                  outs: list[Any]) -> list[tuple[Key, list[torch.Tensor], list[torch.Tensor]]]:
        """Each key with its pushed tensors and its outs (the pushed ones when out is None), checked."""
        ops = []
        for k, v, o in zip(keys, values, outs):
            self._check_key(k)
            srcs = _tensors(v, k, "pushed value")
            dsts = srcs if o is None else _tensors(o, k, "out")
            _check_same(k, srcs, dsts, srcs[0])
            ops.append((k, srcs, dsts))
        return ops

    def _compressed_pushpull(self, keys: list[Key], values: list[Any], outs: list[Any]) -> None:
        """Compress every key's sum, all-gather the payloads in buckets, decompress and add them up
        (all-reduce and decompress the sum, for a ``summable`` compressor).

        Payload parts are packed by dtype into buckets of about :data:`PAYLOAD_BUCKET_BYTES`; a
        bucket's collective starts (asynchronously) as soon as it is full, so later keys are
        compressed while earlier buckets are on the wire, and many small keys share one
        collective.  Every rank compresses the same keys in the same order into payloads of the
        same shapes, so every rank forms the same buckets.
        """
        comp = self._compressor
        world = self.num_workers
        summed = bool(getattr(comp, "summable", False))
        # bytes one worker sends per payload byte: all-reduced or all-gathered (n-1 payloads)
        share = _all_reduce_share(world) if summed else float(max(world - 1, 0))
        with torch.no_grad():
            locals_: list[tuple[Key, torch.Tensor, list[torch.Tensor]]] = []
            for k, srcs, dsts in self._operands(keys, values, outs):
                local = srcs[0].detach().clone() if len(srcs) == 1 else torch.stack(
                    [s.detach().to(srcs[0].device) for s in srcs]).sum(0)
                locals_.append((k, local, dsts))
            self._verify("pushpull", [(k, t) for k, t, _ in locals_])
            if getattr(comp, "collective", False):
                self._collective_pushpull(locals_)
                return
            exchange = _PayloadExchange(world, summed=summed) if world > 1 else None
            compressed: list[tuple[torch.Tensor, list[torch.Tensor], Any, Any, list[Any]]] = []
            try:
                for k, local, dsts in locals_:
                    if not local.is_floating_point():
                        if world > 1:
                            self._run("pushpull", [_Job.of(k, (local, None), [])], _reduce)
                        for d in dsts:
                            d.copy_(local)
                        continue
                    payload, ctx = comp.compress(local, k)
                    parts = list(payload) if isinstance(payload, (list, tuple)) else [payload]
                    self.wire_bytes_sent += int(comp.wire_bytes(payload) * share)
                    slots = exchange.add(parts) if exchange is not None else []
                    compressed.append((local, dsts, payload, ctx, slots))
                if exchange is not None:
                    exchange.finish()
            except RuntimeError as e:
                raise self._peer_error("pushpull", keys, e) from e
            for local, dsts, payload, ctx, slots in compressed:
                is_list = isinstance(payload, (list, tuple))
                per_rank = exchange.gathered(slots) if exchange is not None else [
                    list(payload) if is_list else [payload]]
                if len(per_rank) == 1:  # one worker, or the payloads' sum (summable)
                    total = comp.decompress(per_rank[0] if is_list else per_rank[0][0], ctx)
                else:
                    total = torch.zeros_like(local)
                    for pr in per_rank:
                        total += comp.decompress(pr if is_list else pr[0], ctx)
                for d in dsts:
                    d.copy_(total)

    def _collective_pushpull(self, locals_: list[tuple[Key, torch.Tensor, list[torch.Tensor]]]) -> None:
        """A compressor that runs its own exchange (PowerSGD): its ``collective_sum`` of the float
        keys, through all-reduces in payload buckets; integer keys are summed exactly."""
        comp = self._compressor
        world = self.num_workers
        floats = [(k, t) for k, t, _ in locals_ if t.is_floating_point()]
        keys = [k for k, _, _ in locals_]

        def all_reduce(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
            self.wire_bytes_sent += int(sum(t.numel() * t.element_size() for t in tensors)
                                        * _all_reduce_share(world))
            if world == 1 or not tensors:
                return tensors
            exchange = _PayloadExchange(world, summed=True)
            slots = exchange.add(tensors)
            try:
                exchange.finish()
            except RuntimeError as e:
                raise self._peer_error("pushpull", keys, e) from e
            return exchange.gathered(slots)[0]

        sums = iter(comp.collective_sum(floats, all_reduce))
        for k, local, dsts in locals_:
            if local.is_floating_point():
                total = next(sums)
            else:
                if world > 1:
                    self._run("pushpull", [_Job.of(k, (local, None), [])], _reduce)
                total = local
            for d in dsts:
                d.copy_(total)

    def _sparse_pushpull(self, keys: list[Key], values: list[Any], outs: list[Any]) -> None:
        """Sum row_sparse values over workers: all-gather each worker's row ids and rows, then add."""
        world = self.num_workers
        with torch.no_grad():
            locals_: list[tuple[Key, torch.Tensor, list[torch.Tensor]]] = []
            for k, srcs, dsts in self._operands(keys, values, outs):
                if not all(t.layout != torch.strided for t in srcs):
                    raise KVStoreError(f"key {k!r}: the values pushed mix row_sparse and dense tensors; push "
                                       "values of one storage type (convert with mx.nd.sparse.tostype)")
                locals_.append((k, _row_sparse_sum(k, srcs, srcs[0]), dsts))
            self._verify("pushpull", [(k, t) for k, t, _ in locals_])
            totals = [t for _, t, _ in locals_]
            if world > 1:
                try:
                    totals = self._gather_rows([t for _, t, _ in locals_])
                except RuntimeError as e:
                    raise self._peer_error("pushpull", keys, e) from e
            for (_, _, dsts), total in zip(locals_, totals):
                for d in dsts:
                    _write(d, total)

    def _gather_rows(self, local: list[torch.Tensor]) -> list[torch.Tensor]:
        """Every worker's rows of each row_sparse tensor in ``local``, summed (a coalesced tensor each).

        One all-gather of the row counts, then per (dtype, device) group of keys one all-gather
        of the concatenated row ids and one of the concatenated rows, each padded to the
        longest worker's length.
        """
        from ..nd import sparse

        world = self.num_workers
        parts = [sparse.row_sparse_parts(t) for t in local]
        counts = torch.tensor([ids.numel() for ids, _ in parts], dtype=torch.int64,
                              device=_meta_device(local[0]))
        every = [torch.empty_like(counts) for _ in range(world)]
        dist.all_gather(every, counts)
        n = torch.stack(every).tolist()  # n[rank][key]: rows that rank holds
        groups: dict[tuple[torch.dtype, torch.device], list[int]] = {}
        for j, (_, rows) in enumerate(parts):
            groups.setdefault((rows.dtype, rows.device), []).append(j)
        out = list(local)
        for (dtype, device), members in groups.items():
            width = [math.prod(local[j].shape[1:]) for j in members]  # elements per row
            id_len = [sum(n[r][j] for j in members) for r in range(world)]
            row_len = [sum(n[r][j] * w for j, w in zip(members, width)) for r in range(world)]
            if max(id_len) == 0:
                continue
            ids_buf = torch.zeros(max(id_len), dtype=torch.int64, device=device)
            rows_buf = torch.zeros(max(row_len), dtype=dtype, device=device)
            if id_len[self.rank]:
                ids_buf[:id_len[self.rank]] = torch.cat([parts[j][0] for j in members])
                rows_buf[:row_len[self.rank]] = torch.cat([parts[j][1].reshape(-1) for j in members])
            all_ids = [torch.empty_like(ids_buf) for _ in range(world)]
            all_rows = [torch.empty_like(rows_buf) for _ in range(world)]
            dist.all_gather(all_ids, ids_buf)
            dist.all_gather(all_rows, rows_buf)
            got_ids: dict[int, list[torch.Tensor]] = {j: [] for j in members}
            got_rows: dict[int, list[torch.Tensor]] = {j: [] for j in members}
            for r in range(world):
                id_parts = all_ids[r][:id_len[r]].split([n[r][j] for j in members])
                row_parts = all_rows[r][:row_len[r]].split([n[r][j] * w for j, w in zip(members, width)])
                for j, i_part, r_part in zip(members, id_parts, row_parts):
                    got_ids[j].append(i_part)
                    got_rows[j].append(r_part.view(n[r][j], *local[j].shape[1:]))
            for j in members:
                shape = local[j].shape
                out[j] = torch.sparse_coo_tensor(torch.cat(got_ids[j]).reshape(1, -1), torch.cat(got_rows[j]),
                                                 shape, check_invariants=False).coalesce()
        return out

    def broadcast(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
                  out: Value | Sequence[Value], priority: int = 0) -> None:
        """Copy rank 0's ``value`` into ``out`` (a tensor or list) on every worker."""
        keys, values, _ = _key_list(key, value)
        outs = _key_list(key, out)[1]
        jobs: list[_Job] = []
        with torch.no_grad():
            for k, v, o in zip(keys, values, outs):
                self._check_key(k)
                src = _tensors(v, k, "broadcast value")[0]
                dsts = _tensors(o, k, "out")
                _check_same(k, [src], dsts, src)
                jobs.append(_Job.of(k, _broadcast_buffer(src, dsts, self.rank), dsts))
            self._verify("broadcast", [(j.key, j.buf) for j in jobs])
            self._run("broadcast", jobs, _broadcast)

    def barrier(self) -> None:
        group.barrier()

    def close(self) -> None:
        """Remove gradient hooks; the process group itself stays up until exit (shared)."""
        if self._grad_sync is not None:
            self._grad_sync.detach()
            self._grad_sync = None
        self._hooks_wanted = False

    # ---- gradients: reduce while backward runs ----------------------------------------
    def attach_gradient_hooks(self, params: Sequence[GradientSource],
                              bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> bool:
        """Reduce the gradients of ``params`` in buckets, starting during the backward pass.

        Gradients are packed into buckets of at most ``bucket_bytes``, parameters taken in
        reverse order (the order backward produces them); a bucket's all-reduce starts once
        all its gradients are ready and its predecessors have started, so every rank starts
        them in the same order; any left at the end of backward start then.  Call
        :meth:`synchronize_gradients` before using the gradients.  Parameters with
        ``grad_req='null'`` are skipped.  Hooks need one context and ``grad_req='write'`` for
        every other parameter; otherwise no hook is attached, ``synchronize_gradients``
        reduces everything when called, and this returns False.  Collective: call it on
        every rank with the same parameters.
        """
        if bucket_bytes < 1:
            raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
        self.close()
        self._hooks_wanted, self._bucket_bytes = True, int(bucket_bytes)
        self._grad_sync = _GradientSync(self, list(params), self._bucket_bytes, hook=True)
        return self._grad_sync.hooked

    def synchronize_gradients(self, params: Sequence[GradientSource]) -> None:
        """Finish summing the gradients of ``params`` over workers and write them back to ``.grad``.

        A parameter without a gradient on some ranks counts as zeros there (so nobody hangs);
        if no rank has a gradient for it, its ``.grad`` stays None everywhere.  Collective.
        """
        params = list(params)
        sync = self._grad_sync
        if sync is None or not sync.matches(params):
            # No layout yet, or the parameters changed (cast, reset_ctx, grad_req): finish what
            # the old hooks started, then lay the buckets out again; every rank does the same.
            if sync is not None:
                sync.finish_in_flight()
                sync.detach()
            sync = self._grad_sync = _GradientSync(self, params, self._bucket_bytes, hook=self._hooks_wanted)
        sync.synchronize()

    # ---- internals ---------------------------------------------------------------------
    def _check_key(self, key: Key) -> None:
        if not isinstance(key, (int, str)) or isinstance(key, bool):
            raise KVStoreError(f"KVStore keys must be int or str, got {type(key).__name__}: {key!r}")

    def _verify(self, op: str, items: Sequence[tuple[Key, torch.Tensor]]) -> None:
        """Compare shapes and dtypes across workers for keys used for the first time, or with a
        new shape or dtype (all workers must change it together); known keys cost nothing."""
        new = [(k, t) for k, t in items if self._verified.get(k) != (tuple(t.shape), t.dtype)]
        if not new:
            return
        if self.num_workers > 1:
            _agree(op, [(k, tuple(t.shape), t.dtype) for k, t in new], self.rank, _meta_device(new[0][1]))
        for k, t in new:
            self._verified[k] = (tuple(t.shape), t.dtype)

    def _run(self, op: str, jobs: list[_Job], launch: Callable[[torch.Tensor, bool], Any]) -> None:
        """Launch one collective per large buffer and per bucket of small ones; wait; copy out."""
        if self.num_workers > 1:
            works: list[tuple[Any, list[_Job], torch.Tensor | None]] = []
            try:
                plan = _plan(jobs)
                if len(plan) == 1 and len(plan[0]) == 1:  # one tensor: exactly the plain collective
                    launch(plan[0][0].buf, False)
                    plan = []
                for bucket in plan:
                    if len(bucket) == 1:
                        works.append((launch(bucket[0].buf, True), bucket, None))
                    else:
                        flat = torch.cat([j.buf.reshape(-1) for j in bucket])
                        works.append((launch(flat, True), bucket, flat))
                for work, bucket, packed in works:
                    work.wait()
                    if packed is not None:
                        for j, part in zip(bucket, packed.split([j.buf.numel() for j in bucket])):
                            j.buf.copy_(part.view_as(j.buf))
            except RuntimeError as e:
                raise self._peer_error(op, [j.key for j in jobs], e) from e
        for j in jobs:
            for i, d in enumerate(j.dsts):
                if i != j.done:
                    d.copy_(j.buf)

    def _peer_error(self, op: str, keys: Sequence[Any], e: BaseException) -> KVStoreError:
        shown = ", ".join(repr(k) for k in list(keys)[:8]) + (", ..." if len(keys) > 8 else "")
        return KVStoreError(
            f"rank {self.rank} of {self.num_workers}: {op} of key(s) {shown} failed: {group.explain(e)}. A "
            f"peer process died, hangs, or did not call {op} with the same keys within the timeout "
            f"({group.timeout():g} s, MXTORCH_DIST_TIMEOUT); check the other ranks' logs"
        )


# ---- buffers ---------------------------------------------------------------------------


@dataclass
class _Job:
    key: Key
    buf: torch.Tensor  # contiguous; reduced or broadcast in place
    dsts: list[torch.Tensor]
    done: int | None  # the index of the out that ``buf`` shares memory with: no copy needed

    @classmethod
    def of(cls, key: Key, buffer: tuple[torch.Tensor, int | None], dsts: list[torch.Tensor]) -> _Job:
        return cls(key, buffer[0], dsts, buffer[1])


def _holds_sparse(value: Any) -> bool:
    """Whether a pushed value (a tensor or a list of them) is sparse (row_sparse)."""
    if isinstance(value, torch.Tensor):
        return value.layout != torch.strided
    return isinstance(value, (list, tuple)) and any(
        isinstance(t, torch.Tensor) and t.layout != torch.strided for t in value)


def _check_same(key: Key, srcs: list[torch.Tensor], dsts: list[torch.Tensor], like: torch.Tensor) -> None:
    for t in [*srcs, *dsts]:
        if t.shape != like.shape:
            raise KVStoreError(f"shape mismatch for key {key!r}: {tuple(like.shape)} and {tuple(t.shape)} in "
                               "the same call: every value and out of a key must have one shape")


def _sum_buffer(srcs: list[torch.Tensor], dsts: list[torch.Tensor]) -> tuple[torch.Tensor, int | None]:
    """The contiguous tensor to reduce in place, and the index of the out it already is (if any)."""
    first = srcs[0].detach()
    if len(srcs) == 1:
        same = next((i for i, d in enumerate(dsts) if d is srcs[0]), None)
        if same is not None and first.is_contiguous():
            return first, same  # in place: no copy at all
        out = dsts[0].detach()
        if out.is_contiguous() and out.dtype == first.dtype and out.device == first.device:
            return out.copy_(first), 0
        return first.clone(memory_format=torch.contiguous_format), None
    acc = first.clone(memory_format=torch.contiguous_format)
    for s in srcs[1:]:
        acc.add_(s.detach().to(acc.device, non_blocking=True))
    return acc, None


def _broadcast_buffer(src: torch.Tensor, dsts: list[torch.Tensor],
                      rank: int) -> tuple[torch.Tensor, int | None]:
    """Like :func:`_sum_buffer`: only rank 0's content matters."""
    first = src.detach()
    same = next((i for i, d in enumerate(dsts) if d is src), None)
    if same is not None and first.is_contiguous():
        return first, same
    out = dsts[0].detach()
    if out.is_contiguous() and out.dtype == first.dtype and out.device == first.device:
        return (out.copy_(first) if rank == 0 else out), 0
    return first.clone(memory_format=torch.contiguous_format), None


def _plan(jobs: list[_Job]) -> list[list[_Job]]:
    """Group small buffers by (dtype, device) into buckets; large ones stay alone."""
    alone: list[list[_Job]] = []
    small: dict[tuple[torch.dtype, torch.device], list[_Job]] = {}
    for j in jobs:
        if j.buf.numel() * j.buf.element_size() >= ALONE_BYTES:
            alone.append([j])
        else:
            small.setdefault((j.buf.dtype, j.buf.device), []).append(j)
    buckets = list(alone)
    for group_jobs in small.values():
        current: list[_Job] = []
        size = 0
        for j in group_jobs:
            nbytes = j.buf.numel() * j.buf.element_size()
            if current and size + nbytes > DEFAULT_BUCKET_BYTES:
                buckets.append(current)
                current, size = [], 0
            current.append(j)
            size += nbytes
        if current:
            buckets.append(current)
    return buckets


def _reduce(t: torch.Tensor, async_op: bool) -> Any:
    return dist.all_reduce(t, op=dist.ReduceOp.SUM, async_op=async_op)


def _broadcast(t: torch.Tensor, async_op: bool) -> Any:
    return dist.broadcast(t, src=0, async_op=async_op)


def _meta_device(like: torch.Tensor) -> torch.device:
    # Descriptors travel on the CPU (gloo) unless the group only speaks NCCL.
    b = group.backend()
    return like.device if ("gloo" not in b and like.is_cuda) else torch.device("cpu")


def _dtype_name(d: torch.dtype) -> str:
    return str(d).replace("torch.", "")


# ---- descriptor agreement --------------------------------------------------------------


def _encode(items: Sequence[tuple[Key, tuple[int, ...], torch.dtype]]) -> list[int]:
    out: list[int] = []
    for key, shape, dtype in items:
        code = _DTYPE_CODE.get(dtype, len(_DTYPES))
        if isinstance(key, str):
            raw = key.encode("utf-8")
            out += [1, len(raw), code, len(shape), *shape, *raw]
        else:
            out += [0, int(key), code, len(shape), *shape]
    return out


def _decode(values: list[int]) -> list[tuple[Key, tuple[int, ...], str]]:
    out: list[tuple[Key, tuple[int, ...], str]] = []
    i = 0
    while i < len(values):
        kind, kval, code, ndim = values[i:i + 4]
        shape = tuple(values[i + 4:i + 4 + ndim])
        i += 4 + ndim
        key: Key = kval
        if kind == 1:
            key = bytes(values[i:i + kval]).decode("utf-8", errors="replace")
            i += kval
        out.append((key, shape, _dtype_name(_DTYPES[code]) if code < len(_DTYPES) else "other dtype"))
    return out


def _agree(op: str, items: Sequence[tuple[Key, tuple[int, ...], torch.dtype]], rank: int,
           device: torch.device) -> None:
    """One tiny all_gather of (length, digest); a second, padded one only to explain a mismatch."""
    desc = _encode(items)
    digest = int.from_bytes(hashlib.blake2b(repr(desc).encode(), digest_size=8).digest(), "little",
                            signed=True)
    world = dist.get_world_size()
    mine = torch.tensor([len(desc), digest], dtype=torch.int64, device=device)
    heads = [torch.empty_like(mine) for _ in range(world)]
    try:
        dist.all_gather(heads, mine)
        if all(bool(torch.equal(h, heads[0])) for h in heads):
            return
        longest = max(int(h[0]) for h in heads)
        padded = torch.zeros(longest, dtype=torch.int64, device=device)
        padded[:len(desc)] = torch.tensor(desc, dtype=torch.int64)
        bodies = [torch.empty_like(padded) for _ in range(world)]
        dist.all_gather(bodies, padded)
    except RuntimeError as e:
        raise KVStoreError(
            f"rank {rank} of {world}: comparing shapes and dtypes before the first {op} of key(s) "
            f"{[k for k, _, _ in items][:8]} failed: {group.explain(e)}. A peer process died, hangs, or "
            f"runs different code (timeout {group.timeout():g} s, MXTORCH_DIST_TIMEOUT); check the other "
            "ranks' logs"
        ) from e
    per_rank = [_decode(b[:int(h[0])].tolist()) for b, h in zip(bodies, heads)]
    raise KVStoreError(f"rank {rank}: {_explain(op, per_rank)}")


def _explain(op: str, per_rank: list[list[tuple[Key, tuple[int, ...], str]]]) -> str:
    expected = per_rank[0]
    lines: list[str] = []
    exp_keys = [k for k, _, _ in expected]
    for r, got in enumerate(per_rank[1:], start=1):
        keys = [k for k, _, _ in got]
        if keys != exp_keys:
            lines.append(f"rank {r} passed keys {keys[:8]}{'...' if len(keys) > 8 else ''} but rank 0 passed "
                         f"{exp_keys[:8]}{'...' if len(exp_keys) > 8 else ''}")
            continue
        for (k, shape, dt), (_, eshape, edt) in zip(got, expected):
            if (shape, dt) != (eshape, edt):
                lines.append(f"key {k!r}: rank {r} has shape {shape} {dt}, expected rank 0's {eshape} {edt}")
    return (f"{op} needs the same keys, shapes and dtypes on every worker, but they differ: "
            + "; ".join(lines) + f". Make every rank {op} the same tensors in the same order")


# ---- compressed payloads ----------------------------------------------------------------
def _all_reduce_share(world: int) -> float:
    """Bytes one worker sends per byte all-reduced: a ring all-reduce's 2(n-1)/n."""
    return 2.0 * (world - 1) / world


PAYLOAD_BUCKET_BYTES = 1 << 20
"""A bucket of compressed payloads starts its all-gather once it holds this many bytes."""


class _PayloadExchange:
    """All-gathers of compressed payload parts, packed by (dtype, device) into buckets.

    :meth:`add` files a key's parts and returns where they went; a full bucket is flattened
    and its all-gather launched asynchronously at once; :meth:`finish` launches the rest and
    waits for all; :meth:`gathered` returns every rank's copy of a key's parts.  With
    ``summed`` the buckets are all-reduced (summed in their dtype) instead, and
    :meth:`gathered` returns one list: the sums.
    """

    def __init__(self, world: int, bucket_bytes: int = PAYLOAD_BUCKET_BYTES, summed: bool = False) -> None:
        self.world = world
        self.bucket_bytes = bucket_bytes
        self.summed = summed
        self.open: dict[tuple[torch.dtype, torch.device], _PayloadBucket] = {}
        self.launched: list[_PayloadBucket] = []

    def add(self, parts: list[torch.Tensor]) -> list[tuple[_PayloadBucket, int]]:
        slots = []
        for t in parts:
            t = t.contiguous()
            where = (t.dtype, t.device)
            bucket = self.open.get(where)
            if bucket is None:
                bucket = self.open[where] = _PayloadBucket()
            slots.append((bucket, len(bucket.parts)))
            bucket.parts.append(t)
            bucket.nbytes += t.numel() * t.element_size()
            if bucket.nbytes >= self.bucket_bytes:
                self._launch(self.open.pop(where))
        return slots

    def _launch(self, bucket: _PayloadBucket) -> None:
        flat = bucket.parts[0].reshape(-1) if len(bucket.parts) == 1 else torch.cat(
            [p.reshape(-1) for p in bucket.parts])
        if self.summed:
            # in place: a one-part bucket's part becomes the sum (payloads are only decompressed
            # after the exchange, so nothing needs the local one any more)
            bucket.received = [flat]
            bucket.work = dist.all_reduce(flat, op=dist.ReduceOp.SUM, async_op=True)
        else:
            bucket.received = [torch.empty_like(flat) for _ in range(self.world)]
            bucket.work = dist.all_gather(bucket.received, flat, async_op=True)
        bucket.flat = flat  # kept alive until the gather is done
        self.launched.append(bucket)

    def finish(self) -> None:
        for where in list(self.open):
            self._launch(self.open.pop(where))
        for bucket in self.launched:
            bucket.work.wait()

    @staticmethod
    def gathered(slots: list[tuple[_PayloadBucket, int]]) -> list[list[torch.Tensor]]:
        """``[rank][part]``: every rank's copy of the parts filed at ``slots`` (summed: ``[[sum]]``)."""
        world = len(slots[0][0].received) if slots else 0
        return [[b.part_of(r, i) for b, i in slots] for r in range(world)]


class _PayloadBucket:
    def __init__(self) -> None:
        self.parts: list[torch.Tensor] = []
        self.nbytes = 0
        self.received: list[torch.Tensor] = []
        self.work: Any = None
        self.flat: torch.Tensor | None = None
        self._offsets: list[int] | None = None

    def part_of(self, rank: int, i: int) -> torch.Tensor:
        if self._offsets is None:
            offsets = [0]
            for p in self.parts:
                offsets.append(offsets[-1] + p.numel())
            self._offsets = offsets
        p = self.parts[i]
        return self.received[rank].narrow(0, self._offsets[i], p.numel()).view(p.shape)


# ---- gradient buckets ------------------------------------------------------------------


def _grad_view(p: GradientSource) -> tuple[str, list[torch.Tensor], str]:
    """(grad_req, the tensors holding .grad — one per context, a name) of a Parameter or tensor."""
    if isinstance(p, torch.Tensor):
        return ("write" if p.requires_grad else "null"), [p], f"tensor{tuple(p.shape)}"
    return p.grad_req, list(p.list_data()), str(getattr(p, "name", "parameter"))


@dataclass
class _Bucket:
    index: int
    members: list[int]  # positions in _GradientSync.tensors
    offsets: list[int]
    total: int
    flat: torch.Tensor  # [grads..., one presence flag per member]
    ready: list[bool] = field(default_factory=list)
    n_ready: int = 0
    work: Any = None

    def reset(self) -> None:
        self.ready = [False] * len(self.members)
        self.n_ready = 0
        self.work = None


class _GradientSync:
    """Buckets of gradients for one fixed list of parameters; optional autograd hooks."""

    def __init__(self, store: AllreduceKVStore, params: list[GradientSource], bucket_bytes: int,
                 hook: bool) -> None:
        self.store = store
        self.bucket_bytes = bucket_bytes
        self.signature = _signature(params)
        views = [_grad_view(p) for p in params]
        trainable = [(ts, name) for req, ts, name in views if req != "null"]
        self.copies: list[list[torch.Tensor]] = [ts for ts, _ in trainable]
        self.names = [name for _, name in trainable]
        self.hooked = hook and all(req == "write" and len(ts) == 1 for req, ts, _ in views if req != "null")
        self.buckets = self._layout()
        self.owner = {i: (b.index, m) for b in self.buckets for m, i in enumerate(b.members)}
        self.next_launch = 0
        self.stale = False
        self.callback_queued = False
        self.lock = threading.Lock()
        self.handles: list[Any] = []
        if store.num_workers > 1:
            items: list[tuple[Key, tuple[int, ...], torch.dtype]] = [
                (i, tuple(ts[0].shape), ts[0].dtype) for i, ts in enumerate(self.copies)]
            if items:
                _agree("gradient synchronization", items, store.rank, _meta_device(self.copies[0][0]))
        if self.hooked:
            for i, ts in enumerate(self.copies):
                self.handles.append(ts[0].register_post_accumulate_grad_hook(self._make_hook(i)))

    # -- layout --
    def _layout(self) -> list[_Bucket]:
        buckets: list[_Bucket] = []
        open_: dict[tuple[torch.dtype, torch.device], tuple[list[int], int]] = {}

        def close(members: list[int]) -> None:
            first = self.copies[members[0]][0]
            offsets, total = [], 0
            for i in members:
                offsets.append(total)
                total += self.copies[i][0].numel()
            flat = torch.zeros(total + len(members), dtype=first.dtype, device=first.device)
            b = _Bucket(len(buckets), members, offsets, total, flat)
            b.reset()
            buckets.append(b)

        for i in reversed(range(len(self.copies))):  # backward produces the last parameters first
            t = self.copies[i][0]
            k = (t.dtype, t.device)
            nbytes = t.numel() * t.element_size()
            members, size = open_.get(k, ([], 0))
            if members and size + nbytes > self.bucket_bytes:
                close(members)
                members, size = [], 0
            open_[k] = (members + [i], size + nbytes)
        for members, _ in open_.values():
            if members:
                close(members)
        return buckets

    def matches(self, params: list[GradientSource]) -> bool:
        return _signature(params) == self.signature

    # -- during backward --
    def _make_hook(self, i: int) -> Callable[[torch.Tensor], None]:
        def hook(param: torch.Tensor) -> None:
            self._on_grad(i, param)
        return hook

    def _on_grad(self, i: int, param: torch.Tensor) -> None:
        with self.lock:
            bi, m = self.owner[i]
            b = self.buckets[bi]
            if b.ready[m] or b.work is not None:
                self.stale = True  # a second backward before the step: redo everything at step time
                return
            grad = param.grad
            if grad is None:
                return
            with torch.no_grad():
                b.flat.narrow(0, b.offsets[m], grad.numel()).copy_(grad.reshape(-1))
                b.flat[b.total + m] = 1
            b.ready[m] = True
            b.n_ready += 1
            if not self.callback_queued:
                self.callback_queued = True
                torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)
            self._launch_ready()

    def _end_of_backward(self) -> None:
        # Start every remaining bucket now, so that whatever collective the user runs next
        # comes after all of them on every rank.
        with self.lock:
            self.callback_queued = False
            if not self.stale:
                self._launch_through(len(self.buckets))

    def _launch_ready(self) -> None:
        while self.next_launch < len(self.buckets):
            b = self.buckets[self.next_launch]
            if b.n_ready < len(b.members):
                return
            self._launch(b)

    def _launch_through(self, end: int) -> None:
        while self.next_launch < end:
            b = self.buckets[self.next_launch]
            self._fill_missing(b)
            self._launch(b)

    def _fill_missing(self, b: _Bucket) -> None:
        with torch.no_grad():
            for m, i in enumerate(b.members):
                if b.ready[m]:
                    continue
                part = b.flat.narrow(0, b.offsets[m], self.copies[i][0].numel())
                grads = [t.grad for t in self.copies[i] if t.grad is not None]
                if grads:
                    part.copy_(grads[0].reshape(-1))
                    for g in grads[1:]:
                        part.add_(g.reshape(-1).to(part.device))
                    b.flat[b.total + m] = 1
                else:
                    part.zero_()
                    b.flat[b.total + m] = 0
                b.ready[m] = True
            b.n_ready = len(b.members)

    def _launch(self, b: _Bucket) -> None:
        if self.store.num_workers > 1:
            b.work = dist.all_reduce(b.flat, op=dist.ReduceOp.SUM, async_op=True)
        else:
            b.work = _Done()
        self.next_launch = b.index + 1

    # -- at step time --
    def synchronize(self) -> None:
        with self.lock:
            if self.stale:
                self._wait(self.buckets[:self.next_launch])
                for b in self.buckets:
                    b.reset()
                self.next_launch = 0
            self._launch_through(len(self.buckets))
            try:
                self._wait(self.buckets)
                self._write_back()
            finally:
                for b in self.buckets:
                    b.reset()
                self.next_launch = 0
                self.stale = False

    def finish_in_flight(self) -> None:
        with self.lock:
            self._wait(self.buckets[:self.next_launch])

    def _wait(self, buckets: list[_Bucket]) -> None:
        for b in buckets:
            if b.work is None:
                continue
            try:
                b.work.wait()
            except RuntimeError as e:
                names = [self.names[i] for i in b.members]
                shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
                raise KVStoreError(
                    f"rank {self.store.rank} of {self.store.num_workers}: all-reduce of gradient bucket "
                    f"{b.index} ({len(names)} parameters: {shown}) failed: {group.explain(e)}. A peer "
                    f"process died, hangs, or trains different parameters (timeout {group.timeout():g} s, "
                    "MXTORCH_DIST_TIMEOUT); check the other ranks' logs"
                ) from e
            b.work = _Done()

    def _write_back(self) -> None:
        with torch.no_grad():
            for b in self.buckets:
                present = b.flat[b.total:].tolist()
                for m, i in enumerate(b.members):
                    copies = self.copies[i]
                    if present[m] <= 0:
                        for t in copies:  # no worker has a gradient: stale on every rank alike
                            t.grad = None
                        continue
                    part = b.flat.narrow(0, b.offsets[m], copies[0].numel())
                    for t in copies:
                        src = part.view(t.shape).to(t.device, non_blocking=True)
                        if t.grad is None:
                            t.grad = src.clone()
                        else:
                            t.grad.copy_(src)

    def detach(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


class _Done:
    def wait(self) -> bool:
        return True


def _signature(params: Sequence[GradientSource]) -> tuple[tuple[Any, ...], ...]:
    # What the bucket layout depends on; a change (cast, reset_ctx, grad_req) rebuilds it.
    out = []
    for p in params:
        req, ts, _ = _grad_view(p)
        out.append((id(ts[0]), req, len(ts), ts[0].dtype, ts[0].shape))
    return tuple(out)


def _create(name: str, **kwargs: Any) -> KVStoreBase:
    return AllreduceKVStore(name, **kwargs)


for _name in ("allreduce", "horovod", "nccl"):
    register_factory(_name, _create)
