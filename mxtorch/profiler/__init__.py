"""``mx.profiler``: MXNet's profiler API on ``torch.profiler``.

::

    mx.profiler.set_config(profile_all=True, filename="profile.json", aggregate_stats=True)
    mx.profiler.set_state("run")
    ...                                    # training: torch's operators and mxtorch's spans
    mx.profiler.set_state("stop")
    mx.profiler.dump()                     # a Chrome trace; in a job one per process:
                                           # profile.rank0.json, profile.server0.json, ...
    print(mx.profiler.dumps())             # MXNet's aggregate table

The trace holds torch's operators (and CUDA kernels where there is a GPU) and every span of
mxtorch (``mxtorch/allreduce``, ``mxtorch/ps.push``, ``mxtorch/trainer.step``, ...) with its
arguments.  ``profile_process='server'`` (on worker rank 0) drives the parameter servers'
profilers; ``mxtorch trace merge DIR -o job.json`` joins a job's files into one timeline.
A ``torch.profiler.profile`` the user runs directly records the same spans.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from ..base import MXNetError
from . import _remote
from ._objects import Counter, Domain, Event, Frame, Marker, Task, scope
from ._process import identity, set_identity
from ._session import PROFILER, check_process
from ._spans import recording, span, span_active
from ._table import SORT_KEYS

__all__ = [
    "set_config", "set_state", "dump", "dumps", "pause", "resume", "scope",
    "Domain", "Task", "Frame", "Event", "Counter", "Marker",
    "profiler_set_config", "profiler_set_state", "dump_profile",
    "span", "span_active", "recording", "set_identity", "identity",
]

_logger = logging.getLogger("mxtorch.profiler")


def set_config(**kwargs: Any) -> None:
    """Configure the profiler (keyword arguments only, as MXNet): ``filename``, ``profile_all``,
    ``profile_symbolic``, ``profile_imperative``, ``profile_memory``, ``profile_api``,
    ``continuous_dump``, ``dump_period``, ``aggregate_stats``, ``profile_process``
    ('worker', or 'server' to configure the parameter servers' profilers)."""
    if check_process(str(kwargs.get("profile_process", "worker"))) == "server":
        _remote.to_servers("config", config=_remote.config_for_servers(kwargs))
        return
    PROFILER.set_config(kwargs)


def set_state(state: str = "stop", profile_process: str = "worker") -> None:
    """Start (``'run'``) or stop (``'stop'``) recording, in this process or on the servers."""
    if check_process(profile_process) == "server":
        _remote.to_servers("state", state=state)
        return
    if state == "run" and not PROFILER.running:
        try:  # the servers' clocks against ours, for `mxtorch trace merge`
            _remote.measure_server_clocks()
        except Exception as e:
            _logger.warning("profiler: could not measure the servers' clocks: %s: %s", type(e).__name__, e)
    PROFILER.set_state(state)


def dump(finished: bool = True, profile_process: str = "worker") -> None:
    """Write the trace recorded since the last dump (and stop, unless ``finished=False``)."""
    if check_process(profile_process) == "server":
        _remote.to_servers("dump", finished=bool(finished))
        return
    PROFILER.dump(finished=bool(finished))


def dumps(reset: bool = False, format: str = "table", sort_by: str = "total", ascending: bool = False) -> str:
    """MXNet's aggregate statistics (needs ``aggregate_stats=True``) as a table or JSON text,
    each category sorted by ``sort_by`` ('total', 'avg', 'min', 'max', 'count')."""
    if format not in ("table", "json"):
        raise MXNetError(f"profiler.dumps: format={format!r} is not understood: pass 'table' or 'json'")
    if sort_by not in SORT_KEYS:
        raise MXNetError(f"profiler.dumps: sort_by={sort_by!r} is not one of {', '.join(SORT_KEYS)}")
    if not isinstance(ascending, bool) or not isinstance(reset, bool):
        raise MXNetError("profiler.dumps: ascending and reset are True or False")
    return PROFILER.dumps(reset, format, sort_by, ascending)


def pause(profile_process: str = "worker") -> None:
    """Stop recording for a while (the trace so far is kept); :func:`resume` goes on."""
    if check_process(profile_process) == "server":
        _remote.to_servers("pause", paused=True)
        return
    PROFILER.pause()


def resume(profile_process: str = "worker") -> None:
    """Go on recording after :func:`pause`."""
    if check_process(profile_process) == "server":
        _remote.to_servers("pause", paused=False)
        return
    PROFILER.resume()


def profiler_set_config(mode: str = "symbolic", filename: str = "profile.json") -> None:
    """Deprecated in MXNet: :func:`set_config` with ``profile_<mode>=True``."""
    warnings.warn("profiler.profiler_set_config() is deprecated; use profiler.set_config()",
                  DeprecationWarning, stacklevel=2)
    set_config(**{f"profile_{mode}": True, "filename": filename})


def profiler_set_state(state: str = "stop") -> None:
    """Deprecated in MXNet: :func:`set_state`."""
    warnings.warn("profiler.profiler_set_state() is deprecated; use profiler.set_state()",
                  DeprecationWarning, stacklevel=2)
    set_state(state)


def dump_profile() -> None:
    """Deprecated in MXNet: :func:`dump`."""
    warnings.warn("profiler.dump_profile() is deprecated; use profiler.dump()", DeprecationWarning,
                  stacklevel=2)
    dump(True)
