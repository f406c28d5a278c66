"""The emulated cluster itself: hosts, shaped links, faults, clean removal (also after a crash), the CLI.

Real namespaces, real TCP between them; skipped where namespaces cannot be made.  Rates are
checked only from above (a shaped link can never be faster than its rate; a busy machine
only makes it slower), and the measured figures are printed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mxtorch.cluster import Cluster, ClusterError, list_clusters, sweep_stale
from mxtorch.cluster.netns import list_netns
from mxtorch.cluster.state import state_path

pytestmark = pytest.mark.cluster

PROBE = str(Path(__file__).resolve().parent / "net_probe.py")
PY = sys.executable
MB = 1 << 20


def transfer_rate(c: Cluster, src: str, dst: str, nbytes: int, port: int = 5201) -> float:
    """Bits/s of one TCP transfer of ``nbytes`` from host ``src`` to host ``dst`` (timed at the receiver)."""
    addr = c.host(dst).address
    sink = c.popen(dst, [PY, PROBE, "sink", addr, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        assert sink.stdout.readline().strip() == "listening"
        c.run(src, [PY, PROBE, "source", addr, str(port), str(nbytes)], check=True, timeout=60)
        out, _ = sink.communicate(timeout=60)
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait()
    result = json.loads(out)
    assert result["bytes"] == nbytes
    return nbytes * 8 / result["seconds"]


def can_connect(c: Cluster, src: str, dst: str, port: int, seconds: float = 1.0) -> bool:
    return c.run(src, [PY, PROBE, "connect", c.host(dst).address, str(port), str(seconds)],
                 capture_output=True, timeout=30).returncode == 0


@pytest.mark.cluster(hosts=3)
def test_hosts_have_their_own_addresses_and_names_and_reach_each_other(cluster):
    addrs = [h.address for h in cluster.hosts]
    assert len(set(addrs)) == 3 and all(a.startswith("10.") for a in addrs)
    for h in cluster.hosts:
        r = cluster.run(h.name, ["ip", "-4", "-o", "addr", "show", "dev", "eth0"], capture_output=True,
                        text=True, check=True)
        assert f"inet {h.address}/24" in r.stdout
    code = ("import os, socket; print(socket.gethostbyname('h2'), socket.gethostname(), "
            "os.environ['GLOO_SOCKET_IFNAME'], os.environ['MXTORCH_CLUSTER_HOST'])")
    r = cluster.run("h0", [PY, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.split() == [addrs[2], "h0", "eth0", "h0"]
    listener = cluster.popen("h2", [PY, PROBE, "listen", addrs[2], "7000", "20"], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert listener.stdout is not None and listener.stdout.readline().strip() == "listening"
        assert can_connect(cluster, "h0", "h2", 7000) and can_connect(cluster, "h1", "h2", 7000)
    finally:
        listener.kill()
        listener.wait()


@pytest.mark.cluster(hosts=2, bandwidth="100mbit")
def test_a_link_rate_caps_transfers_both_ways_and_can_be_changed(cluster):
    cap = 1.15  # tbf's 64 KiB burst and header accounting leave a few percent
    forward = transfer_rate(cluster, "h0", "h1", 4 * MB)
    backward = transfer_rate(cluster, "h1", "h0", 4 * MB)
    cluster.set_bandwidth("h1", "50mbit")  # only h1: its link limits what it receives and what it sends
    into_h1 = transfer_rate(cluster, "h0", "h1", 2 * MB, port=5202)
    out_of_h1 = transfer_rate(cluster, "h1", "h0", 2 * MB, port=5203)
    print(f"\n100mbit links: h0->h1 {forward / 1e6:.1f} Mbit/s, h1->h0 {backward / 1e6:.1f} Mbit/s; "
          f"h1 at 50mbit: in {into_h1 / 1e6:.1f} Mbit/s, out {out_of_h1 / 1e6:.1f} Mbit/s")
    assert forward <= cap * 100e6 and backward <= cap * 100e6
    assert into_h1 <= cap * 50e6 and out_of_h1 <= cap * 50e6
    st = {s.host.name: s for s in cluster.status()}
    assert (st["h0"].rate_out, st["h0"].rate_in) == (100_000_000, 100_000_000)
    assert (st["h1"].rate_out, st["h1"].rate_in) == (50_000_000, 50_000_000)
    cluster.set_bandwidth(None, None)
    assert all((s.rate_out, s.rate_in) == (None, None) for s in cluster.status())


def test_htb_shaper_limits_like_tbf(make_cluster):
    c = make_cluster(hosts=2, bandwidth="80mbit", shaper="htb")
    rate = transfer_rate(c, "h0", "h1", 2 * MB)
    print(f"\nhtb 80mbit: {rate / 1e6:.1f} Mbit/s")
    assert rate <= 1.15 * 80e6
    assert {(s.rate_out, s.rate_in) for s in c.status()} == {(80_000_000, 80_000_000)}


@pytest.mark.cluster(hosts=2)
def test_link_down_cuts_a_host_off_and_link_up_restores_it(cluster):
    addr = cluster.host("h1").address
    listener = cluster.popen("h1", [PY, PROBE, "listen", addr, "7001", "30"], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert listener.stdout is not None and listener.stdout.readline().strip() == "listening"
        assert can_connect(cluster, "h0", "h1", 7001)
        cluster.link_down("h1")
        assert not cluster.status()[1].link_up
        assert not can_connect(cluster, "h0", "h1", 7001, seconds=1.0)
        cluster.link_up("h1")
        assert cluster.status()[1].link_up
        assert can_connect(cluster, "h0", "h1", 7001, seconds=10.0)
    finally:
        listener.kill()
        listener.wait()


@pytest.mark.cluster(hosts=2)
def test_kill_host_processes_kills_only_that_hosts_processes(cluster):
    on_h0 = cluster.popen("h0", ["sleep", "60"])
    on_h1 = cluster.popen("h1", ["sleep", "60"])
    try:
        assert cluster.kill_host_processes("h1") == [on_h1.pid]
        assert on_h1.wait(10) == -signal.SIGKILL
        assert on_h0.poll() is None
        assert cluster.status()[0].pids == (on_h0.pid,)
    finally:
        for p in (on_h0, on_h1):
            p.kill()
            p.wait()


def test_down_stops_processes_and_removes_namespaces_and_state(make_cluster):
    c = make_cluster(hosts=2, bandwidth="1gbit")
    sleeper = c.popen("h1", ["sleep", "60"])
    spaces = [h.netns for h in c.hosts]
    assert set(spaces) <= set(list_netns()) and os.path.exists(state_path(c.name))
    c.down()
    assert sleeper.wait(10) == -signal.SIGKILL
    left = set(list_netns())
    assert not left & {*spaces, f"mxc-{c.name}-sw"}
    assert not os.path.exists(state_path(c.name)) and not os.path.exists(f"/etc/netns/{spaces[0]}")
    c.down()  # twice is fine


def test_two_clusters_side_by_side_do_not_collide(make_cluster):
    a, b = make_cluster(hosts=2), make_cluster(hosts=2)
    assert a.name != b.name and a.subnet != b.subnet
    with pytest.raises(ClusterError, match="already exists"):
        make_cluster(hosts=1, name=a.name)
    assert not {h.netns for h in a.hosts} & {h.netns for h in b.hosts}
    a.down()
    assert all(s.exists for s in b.status())
    assert b.run("h0", ["ip", "link", "show", "eth0"], capture_output=True).returncode == 0


_CRASHING_OWNER = textwrap.dedent("""
    import sys, time
    from mxtorch.cluster import Cluster
    c = Cluster.up(2, "1gbit", owned=True)
    p = c.popen("h1", ["sleep", "120"])
    print(c.name, p.pid, flush=True)
    time.sleep(120)
""")


def test_a_cluster_whose_owner_was_killed_is_swept(cluster_support):
    owner = subprocess.Popen([PY, "-c", _CRASHING_OWNER], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        name, sleeper = owner.stdout.readline().split()
    finally:
        owner.kill()  # SIGKILL: no finally blocks, no atexit handlers run in the owner
        owner.wait()
    assert f"mxc-{name}-h1" in list_netns() and name in [c.name for c in list_clusters()]
    assert name in sweep_stale()
    assert not [ns for ns in list_netns() if ns.startswith(f"mxc-{name}-")]
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{sleeper}") and time.monotonic() < deadline:
        time.sleep(0.05)
    gone = not os.path.exists(f"/proc/{sleeper}")
    assert gone or "Z" in Path(f"/proc/{sleeper}/stat").read_text().split()[2]  # dead, not yet reaped


def test_the_command_line_makes_inspects_faults_and_removes_a_cluster(cluster_support):
    name = f"t{os.getpid()}"

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([PY, "-m", "mxtorch.cli.main", "cluster", *args], capture_output=True,
                              text=True, timeout=60)

    try:
        r = cli("up", "--hosts", "2", "--bandwidth", "1gbit", "--name", name)
        assert r.returncode == 0, r.stderr
        assert f"cluster {name}: 2 host(s)" in r.stdout and "1gbit" in r.stdout
        r = cli("exec", "--cluster", name, "h1", "--", "sh", "-c",
                "echo $DMLC_INTERFACE $MXTORCH_CLUSTER_HOST")
        assert (r.returncode, r.stdout.strip()) == (0, "eth0 h1"), r.stderr
        assert cli("link", "--cluster", name, "h1", "down").returncode == 0
        assert cli("bandwidth", "--cluster", name, "h0", "100mbit").returncode == 0
        r = cli("status", name)
        lines = {line.split()[0]: line for line in r.stdout.splitlines()[1:]}
        assert "link DOWN" in lines["h1"] and "100mbit" in lines["h0"]
        r = cli("bandwidth", "--cluster", name, "h5", "1gbit")
        assert r.returncode == 2 and "has no host 'h5'" in r.stderr
    finally:
        r = cli("down", name)
    assert r.returncode == 0 and f"removed: {name}" in r.stdout
    assert not [ns for ns in list_netns() if ns.startswith(f"mxc-{name}-")]
    with pytest.raises(ClusterError, match="no cluster called"):
        Cluster.attach(name)


@pytest.mark.cluster(hosts=2)
def test_wait_until_inside_waits_for_a_process_to_enter_the_namespace(cluster):
    from mxtorch.cluster import netns

    ns = cluster.host("h1").netns
    late = subprocess.Popen(["/bin/sh", "-c", f"sleep 0.4; exec ip netns exec {ns} sleep 30"])
    try:
        start = time.monotonic()
        assert netns.wait_until_inside(late, ns)
        assert time.monotonic() - start >= 0.35
        assert late.pid in netns.netns_pids(ns)  # what kill_host_processes will find
    finally:
        late.kill()
        late.wait()
    gone = subprocess.Popen(["true"])
    assert not netns.wait_until_inside(gone, ns)  # exited before it got there
