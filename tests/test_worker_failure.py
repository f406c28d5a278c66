"""A worker that fails ends the whole job promptly, with an error naming it; a normal early exit waits.

Real jobs on 127.0.0.1 (a free port each): rank 1 of tests/launch_scripts/rank_leaves.py leaves
while rank 0 waits for it in an all-reduce, a barrier or a parameter-server round.  Without
the fix, rank 1 blocked in the exit-time barrier and rank 0 in its collective until
MXTORCH_DIST_TIMEOUT; here that is set to 120 s, so an end within 30 s of rank 1 leaving (it
prints when) shows the job did not just wait it out.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mxtorch.distributed.testing import free_port, rank_env

SCRIPT = str(Path(__file__).resolve().parent / "launch_scripts" / "rank_leaves.py")
PY = sys.executable
PROMPT_S = 30  # the bound for the whole job to end
LIMIT_S = 60  # the test gives up (and kills everything) after this
_LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_USE_AGENT_STORE")


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DMLC_", "MXTORCH_")) and k not in _LAUNCH_VARS}
    env.update({"MXTORCH_DIST_TIMEOUT": "120", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    return env


def since_rank1_left(output: str, ended: float) -> float:
    """Seconds from rank 1's "rank 1 leaves at T" line in ``output`` to the wall-clock time ``ended``."""
    found = re.search(r"rank 1 leaves at ([0-9.]+)", output)
    assert found, f"rank 1 never got to leave:\n{output[-3000:]}"
    return ended - float(found.group(1))


def run_job(processes, envs: list[dict[str, str]], *args: str) -> tuple[list[tuple[int, str]], float]:
    """Start one ``rank_leaves.py *args`` per environment (``processes``: the conftest fixture, which
    kills what is left); return ``[(returncode, stdout+stderr)]`` in that order and the seconds
    from rank 1 leaving (if it did) until the last process ended."""
    start = time.monotonic()
    procs = [processes.start([PY, SCRIPT, *args], env=e, stderr=subprocess.STDOUT) for e in envs]
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=max(1.0, start + LIMIT_S - time.monotonic()))
        outs.append((p.returncode, out))
    ended = time.time()
    left = [o for _, o in outs if "rank 1 leaves at" in o]
    return outs, since_rank1_left(left[0], ended) if left else 0.0


def torchrun_envs(n: int = 2) -> list[dict[str, str]]:
    port = free_port()
    return [{**_base_env(), **rank_env(r, n, port)} for r in range(n)]


def dmlc_worker_envs(n: int, master_port: int | None, root_port: int, servers: int) -> list[dict[str, str]]:
    common = {**_base_env(), "DMLC_ROLE": "worker", "DMLC_NUM_WORKER": str(n),
              "DMLC_NUM_SERVER": str(servers), "DMLC_PS_ROOT_URI": "127.0.0.1",
              "DMLC_PS_ROOT_PORT": str(root_port)}
    if master_port is not None:
        common["MASTER_PORT"] = str(master_port)
    return [{**common, "DMLC_WORKER_ID": str(r)} for r in range(n)]


def check_rank0_names_rank1(outs: list[tuple[int, str]], elapsed: float, why: str) -> None:
    rc0, out0 = outs[0]
    assert elapsed < PROMPT_S, f"the job took {elapsed:.0f} s to end after rank 1 left:\n{out0[-3000:]}"
    assert rc0 == 1, out0[-3000:]
    assert "should not get here" not in out0
    assert why in out0, out0[-3000:]


# ---- torchrun's variables, processes started by the test --------------------------------------
@pytest.mark.parametrize("how, where, status, why", [
    ("exit3", "pushpull", 3, "rank 1 exited with status 3 (pid "),
    ("kill", "barrier", -signal.SIGKILL, "rank 1 is gone: its process (pid "),
])
def test_rank_leaving_ends_the_job_and_is_named(processes, how, where, status, why):
    outs, elapsed = run_job(processes, torchrun_envs(), "allreduce", how, where)
    assert outs[1][0] == status, outs[1][1][-3000:]
    check_rank0_names_rank1(outs, elapsed, why)


def test_a_rank_that_finishes_early_still_waits_for_its_peers(processes):
    outs, _ = run_job(processes, torchrun_envs(), "allreduce", "early", "-")
    assert [rc for rc, _ in outs] == [0, 0], [out[-3000:] for _, out in outs]
    assert "rank 0 done" in outs[0][1] and "rank 1 done" in outs[1][1]


# ---- MXNet's DMLC_* variables ------------------------------------------------------------------
def test_dmlc_worker_leaving_an_allreduce_job(processes):
    envs = dmlc_worker_envs(2, master_port=free_port(), root_port=free_port(), servers=0)
    outs, elapsed = run_job(processes, envs, "allreduce", "exit3", "pushpull")
    assert outs[1][0] == 3
    check_rank0_names_rank1(outs, elapsed, "rank 1 exited with status 3 (pid ")


def test_dmlc_worker_leaving_a_dist_sync_job_fails_the_barrier_and_stops_the_servers(processes):
    """Every role runs the same script (MXNet's way): a barrier used to let worker 0 through as if
    worker 1 had finished normally; now the scheduler declares it dead at once."""
    root = free_port()
    workers = dmlc_worker_envs(2, master_port=None, root_port=root, servers=1)
    roles = [{**workers[0], "DMLC_ROLE": role} for role in ("scheduler", "server")]
    for e in roles:
        e.pop("DMLC_WORKER_ID")
    outs, elapsed = run_job(processes, [*workers, *roles], "dist_sync", "exit3", "barrier")
    assert outs[1][0] == 3
    check_rank0_names_rank1(outs, elapsed, "worker 1 (pid ")
    assert "exited with status 3" in outs[2][1] + outs[3][1]  # the scheduler's log names the cause
    assert [rc for rc, _ in outs[2:]] in ([1, 0], [0, 0])  # both ended: the scheduler reports the failure


# ---- mxtorch launch ------------------------------------------------------------------------------
def test_launch_stops_the_job_and_names_the_rank_that_exited():
    argv = [PY, "-m", "mxtorch.cli.main", "launch", "-n", "2", "python", SCRIPT, "allreduce", "exit3",
            "pushpull"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=LIMIT_S, env=_base_env())
    assert r.returncode == 3, r.stderr[-3000:]
    assert since_rank1_left(r.stdout, time.time()) < PROMPT_S
    assert "mxtorch launch: worker rank 1 failed (exit code 3" in r.stderr
    assert "should not get here" not in r.stdout


# ---- how the process is ending -------------------------------------------------------------------
_EXIT_STATUS = str(Path(__file__).resolve().parents[1] / "mxtorch" / "distributed" / "exit_status.py")


@pytest.mark.parametrize("ending, expected", [
    ("sys.exit(3)", "exited with status 3"),
    ("sys.exit('bad input')", "exited with message 'bad input' (status 1)"),
    ("raise ValueError('shard 1\\nis corrupt')", "raised ValueError: shard 1"),
    ("sys.exit(0)", "None"),
    ("pass", "None"),
    ("threading.Thread(target=sys.exit, args=(4,)).start()", "None"),  # ends a thread, not the process
])
def test_exit_status_records_how_the_process_ends(ending, expected):
    # the module alone (standard library only): no torch import, so each case takes ~50 ms
    code = (f"import atexit, importlib.util, sys, threading\n"
            f"spec = importlib.util.spec_from_file_location('exit_status', {_EXIT_STATUS!r})\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "m.track()\n"
            "atexit.register(lambda: print('failure:', m.failure()))\n"
            f"{ending}\n")
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=30)
    assert f"failure: {expected}" in r.stdout, r.stderr

