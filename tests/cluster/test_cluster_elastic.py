"""An elastic job across namespace hosts (`mxtorch launch --launcher cluster --elastic 2:3 -n 3`)
loses a host, taken down with `cluster.kill_host_processes` (its agent and worker get SIGKILL),
and finishes on the 2 others from its last checkpoint.  The rendezvous store runs on h0, so h2 is
the host that goes; the checkpoints are on the file system every namespace shares."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

import mxtorch as mx

pytestmark = [pytest.mark.cluster, pytest.mark.slow]  # three hosts, one restart: ~40 s on 2 busy cores

ROOT = mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT


@pytest.mark.timeout(600)
@pytest.mark.cluster(hosts=3, bandwidth="1gbit")
def test_an_elastic_job_survives_a_host_taken_down(cluster, tmp_path):
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "mxtorch.cli.main", "launch", "--launcher", "cluster", "--cluster",
            cluster.name, "--elastic", "2:3", "-n", "3", "--rendezvous-timeout", "120",
            "mxtorch", "train", "--data-root", ROOT, "--model", "lenet_bn", "--epochs", "1",
            "--batch-size", "64",
            "--kvstore", "horovod", "--no-progress", "--threads", "1", "--checkpoint-every", "10",
            "--output", str(out)]
    log = tmp_path / "log.txt"
    with open(log, "w") as f:
        job = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            while not (out / "checkpoints" / "step-20" / "manifest.json").exists():
                assert job.poll() is None and time.monotonic() < deadline, log.read_text()[-5000:]
                time.sleep(0.1)
            assert cluster.kill_host_processes("h2")  # mid-epoch: 156 steps an epoch
            rc = job.wait(400)
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
    text = log.read_text()
    assert rc == 0, text[-5000:]
    assert "membership: 3 workers (" in text
    assert "membership: 3 -> 2 workers (left: h2, was rank" in text, text[-5000:]
    assert "lost on the way: h2 (killed by SIGKILL)" in text
    m = json.loads((out / "metrics.json").read_text())
    assert m["workers"] == 2 and m["checkpoint"]["resumed_from_step"] >= 20
