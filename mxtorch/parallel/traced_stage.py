"""``TracedStage``: torch's ``PipelineStage`` whose sends and receives run inside mxtorch spans.

torch's schedules (GPipe, 1F1B, the interleaved ones) take each micro-batch's point-to-point ops
from the stage (``get_fwd_recv_ops``, ``get_fwd_send_ops``, ``get_bwd_recv_ops``,
``get_bwd_send_ops``), post them in their own module-level helpers (``_batch_p2p``: each op's
function called, or ``batch_isend_irecv`` for a batch mixing sends and receives) and wait for the
returned works, sometimes much later.  The stage is the one seam that is ours: its ops carry a
:class:`_TracedOp` as their function, so posting runs inside ``mxtorch/pipeline.send`` /
``mxtorch/pipeline.recv`` and the returned work's ``wait`` inside ``mxtorch/pipeline.send.wait`` /
``mxtorch/pipeline.recv.wait``, each with ``stage``, ``micro_batch``, ``kind`` (``activation`` or
``gradient``), ``peer`` (global rank) and ``bytes``.  Nothing in torch is patched: other
pipelines keep torch's functions, and ours keep them too while no profiler records and no
:class:`~mxtorch.profiler.clock.SpanClock` times these spans (one check per call).
"""

from __future__ import annotations

from typing import Any

import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage

from ..profiler import span, span_active

__all__ = ["TracedStage", "SEND", "RECV"]

SEND, RECV = "pipeline.send", "pipeline.recv"
_NAMES = (SEND, RECV, SEND + ".wait", RECV + ".wait")


def _tracing() -> bool:
    return any(span_active(name) for name in _NAMES)


class _TracedWork:
    """A posted send or receive: ``wait`` runs inside its ``.wait`` span; the rest is the work's."""

    __slots__ = ("_work", "_name", "_args")

    def __init__(self, work: Any, name: str, args: dict[str, Any]) -> None:
        self._work, self._name, self._args = work, name, args

    def wait(self, *a: Any, **kw: Any) -> Any:
        with span(self._name) as sp:
            if sp:
                sp.note(**self._args)
            return self._work.wait(*a, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


class _TracedOp:
    """``dist.isend`` or ``dist.irecv`` posting inside a span, for one op of one micro-batch.

    It compares and hashes as the function it wraps: torch checks an op's function with
    ``op in [isend, irecv]`` and picks its posting path with ``{p.op for p in ops} == {isend}``, and
    both must see the function it is.  Where torch tells the peer by ``op.op is isend``
    (``batch_isend_irecv``) it names it ``group_src`` for a send: either keyword is the peer here.
    """

    __slots__ = ("fn", "name", "args", "__name__")

    def __init__(self, fn: Any, name: str, args: dict[str, Any]) -> None:
        self.fn, self.name, self.args = fn, name, args
        self.__name__ = fn.__name__

    def __call__(self, tensor: Any, peer: int | None = None, group: Any = None, tag: int = 0,
                 group_dst: int | None = None, group_src: int | None = None) -> Any:
        group_peer = group_dst if group_dst is not None else group_src
        with span(self.name) as sp:
            if sp:
                sp.note(**self.args)
            if group_peer is None:
                work = self.fn(tensor, peer, group=group, tag=tag)
            elif self.fn is dist.isend:
                work = self.fn(tensor, group=group, tag=tag, group_dst=group_peer)
            else:
                work = self.fn(tensor, group=group, tag=tag, group_src=group_peer)
        return None if work is None else _TracedWork(work, self.name + ".wait", self.args)

    def __eq__(self, other: object) -> bool:
        return self.fn == (other.fn if isinstance(other, _TracedOp) else other)

    def __hash__(self) -> int:
        return hash(self.fn)


class TracedStage(PipelineStage):
    """A ``PipelineStage`` whose micro-batch sends and receives are spanned (see the module)."""

    def _traced(self, ops: list[dist.P2POp], name: str, micro_batch: int, kind: str) -> list[dist.P2POp]:
        if not ops or not _tracing():
            return ops
        for op in ops:
            args = {"stage": self.stage_index, "micro_batch": micro_batch, "kind": kind, "peer": op.peer,
                    "bytes": op.tensor.numel() * op.tensor.element_size()}
            op.op = _TracedOp(op.op, name, args)
        return ops

    def get_fwd_recv_ops(self, fwd_chunk_id: int) -> list[dist.P2POp]:
        return self._traced(super().get_fwd_recv_ops(fwd_chunk_id), RECV, fwd_chunk_id, "activation")

    def get_fwd_send_ops(self, fwd_chunk_id: int) -> list[dist.P2POp]:
        return self._traced(super().get_fwd_send_ops(fwd_chunk_id), SEND, fwd_chunk_id, "activation")

    def get_bwd_recv_ops(self, bwd_chunk_id: int) -> list[dist.P2POp]:
        return self._traced(super().get_bwd_recv_ops(bwd_chunk_id), RECV, bwd_chunk_id, "gradient")

    def get_bwd_send_ops(self, bwd_chunk_id: int) -> list[dist.P2POp]:
        return self._traced(super().get_bwd_send_ops(bwd_chunk_id), SEND, bwd_chunk_id, "gradient")
