"""Profiling parameter servers from a worker (MXNet's ``profile_process='server'``).

A parameter-server worker registers a :class:`ServerChannel` when its store connects.  Worker
rank 0 then forwards ``set_config`` / ``set_state`` / ``pause`` / ``resume`` / ``dump`` with
``profile_process='server'`` to every server (the other ranks' calls do nothing, as in MXNet),
and every worker measures each server's clock against its own when its profiler starts, so that
``mxtorch trace merge`` can put the servers on worker rank 0's clock.

On a server, :func:`serve` carries out one PROFILER request.  The request comes from the network:
it is checked field by field, and the file name it carries is reduced to a bare name, written
into ``MXTORCH_PROFILE_DIR`` (default: the server's working directory) as
``<stem>.server<rank><ext>`` -- a worker never chooses where a server writes.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..base import MXNetError
from ._process import identity, ntp_offset
from ._session import PROFILER, check_process, parse_config

__all__ = ["ServerChannel", "set_server_channel", "to_servers", "measure_server_clocks", "serve"]

_logger = logging.getLogger("mxtorch.profiler")
_MAX_CONFIG_ITEMS = 16
_MAX_NAME = 255


@dataclass
class ServerChannel:
    """How a worker reaches the servers: ``ask(server, request) -> reply meta``."""

    rank: int
    num_servers: int
    ask: Callable[[int, dict[str, Any]], dict[str, Any]]


_channel: ServerChannel | None = None


def set_server_channel(channel: ServerChannel | None) -> None:
    global _channel
    _channel = channel


def to_servers(op: str, **params: Any) -> None:
    """Send one profiler request to every server (from worker rank 0 only)."""
    if _channel is None:
        raise MXNetError("profile_process='server' profiles parameter servers: create the job's store "
                         "first (kv = mx.kv.create('dist_sync') or 'dist_async') in a job started by "
                         "mxtorch launch")
    if _channel.rank != 0:
        return
    for server in range(_channel.num_servers):
        _channel.ask(server, dict(params, op=op))


def measure_server_clocks() -> None:
    """Every server's clock minus this worker's, kept for the trace's metadata."""
    if _channel is None:
        return
    channel = _channel
    for server in range(channel.num_servers):
        def ask(server: int = server) -> int:
            reply = channel.ask(server, {"op": "clock"})
            value = reply.get("time_ns")
            if not isinstance(value, int):
                raise MXNetError(f"server {server} answered a clock request without its time")
            return value
        identity().peers[f"server{server}"] = ntp_offset(ask)


def _server_filename(name: Any, rank: int) -> str:
    if not isinstance(name, str) or not name or len(name) > 4096:
        raise MXNetError("a profiler request's filename must be a non-empty string of at most 4096 "
                         "characters")
    base = os.path.basename(name.replace("\\", "/"))
    if base in ("", ".", "..") or len(base) > _MAX_NAME or "\x00" in base:
        raise MXNetError(f"a profiler request's filename {name[:80]!r} names no file")
    from ..distributed.env import MXTORCH_PROFILE_DIR

    folder = os.environ.get(MXTORCH_PROFILE_DIR) or os.getcwd()
    return os.path.join(folder, base)


def serve(request: Any, rank: int) -> dict[str, Any]:
    """Carry out one PROFILER request on server ``rank``; return the reply's meta."""
    if not isinstance(request, dict):
        raise MXNetError("a profiler request carries a JSON object")
    op = request.get("op")
    if op == "clock":
        return {"time_ns": time.time_ns()}
    if op == "config":
        config = request.get("config")
        if not isinstance(config, dict) or len(config) > _MAX_CONFIG_ITEMS or not all(
                isinstance(v, (str, bool, int, float)) for v in config.values()):
            raise MXNetError("a profiler config request carries an object of at most 16 plain values")
        config = dict(config, profile_process="worker")  # on the server, the server is the process
        if "filename" in config:
            config["filename"] = _server_filename(config["filename"], rank)
        PROFILER.set_config(config)
        return {}
    if op == "state":
        state = request.get("state")
        if state not in ("run", "stop"):
            raise MXNetError(f"a profiler state request names state {str(state)[:20]!r}: 'run' or 'stop'")
        PROFILER.set_state(state)
        return {}
    if op == "pause":
        (PROFILER.pause if request.get("paused") is True else PROFILER.resume)()
        return {}
    if op == "dump":
        path = PROFILER.dump(finished=request.get("finished") is not False)
        _logger.info("server %d wrote its profile to %s", rank, path)
        return {"path": path}
    raise MXNetError(f"a profiler request names no known operation ({str(op)[:20]!r})")


def config_for_servers(kwargs: dict[str, Any]) -> dict[str, Any]:
    """What set_config sends the servers: the arguments checked here first (a bad one fails on the
    worker), then as given."""
    parse_config(kwargs)
    check_process(str(kwargs.get("profile_process", "server")))
    return {k: v if isinstance(v, (bool, int, float)) else str(v) for k, v in kwargs.items()
            if k != "profile_process"}
