"""An emulated cluster: hosts as Linux network namespaces on one switch, every link shaped by ``tc``.

Layout of a cluster called ``c1`` with two hosts::

    namespace mxc-c1-h0            namespace mxc-c1-sw              namespace mxc-c1-h1
    eth0 10.200.0.1/24 ── veth ──  h0 ─┐                  ┌─ h1  ── veth ── eth0 10.200.0.2/24
    (tbf: host -> switch)          (tbf: switch -> host)  br0

Each host has its own network stack (addresses, ports, routes) and reaches the others only
through its link; nothing is routed to or from the machine's own network.  A link is shaped
in both directions: the host's ``eth0`` limits what it sends, the switch's port limits what
it receives, so a byte from one host to another crosses two shaped links, as through a real
switch.  The subnet is a free ``10.x.y.0/24`` (none of the machine's routes and no other
cluster's).

Processes run inside a host through ``ip netns exec`` with ``GLOO_SOCKET_IFNAME`` and
``DMLC_INTERFACE`` set to the host's interface, so gloo and the parameter server bind to it.
Inside the hosts the names ``h0``, ``h1``, ... resolve to their addresses (an ``/etc/hosts``
that ``ip netns exec`` mounts from ``/etc/netns/<namespace>/``), and each process's host name
is its host's (a UTS namespace, where ``unshare`` exists), so logs say ``pid 123 on h1``.

Example::

    from mxtorch.cluster import Cluster
    with Cluster.up(hosts=2, bandwidth="1gbit") as c:
        server = c.popen("h1", ["python", "-m", "http.server", "8000"])
        c.run("h0", ["curl", f"http://{c.host('h1').address}:8000/"])
        c.link_down("h1")          # the cable is pulled at the switch
        c.set_bandwidth("h0", "100mbit")
    # leaving the block removes every namespace (also when the block raised)
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from .._forward import Forward
from ..distributed import env as _env
from ..distributed.env import DMLC_INTERFACE
from . import netns
from .errors import ClusterError, ClusterUnavailable
from .rates import format_rate, parse_rate
from .state import (
    NAME_RE,
    NETNS_PREFIX,
    ClusterState,
    HostState,
    all_states,
    load_state,
    process_alive,
    process_start_time,
    remove_state,
    save_state,
    state_lock,
)

__all__ = ["Cluster", "Host", "HostStatus", "list_clusters", "down_all", "sweep_stale", "host_environment",
           "MXTORCH_CLUSTER_HOST", "TP_SOCKET_IFNAME", "MAX_HOSTS"]

MXTORCH_CLUSTER_HOST = "MXTORCH_CLUSTER_HOST"
"""Set in every process started inside a cluster host: that host's name ('h0', 'h1', ...)."""
TP_SOCKET_IFNAME = "TP_SOCKET_IFNAME"
"""TensorPipe's (torch RPC) network interface variable."""

MAX_HOSTS = 200
_INTERFACE = "eth0"
_SUBNET_POOL = [(a, b) for a in range(200, 255) for b in range(256)]  # 10.a.b.0/24
_NETNS_ETC = "/etc/netns"  # `ip netns exec NS` bind-mounts /etc/netns/NS/* over /etc/*
# Run as `sh -c SCRIPT HOSTNAME ARGV...` in a new UTS namespace: name the host, then become ARGV
# (exec all the way down, so the pid a caller sees is the command's own).
_SET_HOSTNAME = 'echo "$0" > /proc/sys/kernel/hostname && exec "$@"'


@dataclass(frozen=True)
class Host:
    """One host of a cluster: ``name`` ('h0'), ``index``, its namespace and address."""

    name: str
    index: int
    netns: str
    address: str
    interface: str = _INTERFACE


@dataclass(frozen=True)
class HostStatus:
    """A host as the kernel sees it now; rates in bits/s (None: not limited)."""

    host: Host
    exists: bool
    link_up: bool
    rate_out: int | None  # host -> switch (the host's eth0)
    rate_in: int | None   # switch -> host (the switch's port)
    pids: tuple[int, ...]

    def describe(self) -> str:
        if not self.exists:
            return f"{self.host.name:<4} {self.host.address:<15} MISSING (namespace {self.host.netns} gone)"
        link = "up" if self.link_up else "DOWN"
        return (f"{self.host.name:<4} {self.host.address:<15} link {link:<4} "
                f"out {format_rate(self.rate_out):>9}  in {format_rate(self.rate_in):>9}  "
                f"{len(self.pids)} process(es)  netns {self.host.netns}")


def host_environment(host: Host) -> dict[str, str]:
    """Variables every process in ``host`` gets: gloo, ps-lite and TensorPipe bind to its interface."""
    return {
        _env.GLOO_SOCKET_IFNAME: host.interface,
        DMLC_INTERFACE: host.interface,
        TP_SOCKET_IFNAME: host.interface,
        MXTORCH_CLUSTER_HOST: host.name,
    }


class Cluster:
    """A running emulated cluster; make one with :meth:`up`, find one with :meth:`attach`.

    Hosts are named ``h0``, ``h1``, ...; every method taking a host also accepts its index,
    its address or its namespace name.  A ``Cluster`` is a context manager that calls
    :meth:`down` on exit.
    """

    def __init__(self, state: ClusterState) -> None:
        self._state = state

    # ---- making and removing ------------------------------------------------------------
    @classmethod
    def up(cls, hosts: int, bandwidth: str | int | None = None, *, name: str | None = None,
           shaper: str = "tbf", owned: bool = False) -> Cluster:
        """Make a cluster of ``hosts`` hosts whose links carry ``bandwidth`` each way ('1gbit').

        ``owned=True`` records this process as the owner: if it dies without calling
        :meth:`down`, the cluster is stale and :func:`sweep_stale` removes it.  Raises
        :class:`ClusterUnavailable` when the machine cannot make namespaces, and
        :class:`ClusterError` for a bad option or a failed command (after removing whatever
        was made).
        """
        if isinstance(hosts, bool) or not isinstance(hosts, int) or not 1 <= hosts <= MAX_HOSTS:
            raise ClusterError(f"the number of hosts must be an integer in 1..{MAX_HOSTS}, got {hosts!r}")
        rate = parse_rate(bandwidth)
        if shaper not in netns.SHAPERS:
            raise ClusterError(f"unknown shaper {shaper!r}: choose one of {', '.join(netns.SHAPERS)}")
        if name is not None and not NAME_RE.match(name):
            raise ClusterError(f"cluster name {name!r} is not valid: use 1-24 lower-case letters, digits or "
                               "'_', starting with a letter or digit")
        problem = netns.support_problem()
        if problem is not None:
            raise ClusterUnavailable(problem)
        with state_lock():
            existing = {s.name: s for s in all_states()}
            if name is None:
                name = "c" + uuid.uuid4().hex[:7]
            if name in existing:
                raise ClusterError(f"a cluster called {name!r} already exists: remove it with "
                                   f"`mxtorch cluster down {name}` or choose another name")
            taken = [ns for ns in netns.list_netns() if ns.startswith(f"{NETNS_PREFIX}{name}-")]
            if taken:
                raise ClusterError(f"namespaces of an earlier cluster {name!r} are still there "
                                   f"({', '.join(taken)}) without a state file: remove them with "
                                   "`mxtorch cluster down --all`")
            subnet = _free_subnet([s.subnet for s in existing.values()])
            net = ipaddress.ip_network(subnet)
            state = ClusterState(
                name=name, subnet=subnet, switch_netns=f"{NETNS_PREFIX}{name}-sw", shaper=shaper,
                hosts=[HostState(name=f"h{i}", netns=f"{NETNS_PREFIX}{name}-h{i}", address=str(net[i + 1]),
                                 port=f"h{i}", bandwidth=rate) for i in range(hosts)],
                owner_pid=os.getpid() if owned else None,
                owner_start=process_start_time(os.getpid()) if owned else None,
            )
            save_state(state)  # before anything exists: a crash from here on is cleaned by `down`
        cluster = cls(state)
        try:
            cluster._build()
        except BaseException:
            cluster.down()
            raise
        return cluster

    def _build(self) -> None:
        s = self._state
        netns.add_netns(s.switch_netns)
        netns.run_ip("link", "add", s.bridge, "type", "bridge", "stp_state", "0", "forward_delay", "0",
                     netns=s.switch_netns)
        netns.run_ip("link", "set", s.bridge, "up", netns=s.switch_netns)
        prefix = ipaddress.ip_network(s.subnet).prefixlen
        names = "".join(f"{h.address}\t{h.name} {h.name}.{s.name}\n" for h in s.hosts)
        for h in s.hosts:
            netns.add_netns(h.netns)
            _write_hosts_file(h.netns, names)
            netns.run_ip("link", "add", h.port, "type", "veth", "peer", "name", s.interface, "netns", h.netns,
                         netns=s.switch_netns)
            netns.run_ip("link", "set", h.port, "master", s.bridge, netns=s.switch_netns)
            # no IPv6 link-local address: gloo and ps-lite must find exactly one address on eth0
            netns.run_ip("link", "set", s.interface, "addrgenmode", "none", netns=h.netns)
            netns.run_ip("addr", "add", f"{h.address}/{prefix}", "dev", s.interface, netns=h.netns)
            netns.run_ip("link", "set", h.port, "up", netns=s.switch_netns)
            netns.run_ip("link", "set", s.interface, "up", netns=h.netns)
            self._shape(h, h.bandwidth)

    def down(self) -> None:
        """Stop every process in the cluster's hosts and remove its namespaces and state file.

        Safe to call more than once, and on a cluster that is half made or half gone.
        """
        _remove(self._state)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.down()

    @classmethod
    def attach(cls, name: str | None = None) -> Cluster:
        """The existing cluster ``name`` (None: the only one there is)."""
        if name is not None:
            state = load_state(name)
            if state is None:
                known = ", ".join(s.name for s in all_states()) or "none"
                raise ClusterError(f"no cluster called {name!r} (clusters: {known}); make one with "
                                   "`mxtorch cluster up --hosts N`")
            return cls(state)
        states = all_states()
        if len(states) == 1:
            return cls(states[0])
        if not states:
            raise ClusterError("no cluster is up: make one with "
                               "`mxtorch cluster up --hosts N --bandwidth 1gbit`")
        raise ClusterError(f"{len(states)} clusters are up ({', '.join(s.name for s in states)}): name one "
                           "(--cluster NAME)")

    # ---- what it is ---------------------------------------------------------------------
    name = Forward[str]("_state.name")
    subnet = Forward[str]("_state.subnet")
    shaper = Forward[str]("_state.shaper")

    @property
    def hosts(self) -> list[Host]:
        return [self._host(i) for i in range(len(self._state.hosts))]

    def _host(self, i: int) -> Host:
        h = self._state.hosts[i]
        return Host(h.name, i, h.netns, h.address, self._state.interface)

    def host(self, which: str | int | Host) -> Host:
        """The host called ``which`` ('h1'), with that index, address or namespace name."""
        if isinstance(which, Host):
            which = which.index
        for i, h in enumerate(self._state.hosts):
            if which in (i, h.name, h.address, h.netns) or (isinstance(which, str) and which == str(i)):
                return self._host(i)
        names = ", ".join(h.name for h in self._state.hosts)
        raise ClusterError(f"cluster {self.name!r} has no host {which!r}: its hosts are {names} "
                           "(or their index, address or namespace)")

    def bandwidth(self, which: str | int | Host) -> int | None:
        """The rate (bits/s) the host's link was last set to, None when unlimited."""
        return self._state.hosts[self.host(which).index].bandwidth

    def status(self) -> list[HostStatus]:
        """Every host as the kernel sees it now (link state, rates, processes)."""
        present = set(netns.list_netns())
        out = []
        switch_ok = self._state.switch_netns in present
        for h in self.hosts:
            if h.netns not in present or not switch_ok:
                out.append(HostStatus(h, False, False, None, None, ()))
                continue
            port = self._state.hosts[h.index].port
            up = netns.link_is_up(self._state.switch_netns, port) and netns.link_is_up(h.netns, h.interface)
            out.append(HostStatus(
                h, True, up,
                netns.shaped_rate(h.netns, h.interface), netns.shaped_rate(self._state.switch_netns, port),
                tuple(netns.netns_pids(h.netns)),
            ))
        return out

    def describe(self) -> str:
        """A few lines for people: the cluster, then one line per host."""
        owner = f", owned by pid {self._state.owner_pid}" if self._state.owner_pid else ""
        lines = [f"cluster {self.name}: {len(self._state.hosts)} host(s) on {self.subnet}, shaper "
                 f"{self.shaper}{owner}"]
        lines += ["  " + st.describe() for st in self.status()]
        return "\n".join(lines)

    # ---- running things inside a host --------------------------------------------------
    def environment(self, which: str | int | Host, env: Mapping[str, str | None] | None = None,
                    inherit: bool = True) -> dict[str, str]:
        """The environment of a process in the host: this one's (``inherit``), the host's, then ``env``.

        A value None in ``env`` removes that variable.
        """
        out = dict(os.environ) if inherit else {}
        out.update(host_environment(self.host(which)))
        for k, v in (env or {}).items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = v
        return out

    def command(self, which: str | int | Host, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the host (``ip netns exec NETNS argv...``); set its environment yourself."""
        if not argv:
            raise ClusterError("no command to run in the host")
        h = self.host(which)
        named = ["unshare", "--uts", "--", "/bin/sh", "-c", _SET_HOSTNAME, h.name] if _HAS_UNSHARE else []
        return ["ip", "netns", "exec", h.netns, *named, *argv]

    def popen(self, which: str | int | Host, argv: Sequence[str], env: Mapping[str, str | None] | None = None,
              **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` inside the host (see :meth:`environment` for ``env``); ``kwargs`` go to Popen.

        Returns once the process has entered the host's namespace (``ip netns exec`` switches a
        moment after it starts), so that :meth:`kill_host_processes` and :meth:`status` see it.
        """
        proc = subprocess.Popen(self.command(which, argv), env=self.environment(which, env), **kwargs)
        netns.wait_until_inside(proc, self.host(which).netns)
        return proc

    def run(self, which: str | int | Host, argv: Sequence[str], env: Mapping[str, str | None] | None = None,
            **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        """Run ``argv`` inside the host to its end (``kwargs`` go to :func:`subprocess.run`)."""
        return subprocess.run(self.command(which, argv), env=self.environment(which, env), **kwargs)

    # ---- faults and link changes ---------------------------------------------------------
    def kill_host_processes(self, which: str | int | Host, sig: int = signal.SIGKILL) -> list[int]:
        """Send ``sig`` (default SIGKILL: a crash) to every process in the host; returns their pids."""
        h = self.host(which)
        pids = netns.netns_pids(h.netns)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return pids

    def link_down(self, which: str | int | Host) -> None:
        """Cut the host off: its port on the switch goes down, packets to and from it are lost.

        Nobody is told (no reset, no error on send): peers notice through their timeouts,
        as when a cable is pulled.
        """
        h = self.host(which)
        netns.set_link(self._state.switch_netns, self._state.hosts[h.index].port, False)

    def link_up(self, which: str | int | Host) -> None:
        """Plug the host back in (its shaping is kept)."""
        h = self.host(which)
        netns.set_link(self._state.switch_netns, self._state.hosts[h.index].port, True)

    def set_bandwidth(self, which: str | int | Host | None, bandwidth: str | int | None) -> None:
        """Change the rate of a host's link, both directions (``which`` None: every host)."""
        rate = parse_rate(bandwidth)
        targets = self.hosts if which is None else [self.host(which)]
        for h in targets:
            self._shape(self._state.hosts[h.index], rate)
            self._state.hosts[h.index].bandwidth = rate
        with state_lock():
            if load_state(self.name) is not None:  # not after a concurrent `down`
                save_state(self._state)

    def _shape(self, h: HostState, rate: int | None) -> None:
        netns.shape(h.netns, self._state.interface, rate, self._state.shaper)
        netns.shape(self._state.switch_netns, h.port, rate, self._state.shaper)

    def __repr__(self) -> str:
        return f"Cluster({self.name!r}, hosts={len(self._state.hosts)}, subnet={self.subnet!r})"


_HAS_UNSHARE = shutil.which("unshare") is not None and os.path.exists("/bin/sh")


def _free_subnet(other_clusters: Sequence[str]) -> str:
    used = [ipaddress.ip_network(r, strict=False) for r in netns.routes_in_use() if ":" not in r]
    used += [ipaddress.ip_network(s) for s in other_clusters]
    for a, b in _SUBNET_POOL:
        net = ipaddress.ip_network(f"10.{a}.{b}.0/24")
        if not any(net.overlaps(u) for u in used):
            return str(net)
    raise ClusterError("no free 10.x.y.0/24 subnet in 10.200.0.0-10.254.255.0 (every one overlaps a route "
                       "of this machine or another cluster): remove old clusters with "
                       "`mxtorch cluster down --all`")


def _write_hosts_file(ns: str, names: str) -> None:
    # Best effort: without it only the names are missing (c10d then warns that it cannot name peers).
    with contextlib.suppress(OSError):
        os.makedirs(os.path.join(_NETNS_ETC, ns), exist_ok=True)
        with open(os.path.join(_NETNS_ETC, ns, "hosts"), "w") as f:
            f.write(f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{names}")


def _remove(state: ClusterState) -> None:
    with state_lock():
        present = set(netns.list_netns())
        errors = []
        for ns in state.namespaces():
            if ns in present:
                try:
                    netns.delete_netns(ns)
                except ClusterError as e:
                    errors.append(str(e))
            shutil.rmtree(os.path.join(_NETNS_ETC, ns), ignore_errors=True)
        if errors:
            raise ClusterError(f"cluster {state.name!r} was not removed completely (its state file is kept, "
                               f"so `mxtorch cluster down {state.name}` can try again): " + "; ".join(errors))
        remove_state(state.name)


def list_clusters() -> list[Cluster]:
    """Every cluster that has a state file."""
    return [Cluster(s) for s in all_states()]


def sweep_stale() -> list[str]:
    """Remove the clusters whose owner process has died; returns their names."""
    removed = []
    for s in all_states():
        if s.owner_pid is not None and not process_alive(s.owner_pid, s.owner_start):
            _remove(s)
            removed.append(s.name)
    return removed


def down_all() -> list[str]:
    """Remove every cluster, and every namespace named like one that has lost its state file."""
    removed = []
    for s in all_states():
        _remove(s)
        removed.append(s.name)
    with state_lock():
        orphans = [ns for ns in netns.list_netns() if ns.startswith(NETNS_PREFIX)]
        for ns in sorted(orphans, key=lambda n: n.endswith("-sw")):  # hosts first, switches last
            netns.delete_netns(ns)
        if os.path.isdir(_NETNS_ETC):
            for entry in os.listdir(_NETNS_ETC):
                if entry.startswith(NETNS_PREFIX) and entry not in netns.list_netns():
                    shutil.rmtree(os.path.join(_NETNS_ETC, entry), ignore_errors=True)
    return removed + orphans
