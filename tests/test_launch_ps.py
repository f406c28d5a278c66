"""``mxtorch launch -s N``: the scheduler and servers beside the workers, locally and on clusters.

The first part needs no parameter server: command lines and environments, and local jobs whose
"scheduler" and "servers" are a stand-in script (``--ps-roles same-command`` with
tests/launch_scripts/ps_toy_roles.py).  The second part runs real jobs on mxtorch.kvstore.ps.
"""

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mxtorch.cli.main import main
from mxtorch.distributed.testing import free_port
from mxtorch.launcher import JobSpec, LaunchError, parse_hostfile, ps, rank_environment

SCRIPTS = Path(__file__).resolve().parent / "launch_scripts"
PY = sys.executable
JOB_TIMEOUT = 120


def mxtorch_cli(*args: str, env: dict | None = None, tmp: Path | None = None,
                timeout: float = JOB_TIMEOUT) -> subprocess.CompletedProcess:
    # a job that hangs ends on its own soon after the test gives up on it
    full = {**os.environ, "MXTORCH_DIST_TIMEOUT": "60", **(env or {})}
    if tmp is not None:
        full["TMPDIR"] = str(tmp)  # where failed jobs leave their logs
    return subprocess.run([PY, "-m", "mxtorch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=full)


def prefixed(stdout: str, label: str) -> list[str]:
    """The lines a process printed, from the launcher's ``[label]:line`` output."""
    return [line.partition("]:")[2] for line in stdout.splitlines() if line.startswith(f"[{label}]:")]


def fields(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split())


# ---- environments and command lines ---------------------------------------------------------------
def test_role_environment_precedence():
    spec = JobSpec(["python", "t.py"], num_workers=4, num_servers=2, env={"A": "1", "B": "env"},
                   server_env={"B": "server"})
    sched = ps.role_environment(spec, "scheduler", "10.0.0.1", 9000)
    assert sched == {"DMLC_ROLE": "scheduler", "DMLC_NUM_WORKER": "4", "DMLC_NUM_SERVER": "2",
                     "DMLC_PS_ROOT_URI": "10.0.0.1", "DMLC_PS_ROOT_PORT": "9000", "A": "1", "B": "env"}
    server = ps.role_environment(spec, "server", "10.0.0.1", 9000, server_id=1)
    assert server["DMLC_ROLE"] == "server" and server["DMLC_SERVER_ID"] == "1"
    assert server["B"] == "server"  # --env-server wins over --env, for servers only


def test_roles_and_their_commands():
    spec = JobSpec(["python", "t.py", "--lr", "1"], num_workers=2, num_servers=2)
    roles = ps.ps_roles(spec, "127.0.0.1", 9000)
    assert [r.name for r in roles] == ["scheduler", "server 0", "server 1"]
    assert [r.label for r in roles] == ["scheduler", "server0", "server1"]
    assert roles[0].command == [PY, "-m", "mxtorch.cli.main", "scheduler"]
    assert roles[2].command == [PY, "-m", "mxtorch.cli.main", "server"]
    same = ps.ps_roles(JobSpec(spec.command, 2, 2, ps_roles="same-command"), "127.0.0.1", 9000)
    assert all(r.command == [PY, "t.py", "--lr", "1"] for r in same)  # the workers' command, resolved
    assert ps.ps_roles(JobSpec(spec.command, 2, 0), "h", 1) == []
    with pytest.raises(LaunchError, match="--ps-roles 'mixed': choose one of separate, same-command"):
        JobSpec(spec.command, 2, 1, ps_roles="mixed")
    with pytest.raises(LaunchError, match="--ps-root-port must be in 1..65535"):
        JobSpec(spec.command, 2, 1, ps_root_port=0)
    with pytest.raises(LaunchError, match="restarted workers cannot rejoin a parameter-server job"):
        JobSpec(spec.command, 2, 1, max_restarts=1)


def test_worker_id_wrapper_gives_each_worker_its_rank():
    spec = ps.worker_spec(JobSpec(["python", "-c", "import os; print(os.environ['DMLC_WORKER_ID'])"], 2, 1))
    env = {**os.environ, "RANK": "3"}
    r = subprocess.run(spec.command[:4] + [PY] + spec.command[5:], env=env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0 and r.stdout == "3\n"
    assert ps.worker_spec(JobSpec(["x"], 2, 0)).command == ["x"]  # no servers: unchanged


def dry_run(capsys, *argv):
    assert main(["launch", *argv, "--dry-run", "python", "train.py", "--lr", "0.1"]) == 0
    return [shlex.split(line) for line in capsys.readouterr().out.splitlines()]


def env_of(line):
    """VAR=VALUE words of an ``env ... COMMAND`` line."""
    return dict(w.split("=", 1) for w in line[1:] if "=" in w and not w.startswith("-"))


def test_local_dry_run_lists_scheduler_servers_and_workers(capsys):
    lines = dry_run(capsys, "-n", "4", "-s", "2", "--ps-root-port", "9100", "--env", "A:1",
                    "--env-server", "MXTORCH_PS_SNAPSHOT_EVERY:50")
    assert len(lines) == 4
    sched, s0, s1, workers = lines
    assert sched[-4:] == [PY, "-m", "mxtorch.cli.main", "scheduler"]
    assert env_of(sched) == {"DMLC_ROLE": "scheduler", "DMLC_NUM_WORKER": "4", "DMLC_NUM_SERVER": "2",
                             "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": "9100", "A": "1"}
    for i, server in enumerate((s0, s1)):
        assert server[-4:] == [PY, "-m", "mxtorch.cli.main", "server"]
        env = env_of(server)
        assert (env["DMLC_ROLE"], env["DMLC_SERVER_ID"], env["DMLC_PS_ROOT_PORT"]) == ("server", str(i),
                                                                                      "9100")
        assert env["MXTORCH_PS_SNAPSHOT_EVERY"] == "50" and env["DMLC_NODE_HOST"] == "127.0.0.1"
    assert env_of(workers)["DMLC_ROLE"] == "worker" and env_of(workers)["DMLC_PS_ROOT_PORT"] == "9100"
    assert "MXTORCH_PS_SNAPSHOT_EVERY" not in env_of(workers)
    run = workers[workers.index("--no-python") + 1:]
    assert run[:2] == ["/bin/sh", "-c"] and "DMLC_WORKER_ID" in run[2]
    assert run[3:] == ["mxtorch-worker", PY, "train.py", "--lr", "0.1"]


def test_local_dry_run_same_command(capsys):
    lines = dry_run(capsys, "-n", "2", "-s", "1", "--ps-roles", "same-command")
    assert [line[-4:] for line in lines[:2]] == [[PY, "train.py", "--lr", "0.1"]] * 2
    assert [env_of(line)["DMLC_ROLE"] for line in lines[:2]] == ["scheduler", "server"]
    assert env_of(lines[0])["DMLC_PS_ROOT_PORT"] == "29501"  # --master-port (default 29500) + 1


HOSTFILE = "alpha slots=2\nbob@beta:2\n"


@pytest.fixture
def hostfile(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "hosts"
    path.write_text(HOSTFILE)
    return str(path)


def test_ssh_dry_run_puts_scheduler_and_servers_on_the_first_host(hostfile, capsys, tmp_path):
    lines = dry_run(capsys, "-n", "3", "-s", "2", "--launcher", "ssh", "-H", hostfile,
                    "--master-port", "7000", "--env-server", "X:1")
    assert len(lines) == 5
    for line, role, extra in ((lines[0], "scheduler", ""), (lines[1], "server", "DMLC_SERVER_ID=0 X=1 "),
                              (lines[2], "server", "DMLC_SERVER_ID=1 X=1 ")):
        assert line[:6] == ["ssh", "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes", "alpha"]
        assert line[6] == (f"read -r MXTORCH_PS_SECRET && export MXTORCH_PS_SECRET && "  # from stdin
                           f"cd {tmp_path} && export DMLC_ROLE={role} DMLC_NUM_WORKER=3 DMLC_NUM_SERVER=2 "
                           f"DMLC_PS_ROOT_URI=alpha DMLC_PS_ROOT_PORT=7001 {extra}&& "
                           f"{PY} -m mxtorch.cli.main {role}")
    for line, host in zip(lines[3:], ("alpha", "bob@beta")):
        assert line[5] == host
        assert "DMLC_ROLE=worker" in line[6] and "DMLC_PS_ROOT_URI=alpha DMLC_PS_ROOT_PORT=7001" in line[6]
        assert "--no-python /bin/sh -c" in line[6]
        assert line[6].endswith("mxtorch-worker python train.py --lr 0.1")


def test_mpi_dry_run_with_servers(hostfile, capsys):
    lines = dry_run(capsys, "-n", "2", "-s", "1", "--launcher", "mpi", "-H", hostfile,
                    "--ps-root-port", "9000")
    assert lines[0] == ["mpirun", "-np", "1", "-H", "alpha:1", "-x", "DMLC_ROLE=scheduler", "-x",
                        "DMLC_NUM_WORKER=2", "-x", "DMLC_NUM_SERVER=1", "-x", "DMLC_PS_ROOT_URI=alpha", "-x",
                        "DMLC_PS_ROOT_PORT=9000", "-x", "MXTORCH_PS_SECRET", PY, "-m", "mxtorch.cli.main",
                        "scheduler"]  # the secret's value: from mpirun's environment, not this line
    assert lines[1][:5] == ["mpirun", "-np", "1", "-H", "alpha:1"] and "DMLC_SERVER_ID=0" in lines[1]
    assert lines[1][-1] == "server"
    workers = lines[2]
    assert workers[:5] == ["mpirun", "-np", "2", "-H", "alpha:2"] and "DMLC_PS_ROOT_PORT=9000" in workers
    # the entry point gives each worker DMLC_WORKER_ID = its rank
    assert workers[workers.index("mxtorch.launcher") + 1:] == ["python", "train.py", "--lr", "0.1"]
    env = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "MASTER_ADDR": "alpha",
           "MASTER_PORT": "7000", "DMLC_ROLE": "worker"}
    assert rank_environment(env)["DMLC_WORKER_ID"] == "1"
    assert "DMLC_WORKER_ID" not in rank_environment({**env, "DMLC_ROLE": "server"})


def test_slurm_dry_run_with_servers(hostfile, capsys):
    lines = dry_run(capsys, "-n", "2", "-s", "1", "--launcher", "slurm", "-H", hostfile)
    assert lines[0][:6] == ["srun", "--ntasks=1", "--nodes=1", "--nodelist=alpha", "--overlap",
                            "--kill-on-bad-exit=1"]
    assert lines[0][6] == ("--export=ALL,DMLC_ROLE=scheduler,DMLC_NUM_WORKER=2,DMLC_NUM_SERVER=1,"
                           "DMLC_PS_ROOT_URI=alpha,DMLC_PS_ROOT_PORT=29501")
    assert lines[0][7:] == [PY, "-m", "mxtorch.launcher", PY, "-m", "mxtorch.cli.main", "scheduler"]
    assert "DMLC_SERVER_ID=0" in lines[1][6] and lines[1][-1] == "server"
    assert lines[2][0] == "srun" and "--ntasks=2" in lines[2]
    # inside an allocation, without a hostfile: the allocation's first node, named by the entry point
    lines = dry_run(capsys, "-n", "2", "-s", "1", "--launcher", "slurm")
    assert "--relative=0" in lines[0] and "DMLC_PS_ROOT_URI" not in lines[0][6]


def test_remote_ps_commands_need_hosts():
    spec = JobSpec(["python", "t.py"], num_workers=2, num_servers=1)
    with pytest.raises(LaunchError, match="needs a hostfile"):
        ps.remote_ps_commands("ssh", spec, None)
    assert ps.remote_ps_commands("ssh", JobSpec(["x"], 2, 0), parse_hostfile("a")) == []


def test_env_server_without_servers_is_a_note(capsys):
    assert main(["launch", "--env-server", "A:1", "--dry-run", "python", "x.py"]) == 0
    assert "--env-server is ignored, there are no servers" in capsys.readouterr().err


# ---- local jobs with stand-in roles (no parameter server needed) -----------------------------------
TOY = str(SCRIPTS / "ps_toy_roles.py")


def test_local_job_starts_scheduler_servers_and_workers_with_their_variables():
    port = free_port()
    r = mxtorch_cli("launch", "-n", "2", "-s", "2", "--ps-roles", "same-command", "--ps-root-port", str(port),
                    "--env", "EXTRA:x", "--env-server", "ONLY_SERVERS:yes", "python", TOY)
    assert r.returncode == 0, r.stderr
    common = {"DMLC_NUM_WORKER": "2", "DMLC_NUM_SERVER": "2", "DMLC_PS_ROOT_URI": "127.0.0.1",
              "DMLC_PS_ROOT_PORT": str(port), "EXTRA": "x"}
    (sched,) = prefixed(r.stdout, "scheduler")
    assert fields(sched) == {**common, "DMLC_ROLE": "scheduler", "DMLC_SERVER_ID": "None",
                             "DMLC_WORKER_ID": "None", "RANK": "None", "ONLY_SERVERS": "None"}
    for i in range(2):
        (line,) = prefixed(r.stdout, f"server{i}")
        assert fields(line) == {**common, "DMLC_ROLE": "server", "DMLC_SERVER_ID": str(i),
                                "DMLC_WORKER_ID": "None", "RANK": "None", "ONLY_SERVERS": "yes"}
        (line,) = prefixed(r.stdout, f"worker{i}")
        assert fields(line) == {**common, "DMLC_ROLE": "worker", "DMLC_SERVER_ID": "None",
                                "DMLC_WORKER_ID": str(i), "RANK": str(i), "ONLY_SERVERS": "None"}


def test_failing_server_stops_the_job_and_is_named_with_its_stderr(tmp_path):
    start = time.monotonic()
    r = mxtorch_cli("launch", "-n", "2", "-s", "2", "--ps-roles", "same-command", "python", TOY,
                    env={"TOY_FAIL": "server1", "TOY_WORKER_SLEEP": "900", "TOY_HANG": "1"}, tmp=tmp_path)
    assert r.returncode == 3, r.stderr
    assert time.monotonic() - start < 450  # not the workers' 900 s (margin for a loaded machine)
    report = r.stderr[r.stderr.index("mxtorch launch: the server 1 failed"):]
    assert "(exit code 3, pid" in report and "while the workers were running; the job was stopped" in report
    assert "server1: cannot open the shard map: /nonexistent/shards" in report  # its stderr
    assert f"scheduler and server logs: {tmp_path}" in report


def test_servers_still_running_after_the_workers_are_stopped_and_reported(monkeypatch, capsys):
    monkeypatch.setattr(ps, "PS_EXIT_GRACE_S", 0.5)
    monkeypatch.setenv("TOY_HANG", "1")
    spec = JobSpec([PY, TOY], num_workers=1, num_servers=1, ps_roles="same-command")
    assert ps.launch_local_with_servers(spec, report=sys.stderr) == 0  # the workers' status
    err = capsys.readouterr().err
    assert "the workers finished but scheduler (pid" in err and "server 0 (pid" in err
    assert "did not exit within 0.5 s; stopped" in err


def test_a_worker_started_but_not_recorded_when_a_server_fails_is_stopped(monkeypatch, capsys):
    # ServerDied can interrupt torch elastic between starting a worker and recording it, so that
    # elastic's shutdown misses it: the launcher must stop such children itself
    import mxtorch.launcher.local as local

    started: list[int] = []
    bystander = subprocess.Popen([PY, "-c", "import time; time.sleep(120)"])  # the caller's own child

    def interrupted_start(spec, master_addr, report, hidden_env=None):
        child = subprocess.Popen([PY, "-c", "import time; time.sleep(120)"])
        started.append(child.pid)
        del child  # the handle is lost, as when the interruption lands inside elastic's start-up
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:  # ServerDied arrives here, from the watcher's signal
            time.sleep(0.05)
        return 0

    monkeypatch.setattr(local, "launch_local", interrupted_start)
    monkeypatch.setenv("TOY_FAIL", "server0")
    monkeypatch.setenv("TOY_HANG", "1")
    spec = JobSpec([PY, TOY], num_workers=1, num_servers=1, ps_roles="same-command")
    start = time.monotonic()
    assert ps.launch_local_with_servers(spec, report=sys.stderr) == 3  # the server's exit code
    assert time.monotonic() - start < 450  # the 900 s wait was cut short by ServerDied
    assert "mxtorch launch: the server 0 failed" in capsys.readouterr().err
    assert started and not os.path.exists(f"/proc/{started[0]}")  # stopped and reaped
    assert bystander.poll() is None  # a child the caller had before the job is left alone
    bystander.kill()
    bystander.wait()


def test_failing_worker_stops_the_servers(tmp_path):
    r = mxtorch_cli("launch", "-n", "2", "-s", "1", "--ps-roles", "same-command", "python", TOY,
                    env={"TOY_FAIL": "worker1", "TOY_HANG": "1"}, tmp=tmp_path)
    assert r.returncode == 3
    assert "mxtorch launch: worker rank 1 failed" in r.stderr
    assert "server 0 failed" not in r.stderr and "did not exit" not in r.stderr  # stopped quietly


# ---- real parameter-server jobs (mxtorch.kvstore.ps) -----------------------------------------------
def _has_ps() -> bool:
    try:
        import mxtorch.kvstore.ps  # noqa: F401
    except ImportError:
        return False
    return True


needs_ps = pytest.mark.skipif(not _has_ps(), reason="mxtorch.kvstore.ps (the parameter server) is missing")
PUSHPULL = str(SCRIPTS / "ps_pushpull.py")
SMALL_BOUND = {"MXNET_KVSTORE_BIGARRAY_BOUND": "5"}  # the 10-element key is split over the servers


def check_pushpull_output(stdout: str, workers: int, servers: int) -> None:
    total = workers * (workers + 1) / 2  # sum over ranks of rank + 1
    for rank in range(workers):
        (line,) = prefixed(stdout, f"worker{rank}")
        assert line == (f"rank={rank} workers={workers} servers={servers} type=dist_sync id={rank} "
                        f"small={[total] * 3} big={[i * total for i in range(10)]}")


@needs_ps
@pytest.mark.slow  # the split-key job below launches the same roles and more
def test_launch_two_workers_one_server_push_pull():
    r = mxtorch_cli("launch", "-n", "2", "-s", "1", "python", PUSHPULL, "dist_sync")
    assert r.returncode == 0, r.stderr[-3000:]
    check_pushpull_output(r.stdout, 2, 1)
    assert "did not exit" not in r.stderr  # the scheduler and the server ended on their own


@needs_ps
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_launch_two_servers_share_a_split_key():
    r = mxtorch_cli("launch", "-n", "2", "-s", "2", "--env", "MXNET_KVSTORE_BIGARRAY_BOUND:5", "python",
                    PUSHPULL, "dist_sync")
    assert r.returncode == 0, r.stderr[-3000:]
    check_pushpull_output(r.stdout, 2, 2)
    assert "did not exit" not in r.stderr


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@needs_ps
def test_same_command_mode_the_script_becomes_scheduler_and_server():
    r = mxtorch_cli("launch", "-n", "2", "-s", "1", "--ps-roles", "same-command", "python", PUSHPULL,
                    "dist_sync")
    assert r.returncode == 0, r.stderr[-3000:]
    check_pushpull_output(r.stdout, 2, 1)
    # the scheduler and the server served, then left: they never ran the rest of the script
    assert not prefixed(r.stdout, "scheduler") and not prefixed(r.stdout, "server0")
    assert "did not exit" not in r.stderr


@needs_ps
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_server_with_a_bad_variable_fails_the_launch_with_its_error(tmp_path):
    r = mxtorch_cli("launch", "-n", "2", "-s", "1", "--env-server", "MXTORCH_PS_HEARTBEAT_S:often", "python",
                    PUSHPULL, "dist_sync", tmp=tmp_path)
    assert r.returncode == 2, r.stderr[-3000:]
    # stopped because the server failed, not when the workers gave up waiting for it (no timing verdict:
    # the machine may be loaded)
    assert "timed out" not in r.stderr.lower() and "timeout" not in r.stderr.lower(), r.stderr[-3000:]
    report = r.stderr[r.stderr.index("mxtorch launch: the server 0 failed (exit code 2"):]
    assert "MXTORCH_PS_HEARTBEAT_S" in report and "often" in report  # the server's own error message
    assert "rank=" not in r.stdout


@needs_ps
@pytest.mark.parametrize("role", ["scheduler", "server"])
def test_role_commands_report_bad_variables(role):
    base = {k: v for k, v in os.environ.items() if not k.startswith("DMLC_")}
    env = {**base, "DMLC_NUM_WORKER": "2", "DMLC_NUM_SERVER": "1", "DMLC_PS_ROOT_URI": "127.0.0.1",
           "DMLC_PS_ROOT_PORT": "port"}
    r = subprocess.run([PY, "-m", "mxtorch.cli.main", role], capture_output=True, text=True, timeout=60,
                       env=env)
    assert r.returncode == 2
    assert r.stderr.startswith(f"mxtorch {role}: error: ") and "DMLC_PS_ROOT_PORT" in r.stderr
    assert "'port'" in r.stderr and "Traceback" not in r.stderr


@needs_ps
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_job_started_by_hand_with_the_role_commands(processes):
    """`mxtorch scheduler` / `mxtorch server` and two workers, with only DMLC_* variables (MXNet's way
    of starting a job without a launcher); the scheduler's port comes from --root-port."""
    port = free_port()
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("DMLC_") and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    base.update({"DMLC_NUM_WORKER": "2", "DMLC_NUM_SERVER": "1", "DMLC_PS_ROOT_URI": "127.0.0.1",
                 "DMLC_PS_ROOT_PORT": "1", "OMP_NUM_THREADS": "1", "MXTORCH_DIST_TIMEOUT": "60"})
    procs = [processes.start([PY, "-m", "mxtorch.cli.main", role, "--root-port", str(port)], env=base)
             for role in ("scheduler", "server")]
    workers = {**base, "DMLC_ROLE": "worker", "DMLC_PS_ROOT_PORT": str(port)}
    procs += [processes.start([PY, PUSHPULL, "dist_sync"], env={**workers, "DMLC_WORKER_ID": str(rank)})
              for rank in (0, 1)]
    outs = [p.communicate(timeout=JOB_TIMEOUT) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [e[-2000:] for _, e in outs]
    lines = [f"[worker{rank}]:{outs[2 + rank][0].strip()}" for rank in (0, 1)]
    check_pushpull_output("\n".join(lines), 2, 1)
