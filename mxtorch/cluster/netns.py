"""Thin, checked wrappers over iproute2: namespaces, links, ``tc`` shaping, process lists.

Every function runs one ``ip`` or ``tc`` command and raises :class:`ClusterError` quoting
the command and what it printed when it fails.  :func:`support_problem` says (without
raising) whether this machine can make namespaces at all.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from .errors import ClusterError
from .rates import parse_rate

__all__ = ["run_ip", "run_tc", "support_problem", "list_netns", "add_netns", "delete_netns", "netns_pids",
           "set_link", "link_is_up", "shape", "shaped_rate", "routes_in_use", "SHAPERS", "IPROUTE2_HINT"]

SHAPERS = ("tbf", "htb")
"""Queueing disciplines that can limit a link: a token bucket (tbf) or a one-class htb."""

IPROUTE2_HINT = "install iproute2 (`apt-get install iproute2`, or run scripts/setup.sh as root)"

_COMMAND_TIMEOUT_S = 30.0
_MIN_BURST_BYTES = 64 * 1024  # at least one GSO super-packet, or tbf drops what veth hands it
_LATENCY = "50ms"  # how long a packet may wait in the shaper's queue before it is dropped


def _run(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    if shutil.which(argv[0]) is None:
        raise ClusterError(f"{argv[0]!r} is not on PATH: {IPROUTE2_HINT}")
    try:
        r = subprocess.run(list(argv), capture_output=True, text=True, timeout=_COMMAND_TIMEOUT_S,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise ClusterError(f"`{' '.join(argv)}` did not finish within {_COMMAND_TIMEOUT_S:g} s") from e
    if check and r.returncode != 0:
        said = (r.stderr or r.stdout).strip() or f"exit code {r.returncode}"
        raise ClusterError(f"`{' '.join(argv)}` failed: {said}")
    return r


def run_ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``ip [-n NETNS] ARGS...``."""
    return _run(["ip", *(["-n", netns] if netns else []), *args], check=check)


def run_tc(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``tc [-n NETNS] ARGS...``."""
    return _run(["tc", *(["-n", netns] if netns else []), *args], check=check)


@functools.lru_cache(maxsize=1)
def support_problem() -> str | None:
    """Why this machine cannot run an emulated cluster, or None when it can.

    Checks the platform, the tools, the privilege, and finally makes (and removes) a real
    namespace with a veth pair and a token-bucket qdisc, since containers may forbid any of
    those even to root.  The answer is cached for the life of the process.
    """
    if not sys.platform.startswith("linux"):
        return f"network namespaces need Linux (this is {sys.platform})"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"{tool!r} is not on PATH: {IPROUTE2_HINT}"
    if os.geteuid() != 0:
        return ("creating network namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN): run as root, "
                "e.g. `sudo .venv/bin/pytest -m cluster tests/cluster`")
    probe = f"mxtorch-probe-{uuid.uuid4().hex[:8]}"  # not "mxc-": `down --all` would take it
    try:
        run_ip("netns", "add", probe)
    except ClusterError as e:
        return f"this kernel or container does not allow network namespaces: {e}"
    try:
        run_ip("link", "add", "p0", "type", "veth", "peer", "name", "p1", netns=probe)
        run_ip("link", "add", "b0", "type", "bridge", netns=probe)
        run_ip("link", "set", "p0", "up", netns=probe)
        run_tc("qdisc", "add", "dev", "p0", "root", "tbf", "rate", "1gbit", "burst", "125000", "latency",
               _LATENCY, netns=probe)
    except ClusterError as e:
        return f"namespaces work, but veth pairs, bridges or tc shaping do not: {e}"
    finally:
        run_ip("netns", "delete", probe, check=False)
    return None


def list_netns() -> list[str]:
    """Names of the named network namespaces (``ip netns list``)."""
    out = run_ip("netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def add_netns(name: str) -> None:
    run_ip("netns", "add", name)
    run_ip("link", "set", "lo", "up", netns=name)


def wait_until_inside(proc: Any, name: str, timeout: float = 5.0) -> bool:
    """Wait until process ``proc`` (a Popen) lives in namespace ``name``; False if it exited first,
    the namespace files cannot be read, or ``timeout`` seconds passed."""
    try:
        target = os.stat(f"/run/netns/{name}").st_ino
    except OSError:
        return False
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        try:
            if os.stat(f"/proc/{proc.pid}/ns/net").st_ino == target:
                return True
        except OSError:
            return False
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return False


def netns_pids(name: str) -> list[int]:
    """Processes living in namespace ``name`` (empty if it does not exist)."""
    r = run_ip("netns", "pids", name, check=False)
    return [int(p) for p in r.stdout.split() if p.isdigit()]


def delete_netns(name: str) -> None:
    """Remove namespace ``name`` (nothing if it does not exist); kill its processes first."""
    import signal

    for _ in range(3):  # a process may fork while we kill; three rounds catch the stragglers
        pids = netns_pids(name)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    r = run_ip("netns", "delete", name, check=False)
    if r.returncode != 0 and name in list_netns():
        raise ClusterError(f"cannot delete network namespace {name!r}: {r.stderr.strip()}")


def set_link(netns: str, dev: str, up: bool) -> None:
    run_ip("link", "set", dev, "up" if up else "down", netns=netns)


def link_is_up(netns: str, dev: str) -> bool:
    """Whether ``dev`` is administratively up and has carrier."""
    r = run_ip("-j", "link", "show", dev, netns=netns)
    info = json.loads(r.stdout)[0]
    flags = info.get("flags", [])
    return "UP" in flags and "LOWER_UP" in flags


def _burst(bits_per_s: int) -> int:
    # One millisecond at the rate: enough for tbf's timer, small enough to keep the rate honest.
    return max(_MIN_BURST_BYTES, bits_per_s // 8 // 1000)


def shape(netns: str, dev: str, bits_per_s: int | None, shaper: str = "tbf") -> None:
    """Limit what ``dev`` sends to ``bits_per_s`` (None: remove the limit)."""
    if shaper not in SHAPERS:
        raise ClusterError(f"unknown shaper {shaper!r}: choose one of {', '.join(SHAPERS)}")
    run_tc("qdisc", "del", "dev", dev, "root", netns=netns, check=False)  # none there is fine
    if bits_per_s is None:
        return
    rate, burst = f"{bits_per_s}bit", str(_burst(bits_per_s))
    if shaper == "tbf":
        run_tc("qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", burst, "latency", _LATENCY,
               netns=netns)
    else:
        run_tc("qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1", netns=netns)
        run_tc("class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil",
               rate, "burst", burst, "quantum", str(_MIN_BURST_BYTES), netns=netns)


_HTB_RATE_RE = re.compile(r"\brate (\d+(?:\.\d+)?[KMGT]?bit)\b")


def shaped_rate(netns: str, dev: str) -> int | None:
    """The rate ``dev`` is limited to right now, read back from the kernel (None: not limited)."""
    qdiscs = json.loads(run_tc("-j", "qdisc", "show", "dev", dev, netns=netns).stdout or "[]")
    root = next((q for q in qdiscs if q.get("root")), None)
    if root is None:
        return None
    if root.get("kind") == "tbf":
        return int(root["options"]["rate"]) * 8
    if root.get("kind") == "htb":
        m = _HTB_RATE_RE.search(run_tc("class", "show", "dev", dev, netns=netns).stdout)
        return parse_rate(m.group(1)) if m else None
    return None


def routes_in_use() -> list[str]:
    """Every destination prefix routed in this (the root) namespace, all tables (``'default'`` left out)."""
    out = run_ip("-j", "route", "show", "table", "all").stdout
    return [r["dst"] for r in json.loads(out or "[]") if r.get("dst") and r["dst"] != "default"]
