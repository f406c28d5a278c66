"""``mxtorch launch`` and ``mxtorch train --workers``: real local jobs, command lines for clusters.

Jobs run through the product's own command line (``python -m mxtorch.cli.main launch``), each
with a timeout; the launcher picks a free rendezvous port itself.
"""

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mxtorch as mx
from mxtorch.cli.main import main
from mxtorch.distributed.testing import free_port
from mxtorch.launcher import (
    Host,
    JobSpec,
    LaunchError,
    assign_workers,
    parse_env_pairs,
    parse_hostfile,
    rank_environment,
)

SCRIPTS = Path(__file__).resolve().parent / "launch_scripts"
PY = sys.executable
JOB_TIMEOUT = 90


def mxtorch_cli(*args: str, tmp: Path | None = None,
                timeout: float = JOB_TIMEOUT) -> subprocess.CompletedProcess:
    """Run the mxtorch command line; ``tmp`` receives the logs a failed job leaves behind."""
    env = {**os.environ, "TMPDIR": str(tmp)} if tmp is not None else None
    return subprocess.run([PY, "-m", "mxtorch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


# ---- local jobs ---------------------------------------------------------------------------------
def test_two_local_workers_allreduce_and_get_their_environment():
    r = mxtorch_cli("launch", "-n", "2", "--env", "EXTRA:a:b", "python", str(SCRIPTS / "allreduce_rank.py"))
    assert r.returncode == 0, r.stderr
    lines = sorted(line.partition("]:")[2] for line in r.stdout.splitlines() if "]:rank=" in line)
    assert lines == [
        f"rank={rank} world=2 sum=3 LOCAL_RANK={rank} LOCAL_WORLD_SIZE=2 DMLC_ROLE=worker "
        "DMLC_NUM_WORKER=2 DMLC_NUM_SERVER=0 EXTRA=a:b"
        for rank in (0, 1)
    ]


# slow tier: the stderr-tail case (the error-file case stays in the default run)
@pytest.mark.parametrize("record", [pytest.param(False, marks=pytest.mark.slow), True],
                         ids=["stderr-tail", "error-file"])
def test_failing_rank_stops_the_job_and_is_named_with_its_traceback(record, tmp_path):
    args = [str(SCRIPTS / "fail_rank1.py")] + (["--record"] if record else [])
    start = time.monotonic()
    r = mxtorch_cli("launch", "-n", "2", "python", *args, tmp=tmp_path)
    elapsed = time.monotonic() - start
    assert r.returncode == 1
    assert elapsed < 300, f"the launcher took {elapsed:.0f} s to give up"
    assert "should not get here" not in r.stdout
    report = r.stderr[r.stderr.index("mxtorch launch: worker rank 1 failed"):]
    assert "exit code 1" in report
    assert "load_shard(1)" in report and "ValueError: shard 1 is corrupt" in report  # rank 1's traceback
    assert "rank 0" in report  # and what became of the other worker
    assert f"worker logs: {tmp_path}" in report


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_max_restarts_restarts_every_worker():
    r = mxtorch_cli("launch", "-n", "2", "--max-restarts", "1", "python", str(SCRIPTS / "fail_rank1.py"),
                    "--first-attempt-only")
    assert r.returncode == 0, r.stderr
    assert sorted(line.partition("]:")[2] for line in r.stdout.splitlines() if "finished" in line) == [
        "rank 0 finished attempt 1", "rank 1 finished attempt 1"]


def test_timeout_stops_the_job():
    start = time.monotonic()
    r = mxtorch_cli("launch", "-n", "2", "--timeout", "2", "python", str(SCRIPTS / "sleep_forever.py"))
    assert r.returncode == 124
    assert "did not finish within 2 s" in r.stderr
    assert time.monotonic() - start < 300  # the script sleeps forever


# ---- errors the launcher reports before starting anything --------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--env", "OMP_NUM_THREADS"], "--env 'OMP_NUM_THREADS': expected NAME:VALUE"),
    (["--env-worker", "1X:2"], "'1X' is not a valid environment variable name"),
    (["-n", "0"], "the number of workers (-n) must be an integer >= 1, got 0"),
    (["--timeout", "-1"], "--timeout must be a number of seconds > 0"),
    (["-s", "-1"], "the number of servers (-s) must be an integer >= 0, got -1"),
    (["--launcher", "ssh"], "--launcher ssh needs hosts: -H host1:4,host2:4 or --hostfile FILE"),
    (["-H", "hosts.txt"], "-H 'hosts.txt': no such file; -H takes a host list"),
    (["--launcher", "mpi", "-H", "/nonexistent/hosts"], "no such file; -H takes a host list"),
    (["--launcher", "mpi", "--hostfile", "/nonexistent/hosts"],
     "cannot read the hostfile '/nonexistent/hosts'"),
])
def test_bad_options_are_clear_errors(argv, message, capsys):
    assert main(["launch", *argv, "python", "x.py"]) == 2
    assert message in capsys.readouterr().err


def test_no_command(capsys):
    assert main(["launch", "-n", "2"]) == 2
    assert "no command to launch" in capsys.readouterr().err


def test_parse_env_pairs_keeps_colons_in_values():
    pairs = parse_env_pairs(["A:1", "URL:http://h:80", "EMPTY:"])
    assert pairs == {"A": "1", "URL": "http://h:80", "EMPTY": ""}


# ---- hostfiles and cluster command lines -------------------------------------------------------
HOSTFILE = """\
# two GPU boxes and a spare
alpha slots=2
bob@beta:2   # user@host
gamma
"""


def test_parse_hostfile():
    assert parse_hostfile(HOSTFILE) == [Host("alpha", 2), Host("bob@beta", 2), Host("gamma", None)]
    assert Host("bob@beta").address == "beta"


@pytest.mark.parametrize("text, message", [
    ("a\nb slots=0\n", "hosts line 2: 'b slots=0': the number of slots must be an integer >= 1"),
    ("a\n\nb:x\n", "hosts line 3"),
    ("a extra words\n", "hosts line 1: 'a extra words': expected 'HOST', 'HOST slots=K' or 'HOST:K'"),
    ("a\nb;rm\n", "hosts line 2: 'b;rm' is not a host name"),
    ("a\nb\na\n", "hosts line 3: host 'a' is already listed on line 1"),
    ("# nothing\n\n", "hosts lists no hosts"),
])
def test_bad_hostfiles_name_the_line(text, message):
    with pytest.raises(LaunchError) as e:
        parse_hostfile(text, source="hosts")
    assert message in str(e.value)


def test_assign_workers():
    hosts = parse_hostfile(HOSTFILE)
    assert [(h.name, n) for h, n in assign_workers(hosts, 3)] == [("alpha", 2), ("bob@beta", 1)]
    # slots are caps; hosts without a count take the rest in turn
    assert [n for _, n in assign_workers(hosts, 7)] == [2, 2, 3]
    plain = [Host("a"), Host("b")]
    assert [n for _, n in assign_workers(plain, 5)] == [3, 2]
    with pytest.raises(LaunchError, match="offers 4 slots but 5 workers"):
        assign_workers([Host("a", 2), Host("b", 2)], 5)


@pytest.fixture
def hostfile(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "hosts"
    path.write_text(HOSTFILE)
    return str(path)


def dry_run(capsys, *argv):
    assert main(["launch", *argv, "--dry-run", "python", "train.py", "--lr", "0.1"]) == 0
    return [shlex.split(line) for line in capsys.readouterr().out.splitlines()]


def test_ssh_dry_run(hostfile, capsys, tmp_path):
    lines = dry_run(capsys, "-n", "5", "--launcher", "ssh", "-H", hostfile, "--env", "OMP_NUM_THREADS:4",
                    "--env-worker", "NAME:two words", "--master-port", "7000")
    assert len(lines) == 3
    for node_rank, (host, nproc) in enumerate([("alpha", 2), ("bob@beta", 2), ("gamma", 1)]):
        assert lines[node_rank][:6] == ["ssh", "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes", host]
        remote = lines[node_rank][6]
        assert remote == (
            f"cd {tmp_path} && export DMLC_ROLE=worker DMLC_NUM_WORKER=5 DMLC_NUM_SERVER=0 "
            "DMLC_PS_ROOT_URI=alpha DMLC_PS_ROOT_PORT=7001 OMP_NUM_THREADS=4 NAME='two words' && "
            f"{PY} -m torch.distributed.run --nnodes=3 --nproc-per-node={nproc} --node-rank={node_rank} "
            "--master-addr=alpha --master-port=7000 --max-restarts=0 --no-python python train.py --lr 0.1"
        )


def test_ssh_dry_run_with_restarts_uses_a_fresh_store_per_attempt(hostfile, capsys):
    lines = dry_run(capsys, "-n", "2", "--launcher", "ssh", "-H", hostfile, "--max-restarts", "3")
    (remote,) = [line[-1] for line in lines]
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in remote
    run = shlex.split(remote.rpartition(" && ")[2])
    assert run[3:6] == ["--nnodes=1", "--nproc-per-node=2", "--rdzv-backend=c10d"]
    assert run[6] == "--rdzv-endpoint=alpha:29500" and run[7].startswith("--rdzv-id=mxtorch-")
    assert "--max-restarts=3" in run


def test_mpi_dry_run(hostfile, capsys):
    (line,) = dry_run(capsys, "-n", "4", "--launcher", "mpi", "-H", hostfile, "--env", "A:1")
    assert line == [
        "mpirun", "-np", "4", "-H", "alpha:2,bob@beta:2",
        "-x", "DMLC_ROLE=worker", "-x", "DMLC_NUM_WORKER=4", "-x", "DMLC_NUM_SERVER=0",
        "-x", "DMLC_PS_ROOT_URI=alpha", "-x", "DMLC_PS_ROOT_PORT=29501", "-x", "A=1",
        "-x", "MASTER_ADDR=alpha", "-x", "MASTER_PORT=29500",
        PY, "-m", "mxtorch.launcher", "python", "train.py", "--lr", "0.1",
    ]


def test_slurm_dry_run(hostfile, capsys):
    (line,) = dry_run(capsys, "-n", "3", "--launcher", "slurm", "-H", hostfile)
    assert line == [
        "srun", "--ntasks=3", "--nodes=2", "--nodelist=alpha,beta", "--kill-on-bad-exit=1",
        "--export=ALL,DMLC_ROLE=worker,DMLC_NUM_WORKER=3,DMLC_NUM_SERVER=0,DMLC_PS_ROOT_PORT=29501,"
        "MASTER_PORT=29500",
        PY, "-m", "mxtorch.launcher", "python", "train.py", "--lr", "0.1",
    ]
    (line,) = dry_run(capsys, "-n", "8", "--launcher", "slurm")  # inside an allocation: no hostfile
    assert line[:2] == ["srun", "--ntasks=8"] and not any(a.startswith("--nodelist") for a in line)


def test_restarts_need_torchrun(hostfile, capsys):
    assert main(["launch", "--launcher", "mpi", "-H", hostfile, "--max-restarts", "1", "python", "x.py"]) == 2
    assert "--max-restarts needs torchrun's agent" in capsys.readouterr().err


def test_local_dry_run_and_environment_precedence(capsys, monkeypatch):
    monkeypatch.setenv("MXTORCH_LAUNCH_NUM_WORKERS", "3")
    (line,) = dry_run(capsys)
    assert "--nproc-per-node=3" in line and "DMLC_NUM_WORKER=3" in line
    assert line[line.index("--no-python") + 1:] == [PY, "train.py", "--lr", "0.1"]
    (line,) = dry_run(capsys, "-n", "2")  # the command line wins over the environment
    assert "--nproc-per-node=2" in line
    assert main(["launch", "--dry-run", "mxtorch", "train", "--epochs", "1"]) == 0  # this mxtorch
    assert capsys.readouterr().out.rstrip().endswith(f"--no-python {PY} -m mxtorch.cli.main train --epochs 1")
    monkeypatch.setenv("MXTORCH_LAUNCH_NUM_WORKERS", "many")
    assert main(["launch", "python", "x.py"]) == 2
    assert "MXTORCH_LAUNCH_NUM_WORKERS='many'" in capsys.readouterr().err


def test_rank_environment_from_mpi_and_slurm():
    ompi = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "alpha", "MASTER_PORT": "7000"}
    assert rank_environment(ompi) == {
        "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "alpha",
        "MASTER_PORT": "7000", "DMLC_PS_ROOT_URI": "alpha"}
    slurm = {"SLURM_PROCID": "4", "SLURM_NTASKS": "6", "SLURM_LOCALID": "0", "SLURM_NODEID": "2",
             "SLURM_NNODES": "3", "SLURM_STEP_NODELIST": "node[07-08],gpu1", "MASTER_PORT": "29500"}
    env = rank_environment(slurm)
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"]) == ("4", "6", "0")
    assert env["MASTER_ADDR"] == env["DMLC_PS_ROOT_URI"] == "node07"  # rank 0 runs on the first node
    with pytest.raises(LaunchError, match="none of OMPI_COMM_WORLD_RANK"):
        rank_environment({})
    with pytest.raises(LaunchError, match="MASTER_PORT"):
        rank_environment({"PMI_RANK": "0", "PMI_SIZE": "2"})


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_worker_entry_point_runs_an_mpi_started_job(processes):
    """Two processes started as mpirun would (OMPI_* variables only) join one gloo group through
    ``python -m mxtorch.launcher``."""
    port = free_port()
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    base.update({"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                 "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1", "DMLC_ROLE": "worker"})
    argv = [PY, "-m", "mxtorch.launcher", "python", str(SCRIPTS / "allreduce_rank.py")]
    ranks = [{"OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_LOCAL_RANK": str(r)} for r in range(2)]
    procs = [processes.start(argv, env={**base, **rank}) for rank in ranks]
    outs = [p.communicate(timeout=JOB_TIMEOUT) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e for _, e in outs]
    for r, (out, _) in enumerate(outs):
        assert out.startswith(f"rank={r} world=2 sum=3 LOCAL_RANK={r} LOCAL_WORLD_SIZE=2 DMLC_ROLE=worker")


def test_job_spec_validates():
    with pytest.raises(LaunchError, match="--max-restarts must be an integer >= 0"):
        JobSpec(["x"], max_restarts=-1)
    with pytest.raises(LaunchError, match="--master-port must be in 1..65535"):
        JobSpec(["x"], master_port=70000)


# ---- mxtorch train --workers -------------------------------------------------------------------
needs_allreduce = pytest.mark.skipif(not mx.kv.is_registered("horovod"),
                                     reason="the 'horovod' (allreduce) KVStore is not registered")


@needs_allreduce
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_train_two_workers_on_embedded_subset(tmp_path):
    out = tmp_path / "run"
    r = mxtorch_cli("train", "--workers", "2", "--kvstore", "horovod", "--model", "mlp",
                    "--data-root", mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT, "--epochs", "1",
                    "--batch-size", "256", "--lr", "0.1", "--output", str(out), "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["workers"] == 2 and metrics["config"]["workers"] == 2
    assert metrics["final_test_acc"] > 0.6
    assert (out / "model.params").is_file()
    assert r.stdout.count("final held-out accuracy") == 1  # worker 0 alone reports
    assert "workers: 2 x 128" in r.stdout


def test_train_workers_need_a_distributed_kvstore(tmp_path):
    r = mxtorch_cli("train", "--workers", "2", "--kvstore", "device", "--model", "mlp", "--epochs", "1",
                    "--output", str(tmp_path), "--no-progress", tmp=tmp_path)
    assert r.returncode != 0
    assert "only reduces gradients inside one process: use --kvstore allreduce" in r.stderr


def test_train_workers_reject_uneven_global_batch():
    with pytest.raises(SystemExit, match="must be divisible by --workers 3"):
        main(["train", "--workers", "3", "--batch-size", "100", "--kvstore", "device"])
