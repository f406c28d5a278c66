"""A worker's dense requests: the flat value of a push (its list summed), each slice's payload
(compressed when the worker set a compressor), and pulls into dense outs -- PULL, or PUSHPULL
carrying the push too -- whose replies are written into the outs (or become a whole out's
storage, :func:`_adopt`).  The row-sparse ones are :mod:`.row_transfer`'s.

Each function sends its requests through the worker's :class:`~.client.PSClient` without
waiting; the caller waits for every reply at once (:meth:`PSClient.wait`).  The senders return
the bytes of the tensors they pushed (``DistKVStore.wire_bytes_sent`` sums them).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from ...compression.base import payload_tensors
from ..base import KVStoreError
from . import protocol as P
from .client import PSClient
from .placement import KeyPlan
from .protocol import Command, Flag, Message

__all__ = ["flat_value", "summed_flat", "push_payload", "send_dense_push", "send_dense_pull"]


def flat_value(t: torch.Tensor) -> torch.Tensor:
    """``t`` detached, on the CPU, contiguous, as a 1-D view."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    return t.contiguous().view(-1)


def summed_flat(vals: list[torch.Tensor]) -> torch.Tensor:
    """The flat value of dense ``vals`` (one per local context) summed on the CPU."""
    if len(vals) == 1:
        return flat_value(vals[0])
    with torch.no_grad():
        acc = vals[0].detach().to("cpu", copy=True)
        for v in vals[1:]:
            acc.add_(v.detach().to("cpu"))
    return flat_value(acc)


def push_payload(plan: KeyPlan, flat: torch.Tensor, i: int,
                 compressor: Any) -> tuple[list[torch.Tensor], int, int]:
    """The tensors and flags pushing slice ``i`` of the dense ``flat`` (compressed by ``compressor``
    if it is set and the key is floating point), and their bytes."""
    _, off, size = plan.shards[i]
    data = flat.view(plan.shape) if len(plan.shards) == 1 else flat.narrow(0, off, size)
    tensors, flags = [data], 0
    comp = compressor if plan.dtype.is_floating_point else None
    if comp is not None:
        payload, _ = comp.compress(data, plan.residual_key(i))
        tensors, flags = payload_tensors(payload), Flag.COMPRESSED
    return tensors, flags, sum(t.numel() * t.element_size() for t in tensors)


def send_dense_push(client: PSClient, plan: KeyPlan, flat: torch.Tensor, compressor: Any) -> int:
    """Push every slice of the dense ``flat``; return the bytes sent."""
    sent = 0
    for i, (server, _, _) in enumerate(plan.shards):
        tensors, flags, nbytes = push_payload(plan, flat, i, compressor)
        sent += nbytes
        client.send(server, Message(Command.PUSH, flags=flags, key=plan.key, shard=i, arg=plan.push_arg(i),
                                    tensors=tensors), functools.partial(plan.operation, "PUSH", i), keep=True)
    return sent


def send_dense_pull(client: PSClient, plan: KeyPlan, outs: list[torch.Tensor], narrow: torch.dtype | None,
                    adopt_pulls: bool, hint: str, push: torch.Tensor | None = None,
                    compressor: Any = None) -> int:
    """Pull the value into dense ``outs`` (as ``narrow``, a float16/bfloat16 dtype, when set; a whole
    out may adopt the received frame, :func:`_adopt`, when ``adopt_pulls``); with ``push`` (a dense
    flat value), push it first, in one PUSHPULL message per slice.  Returns the bytes pushed."""
    staging: list[torch.Tensor | None] = [None]
    remaining = [len(plan.shards)]
    targets = [o for o in outs if o.is_contiguous()]
    others = [o for o in outs if not o.is_contiguous()]
    sharded = len(plan.shards) > 1
    adopt = adopt_pulls and not sharded
    # a slice of a sharded key arrives flat: copy it straight into the flat view of each target
    # (the views are made once per call, not per slice: each torch call costs microseconds)
    flats = [o.detach().view(-1) for o in targets] if sharded else []
    pull_reply = Command.PULL_REPLY

    def on_reply(msg: Message, i: int) -> None:
        tensors = msg.tensors
        if msg.command != pull_reply or len(tensors) != 1:
            raise KVStoreError(f"unexpected {msg.command.name} reply to a PULL of {plan.describe(i)}")
        data = tensors[0]
        _, off, size = plan.shards[i]
        if data.numel() != size or data.dtype not in (plan.dtype, narrow):
            raise KVStoreError(f"server sent {tuple(data.shape)} {data.dtype} for {plan.describe(i)}, "
                               f"expected {size} {plan.dtype} elements")
        if sharded:
            if data.dim() != 1:
                data = data.view(-1)
            for flat in flats:  # detached views: no autograd bookkeeping needed
                flat.narrow(0, off, size).copy_(data)
            if not others:
                return
        with torch.no_grad():
            if not sharded:
                for j, o in enumerate(targets):
                    if j == 0 and adopt and _adopt(o, data):
                        continue
                    o.copy_(data.view(o.shape))
            if others:
                if not sharded:
                    for o in others:
                        o.copy_(data.view(o.shape))
                else:
                    buf = staging[0]
                    if buf is None:
                        buf = staging[0] = torch.empty(plan.numel, dtype=plan.dtype)
                    buf.narrow(0, off, size).copy_(data)
                    remaining[0] -= 1
                    if remaining[0] == 0:
                        for o in others:
                            o.copy_(buf.view(o.shape))

    arg = P.dtype_code(narrow) if narrow is not None else 0
    sent = 0
    for i, (server, _, _) in enumerate(plan.shards):
        if push is None:
            msg = Message(Command.PULL, flags=Flag.COMPRESSED if narrow is not None else 0, key=plan.key,
                          shard=i, arg=arg)
        else:
            tensors, flags, nbytes = push_payload(plan, push, i, compressor)
            sent += nbytes
            if narrow is not None:
                flags |= Flag.NARROW
            msg = Message(Command.PUSHPULL, flags=flags, key=plan.key, shard=i, arg=plan.push_arg(i, arg),
                          tensors=tensors)
        client.send(server, msg, functools.partial(plan.operation, msg.command.name, i), hint,
                    on_reply=functools.partial(on_reply, i=i))
    return sent


_use_count = getattr(torch._C, "_storage_Use_Count", None)


def _adopt(out: torch.Tensor, data: torch.Tensor) -> bool:
    """Make the received ``data`` the storage of ``out`` instead of copying it, where nothing can tell.

    Only when ``out`` is a plain contiguous CPU tensor owning all of its storage, which no
    other tensor (view, detached alias) shares, and ``data`` has its dtype and size: ``out``
    then stays the same tensor object with the same shape, strides and autograd identity, now
    reading the pulled bytes (the received ZeroMQ frame, kept alive by the storage).  Returns
    False (the caller copies) in every other case, and where this torch cannot count storage
    users.  Saves a copy of every pulled byte (MXTORCH_PS_ADOPT_PULLS=0 turns it off).
    """
    if _use_count is None or out.dtype != data.dtype or out.device.type != "cpu" or \
            out.layout != torch.strided:
        return False
    if out._base is not None or out.storage_offset() != 0 or not out.is_contiguous() or \
            (out.requires_grad and not out.is_leaf) or data.numel() != out.numel():
        return False
    storage = out.untyped_storage()
    if storage.nbytes() != out.numel() * out.element_size() or _use_count(storage._cdata) != 2:
        return False  # 2: out itself and the ``storage`` object just made
    src = data.untyped_storage()
    if data.storage_offset() != 0 or src.nbytes() != storage.nbytes():
        return False
    out.set_(src, 0, out.shape, out.stride())
    return True
