"""An elastic dist_sync (and dist_async) job (``MXTORCH_PS_ELASTIC=1``) across namespace hosts loses
a worker's host and finishes on the others.

Workers on h0, h1, h2 train tests/cluster/cluster_train.py for 60 steps through a Gluon Trainer on
dist_sync; the scheduler and the server sit on h3.  Once rank 0 has done step 5, h1 is taken down
(`cluster.kill_host_processes`: its worker gets SIGKILL).  The scheduler finds the dead worker,
announces the new membership, the servers close each round with the two live workers, and the
survivors finish all 60 steps with one model between them (the non-elastic job ends with an error
instead: tests/cluster/test_cluster_ps.py).
"""

from __future__ import annotations

import pytest
import torch

from mxtorch.cluster.testing import HostJob, ParameterServerNodes
from mxtorch.distributed.env import MXTORCH_PS_ELASTIC

pytest.importorskip("mxtorch.kvstore.ps.worker", reason="this mxtorch has no parameter server")

from cluster_jobs import JOB_TIMEOUT, PY, WORKER  # noqa: E402

from mxtorch.gluon.serialization import load_tensors  # noqa: E402

pytestmark = pytest.mark.cluster

ENV = {MXTORCH_PS_ELASTIC: "1", "MXTORCH_DIST_TIMEOUT": "10", "MXTORCH_PS_DEAD_S": "3",
       "MXTORCH_PS_HEARTBEAT_S": "0.5"}


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@pytest.mark.cluster(hosts=4, bandwidth="1gbit")
@pytest.mark.parametrize("kvstore", ["dist_sync", "dist_async"])
def test_an_elastic_dist_sync_job_survives_a_worker_host_taken_down(cluster, tmp_path, kvstore):
    out = tmp_path / "elastic-ps"
    argv = [PY, WORKER, "--out", str(out), "--kvstore", kvstore, "--steps", "60", "--step-sleep", "0.05",
            "--max-seconds", str(JOB_TIMEOUT)]
    with ParameterServerNodes(cluster, 3, 1, scheduler_host="h3", server_hosts=["h3"], env=ENV) as nodes, \
            HostJob(cluster, argv, 3, hosts=["h0", "h1", "h2"], env={**nodes.worker_env(), **ENV}) as job:
        job.wait_for_output(0, "step 5 ", JOB_TIMEOUT)
        assert cluster.kill_host_processes("h1")
        results = job.wait(JOB_TIMEOUT)
        codes = nodes.wait(40.0)
    # dist_async: a survivor that finished first may have left when the other counts its peers
    done = "of 2 " if kvstore == "dist_sync" else ""
    for r in (0, 2):
        code, stdout, err = results[r]
        assert code == 0, err[-3000:]
        assert "step 60 " in stdout and f"done rank {r} {done}" in stdout, stdout[-2000:]
    assert results[1][0] != 0  # the worker on h1 was killed
    assert codes == {"scheduler": 0, "server0": 0}, (nodes.output("scheduler")[-3000:], codes)
    first, last = (load_tensors(f"{out}.rank{r}") for r in (0, 2))
    assert first.keys() == last.keys()
    if kvstore == "dist_sync":  # one model; dist_async workers pull at their own times
        assert all(torch.equal(first[k], last[k]) for k in first)
    else:
        assert all(torch.isfinite(v).all() for v in (*first.values(), *last.values()))
