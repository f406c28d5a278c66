"""``mxtorch launch --launcher cluster -s M``: every process of the job, in whichever host, holds the
job's MXTORCH_PS_SECRET in its environment and on no command line (``ip netns exec`` passes on the
environment it was started with; the ``env VAR=...`` words of the command carry everything else)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

ROLES = str(Path(__file__).resolve().parent.parent / "launch_scripts" / "ps_secret_roles.py")


@pytest.mark.cluster(hosts=2)
def test_cluster_job_processes_hold_the_secret_in_their_environment_only(cluster, tmp_path):
    done = tmp_path / "done"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "MXTORCH_PS_"))}
    argv = ["launch", "--launcher", "cluster", "--cluster", cluster.name, "-n", "2", "-s", "1", "--ps-roles",
            "same-command", "--env", f"SECRET_TEST_DONE:{done}", "python", ROLES]
    r = subprocess.run([sys.executable, "-m", "mxtorch.cli.main", *argv], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    reports = [dict(p.split("=", 1) for p in line.split()) for line in r.stdout.splitlines()
               if line.startswith("role=")]
    assert sorted(f["role"] for f in reports) == ["scheduler", "server0", "worker0", "worker1"], r.stdout
    assert len({f["secret"] for f in reports}) == 1 and reports[0]["secret"] != "none", reports
    assert all(f["in_argv"] == "False" for f in reports), reports
    # scheduler, server, two workers and the workers' torchrun agent; none with it on its command line
    assert "found=5 leaked=0" in r.stdout, r.stdout
