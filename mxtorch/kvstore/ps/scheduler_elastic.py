"""The scheduler's part of elastic jobs (:mod:`.membership`): admitting a worker that joins a
running job, announcing the membership, and answering a joiner's ``kv.init`` of known keys."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from ..base import KVStoreError
from . import protocol as P
from .membership import MAX_WORKER_RANKS, membership_message
from .protocol import Command, Message

# the functions take the Scheduler (and its _Node) as Any: importing .scheduler here would make a cycle
Scheduler = Any
_Node = Any

__all__ = ["admit_worker", "announce", "live_ranks", "remember_keys", "keys_known"]

_logger = logging.getLogger("mxtorch.kvstore.ps.scheduler")


def live_ranks(s: Scheduler) -> list[int]:
    return [n.rank for n in s.workers if n.state == "alive"]


def membership_meta(s: Scheduler) -> dict[str, Any]:
    """What an ASSIGN or LAYOUT of an elastic job adds: the epoch and the live ranks."""
    return {"epoch": s.epoch, "workers": live_ranks(s)} if s.config.elastic else {}


def announce(s: Scheduler, skip: _Node | None = None) -> None:
    """A new epoch: tell every live server and worker (but ``skip``) the live worker ranks."""
    s.epoch += 1
    ranks = live_ranks(s)
    _logger.info("membership epoch %d: %d live worker(s) %s", s.epoch, len(ranks), ranks[:32])
    for node in (*s.servers, *s.workers):
        if node.state == "alive" and node is not skip:
            s._send(node.identity, membership_message(s.epoch, ranks))


def admit_worker(s: Scheduler, node: _Node) -> None:
    """A worker registering with a running elastic job: a new rank, the LAYOUT, a new epoch."""
    if len(s.workers) >= MAX_WORKER_RANKS:
        raise KVStoreError(f"this elastic job has handed out {MAX_WORKER_RANKS} worker ranks, the most a job "
                           "may: start a new job")
    rank = len(s.workers)  # ranks are never reused: a late message from a departed worker names it
    node.rank, node.node_id, node.last_seen = rank, P.worker_node(rank), time.monotonic()
    s.workers.append(node)
    s.by_identity[node.identity] = node
    host = str(node.info.get("host"))
    same_host = [n for n in s.workers if n.state == "alive" and str(n.info.get("host")) == host]
    announce(s, skip=node)  # the servers count it from this epoch; it learns the epoch in its LAYOUT
    layout = [{"rank": v.rank, "address": v.address, "nonce": v.nonce} for v in s.servers]
    s._send(node.identity, Message(Command.LAYOUT, meta={
        "rank": rank, "num_workers": len(live_ranks(s)), "num_servers": len(s.servers), "mode": s.mode,
        "servers": layout, "token": s.token, "local_rank": same_host.index(node),
        "local_size": len(same_host), "joined": True, **membership_meta(s)}))
    _logger.info("worker %d joins the job (pid %s on %s)", rank, node.info.get("pid"), host)


def _items(keys: list[Any]) -> list[str]:
    return [json.dumps(item, sort_keys=True) for item in keys]


def remember_keys(s: Scheduler, keys: list[Any]) -> None:
    """Keys every worker agreed on (a KEY_CHECK that passed): a joiner may init them alone."""
    if s.config.elastic:
        s.known_keys.update(_items(keys))


def keys_known(s: Scheduler, keys: list[Any]) -> bool:
    """Whether every key of a KEY_CHECK was agreed on before, with the same shape and dtype."""
    return bool(s.config.elastic and keys) and all(k in s.known_keys for k in _items(keys))
