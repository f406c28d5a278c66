"""``mxtorch launch``'s horovodrun/torchrun spellings: -H host lists, --min/--max-workers, per-node
mode (--nnodes/--node-rank/--rdzv-endpoint/--nproc-per-node) and --gpus-per-worker.

Flag checks and command lines run in process (``--dry-run``); the per-node job is real: two
launchers on 127.0.0.1 (two emulated hosts with distinct node ranks and one endpoint) form one
4-worker gloo job.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mxtorch.cli.launch import elastic_range
from mxtorch.cli.main import main
from mxtorch.distributed.testing import free_port
from mxtorch.launcher import LaunchError
from mxtorch.launcher.hostlist import parse_host_list

SCRIPTS = Path(__file__).resolve().parent / "launch_scripts"
PY = sys.executable


def dry_run(capsys, *argv):
    assert main(["launch", *argv, "--dry-run", "python", "train.py"]) == 0
    captured = capsys.readouterr()
    return [shlex.split(line) for line in captured.out.splitlines()], captured.err


@pytest.mark.parametrize("argv, message", [
    (["-H", "h1:4", "--hostfile", "x"], "give the hosts one way"),
    (["-H", "h1:0"], "the number of slots must be an integer >= 1"),
    (["-H", "h1:4,,h2"], "no empty entries"),
    (["-H", "h1:4,h1:2"], "host 'h1' is already listed"),
    (["--launcher", "local", "-H", "alpha:2"], "-H/--hostfile is for --launcher ssh, mpi or slurm"),
    (["--elastic", "--timeout", "5"], "--elastic needs MIN:MAX, or --min-workers MIN"),
    (["--elastic"], "--elastic 'python': expected MIN:MAX"),  # a bare --elastic took the command's name
    (["--elastic", "2:3", "--min-workers", "1"], "disagree: give the range one way"),
    (["-n", "2", "--min-workers", "3", "--max-workers", "2"], "--min-workers 3 is more than --max-workers 2"),
    (["--min-workers", "0"], "--min-workers must be an integer >= 1"),
    (["-n", "2", "--min-workers", "3"], "needs at least MIN=3"),
    (["--node-rank", "0"], "need --nnodes N"),
    (["--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:1234"], "needs --node-rank R (0..1"),
    (["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:1"], "node ranks run from 0 to 1"),
    (["--nnodes", "2", "--node-rank", "0"], "needs --rdzv-endpoint HOST:PORT"),
    (["--nnodes", "3:2", "--rdzv-endpoint", "h:1"], "need 1 <= MIN <= MAX"),
    (["--nnodes", "two", "--rdzv-endpoint", "h:1"], "expected N or MIN:MAX"),
    (["--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "nocolon"], "--rdzv-endpoint 'nocolon'"),
    (["--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "h:1", "-n", "4"], "does not take -n"),
    (["--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "h:1", "-s", "1"], "does not take -s"),
    (["--nnodes", "1:2", "--rdzv-endpoint", "h:1", "--min-workers", "1"], "does not take --elastic/"),
    (["--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "h:1", "--launcher", "ssh"],
     "does not take --launcher ssh"),
    (["--nnodes", "1", "--rdzv-endpoint", "h:1", "--nproc-per-node", "0"], "--nproc-per-node must be"),
    (["--gpus-per-worker", "0"], "--gpus-per-worker must be an integer >= 1"),
])
def test_bad_flag_combinations_are_one_line_errors(argv, message, capsys):
    assert main(["launch", *argv, "python", "x.py"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mxtorch launch: error: ") and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_host_lists_as_horovodrun(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    hosts = parse_host_list("alpha:2, bob@beta:3,gamma")
    assert [(h.name, h.slots) for h in hosts] == [("alpha", 2), ("bob@beta", 3), ("gamma", None)]
    # -H without --launcher: ssh, and -n defaults to the slots
    lines, _ = dry_run(capsys, "-H", "alpha:2,beta:2")
    assert [line[5] for line in lines] == ["alpha", "beta"]
    assert all("DMLC_NUM_WORKER=4" in line[6] for line in lines)
    # every host is this machine: the local launcher, -n from the slots
    lines, _ = dry_run(capsys, "-H", "localhost:3")
    assert "--nproc-per-node=3" in lines[0] or "--nproc_per_node=3" in lines[0]
    # mpi passes the list on
    (line,), _ = dry_run(capsys, "--launcher", "mpi", "-H", "alpha:2,beta:1")
    assert line[:5] == ["mpirun", "-np", "3", "-H", "alpha:2,beta:1"]
    # the old spelling: -H FILE still reads a hostfile, with a note to write --hostfile
    (tmp_path / "hosts").write_text("alpha slots=2\n")
    (line,), err = dry_run(capsys, "--launcher", "mpi", "-n", "2", "-H", "hosts")
    assert line[:5] == ["mpirun", "-np", "2", "-H", "alpha:2"]
    assert "write --hostfile hosts" in err
    (line,), err = dry_run(capsys, "--launcher", "mpi", "-n", "2", "--hostfile", "hosts")
    assert line[:5] == ["mpirun", "-np", "2", "-H", "alpha:2"] and "note" not in err


def test_min_max_workers_are_elastic_ranges(capsys):
    assert elastic_range(None, None, None, 3) is None
    assert elastic_range("2:4", None, None, 3) == "2:4"
    assert elastic_range("", 2, 4, 3) == "2:4"  # --elastic --min-workers 2 --max-workers 4
    assert elastic_range(None, 2, None, 3) == "2:3"  # a missing side is -n, as horovodrun's --min-np
    assert elastic_range(None, None, 5, 3) == "3:5"
    assert elastic_range("2:4", 2, 4, 3) == "2:4"
    with pytest.raises(LaunchError, match="disagree"):
        elastic_range("2:4", 1, None, 3)
    assert main(["launch", "-n", "3", "--min-workers", "2", "--max-workers", "4", "--dry-run", "python",
                 "train.py"]) == 0
    out = capsys.readouterr().out.splitlines()
    job = json.loads(out[0].partition("job: ")[2])
    assert (job["min_workers"], job["max_workers"]) == (2, 4)
    assert len(out) == 4  # the store line, then one agent per worker


def test_per_node_dry_run_is_torchruns_command(capsys):
    (line,), _ = dry_run(capsys, "--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "node0:29400",
                         "--nproc-per-node", "8")
    assert line == ["torchrun", "--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "8",
                    "--rdzv-backend", "static", "--rdzv-endpoint", "node0:29400", "--rdzv-id",
                    "mxtorch-node0-29400", "python", "train.py"]
    (line,), err = dry_run(capsys, "--nnodes", "1:4", "--node-rank", "3", "--rdzv-endpoint", "node0:29400",
                           "--rdzv-id", "job7")
    assert line[:3] == ["torchrun", "--nnodes", "1:4"] and "c10d" in line and "job7" in line
    assert "--node-rank 3 is not used" in err


def _node(port: int, node_rank: int | None, tmp_path: Path) -> subprocess.Popen:
    nodes = ["--nnodes", "2", "--node-rank", str(node_rank)] if node_rank is not None else ["--nnodes", "2:2"]
    argv = [PY, "-m", "mxtorch.cli.main", "launch", *nodes,
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--nproc-per-node", "2", "--gpus-per-worker", "1",
            "--env", "REPORT_VARS:GROUP_RANK,LOCAL_RANK,DMLC_NUM_WORKER,MXTORCH_GPUS_PER_WORKER",
            "python", str(SCRIPTS / "allreduce_rank.py")]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@pytest.mark.timeout(600)
def test_two_per_node_launchers_form_one_four_worker_job(tmp_path):
    port = free_port()
    nodes = [_node(port, r, tmp_path) for r in (1, 0)]  # node 1 first: it waits for node 0's store
    outputs = []
    try:
        for p in nodes:
            out, err = p.communicate(timeout=240)
            outputs.append((p.returncode, out, err))
    finally:
        for p in nodes:
            if p.poll() is None:
                p.kill()
    for code, out, err in outputs:
        assert code == 0, f"exit {code}\n{out}\n{err}"
    seen = {}
    for node_rank, (_, out, _) in zip((1, 0), outputs):
        for m in re.finditer(r"rank=(\d) world=(\d) sum=(\d+) GROUP_RANK=(\S+) LOCAL_RANK=(\S+) "
                             r"DMLC_NUM_WORKER=(\S+) MXTORCH_GPUS_PER_WORKER=(\S+)", out):
            rank, world, total, group, local, dmlc, gpus = m.groups()
            seen[int(rank)] = (node_rank, int(group), int(local))
            assert (world, total, dmlc, gpus) == ("4", "10", "4", "1")
    # ranks 0-1 on node 0 and 2-3 on node 1, each node's own rank as torchrun's GROUP_RANK
    assert seen == {0: (0, 0, 0), 1: (0, 0, 1), 2: (1, 1, 0), 3: (1, 1, 1)}, seen


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@pytest.mark.timeout(600)
def test_per_node_range_numbers_nodes_as_they_arrive(tmp_path):
    port = free_port()
    nodes = [_node(port, None, tmp_path) for _ in range(2)]  # --nnodes 2:2: c10d, numbered on arrival
    try:
        outs = [p.communicate(timeout=240) for p in nodes]
    finally:
        for p in nodes:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in nodes] == [0, 0], outs
    lines = re.findall(r"rank=(\d) world=(\d) sum=(\d+) GROUP_RANK=(\d)", "".join(o for o, _ in outs))
    # one job of both nodes, whichever arrived first is node 0
    assert sorted(lines) == [("0", "4", "10", "0"), ("1", "4", "10", "0"), ("2", "4", "10", "1"),
                             ("3", "4", "10", "1")], outs
