"""Training across namespace hosts: same result as on loopback, and the documented ends of faults.

Every rank of ``cluster_train.py`` runs in its own host, so every gradient byte crosses two
shaped links (the sender's and the receiver's).  The loopback reference is the same job on
127.0.0.1 (mxtorch.distributed.testing.run_script).  Faults are injected once rank 0 has
printed a chosen step; waits are bounded by MXTORCH_DIST_TIMEOUT plus a grace period.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from cluster_jobs import (
    DIST_TIMEOUT,
    GRACE,
    JOB_TIMEOUT,
    PY,
    STEPS,
    WORKER,
    assert_same,
    cluster_params,
    final_params,
    loopback_params,
)

from mxtorch.cluster.testing import HostJob

pytestmark = pytest.mark.cluster

@pytest.mark.parametrize("hosts", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_horovod_training_across_hosts_equals_loopback(make_cluster, tmp_path, hosts):
    cluster = make_cluster(hosts=hosts, bandwidth="1gbit")
    assert_same(cluster_params(cluster, tmp_path, hosts, *STEPS), loopback_params(tmp_path, hosts, *STEPS))


@pytest.mark.cluster(hosts=2, bandwidth="1gbit")
def test_compressed_horovod_training_across_hosts_equals_loopback(cluster, tmp_path):
    args = (*STEPS, "--compression", "2bit")
    assert_same(cluster_params(cluster, tmp_path, 2, *args), loopback_params(tmp_path, 2, *args))


@pytest.mark.slow  # two torchrun agents, then their workers: ~30 s on a busy 2-core machine
@pytest.mark.cluster(hosts=2, bandwidth="1gbit")
def test_mxtorch_launch_runs_the_job_on_the_cluster_hosts(cluster, tmp_path):
    out = tmp_path / "launched"
    r = subprocess.run([PY, "-m", "mxtorch.cli.main", "launch", "--launcher", "cluster",
                        "--cluster", cluster.name, "-n", "2", "python", WORKER, "--out", str(out), *STEPS],
                       capture_output=True, text=True, timeout=JOB_TIMEOUT)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "done rank 0 of 2 on h0" in r.stdout and "done rank 1 of 2 on h1" in r.stdout
    assert_same(final_params(out, 2), loopback_params(tmp_path, 2, *STEPS))


def _long_job(cluster, tmp: Path, world: int, timeout: int = DIST_TIMEOUT, steps: int = 0) -> HostJob:
    argv = [PY, WORKER, "--out", str(tmp / "long"), "--steps", str(steps), "--step-sleep", "0.05",
            "--max-seconds", str(JOB_TIMEOUT)]
    return HostJob(cluster, argv, world, env={"MXTORCH_DIST_TIMEOUT": str(timeout)})


@pytest.mark.cluster(hosts=3, bandwidth="1gbit")
def test_a_killed_worker_ends_a_sync_job_with_the_documented_error(cluster, tmp_path):
    with _long_job(cluster, tmp_path, 3) as job:
        job.wait_for_output(0, "step 5 ", JOB_TIMEOUT)
        assert cluster.kill_host_processes("h1")
        results = job.wait(DIST_TIMEOUT + GRACE)
    for r in (0, 2):
        code, _, err = results[r]
        assert code != 0
        assert "KVStoreError" in err and "A peer process died, hangs" in err, err[-3000:]
        assert "MXTORCH_DIST_TIMEOUT" in err


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@pytest.mark.cluster(hosts=2, bandwidth="1gbit")
def test_a_cut_link_ends_a_sync_job_with_the_documented_error_after_the_timeout(cluster, tmp_path):
    with _long_job(cluster, tmp_path, 2) as job:
        job.wait_for_output(0, "step 5 ", JOB_TIMEOUT)
        cluster.link_down("h1")
        cut_at = time.monotonic()
        results = job.wait(DIST_TIMEOUT + GRACE)
    print(f"\njob ended {time.monotonic() - cut_at:.1f} s after the cut "
          f"(MXTORCH_DIST_TIMEOUT={DIST_TIMEOUT})")
    for code, _, err in results:  # nobody is told of a pulled cable: both sides end by the timeout
        assert code != 0
        assert "KVStoreError" in err and f"timeout {DIST_TIMEOUT} s, MXTORCH_DIST_TIMEOUT" in err, err[-3000:]


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@pytest.mark.cluster(hosts=2, bandwidth="1gbit")
def test_a_slowed_link_and_a_short_cut_change_the_time_not_the_result(cluster, tmp_path):
    with _long_job(cluster, tmp_path, 2, timeout=30, steps=int(STEPS[1])) as job:
        job.wait_for_output(0, "step 3 ", JOB_TIMEOUT)
        cluster.set_bandwidth("h1", "10mbit")
        job.wait_for_output(0, "step 6 ", JOB_TIMEOUT)
        cluster.link_down("h1")
        time.sleep(2.0)  # well inside the 30 s timeout: TCP retransmits once the link is back
        cluster.link_up("h1")
        cluster.set_bandwidth("h1", "1gbit")
        results = job.wait(JOB_TIMEOUT)
    assert [code for code, _, _ in results] == [0, 0], results[0][2][-3000:]
    assert_same(final_params(tmp_path / "long", 2), loopback_params(tmp_path, 2, *STEPS))
