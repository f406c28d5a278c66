"""What the cluster tests share: the training worker, its loopback references, result comparison.

The loopback references (the same job on 127.0.0.1) are computed once per test session for
each set of arguments.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from mxtorch.cluster.testing import HostJob
from mxtorch.distributed.testing import run_script
from mxtorch.gluon.serialization import load_tensors

WORKER = str(Path(__file__).resolve().parent / "cluster_train.py")
PY = sys.executable
STEPS = ("--steps", "15")  # one length for every job compared with loopback: one reference run
JOB_TIMEOUT = 120.0
DIST_TIMEOUT = 10  # MXTORCH_DIST_TIMEOUT of the fault tests
GRACE = 30.0  # process start and exit on a busy 2-core machine


def final_params(out: Path, world: int) -> dict[str, torch.Tensor]:
    """Rank 0's parameters, after checking that every rank ended with the same ones."""
    ranks = [load_tensors(f"{out}.rank{r}") for r in range(world)]  # save_parameters' files
    for r, p in enumerate(ranks[1:], start=1):
        for k in ranks[0]:
            assert torch.equal(p[k], ranks[0][k]), f"rank {r} differs from rank 0 in {k}"
    return ranks[0]


_loopback: dict[tuple[str, ...], dict[str, torch.Tensor]] = {}


def loopback_params(tmp: Path, world: int, *args: str) -> dict[str, torch.Tensor]:
    """The job's result on 127.0.0.1 (computed once per session for each world size and arguments)."""
    key = (str(world), *args)
    if key not in _loopback:
        out = tmp / "loopback"
        results = run_script([PY, WORKER, "--out", str(out), *args], world, timeout=JOB_TIMEOUT)
        for r, (code, _, err) in enumerate(results):
            assert code == 0, f"loopback rank {r}: {err[-3000:]}"
        _loopback[key] = final_params(out, world)
    return _loopback[key]


def cluster_params(cluster, tmp: Path, world: int, *args: str, env=None) -> dict[str, torch.Tensor]:
    out = tmp / f"cluster-{cluster.name}"
    with HostJob(cluster, [PY, WORKER, "--out", str(out), *args], world, env=env) as job:
        results = job.wait(JOB_TIMEOUT)
    for r, (code, stdout, err) in enumerate(results):
        assert code == 0, f"rank {r} on {job.placement[r].name}: {err[-3000:]}"
        assert f"on {job.placement[r].name}" in stdout
    return final_params(out, world)


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=lambda m, k=k: f"{k}: {m}")


def loopback_ps_params(tmp: Path, workers: int, servers: int, *args: str) -> dict[str, torch.Tensor]:
    """The parameter-server job on 127.0.0.1 through `mxtorch launch -n W -s S` (once per session)."""
    key = ("ps", str(workers), str(servers), *args)
    if key not in _loopback:
        out = tmp / "ps-loopback"
        r = subprocess.run([PY, "-m", "mxtorch.cli.main", "launch", "-n", str(workers), "-s", str(servers),
                            "python", WORKER, "--out", str(out), *args], capture_output=True, text=True,
                           timeout=JOB_TIMEOUT)
        assert r.returncode == 0, r.stderr[-3000:]
        _loopback[key] = final_params(out, workers)
    return _loopback[key]


def take_down_host_mid_job(cluster, argv: Sequence[str], log: Path, ready: Callable[[], bool], host: str,
                           wait: float, timeout: float) -> tuple[int, float]:
    """Start the launcher command ``argv`` (its output in ``log``), SIGKILL every process of ``host``
    once ``ready()`` holds (within ``wait`` seconds), and wait for the job; (its status, the seconds
    from the kill to its end)."""
    with open(log, "w") as f:
        job = subprocess.Popen(list(argv), stdout=f, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + wait
            while not ready():
                assert job.poll() is None and time.monotonic() < deadline, log.read_text()[-5000:]
                time.sleep(0.1)
            killed = time.monotonic()
            assert cluster.kill_host_processes(host)
            rc = job.wait(timeout)
            return rc, time.monotonic() - killed
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
