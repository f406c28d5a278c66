"""The optimizer on the servers seen from a worker: declared, kept in step with the worker's
hyper-parameters, and its states gathered from every server into one
``Updater.get_states`` file (a split key's slice states joined), and a file scattered back to
the servers (a whole-key state sliced as the key is placed).

Each function takes the ``prefix`` of a worker group (:class:`~.group.GroupStore`) to act on
that group's optimizer on the servers (None: the job's), and the plans of that group's keys:
files hold the states under the group's own names of its keys (its Trainer's indices), the
servers under their full names."""

from __future__ import annotations

from typing import Any

import torch

from ..base import Key
from . import protocol as P
from .client import PSClient
from .optimizer_spec import describe_optimizer, hyper_of
from .placement import KeyPlan
from .protocol import Command, Message

__all__ = ["send_to_servers", "sync_hyper", "gather_states", "save_states", "load_states"]


def _with_prefix(meta: dict[str, Any], prefix: str | None) -> dict[str, Any]:
    return meta if prefix is None else {**meta, "prefix": prefix}


def send_to_servers(client: PSClient, num_servers: int, command: Command, meta: dict[str, Any]) -> None:
    """Send one message to every server and wait for their replies."""
    for s in range(num_servers):
        client.send(s, Message(command, meta=meta), command.name)
    client.wait()


def sync_hyper(client: PSClient, num_servers: int, optimizer: Any,
               sent: dict[str, Any] | None, prefix: str | None = None) -> dict[str, Any]:
    """Send the servers the hyper-parameters that differ from ``sent``; return the ones now in force."""
    hyper = hyper_of(optimizer)
    if hyper != sent:
        changed = _with_prefix({k: v for k, v in hyper.items() if sent is None or sent.get(k) != v}, prefix)
        for s in range(num_servers):
            client.send(s, Message(Command.SET_HYPER, meta=changed), "SET_HYPER")
    return hyper


def gather_states(client: PSClient, num_servers: int, plans: dict[Key, KeyPlan],
                  prefix: str | None = None) -> tuple[dict[Key, Any], dict[Key, int], int]:
    """Every key's optimizer state joined from its slices' states, update counts, num_update; keys
    as their owner names them (:attr:`KeyPlan.own_key`)."""
    meta = _with_prefix({}, prefix) or None
    ids = [client.send(s, Message(Command.GET_STATES, meta=meta), "GET_STATES") for s in range(num_servers)]
    client.wait()
    parts: dict[Key, dict[int, Any]] = {}
    counts: dict[Key, int] = {}
    num_update = 0
    for rid in ids:
        reply = client.replies.pop(rid)
        m = reply.meta or {}
        for item in m.get("states", []):
            k = P.key_from_json(item[0])
            parts.setdefault(k, {})[int(item[1])] = P.unpack_tree(item[2], reply.tensors)
        for item in m.get("counts", []):
            k = P.key_from_json(item[0])
            counts[k] = max(counts.get(k, 0), int(item[2]))
        num_update = max(num_update, int(m.get("num_update", 0)))
    states: dict[Key, Any] = {}
    for k, by_shard in parts.items():
        plan = plans.get(k)
        if plan is None or len(plan.shards) == 1:
            states[_own(plans, k)] = next(iter(by_shard.values()))
        elif len(by_shard) == len(plan.shards):  # else a slice was never updated: no state yet
            states[plan.own_key] = _join_state([by_shard[i] for i in range(len(plan.shards))], plan)
    return states, {_own(plans, k): c for k, c in counts.items()}, num_update


def _own(plans: dict[Key, KeyPlan], key: Key) -> Key:
    plan = plans.get(key)
    return key if plan is None else plan.own_key


def save_states(client: PSClient, num_servers: int, plans: dict[Key, KeyPlan], optimizer: Any,
                fname: str, dump_optimizer: bool, prefix: str | None = None) -> None:
    """Write the servers' optimizer states to ``fname`` in ``Updater.get_states`` format."""
    from ...checkpoint_io import atomic_write_bytes
    from ...optimizer import Updater

    states, counts, num_update = gather_states(client, num_servers, plans, prefix)
    optimizer._index_update_count = dict(counts)
    optimizer.num_update = max(num_update, optimizer.begin_num_update)
    updater = Updater(optimizer)
    updater.states = states
    atomic_write_bytes(fname, updater.get_states(dump_optimizer))


def load_states(client: PSClient, num_servers: int, plans: dict[Key, KeyPlan], optimizer: Any,
                fname: str, prefix: str | None = None) -> None:
    """Load a file written by ``save_states`` or ``Updater.get_states`` into the servers."""
    from ...optimizer import Updater

    with open(fname, "rb") as f:
        blob = f.read()
    updater = Updater(optimizer)
    updater.set_states(blob)  # validates; loads hyper-parameters and counts into optimizer
    desc = describe_optimizer(optimizer)
    per_server: list[tuple[list[Any], list[torch.Tensor], list[Any]]] = [
        ([], [], []) for _ in range(num_servers)]
    counts = optimizer._index_update_count
    for k, plan in plans.items():
        own = plan.own_key
        for i, (server, off, size) in enumerate(plan.shards):
            states, tensors, cnts = per_server[server]
            if own in updater.states:
                piece = updater.states[own]
                if len(plan.shards) > 1:
                    piece = _slice_state(piece, plan, off, size)
                states.append([P.key_to_json(k), i, P.pack_tree(piece, tensors)])
            if own in counts:
                cnts.append([P.key_to_json(k), i, int(counts[own])])
    for s, (states, tensors, cnts) in enumerate(per_server):
        meta = _with_prefix({"optimizer": desc, "states": states, "counts": cnts,
                             "num_update": int(optimizer.num_update)}, prefix)
        client.send(s, Message(Command.SET_STATES, meta=meta, tensors=tensors), "SET_STATES")
    client.wait()


def _join_state(pieces: list[Any], plan: KeyPlan) -> Any:
    """Concatenate the servers' slice states of a split key into whole-key state."""
    first = pieces[0]
    if isinstance(first, torch.Tensor):
        if all(isinstance(p, torch.Tensor) and p.dim() == 1 for p in pieces) and \
                sum(p.numel() for p in pieces) == plan.numel:
            return torch.cat(pieces).view(plan.shape)
        return first  # a per-key scalar state: the slices hold the same value
    if isinstance(first, tuple):
        return tuple(_join_state([p[j] for p in pieces], plan) for j in range(len(first)))
    return first


def _slice_state(state: Any, plan: KeyPlan, off: int, size: int) -> Any:
    """The part of a whole-key state that the slice ``off:off+size`` of a split key keeps."""
    if isinstance(state, torch.Tensor):
        if state.numel() == plan.numel and state.numel() > 1:
            return state.reshape(-1).narrow(0, off, size).contiguous()
        return state
    if isinstance(state, (tuple, list)):
        return tuple(_slice_state(s, plan, off, size) for s in state)
    return state
