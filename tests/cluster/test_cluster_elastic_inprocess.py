"""An in-process elastic job across namespace hosts loses a host and finishes on the others.

`mxtorch launch --launcher cluster --elastic 2:3 -n 3 --env MXTORCH_ELASTIC_MODE:inprocess` runs
tests/hvd_elastic_trainer_worker.py (``hvd.elastic.run``, ``hvd.DistributedTrainer``, a weight
whose moves are computed by hand) with one worker per host.  The worker on h2 stops before step 8
and h2 is taken down (`cluster.kill_host_processes`: its agent and worker get SIGKILL; h0 keeps
the rendezvous store).  The workers on h0 and h1 re-form the group in their own processes, go back
to the commit of step 5 and finish averaging over 2; nothing restarts.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from cluster_jobs import take_down_host_mid_job

from mxtorch.elastic.env import MXTORCH_ELASTIC_MODE

pytestmark = pytest.mark.cluster

WORKER = str(Path(__file__).resolve().parent.parent / "hvd_elastic_trainer_worker.py")


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@pytest.mark.timeout(300)
@pytest.mark.cluster(hosts=3, bandwidth="1gbit")
def test_an_in_process_elastic_job_survives_a_host_taken_down(cluster, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    argv = [sys.executable, "-m", "mxtorch.cli.main", "launch", "--launcher", "cluster", "--cluster",
            cluster.name, "--elastic", "2:3", "-n", "3", "--rendezvous-timeout", "60",
            "--env", f"{MXTORCH_ELASTIC_MODE}:inprocess", "--env", "H25_VICTIM:h2:8", "--env",
            "MXTORCH_DIST_TIMEOUT:60", "python", WORKER, str(out)]
    log = tmp_path / "log.txt"
    rc, after = take_down_host_mid_job(cluster, argv, log, lambda: any(out.glob("victim.*")), "h2", wait=120,
                                       timeout=120)
    print(f"host h2 taken down at step 8: the job finished on h0 and h1 {after:.1f} s later")
    text = log.read_text()
    assert rc == 0, text[-5000:]
    assert re.search(r"agent h2 \(pid \d+\) ended \(killed by SIGKILL\)", text), text[-5000:]
    victim = int(next(out.glob("victim.*")).name.split(".")[1])
    results = {int(p.name.split(".")[1]): json.loads(p.read_text()) for p in out.glob("result.*.json")}
    assert len(results) == 2 and victim not in results, text[-5000:]
    assert sorted((r["rank"], r["size"]) for r in results.values()) == [(0, 2), (1, 2)]
    for r in results.values():  # back to the commit of step 5, then averaged over 2: -0.25 * 3 / 2
        assert r["moves"] == [[2, -0.375, -0.375]] * 15, r["moves"]
        assert r["w"] == [5 * -0.5 + 15 * -0.375] * 2
