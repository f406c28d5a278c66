"""A worker's row-sparse requests: pushing rows, pulling the rows a value stores, row_sparse_pull.

Each function sends its requests through the worker's :class:`~.client.PSClient` without
waiting; the caller waits for every reply at once (:meth:`PSClient.wait`), and the replies'
callbacks write the rows into the outs.  Where rows sit in the servers' slices is
:mod:`.rows`'s geometry.
"""

from __future__ import annotations

import functools
import numbers
from typing import Any

import torch

from ..base import Key, KVStoreError
from ..local import _row_ids
from .client import PSClient
from .placement import KeyPlan
from .protocol import Command, Flag, Message
from .rows import element_positions, rows_in_slice, scatter_rows

__all__ = ["summed_rows", "send_rows_push", "send_stored_rows_pull", "row_pull_groups", "send_row_pull",
           "write_rows"]


def summed_rows(plan: KeyPlan, vals: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(row ids, rows)`` of the sum of row_sparse ``vals`` (one per local context), on the CPU."""
    from ...nd import sparse

    plan.rows_check()
    for v in vals:
        if v.layout != torch.sparse_coo or v.sparse_dim() != 1:
            raise KVStoreError(f"key {plan.key!r}: a sparse value must be row_sparse (a COO tensor with one "
                               f"sparse dimension), got layout {v.layout}; convert it with "
                               "mx.nd.sparse.tostype")
    with torch.no_grad():
        total = vals[0] if len(vals) == 1 else sparse.add_n(*[v.detach().cpu() for v in vals])
        ids, rows = sparse.row_sparse_parts(total.detach())
    return ids.cpu().contiguous(), rows.cpu().contiguous()


def send_rows_push(client: PSClient, plan: KeyPlan, ids: torch.Tensor, rows: torch.Tensor) -> int:
    """Push each server the rows touching its slice; return the bytes sent.

    Every slice gets a push, possibly of no rows: a dist_sync round needs one from every worker.
    """
    sent = 0
    for i, (server, off, size) in enumerate(plan.shards):
        lo, hi = rows_in_slice(ids, plan.row, off, size)
        tensors = [ids[lo:hi], rows[lo:hi]]
        sent += sum(t.numel() * t.element_size() for t in tensors)
        msg = Message(Command.PUSH, flags=Flag.ROW_SPARSE, key=plan.key, shard=i, arg=plan.push_arg(i),
                      tensors=tensors)
        client.send(server, msg, functools.partial(plan.operation, "PUSH", i), keep=True)
    return sent


def send_stored_rows_pull(client: PSClient, plan: KeyPlan, outs: list[torch.Tensor], hint: str) -> None:
    """Pull the rows the value stores into row_sparse ``outs`` (they become exactly those rows)."""
    plan.rows_check()
    parts: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def on_reply(msg: Message, i: int) -> None:
        if msg.command != Command.PULL_REPLY or len(msg.tensors) != 2:
            raise KVStoreError(f"unexpected {msg.command.name} reply to a row PULL of {plan.describe(i)}")
        parts[i] = (msg.tensors[0], msg.tensors[1])
        if len(parts) == len(plan.shards):
            ids, rows = _assemble(plan, parts)
            write_rows(outs, ids, rows, plan.shape)

    for i, (server, _, _) in enumerate(plan.shards):
        client.send(server, Message(Command.PULL, flags=Flag.ROW_SPARSE, key=plan.key, shard=i),
                    functools.partial(plan.operation, "PULL", i), hint,
                    on_reply=functools.partial(on_reply, i=i))


def _assemble(plan: KeyPlan, parts: dict[int, tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor,
                                                                                         torch.Tensor]:
    """Whole rows from the slices' ``(row ids, elements)`` replies (a row cut in two is joined)."""
    row = plan.row
    all_ids = torch.unique(torch.cat([ids for ids, _ in parts.values()]), sorted=True)
    rows = torch.zeros((all_ids.numel(), row), dtype=plan.dtype)
    for i, (ids, data) in parts.items():
        _, off, size = plan.shards[i]
        if ids.dtype != torch.int64 or ids.dim() != 1:
            raise KVStoreError(f"server sent malformed row ids for {plan.describe(i)}")
        _, inside = element_positions(ids, row, off, size)
        if data.numel() != int(inside.sum()):
            raise KVStoreError(f"server sent {data.numel()} elements for {ids.numel()} rows of "
                               f"{plan.describe(i)}")
        part = torch.zeros((ids.numel(), row), dtype=plan.dtype)
        scatter_rows(part, data, ids, row, off, size)
        rows.index_add_(0, torch.searchsorted(all_ids, ids), part)
    return all_ids, rows.view((all_ids.numel(), *plan.shape[1:]))


def row_pull_groups(key: Key, plan: KeyPlan, outs: list[torch.Tensor],
                    row_ids: Any) -> list[tuple[torch.Tensor, list[torch.Tensor]]]:
    """``[(row ids, outs asking for them), ...]`` of one key's ``row_sparse_pull``: ``row_ids`` is
    one id tensor per out, or one tensor or list of ints for all of them; outs asking for the same
    rows share one request.  The outs must be row_sparse."""
    for t in outs:
        if t.layout == torch.strided:
            raise KVStoreError(
                f"row_sparse_pull of key {key!r} needs row_sparse outs, got a dense tensor of shape "
                f"{tuple(t.shape)}: pull into mx.nd.sparse.zeros('row_sparse', shape), or use pull() for "
                "every row")
    # a list of id tensors is one per out; a plain list of ints (or []) is one set of ids
    per_out = list(row_ids) if isinstance(row_ids, (list, tuple)) and row_ids and not all(
        isinstance(i, numbers.Number) for i in row_ids) else [row_ids] * len(outs)
    if len(per_out) != len(outs):
        raise KVStoreError(f"row_sparse_pull of key {key!r}: {len(outs)} outs but {len(per_out)} "
                           "row_ids: give one row_ids per out (or one for all)")
    groups: list[tuple[torch.Tensor, list[torch.Tensor]]] = []
    for t, rid in zip(outs, per_out):
        ids = _row_ids(key, rid, plan.shape[0], torch.device("cpu"))
        for gids, members in groups:  # outs asking for the same rows share one request
            if torch.equal(gids, ids):
                members.append(t)
                break
        else:
            groups.append((ids, [t]))
    return groups


def send_row_pull(client: PSClient, plan: KeyPlan, ids: torch.Tensor, outs: list[torch.Tensor],
                  hint: str) -> None:
    """Ask each server for the rows ``ids`` (sorted, unique) touching its slice; write them into ``outs``."""
    rows = torch.zeros((ids.numel(), plan.row), dtype=plan.dtype)
    asked = [(i, server, off, size, *rows_in_slice(ids, plan.row, off, size))
             for i, (server, off, size) in enumerate(plan.shards)]
    asked = [a for a in asked if a[5] > a[4]]
    remaining = [len(asked)]

    def on_reply(msg: Message, i: int, off: int, size: int, lo: int, hi: int) -> None:
        if msg.command != Command.PULL_REPLY or len(msg.tensors) != 1:
            raise KVStoreError(f"unexpected {msg.command.name} reply to a ROW_PULL of {plan.describe(i)}")
        data = msg.tensors[0]
        _, inside = element_positions(ids[lo:hi], plan.row, off, size)
        if data.numel() != int(inside.sum()) or data.dtype != plan.dtype:
            raise KVStoreError(f"server sent {data.numel()} {data.dtype} elements for {hi - lo} rows of "
                               f"{plan.describe(i)}")
        scatter_rows(rows[lo:hi], data, ids[lo:hi], plan.row, off, size)
        remaining[0] -= 1
        if remaining[0] == 0:
            write_rows(outs, ids, rows.view((ids.numel(), *plan.shape[1:])), plan.shape)

    if not asked:  # no rows asked for
        write_rows(outs, ids, rows.view((0, *plan.shape[1:])), plan.shape)
        return
    for i, server, off, size, lo, hi in asked:
        client.send(server, Message(Command.ROW_PULL, key=plan.key, shard=i, tensors=[ids[lo:hi]]),
                    functools.partial(plan.operation, "ROW_PULL", i), hint,
                    on_reply=functools.partial(on_reply, i=i, off=off, size=size, lo=lo, hi=hi))


def write_rows(outs: list[torch.Tensor], ids: torch.Tensor, rows: torch.Tensor, shape: torch.Size) -> None:
    """Rows ``ids`` into each out: a row_sparse out becomes exactly them, a dense one gets them written."""
    from ...nd import sparse

    with torch.no_grad():
        for t in outs:
            r = rows.to(device=t.device, dtype=t.dtype)
            i = ids.to(t.device)
            if t.layout != torch.strided:
                t.copy_(sparse.from_row_parts(i, r, tuple(shape)))
            else:
                t.index_copy_(0, i, r)
