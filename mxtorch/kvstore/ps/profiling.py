"""The parameter server's side of ``mx.profiler``: spans' arguments, PROFILER requests, and the
channel through which worker rank 0 drives the servers' profilers (``profile_process='server'``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import torch

from ...profiler._process import set_identity
from ...profiler._remote import ServerChannel, serve, set_server_channel
from .protocol import Command, Message

if TYPE_CHECKING:
    from .client import PSClient
    from .shard import KeyShard

__all__ = ["message_args", "update_args", "on_profiler", "connect_worker"]


class _Served(Protocol):
    """What :func:`on_profiler` needs of the ParameterServer (no import of it: no cycle)."""

    rank: int

    def _worker(self, identity: bytes | None) -> int: ...

    def _ack(self, identity: bytes | None, req: Message, arg: int = 0,
             meta: dict[str, Any] | None = None) -> None: ...


def message_args(msg: Message, worker: int | None) -> dict[str, Any]:
    """A request's span arguments: command, key, slice, tensor bytes, worker rank."""
    nbytes = sum(t.numel() * t.element_size() for t in msg.tensors)
    return {"command": msg.command.name, "key": msg.key, "shard": msg.shard, "bytes": nbytes,
            "worker": worker}


def update_args(sh: KeyShard, grad: Any) -> dict[str, Any]:
    """An update's span arguments: key, slice, gradient bytes (a row-sparse one's rows)."""
    t = grad if isinstance(grad, torch.Tensor) else grad.values
    return {"key": sh.key, "shard": sh.shard, "bytes": t.numel() * t.element_size(),
            "sparse": t is not grad}


def on_profiler(server: _Served, identity: bytes | None, msg: Message) -> None:
    """PROFILER from a greeted worker: carry it out (:func:`mxtorch.profiler._remote.serve`), ACK."""
    server._worker(identity)
    server._ack(identity, msg, meta=serve(msg.meta, server.rank))


def connect_worker(client: PSClient) -> None:
    """Name this process worker ``client.rank`` and let its profiler reach the servers."""
    set_identity("worker", client.rank, client.num_workers)

    def ask(server: int, request: dict[str, Any]) -> dict[str, Any]:
        rid = client.send(server, Message(Command.PROFILER, meta=request), "PROFILER")
        client.wait()
        return client.replies.pop(rid).meta or {}

    set_server_channel(ServerChannel(client.rank, client.num_servers, ask))
