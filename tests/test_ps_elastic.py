"""Elastic parameter-server jobs (MXTORCH_PS_ELASTIC=1): workers leave and join a running dist_sync or
dist_async job, and a server killed mid-job is restored while the workers wait (real processes on
127.0.0.1; deaths are SIGKILLs or ``os._exit``; hand-offs through files, no timing verdicts)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import ps_elastic_workers as ew  # noqa: I001  (tests/ is on sys.path)
import pytest
import torch

from mxtorch.cli.main import main
from mxtorch.kvstore.ps.config import PSConfig
from mxtorch.kvstore.ps.membership import membership_message, read_membership
from mxtorch.kvstore.ps.protocol import ProtocolError
from mxtorch.kvstore.ps.server import ParameterServer
from mxtorch.kvstore.ps.server_elastic import note_greeting, on_membership, start_membership
from mxtorch.kvstore.ps.shard import KeyShard
from mxtorch.kvstore.ps.testing import ps_cluster

SCRIPTS = Path(__file__).resolve().parent / "launch_scripts"
ELASTIC = {"MXTORCH_PS_ELASTIC": "1", "MXTORCH_PS_HEARTBEAT_S": "0.2", "MXTORCH_PS_DEAD_S": "1",
           "MXTORCH_DIST_TIMEOUT": "60"}


def _wait_files(c, *paths, limit: float = 90.0) -> None:
    deadline = time.monotonic() + limit
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, [c.stderr(f"worker {r}") for r in range(c.num_workers)]
        time.sleep(0.05)


def _wait_log(c, name: str, text: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while text not in c.stderr(name):
        assert time.monotonic() < deadline, c.stderr(name)
        time.sleep(0.05)


# "closed": slow tier (scripts/test.sh -m slow): a faster test of this path ("killed") stays in the run
@pytest.mark.parametrize("how", ["killed", pytest.param("closed", marks=pytest.mark.slow)])
def test_dist_sync_loses_a_worker_and_finishes(tmp_path, how):
    """Rank 2 leaves after step 2: rounds 1-2 sum three workers' pushes (1 + 2 + 3), round 3 and
    later the two that remain (1 + 2); the round they wait in when rank 2 dies completes once the
    scheduler announces the membership without it (not at MXTORCH_DIST_TIMEOUT)."""
    with ps_cluster(3, 1, env=ELASTIC, timeout=90) as c:
        c.start_workers(ew.sync_leave, str(tmp_path), 4, 2, how)
        outcomes = c.join_workers()
        codes = c.wait_exit()
        scheduler_log = c.stderr("scheduler")
    gone = outcomes[2]
    if how == "killed":
        assert gone.exitcode == 3
    else:
        assert gone.ok and gone.value["values"] == [6.0, 6.0], gone.error
    for o in outcomes[:2]:
        assert o.ok, o.error
        assert o.value["values"] == [6.0, 6.0, 3.0, 3.0]
        assert o.value["num_workers"] == 2
    assert codes == {"scheduler": 0, "server 0": 0}  # a worker leaving an elastic job is no failure
    if how == "killed":
        assert "declared dead" in scheduler_log, scheduler_log


def _two_then_a_joiner(tmp_path, fn):
    """Run ``fn(folder, 4, 2)`` on two workers and, once both wrote ``ready-<rank>`` after step 2, on
    a third that joins; the outcomes (all ok, the scheduler and server ended 0) and its slot."""
    with ps_cluster(2, 1, env=ELASTIC, timeout=90) as c:
        c.start_workers(fn, str(tmp_path), 4, 2)
        _wait_files(c, tmp_path / "ready-0", tmp_path / "ready-1")
        slot = c.add_worker(fn, str(tmp_path), 4, 2)
        outcomes = c.join_workers()
        codes = c.wait_exit()
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    assert codes == {"scheduler": 0, "server 0": 0}
    return outcomes, slot


def test_dist_sync_gains_a_worker_and_finishes(tmp_path):
    """A third worker joins after round 2: its init keeps the servers' value (it pulls 1 + 2, not
    its own -1), it gets rank 2, and rounds 3-4 sum the three workers' pushes."""
    outcomes, slot = _two_then_a_joiner(tmp_path, ew.sync_join)
    for o in outcomes[:2]:
        assert o.value["values"] == [3.0, 3.0, 6.0, 6.0]
        assert o.value["counts"][:3] == [2, 2, 3]  # kv.num_workers: the live ones (none left before step 4)
    joiner = outcomes[slot].value
    assert joiner["rank"] == 2 and joiner["first"] == 3.0 and joiner["values"] == [6.0, 6.0]


def test_a_trainer_keeps_the_global_batch_rule_when_a_worker_joins(tmp_path):
    """Gluon Trainers on dist_sync (SGD lr 0.1 on the servers); each worker's gradient is 4 per
    weight, the servers sum them, and ``trainer.step(4 * kv.num_workers)`` rescales the sum to 1:
    the weights move by -0.1 a step with 2 workers and with 3.  The joiner's Trainer declares no
    optimizer and starts from the job's weights (0.3), not its own (9)."""
    outcomes, slot = _two_then_a_joiner(tmp_path, ew.trainer_join)
    for o in outcomes[:2]:
        assert o.value["weights"] == pytest.approx([0.4, 0.3, 0.2, 0.1], abs=1e-6)
    assert outcomes[slot].value["weights"] == pytest.approx([0.2, 0.1], abs=1e-6)


def test_dist_async_loses_and_gains_a_worker(tmp_path):
    """dist_async, SGD(lr=1) on the servers: ranks 0 and 1 push 3 times (1 and 2 each), rank 1 dies,
    a worker joins (rank 2) and it and rank 0 push 2 times (3 and 1 each): every push is applied
    once, the final value is -(3 * 1 + 3 * 2 + 2 * 1 + 2 * 3) = -17."""
    with ps_cluster(2, 1, env=ELASTIC, timeout=90) as c:
        c.start_workers(ew.async_leave_and_join, str(tmp_path), 3, 2)
        _wait_files(c, tmp_path / "alone")
        slot = c.add_worker(ew.async_leave_and_join, str(tmp_path), 3, 2)
        outcomes = c.join_workers()
        codes = c.wait_exit()
    assert outcomes[1].exitcode == 3
    for o in (outcomes[0], outcomes[slot]):
        assert o.ok, o.error
        assert o.value["value"] == -17.0
    assert outcomes[0].value["seen"] == [1, 2] and outcomes[slot].value["rank"] == 2
    assert codes == {"scheduler": 0, "server 0": 0}


def test_a_killed_server_is_restored_mid_job_while_the_workers_wait(tmp_path):
    """Server 0 is SIGKILLed while rank 0 waits in round 4 and the scheduler declares it dead; the
    workers wait (an elastic job does not fail on it), the restarted server restores its snapshot
    and log, rank 0 sends its request again, and the job ends with the undisturbed values:
    SGD(lr=0.5) of the round sums 1 + 2 = 3, -1.5 per step."""
    env = {**ELASTIC, "MXTORCH_PS_SNAPSHOT_DIR": str(tmp_path / "snap")}
    with ps_cluster(2, 1, env=env, timeout=120) as c:
        c.start_workers(ew.sync_across_server_restart, str(tmp_path), 6, 3)
        _wait_files(c, tmp_path / "mid")
        c.kill_server(0)
        _wait_log(c, "scheduler", "declared dead")
        c.start_server(0)
        (tmp_path / "restarted").write_text("yes")
        outcomes = c.join_workers()
        codes = c.wait_exit()
        server_log = c.stderr("server 0")
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    for o in outcomes:
        assert o.value["values"] == [-1.5 * s for s in range(1, 7)]
    assert "restored" in server_log, server_log
    assert codes == {"scheduler": 0, "server 0": 0}


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_a_worker_joins_while_a_server_is_down(tmp_path):
    """Server 0 is killed (and declared dead) between rounds 2 and 3, a worker joins while it is down
    (its greeting waits, signed for the dead process), the server comes back from its snapshot and
    log: the joiner greets it again, pulls round 2's value and rounds 3-4 sum three workers."""
    env = {**ELASTIC, "MXTORCH_PS_SNAPSHOT_DIR": str(tmp_path / "snap"), "MXTORCH_PS_SECRET": "s3cret"}
    with ps_cluster(2, 1, env=env, timeout=120) as c:
        c.start_workers(ew.sync_join, str(tmp_path), 4, 2)
        _wait_files(c, tmp_path / "ready-0", tmp_path / "ready-1")
        c.kill_server(0)
        _wait_log(c, "scheduler", "declared dead")
        slot = c.add_worker(ew.sync_join, str(tmp_path), 4, 2)
        _wait_log(c, "scheduler", "joins the job")
        c.start_server(0)
        outcomes = c.join_workers()
        codes = c.wait_exit()
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    for o in outcomes[:2]:
        assert o.value["values"] == [3.0, 3.0, 6.0, 6.0]
    assert outcomes[slot].value["first"] == 3.0 and outcomes[slot].value["values"] == [6.0, 6.0]
    assert codes == {"scheduler": 0, "server 0": 0}


# ---- the rules, in process ----------------------------------------------------------------------
def test_a_round_counts_the_live_workers_and_every_push_that_arrived():
    sh = KeyShard("w", 0, 1, (2,), torch.float32, 0, 2, value=torch.zeros(2))
    sh.add_push(0, torch.ones(2))
    sh.add_push(5, torch.ones(2))  # a worker that left after pushing: its push stays in the round
    assert not sh.round_complete({0, 1})
    assert sh.round_complete({0})  # worker 1 left: the round is complete
    assert not KeyShard("v", 0, 1, (2,), torch.float32, 0, 2).round_complete(set())  # no push, no round


def _elastic_server(members: list[int]) -> ParameterServer:
    server = ParameterServer(PSConfig(role="server", root_uri="127.0.0.1", root_port=1, num_servers=1,
                                      num_workers=len(members), elastic=True))
    start_membership(server, {"epoch": 1, "workers": members})
    return server


def test_a_server_takes_memberships_from_the_scheduler_only_and_in_epoch_order():
    server = _elastic_server([0, 1])
    sh = KeyShard("w", 0, 1, (2,), torch.float32, 0, 2, value=torch.zeros(2))
    server.shards[("w", 0)] = sh
    sh.add_push(0, torch.ones(2))
    with pytest.raises(ProtocolError, match="only the scheduler"):  # a worker cannot shrink the rounds
        on_membership(server, b"w1-identity", membership_message(2, [0]))
    assert server.members == {0, 1} and sh.version == 0
    on_membership(server, None, membership_message(1, [0]))  # not newer than what it knows: ignored
    assert server.members == {0, 1}
    note_greeting(server, 5, {"epoch": 3})  # a joiner greets before the membership naming it arrives
    on_membership(server, None, membership_message(2, [0]))  # worker 1 left; the joiner stays (epoch 3)
    assert server.members == {0, 5} and sh.version == 0  # the round now waits for the joiner
    on_membership(server, None, membership_message(4, [0]))  # the joiner left too: the round completes
    assert server.members == {0} and sh.version == 1
    torch.testing.assert_close(sh.value, torch.ones(2))  # no optimizer: the round's sum is stored


def test_a_server_of_a_job_that_is_not_elastic_refuses_memberships():
    server = ParameterServer(PSConfig(role="server", root_uri="127.0.0.1", root_port=1, num_servers=1,
                                      num_workers=2))
    with pytest.raises(ProtocolError, match="not elastic"):
        on_membership(server, None, membership_message(1, [0]))


@pytest.mark.parametrize("meta", [None, {"epoch": -1, "workers": []}, {"epoch": 1, "workers": [1.5]},
                                  {"epoch": 1, "workers": [4096]}, {"epoch": True, "workers": "0"},
                                  {"epoch": 2, "workers": list(range(5000))}])
def test_a_malformed_membership_is_refused(meta):
    with pytest.raises(ProtocolError, match="MEMBERSHIP"):
        read_membership(meta)


def test_a_membership_reads_back_sorted_and_unique():
    assert read_membership({"epoch": 3, "workers": [4, 0, 4, 2]}) == (3, [0, 2, 4])


# ---- mxtorch launch --elastic MIN:MAX -s K ------------------------------------------------------
def _cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "MXTORCH_DIST_TIMEOUT": "120", "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-m", "mxtorch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_launch_elastic_with_servers_dry_run_names_the_elastic_job(capsys):
    assert main(["launch", "--elastic", "2:3", "-n", "2", "-s", "2", "--dry-run", "python", "train.py"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5  # the scheduler, two servers, two workers
    assert all("MXTORCH_PS_ELASTIC=1" in line for line in lines)
    assert sum("DMLC_ROLE=server" in line and "MXTORCH_PS_SNAPSHOT_DIR=" in line for line in lines) == 2
    assert [line.count("DMLC_WORKER_ID=") for line in lines] == [0, 0, 0, 1, 1]


@pytest.mark.parametrize("args, match", [
    (["--elastic", "2:3", "-n", "4", "-s", "1"], "need 1 <= MIN <= -n <= MAX"),
    (["--elastic", "1:2", "-n", "2", "-s", "1", "--launcher", "ssh", "-H", "a:1"], "this machine only"),
])
def test_launch_elastic_with_servers_refuses_what_it_cannot_run(capsys, args, match):
    assert main(["launch", *args, "--dry-run", "python", "train.py"]) == 2
    assert match in capsys.readouterr().err


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_launch_elastic_job_replaces_a_worker_and_restarts_a_killed_server():
    """`mxtorch launch --elastic 2:3 -n 2 -s 1`: rank 1 dies after step 2 and the launcher's
    replacement joins as rank 2; rank 0 SIGKILLs the server after step 4 and the launcher starts it
    again from its snapshot while the workers wait.  Rounds 1-2 sum ranks 0 and 1 (1 + 2), rounds
    3-6 ranks 0 and 2 (1 + 3); both stop at round 6; the job exits 0."""
    r = _cli("launch", "--elastic", "2:3", "-n", "2", "-s", "1", "--env", "MXTORCH_PS_HEARTBEAT_S:0.2",
             "--env", "MXTORCH_PS_DEAD_S:1", "python", str(SCRIPTS / "ps_elastic_job.py"))
    assert r.returncode == 0, r.stderr[-4000:]
    rank0 = [fields(x) for x in prefixed(r.stdout, "worker0")]
    joiner = [fields(x) for x in prefixed(r.stdout, "worker2")]
    assert [x["w"] for x in rank0] == ["3", "3", "4", "4", "4", "4"], r.stdout
    assert joiner and {x["rank"] for x in joiner} == {"2"} and {x["w"] for x in joiner} == {"4"}, r.stdout
    assert len(joiner) == 4  # rounds 3-6, its steps 1-4
    assert "a replacement joins the job" in r.stderr
    assert "the server 0 ended (killed by SIGKILL" in r.stderr and "restored" in r.stderr


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_launch_elastic_async_job_replaces_a_worker_and_restarts_a_killed_server():
    """The same through `mxtorch launch` for dist_async: rank 1 pushes twice and dies, its
    replacement pushes 4 times, rank 0 6 times and SIGKILLs the server after its third; every push
    moves 'w' by -1 exactly once (the server's log keeps the updates made since its snapshot)."""
    r = _cli("launch", "--elastic", "2:3", "-n", "2", "-s", "1", "--env", "MXTORCH_PS_HEARTBEAT_S:0.2",
             "--env", "MXTORCH_PS_DEAD_S:1", "python", str(SCRIPTS / "ps_elastic_async_job.py"))
    assert r.returncode == 0, r.stderr[-4000:]
    finals = {label: [fields(x)["final"] for x in prefixed(r.stdout, label) if "final=" in x]
              for label in ("worker0", "worker2")}
    assert finals == {"worker0": ["-12"], "worker2": ["-12"]}, r.stdout
    assert "a replacement joins the job" in r.stderr
    assert "the server 0 ended (killed by SIGKILL" in r.stderr and "restored" in r.stderr


def prefixed(stdout: str, label: str) -> list[str]:
    return [line.partition("]:")[2] for line in stdout.splitlines() if line.startswith(f"[{label}]:")]


def fields(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split())
