"""The parameter server (dist_sync / dist_async) across namespace hosts.

Workers, scheduler and servers each run in a chosen host, so every byte between a worker
and a server crosses two shaped links.  dist_sync must give the loopback result; a dead or
cut-off worker must end a dist_sync job with the documented error, while a dist_async job
goes on without it; a server killed and started again must continue from its snapshot, so
that the job still ends with the loopback result.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from mxtorch.cluster.testing import HostJob, ParameterServerNodes

pytest.importorskip("mxtorch.kvstore.ps.worker", reason="this mxtorch has no parameter server")

from cluster_jobs import JOB_TIMEOUT, PY, STEPS, WORKER, assert_same, final_params, loopback_ps_params  # noqa: E402

pytestmark = pytest.mark.cluster

FAULT_ENV = {"MXTORCH_DIST_TIMEOUT": "10", "MXTORCH_PS_DEAD_S": "3", "MXTORCH_PS_HEARTBEAT_S": "0.5"}
GRACE = 40.0


def run_ps_job(cluster, tmp: Path, workers: list[str], scheduler: str, servers: list[str], *args: str,
               node_env=None) -> tuple[list[tuple[int, str, str]], dict]:
    out = tmp / f"ps-{cluster.name}"
    with ParameterServerNodes(cluster, len(workers), len(servers), scheduler_host=scheduler,
                              server_hosts=servers, env=node_env) as nodes:
        with HostJob(cluster, [PY, WORKER, "--out", str(out), *args], len(workers), hosts=workers,
                     env=nodes.worker_env()) as job:
            results = job.wait(JOB_TIMEOUT)
        codes = nodes.wait(GRACE)
    return results, codes


@pytest.mark.cluster(hosts=4, bandwidth="1gbit")
def test_dist_sync_training_across_hosts_equals_loopback(cluster, tmp_path):
    args = (*STEPS, "--kvstore", "dist_sync")
    results, codes = run_ps_job(cluster, tmp_path, ["h0", "h1"], "h2", ["h2", "h3"], *args)
    assert [r[0] for r in results] == [0, 0], results[0][2][-3000:]
    assert codes == {"scheduler": 0, "server0": 0, "server1": 0}
    assert_same(final_params(tmp_path / f"ps-{cluster.name}", 2), loopback_ps_params(tmp_path, 2, 2, *args))


def _fault_job(cluster, tmp: Path, mode: str) -> tuple[ParameterServerNodes, HostJob]:
    """Workers on h0, h1, h2; scheduler and server on h3.  dist_sync runs until it fails; dist_async
    runs a fixed number of steps, which the surviving workers must finish."""
    nodes = ParameterServerNodes(cluster, 3, 1, scheduler_host="h3", server_hosts=["h3"], env=FAULT_ENV)
    steps = "0" if mode == "dist_sync" else "60"
    argv = [PY, WORKER, "--out", str(tmp / "fault"), "--kvstore", mode, "--steps", steps,
            "--step-sleep", "0.05", "--max-seconds", str(JOB_TIMEOUT)]
    try:
        job = HostJob(cluster, argv, 3, hosts=["h0", "h1", "h2"], env={**nodes.worker_env(), **FAULT_ENV})
    except BaseException:
        nodes.close()
        raise
    return nodes, job


def _check_fault_outcome(mode: str, results: list[tuple[int, str, str]]) -> None:
    for r in (0, 2):
        code, out, err = results[r]
        if mode == "dist_sync":  # the job cannot go on: every surviving worker fails, naming the dead one
            assert code != 0 and "KVStoreError" in err, err[-3000:]
            assert re.search(r"worker 1 .*(died|declared dead)|MXTORCH_DIST_TIMEOUT", err), err[-3000:]
        else:  # dist_async: the others carry on to the end
            assert code == 0, err[-3000:]
            assert "step 60 " in out and f"done rank {r} of 3" in out


@pytest.mark.parametrize("mode", ["dist_sync", "dist_async"])
@pytest.mark.cluster(hosts=4, bandwidth="1gbit")
def test_a_killed_worker_ends_dist_sync_and_dist_async_goes_on(cluster, tmp_path, mode):
    nodes, job = _fault_job(cluster, tmp_path, mode)
    with nodes, job:
        job.wait_for_output(0, "step 5 ", JOB_TIMEOUT)
        assert cluster.kill_host_processes("h1")
        results = job.wait(JOB_TIMEOUT)
        codes = nodes.wait(GRACE)
    _check_fault_outcome(mode, results)
    assert codes["server0"] == 0 and codes["scheduler"] == (1 if mode == "dist_sync" else 0), nodes


@pytest.mark.slow  # two 4-host jobs, ~40 s on a busy 2-core machine
@pytest.mark.parametrize("mode", ["dist_sync", "dist_async"])
@pytest.mark.cluster(hosts=4, bandwidth="1gbit")
def test_a_cut_link_ends_dist_sync_and_dist_async_goes_on(cluster, tmp_path, mode):
    nodes, job = _fault_job(cluster, tmp_path, mode)
    with nodes, job:
        job.wait_for_output(0, "step 5 ", JOB_TIMEOUT)
        cluster.link_down("h1")
        results = job.wait(JOB_TIMEOUT)
    _check_fault_outcome(mode, results)
    code, _, err = results[1]  # the worker that was cut off cannot reach anyone and gives up
    assert code != 0 and "KVStoreError" in err, err[-3000:]


@pytest.mark.cluster(hosts=4, bandwidth="1gbit")
def test_a_restarted_server_continues_from_its_snapshot(cluster, tmp_path):
    """Kill the server's host processes at a quiet moment, start the server again on the same host:
    it reloads values and optimizer states, and the job ends exactly as one never interrupted."""
    pause = tmp_path / "pause"
    pause.mkdir()
    # the old server must not be declared dead while its replacement starts (seconds on a busy host)
    snap = {"MXTORCH_PS_SNAPSHOT_DIR": str(tmp_path / "snapshots"), "MXTORCH_PS_SNAPSHOT_EVERY": "1",
            "MXTORCH_PS_DEAD_S": "30"}
    args = (*STEPS, "--kvstore", "dist_sync")
    out = tmp_path / "restart"
    with ParameterServerNodes(cluster, 2, 1, scheduler_host="h2", server_hosts=["h3"], env=snap) as nodes:
        argv = [PY, WORKER, "--out", str(out), *args, "--pause-after", "6", "--pause-dir", str(pause)]
        with HostJob(cluster, argv, 2, hosts=["h0", "h1"], env=nodes.worker_env()) as job:
            deadline = time.monotonic() + JOB_TIMEOUT
            while not (pause / "paused").exists():
                assert time.monotonic() < deadline and all(p.poll() is None for p in job.procs), job.output(0)
                time.sleep(0.05)
            time.sleep(0.5)  # the server writes its snapshot as the round completes
            assert cluster.kill_host_processes("h3")
            nodes.kill_server(0)
            nodes.start_server(0)
            (pause / "resume").write_text("go\n")
            results = job.wait(JOB_TIMEOUT)
        codes = nodes.wait(GRACE)
        server_log, scheduler_log = nodes.output("server0"), nodes.output("scheduler")
    assert [r[0] for r in results] == [0, 0], results[0][2][-3000:] + server_log[-2000:]
    assert "restored" in server_log and "rejoins" in scheduler_log, server_log[-2000:]
    assert codes["server0"] == 0
    assert_same(final_params(out, 2), loopback_ps_params(tmp_path, 2, 2, *args))


@pytest.mark.slow  # torchrun agents plus scheduler and servers: ~30 s on a busy machine
@pytest.mark.cluster(hosts=4, bandwidth="1gbit")
def test_mxtorch_launch_places_scheduler_servers_and_workers_on_the_cluster(cluster, tmp_path):
    out = tmp_path / "launched-ps"
    args = (*STEPS, "--kvstore", "dist_sync")
    r = subprocess.run([PY, "-m", "mxtorch.cli.main", "launch", "--launcher", "cluster",
                        "--cluster", cluster.name, "-n", "2", "-s", "2", "python", WORKER, "--out", str(out),
                        *args],
                       capture_output=True, text=True, timeout=JOB_TIMEOUT)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "done rank 0 of 2 on h0" in r.stdout and "done rank 1 of 2 on h1" in r.stdout
    assert_same(final_params(out, 2), loopback_ps_params(tmp_path, 2, 2, *args))
