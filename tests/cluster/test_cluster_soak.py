"""A short run of bench/soak.py on its own 3-host cluster: both jobs undisturbed, then one round of
each under faults, so that a broken soak is noticed.  Whether the faults are survived is what the
soak reports, not what this test checks."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "bench", "soak.py")

pytestmark = [pytest.mark.cluster, pytest.mark.slow]  # four training jobs: ~5 min on 2 busy cores


@pytest.mark.timeout(1500)
def test_a_short_soak_runs_every_fault_and_prints_the_verdict(cluster_support, tmp_path):
    r = subprocess.run([sys.executable, BENCH, "--minutes", "0.05", "--epochs", "2", "--seed", "3",
                        "--stall-timeout", "120", "--out", str(tmp_path / "soak")],
                       capture_output=True, text=True, timeout=1400, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "undisturbed horovod: accuracy" in out and "undisturbed dist_sync: accuracy" in out, out[-3000:]
    assert re.search(r"^1\s+horovod\s", out, re.M) and re.search(r"^2\s+dist_sync\s", out, re.M), out[-3000:]
    # drawn for round 2, whether or not the job lived to get them all
    for kind in ("server-kill", "partition", "hostile", "cpu-hog"):
        assert f"{kind} h" in out or f"{kind} server" in out, out[-3000:]
    assert re.search(r"round 1 horovod: worker-kill h\d at step count \d+: SIGKILL pid", out), out[-3000:]
    injected = re.search(r"^all\s+(\d+)\s+(\d+)", out, re.M)
    assert injected and int(injected.group(1)) >= 2, out[-3000:]
    assert "every fault survived: " in out and "accuracy within 1 point: " in out
