"""Elastic jobs across namespace hosts (`mxtorch launch --launcher cluster --elastic 2:3`).

One loses a host, taken down with `cluster.kill_host_processes` (its agent and worker get SIGKILL),
and finishes on the 2 others from its last checkpoint.  The rendezvous store runs on h0, so h2 is
the host that goes; the checkpoints are on the file system every namespace shares.

The other starts on h0 and h1 and gains a worker from h2 (`mxtorch cluster exec h2 -- mxtorch launch
--join HOST:PORT`, the address the launcher prints) mid-epoch: the two workers wait at
MXTORCH_TEST_PAUSE_AT_STEP until it is admitted, commit the step they stopped at and the job
finishes on 3 from there."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

import mxtorch as mx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import train_test_hooks  # noqa: E402, I001  (tests/, for the test-only hooks of the workers)
from cluster_jobs import take_down_host_mid_job  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.slow]  # three hosts, one restart each: ~40 s on 2 busy cores

ROOT = mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT


def _elastic_train(cluster, workers: int, out) -> list[str]:
    """``mxtorch launch --elastic 2:3 -n workers`` over the emulated cluster's hosts, training
    lenet_bn for one epoch with a checkpoint every 10 steps into ``out``."""
    return [sys.executable, "-m", "mxtorch.cli.main", "launch", "--launcher", "cluster", "--cluster",
            cluster.name, "--elastic", "2:3", "-n", str(workers), "--rendezvous-timeout", "120",
            "mxtorch", "train", "--data-root", ROOT, "--model", "lenet_bn", "--epochs", "1",
            "--batch-size", "64", "--kvstore", "horovod", "--no-progress", "--threads", "1",
            "--checkpoint-every", "10", "--output", str(out)]


@pytest.mark.timeout(600)
@pytest.mark.cluster(hosts=3, bandwidth="1gbit")
def test_an_elastic_job_survives_a_host_taken_down(cluster, tmp_path):
    out = tmp_path / "run"
    argv = _elastic_train(cluster, 3, out)
    log = tmp_path / "log.txt"
    saved = out / "checkpoints" / "step-20" / "manifest.json"  # mid-epoch: 156 steps an epoch
    rc, _ = take_down_host_mid_job(cluster, argv, log, saved.exists, "h2", wait=300, timeout=400)
    text = log.read_text()
    assert rc == 0, text[-5000:]
    assert "membership: 3 workers (" in text
    assert "membership: 3 -> 2 workers (left: h2, was rank" in text, text[-5000:]
    assert "lost on the way: h2 (killed by SIGKILL)" in text
    m = json.loads((out / "metrics.json").read_text())
    assert m["workers"] == 2 and m["checkpoint"]["resumed_from_step"] >= 20


def _wait_for(log, pattern: str, job: subprocess.Popen, timeout: float) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while True:
        m = re.search(pattern, log.read_text())
        if m:
            return m
        assert job.poll() is None and time.monotonic() < deadline, \
            f"no {pattern!r} in the log:\n{log.read_text()[-5000:]}"
        time.sleep(0.1)


@pytest.mark.timeout(600)
@pytest.mark.cluster(hosts=3, bandwidth="1gbit")
def test_an_elastic_job_gains_a_worker_from_another_host(cluster, tmp_path):
    out = tmp_path / "run"
    argv = _elastic_train(cluster, 2, out)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MXTORCH_TEST_")}
    # h0 and h1 wait after step 40 of 156 (mid-epoch) until the job has 3 workers
    env.update(train_test_hooks.env(MXTORCH_TEST_PAUSE_AT_STEP="40:3"))
    log, join_log = tmp_path / "log.txt", tmp_path / "join.txt"
    with open(log, "w") as f, open(join_log, "w") as jf:
        job = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env)
        joined: subprocess.Popen | None = None
        try:
            endpoint = _wait_for(log, r"mxtorch launch --join (\S+)", job, 120).group(1)
            assert endpoint.startswith(cluster.host("h0").address + ":"), endpoint
            _wait_for(log, r"membership: 2 workers \(", job, 300)
            join = [sys.executable, "-m", "mxtorch.cli.main", "launch", "--join", endpoint, "--name", "h2"]
            joined = subprocess.Popen(
                [sys.executable, "-m", "mxtorch.cli.main", "cluster", "exec", "--cluster", cluster.name, "h2",
                 "--", *join], stdout=jf, stderr=subprocess.STDOUT,
                env={k: v for k, v in os.environ.items() if not k.startswith("MXTORCH_TEST_")})
            rc = job.wait(400)
            joined_rc = joined.wait(120)
        finally:
            for p in (job, joined):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
    text, jtext = log.read_text(), join_log.read_text()
    assert rc == 0, text[-5000:]
    assert joined_rc == 0, jtext[-5000:]
    both = text + jtext  # the membership lines come from rank 0, whichever host that is
    assert re.search(r"membership: 2 workers \(h0=rank0, h1=rank1\); starting at step 0", both), text[-5000:]
    m = re.search(r"membership change: the workers restart; saved checkpoint step (\d+)", both)
    assert m, text[-5000:]
    saved = int(m.group(1))
    assert 0 < saved <= 40 and saved % 5 == 0  # restarts are agreed on every 5th step
    line = re.search(r"membership: 2 -> 3 workers \(joined: h2\); ranks now .*h2=rank\d; resuming from the "
                     rf"checkpoint of step {saved} \(epoch 1, batch {saved} of 156\)", both)
    assert line, both[-5000:]
    print(line.group(0))
    # the agents that started the job, in the order they ended (the launcher does not supervise h2's)
    assert re.search(r"elastic job finished on agent\(s\) (h0, h1|h1, h0)\n", text), text[-3000:]
    m = json.loads((out / "metrics.json").read_text())
    assert m["workers"] == 3 and m["checkpoint"]["resumed_from_step"] == saved
    print(f"held-out accuracy after the join at step {saved}: {m['final_test_acc']:.4f}")
