"""A server's part of elastic jobs (:mod:`.membership`): which workers its sync rounds wait for."""

from __future__ import annotations

from typing import Any

from .membership import MAX_WORKER_RANKS, read_membership
from .protocol import Message, ProtocolError

ParameterServer = Any  # the server (importing .server here would make a cycle)

__all__ = ["start_membership", "on_membership", "note_greeting"]


def start_membership(server: ParameterServer, assign: dict[str, Any]) -> None:
    """Set the server's workers from its ASSIGN: ranks 0..num_workers-1, or an elastic job's live ranks."""
    if not server.config.elastic:
        server.live = set(range(server.num_workers))
        return
    server.epoch, ranks = read_membership(assign)
    server.num_workers = MAX_WORKER_RANKS  # the bound on the ranks a HELLO or an INIT may name
    server.members = set(ranks)
    server.live = set(ranks)


def _join(server: ParameterServer, rank: int) -> None:
    """``rank`` takes part from now on; in dist_async its staleness count starts at the slowest's."""
    if server.mode == "async":
        for sh in server.shards.values():
            if sh.pushes_key(rank) and rank not in sh.pushes:
                counts = [sh.pushes.get(w, 0) for w in server.live if sh.pushes_key(w)]
                sh.pushes[rank] = min(counts, default=0)
    server.members.add(rank)
    server.live.add(rank)


def on_membership(server: ParameterServer, identity: bytes | None, msg: Message) -> None:
    """The scheduler's MEMBERSHIP: rounds that waited only for a worker that left complete now."""
    if identity is not None:
        raise ProtocolError("only the scheduler announces the membership")
    if not server.config.elastic:
        raise ProtocolError("MEMBERSHIP in a job that is not elastic (MXTORCH_PS_ELASTIC)")
    epoch, ranks = read_membership(msg.meta)
    if epoch <= server.epoch:
        return  # older than what this server knows (a greeting may have told it more)
    server.epoch = epoch
    for rank in ranks:
        if rank not in server.members:
            _join(server, rank)
    # a worker that greeted with a later epoch stays: this older membership predates its join
    server.greeted = {r: e for r, e in server.greeted.items() if e > epoch}
    keep = set(ranks) | set(server.greeted)
    server.members.intersection_update(keep)
    server.live.intersection_update(keep)
    for sh in server.shards.values():
        if server.mode == "sync":
            server._complete_rounds(sh)
        else:
            server._answer_pulls(sh)


def note_greeting(server: ParameterServer, rank: int, hello: dict[str, Any]) -> None:
    """A worker that greets with an epoch newer than this server's joined at that epoch: it counts
    in the rounds from now on, before the MEMBERSHIP that says so arrives (from another connection)."""
    epoch = hello.get("epoch")
    if server.config.elastic and type(epoch) is int and epoch > server.epoch and rank not in server.members:
        server.greeted[rank] = epoch
        _join(server, rank)
