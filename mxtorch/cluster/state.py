"""What a cluster is made of, kept in a JSON file so that ``cluster down`` works after a crash.

The state file is written *before* the first namespace is made and removed only after the
last one is gone, so whatever a crashed ``up`` (or a killed test) left behind is listed in
it.  Files live in ``/run/mxtorch-cluster`` (``$TMPDIR/mxtorch-cluster-<uid>`` where /run is
not writable, or ``MXTORCH_CLUSTER_STATE_DIR``), one per cluster, named after it.

A cluster may have an *owner*: the process that made it for its own use (a test session).
When the owner has died, the cluster is *stale* and :func:`mxtorch.cluster.sweep_stale`
removes it.  Clusters made by ``mxtorch cluster up`` have no owner and stay until
``mxtorch cluster down``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from .. import bounded_json
from ..checkpoint_io import atomic_write_text
from .errors import ClusterError

__all__ = ["HostState", "ClusterState", "state_dir", "state_path", "load_state", "save_state",
           "remove_state", "all_states", "state_lock", "process_alive", "process_start_time",
           "MXTORCH_CLUSTER_STATE_DIR", "NETNS_PREFIX", "NAME_RE"]

MXTORCH_CLUSTER_STATE_DIR = "MXTORCH_CLUSTER_STATE_DIR"
"""Folder holding the clusters' state files (default /run/mxtorch-cluster)."""

NETNS_PREFIX = "mxc-"
"""Every namespace a cluster makes is called ``mxc-<cluster>-<host>``: ``down --all`` finds them by it."""

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_]{0,23}$")
"""Cluster names: lower-case letters, digits and '_' (no '-': it separates the parts of a namespace name)."""

_VERSION = 1


@dataclass
class HostState:
    """One emulated host: its namespace, address and link rate (bits/s, None: unlimited)."""

    name: str
    netns: str
    address: str
    port: str  # the host's port on the switch (the veth end inside the switch namespace)
    bandwidth: int | None


@dataclass
class ClusterState:
    """Everything ``down`` needs to remove a cluster, and what ``status`` shows."""

    name: str
    subnet: str
    switch_netns: str
    shaper: str
    hosts: list[HostState]
    owner_pid: int | None = None
    owner_start: int | None = None
    interface: str = "eth0"
    bridge: str = "br0"
    version: int = _VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    def namespaces(self) -> list[str]:
        """Hosts first, the switch last: removing the switch removes every link."""
        return [h.netns for h in self.hosts] + [self.switch_netns]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str, source: str) -> ClusterState:
        try:
            d = bounded_json.loads(text, "the file", ValueError, expect=dict)
            if d.get("version") != _VERSION:
                raise ValueError(f"version {d.get('version')!r}, expected {_VERSION}")
            d["hosts"] = [HostState(**h) for h in d["hosts"]]
            return cls(**d)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as e:
            raise ClusterError(f"cluster state file {source} is not readable ({e}): remove the cluster with "
                               "`mxtorch cluster down --all`, which also finds its namespaces by name") from e


def state_dir() -> str:
    """The folder of state files (made on first use)."""
    chosen = os.environ.get(MXTORCH_CLUSTER_STATE_DIR)
    fallback = os.path.join(tempfile.gettempdir(), f"mxtorch-cluster-{os.getuid()}")
    candidates = [chosen] if chosen else ["/run/mxtorch-cluster", fallback]
    for path in candidates:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError:
            continue
        if os.access(path, os.W_OK):
            return path
    raise ClusterError(f"no writable folder for cluster state files (tried {', '.join(candidates)}): set "
                       f"{MXTORCH_CLUSTER_STATE_DIR} to a writable folder")


def state_path(name: str) -> str:
    return os.path.join(state_dir(), f"{name}.json")


def save_state(state: ClusterState) -> None:
    """Write atomically (a crash leaves the old or the new file, never half of one)."""
    atomic_write_text(state_path(state.name), state.to_json())


def load_state(name: str) -> ClusterState | None:
    path = state_path(name)
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    return ClusterState.from_json(text, path)


def remove_state(name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(state_path(name))


def all_states() -> list[ClusterState]:
    """Every cluster with a state file, by name."""
    out = []
    for entry in sorted(os.listdir(state_dir())):
        if entry.endswith(".json"):
            state = load_state(entry[:-len(".json")])
            if state is not None:
                out.append(state)
    return out


@contextlib.contextmanager
def state_lock() -> Iterator[None]:
    """Serializes ``up`` and ``down`` across processes (subnet choice, names, state files)."""
    with open(os.path.join(state_dir(), ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), None if it does not exist.

    Stored beside an owner's pid, it tells a live owner from a new process that got its pid.
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and ')': fields after the last ')' are plain
    return int(text.rpartition(")")[2].split()[19])


def process_alive(pid: int, start_time: int | None) -> bool:
    now = process_start_time(pid)
    return now is not None and (start_time is None or now == start_time)
