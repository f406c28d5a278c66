"""Parts of mxtorch.cluster that need no namespaces: rates, options, state files, skip reasons."""

from __future__ import annotations

import pytest

from mxtorch.cluster import Cluster, ClusterError, format_rate, parse_rate
from mxtorch.cluster import netns as netns_mod
from mxtorch.cluster.state import ClusterState, HostState, process_alive, process_start_time


@pytest.mark.parametrize("text, bits", [("1gbit", 10**9), ("10Gbit", 10**10), ("2.5gbit", 25 * 10**8),
                                        ("100mbit", 10**8), ("64kbit", 64000), ("none", None), (None, None),
                                        (123, 123)])
def test_rates_parse_in_bits(text, bits):
    assert parse_rate(text) == bits


@pytest.mark.parametrize("text, hint", [("1gbps", "bytes per second"), ("fast", "not a rate"),
                                        ("0mbit", "positive"), (-5, "positive")])
def test_bad_rates_say_what_to_write(text, hint):
    with pytest.raises(ClusterError, match=hint):
        parse_rate(text)


def test_rates_print_in_the_largest_even_unit():
    assert [format_rate(r) for r in (10**10, 10**9, 25 * 10**8, 10**8, 1500, None)] == \
        ["10gbit", "1gbit", "2500mbit", "100mbit", "1500bit", "unlimited"]


@pytest.mark.parametrize("kwargs, message", [
    ({"hosts": 0}, "number of hosts"), ({"hosts": 2, "bandwidth": "1gbps"}, "bytes per second"),
    ({"hosts": 2, "shaper": "netem"}, "unknown shaper"), ({"hosts": 2, "name": "Bad-Name"}, "not valid"),
])
def test_bad_options_are_refused_before_anything_is_made(kwargs, message):
    with pytest.raises(ClusterError, match=message):
        Cluster.up(**kwargs)


def test_without_root_the_reason_says_so(monkeypatch):
    monkeypatch.setattr(netns_mod.os, "geteuid", lambda: 1000)
    reason = netns_mod.support_problem.__wrapped__()
    assert reason is not None and "needs root" in reason


def test_without_iproute2_the_reason_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(netns_mod.shutil, "which", lambda tool: None)
    reason = netns_mod.support_problem.__wrapped__()
    assert reason is not None and "apt-get install iproute2" in reason


def test_state_round_trips_through_json():
    s = ClusterState(name="c1", subnet="10.200.0.0/24", switch_netns="mxc-c1-sw", shaper="tbf",
                     hosts=[HostState("h0", "mxc-c1-h0", "10.200.0.1", "h0", 10**9)], owner_pid=1)
    assert ClusterState.from_json(s.to_json(), "x") == s
    with pytest.raises(ClusterError, match="cluster down --all"):
        ClusterState.from_json("{not json", "/run/mxtorch-cluster/c1.json")


def test_an_owner_is_alive_only_with_its_own_start_time():
    import os

    me = os.getpid()
    assert process_alive(me, process_start_time(me))
    assert not process_alive(me, (process_start_time(me) or 0) + 1)  # a new process that reused the pid


# ---- `mxtorch launch --launcher cluster`: command lines (built from a cluster's state, nothing runs) ----
def _paper_cluster(n: int) -> Cluster:
    hosts = [HostState(f"h{i}", f"mxc-p-h{i}", f"10.250.0.{i + 1}", f"h{i}", None) for i in range(n)]
    return Cluster(ClusterState(name="p", subnet="10.250.0.0/24", switch_netns="mxc-p-sw", shaper="tbf",
                                hosts=hosts))


def _where(cmd: list[str]) -> tuple[str, dict[str, str]]:
    """(namespace, variables) of one `ip netns exec NS ... env K=V ... PROGRAM` command line."""
    assert cmd[:3] == ["ip", "netns", "exec"]
    start = cmd.index("env") + 1
    env = {}
    for item in cmd[start:]:
        if "=" not in item or item.startswith("/"):
            break
        k, _, v = item.partition("=")
        env[k] = v
    return cmd[3], env


def test_cluster_launcher_puts_one_torchrun_agent_on_each_worker_host():
    from mxtorch.cluster.launch import cluster_commands
    from mxtorch.launcher import JobSpec

    cmds = cluster_commands(JobSpec(["python", "train.py"], num_workers=3), _paper_cluster(2))
    assert [_where(c)[0] for c in cmds] == ["mxc-p-h0", "mxc-p-h1"]
    for rank, c in enumerate(cmds):
        ns, env = _where(c)
        assert env["GLOO_SOCKET_IFNAME"] == "eth0" and env["DMLC_INTERFACE"] == "eth0"
        assert env["MXTORCH_CLUSTER_HOST"] == f"h{rank}" and env["DMLC_PS_ROOT_URI"] == "10.250.0.1"
        assert "--master-addr=10.250.0.1" in c and f"--node-rank={rank}" in c
    assert "--nproc-per-node=2" in cmds[0] and "--nproc-per-node=1" in cmds[1]  # 3 workers on 2 hosts


def test_cluster_launcher_places_servers_apart_from_workers():
    pytest.importorskip("mxtorch.launcher.ps")
    from mxtorch.cluster.launch import cluster_commands
    from mxtorch.launcher import JobSpec

    cmds = cluster_commands(JobSpec(["python", "train.py"], num_workers=2, num_servers=2), _paper_cluster(4))
    placed = [(_where(c)[0], _where(c)[1].get("DMLC_ROLE")) for c in cmds]
    assert placed == [("mxc-p-h2", "scheduler"), ("mxc-p-h2", "server"), ("mxc-p-h3", "server"),
                      ("mxc-p-h0", "worker"), ("mxc-p-h1", "worker")]
    envs = [_where(c)[1] for c in cmds]
    assert {e["DMLC_PS_ROOT_URI"] for e in envs} == {"10.250.0.3"}
    assert [e.get("DMLC_NODE_HOST") for e in envs[1:3]] == ["10.250.0.3", "10.250.0.4"]
    job = JobSpec(["python", "train.py"], num_workers=2, num_servers=1)
    chosen = cluster_commands(job, _paper_cluster(4), ps_hosts=["h3"])
    assert [_where(c)[0] for c in chosen] == ["mxc-p-h3", "mxc-p-h3", "mxc-p-h0", "mxc-p-h1"]


def test_cluster_launcher_errors_name_the_bad_host_or_placement():
    from mxtorch.cluster.launch import cluster_commands
    from mxtorch.launcher import Host, JobSpec, LaunchError

    job, two = JobSpec(["python", "x.py"], num_workers=2), _paper_cluster(2)
    with pytest.raises(LaunchError, match="has no host 'h9'"):
        cluster_commands(job, two, [Host("h0"), Host("h9")])
    with pytest.raises(LaunchError, match="one cluster host twice"):
        cluster_commands(job, two, [Host("h0"), Host("0")])
    with pytest.raises(LaunchError, match="give -s M too"):
        cluster_commands(job, two, ps_hosts=["h1"])
