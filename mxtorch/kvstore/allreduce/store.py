"""The 'allreduce' / 'horovod' / 'nccl' KVStore: the interface, on top of the other modules."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from ... import compression
from ..._forward import Forward
from ...distributed import group
from ...distributed.env import DistributedConfigError
from ...nd import sparse
from ...profiler import horovod_timeline, span
from ..base import Capability, Key, KVStoreBase, KVStoreError, Value, register_factory
from ..local import _key_list, _row_sparse_sum, _tensors, _write
from .buffers import (
    DEFAULT_BUCKET_BYTES,
    _broadcast_buffer,
    _check_same,
    _holds_sparse,
    _Job,
    _plan,
    _sum_buffer,
)
from .collectives import _agree, _Comm, _meta_device
from .compressed import _all_reduce_share, _PayloadExchange
from .overlap import GradientSource, GradientSync


class AllreduceKVStore(KVStoreBase):
    """Sum values over workers with all-reduce; see the module docstring for semantics and cost.

    Creating it joins the process group (:func:`mxtorch.distributed.init`), so the process
    must have been launched as part of a job (``mxtorch launch``, torchrun, mpirun, srun).

    ``process_group`` (a ``torch.distributed`` group this process belongs to, from
    ``dist.new_group`` or a DeviceMesh dimension's ``get_group()``) confines the store to that
    group's ranks, e.g. the data-parallel replicas of one pipeline stage: every collective
    runs on it, ``rank``/``num_workers`` are the rank within the group and its size, and
    ``broadcast``/``init`` copy the value of the group's first rank.  None: the whole job.
    Create the group with the job's timeout (``timeout=datetime.timedelta(seconds=
    mxtorch.distributed.timeout())``): torch's default for new groups is 30 minutes.
    """

    def __init__(self, name: str = "allreduce", backend: str | None = None,
                 process_group: Any = None) -> None:
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
        self._comm = (_Comm.world(self._info.rank, self._info.world_size) if process_group is None
                      else _Comm.of(process_group))
        self._pg = self._comm.group
        self._verified: dict[Key, tuple[tuple[int, ...], torch.dtype]] = {}
        self._grad_sync: GradientSync | None = None
        self._hooks_wanted = False
        self._bucket_bytes = DEFAULT_BUCKET_BYTES
        self._passes = 1
        self._compressor: Any = None
        self.wire_bytes_sent = 0
        """Payload bytes this worker sent through compressed pushpulls (for benchmarks)."""
        self.gradient_allreduces = 0
        """Gradient bucket all-reduces started by the gradient synchronization (hooks or step):
        one per bucket and step when nothing went stale (for benchmarks and tests)."""

    # ---- description -----------------------------------------------------------------
    type = Forward[str]("_type")
    rank = Forward[int](
        "_comm.rank", "This worker's rank in the store's process group (the job's rank without one).")
    num_workers = Forward[int](
        "_comm.size", "The number of workers in the store's process group (the job's size without one).")
    process_group = Forward[Any](
        "_pg", "The ``torch.distributed`` process group the store's collectives run on (None: the job's).")
    local_rank = Forward[int]("_info.local_rank")

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
        self._compressor = compression.create(compression_params)
        self.close()

    compressor = Forward[Any]("_compressor")

    # ---- the KVStore interface ---------------------------------------------------------
    def init(self, key: Key | Sequence[Key], value: Value | Sequence[Value]) -> None:
        """Give every worker rank 0's value (the group's first rank's), in place (nothing is stored)."""
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
            self._run("pushpull", jobs, self._comm.reduce)

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
            exchange = _PayloadExchange(world, summed=summed, group=self._pg) if world > 1 else None
            compressed: list[tuple[torch.Tensor, list[torch.Tensor], Any, Any, list[Any]]] = []
            try:
                for k, local, dsts in locals_:
                    if not local.is_floating_point():
                        if world > 1:
                            self._run("pushpull", [_Job.of(k, (local, None), [])], self._comm.reduce)
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
                with span("compression.decode", compressor=comp.name, payloads=len(per_rank)):
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
            exchange = _PayloadExchange(world, summed=True, group=self._pg)
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
                    self._run("pushpull", [_Job.of(k, (local, None), [])], self._comm.reduce)
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
        world = self.num_workers
        parts = [sparse.row_sparse_parts(t) for t in local]
        counts = torch.tensor([ids.numel() for ids, _ in parts], dtype=torch.int64,
                              device=_meta_device(local[0], self._comm.backend))
        every = [torch.empty_like(counts) for _ in range(world)]
        dist.all_gather(every, counts, group=self._pg)
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
            dist.all_gather(all_ids, ids_buf, group=self._pg)
            dist.all_gather(all_rows, rows_buf, group=self._pg)
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
        """Copy rank 0's ``value`` (the process group's first rank's) into ``out`` (a tensor or list) on
        every worker."""
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
            self._run("broadcast", jobs, self._comm.broadcast)

    def barrier(self) -> None:
        """Wait until every worker of the store's process group reaches this point."""
        if self._pg is None:
            group.barrier()
            return
        if self.num_workers == 1:
            return
        comm = self._comm
        group.barrier_on(self._pg, comm.backend, comm.timeout(), comm.where(), "Some rank of the group")

    def rejoin(self) -> None:
        """Follow the job's process group after it was re-formed at another size or with other
        members (elastic in-process recovery, :func:`mxtorch.distributed.rejoin`): this worker's
        rank and the worker count are read again; gradient hooks are removed (set up again at the
        next step).  Only a store over the whole job (no ``process_group``) can follow it."""
        if self._pg is not None:
            raise KVStoreError(f"KVStore {self._type!r} runs on a process group of its own: create it again "
                               "on the re-formed job instead of rejoining")
        self.close()
        self._info = group.world()
        self._comm = _Comm.world(self._info.rank, self._info.world_size)
        self._verified.clear()

    def close(self) -> None:
        """Remove gradient hooks; the process group itself stays up until exit (shared)."""
        if self._grad_sync is not None:
            self._grad_sync.detach()
            self._grad_sync = None
        self._hooks_wanted = False

    # ---- gradients: reduce while backward runs ----------------------------------------
    @property
    def backward_passes_per_step(self) -> int:
        """Backward passes that accumulate into the gradients before each step (default 1): the
        gradient hooks reduce each gradient after its last pass only, once per step (Horovod's
        ``backward_passes_per_step``; a pipeline sets it to its micro-batches).  Every rank must
        set the same value; more passes than this before a step are still correct (everything is
        reduced again at step time), fewer leave the reduction to the step."""
        return self._passes

    @backward_passes_per_step.setter
    def backward_passes_per_step(self, passes: int) -> None:
        if isinstance(passes, bool) or not isinstance(passes, int) or passes < 1:
            raise ValueError(f"backward_passes_per_step must be a positive int, got {passes!r}")
        self._passes = passes

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
        self._grad_sync = self._gradient_sync(list(params), hook=True)
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
            sync = self._grad_sync = self._gradient_sync(params, hook=self._hooks_wanted)
        sync.synchronize()

    # ---- internals ---------------------------------------------------------------------
    def _gradient_sync(self, params: list[GradientSource], hook: bool) -> GradientSync:
        def launched() -> None:
            self.gradient_allreduces += 1

        return GradientSync(self._comm, self.num_workers, params, self._bucket_bytes, hook,
                            passes=lambda: self.backward_passes_per_step, on_launch=launched)

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
            _agree(op, [(k, tuple(t.shape), t.dtype) for k, t in new], self._comm,
                   _meta_device(new[0][1], self._comm.backend))
        for k, t in new:
            self._verified[k] = (tuple(t.shape), t.dtype)

    def _run(self, op: str, jobs: list[_Job], launch: Callable[[torch.Tensor, bool], Any]) -> None:
        with span("allreduce" if op == "pushpull" else op) as sp:
            if sp:
                nbytes = sum(j.buf.numel() * j.buf.element_size() for j in jobs)
                sp.note(keys=[j.key for j in jobs], bytes=nbytes, worker=self.rank)
            tl = horovod_timeline.active()
            if tl is None or not jobs:
                self._run_jobs(op, jobs, launch)
                return
            kind = "ALLREDUCE" if op == "pushpull" else op.upper()
            with tl.operation([str(j.key) for j in jobs], kind, horovod_timeline.activity(kind, jobs[0].buf),
                              fused=len(jobs) > 1, args=horovod_timeline.describe([j.buf for j in jobs])):
                self._run_jobs(op, jobs, launch)

    def _run_jobs(self, op: str, jobs: list[_Job], launch: Callable[[torch.Tensor, bool], Any]) -> None:
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
            f"{self._comm.where()}: {op} of key(s) {shown} failed: {group.explain(e)}. A peer process died, "
            f"hangs, or did not call {op} with the same keys within the timeout "
            f"({self._comm.timeout_hint()}); check the other ranks' logs"
        )



def _create(name: str, **kwargs: Any) -> KVStoreBase:
    return AllreduceKVStore(name, **kwargs)


for _name in ("allreduce", "horovod", "nccl"):
    register_factory(_name, _create)
