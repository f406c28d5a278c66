"""Jobs with parameter servers are authenticated by default: every launcher gives each process of the
job the job's ``MXTORCH_PS_SECRET`` through its environment, never its command line, and a
process without it cannot join.

Local and ssh jobs run for real (ssh through a stand-in ``ssh`` on PATH that runs the remote
command in a local shell, as sshd would, stdin included); the processes report what they see
in their own environment and in /proc (tests/launch_scripts/ps_secret_roles.py).
"""

import hashlib
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mxtorch.cli.main import main
from mxtorch.distributed.testing import free_port
from mxtorch.launcher import JobSpec, LaunchError, remote
from mxtorch.launcher.secret import READ_SECRET, job_secret

SCRIPTS = Path(__file__).resolve().parent / "launch_scripts"
ROLES = str(SCRIPTS / "ps_secret_roles.py")
PY = sys.executable
JOB_TIMEOUT = 120
USER_SECRET = "a-secret-the-user-exported-0123456789"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()[:16]


def _clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "MXTORCH_PS_"))}
    return {**env, "MXTORCH_DIST_TIMEOUT": "60", "TMPDIR": str(tmp), **extra}


def _reports(stdout: str) -> dict[str, dict[str, str]]:
    """``role=LABEL secret=... in_argv=...`` lines (with or without a ``[label]:`` prefix) by label."""
    out = {}
    for line in stdout.splitlines():
        text = line.partition("]:")[2] if line.startswith("[") else line
        if text.startswith("role="):
            fields = dict(part.split("=", 1) for part in text.split())
            out[fields["role"]] = fields
    return out


def _check_job(r: subprocess.CompletedProcess, workers: int, servers: int, expected: str | None,
               holders: int = 0) -> str:
    """Check every process's report; ``holders``: processes beyond the job's that hold the secret."""
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    reports = _reports(r.stdout)
    labels = {"scheduler", *(f"server{i}" for i in range(servers)), *(f"worker{i}" for i in range(workers))}
    assert set(reports) == labels, r.stdout
    digests = {f["secret"] for f in reports.values()}
    assert len(digests) == 1 and "none" not in digests, reports  # one secret, in every process
    assert all(f["in_argv"] == "False" for f in reports.values()), reports
    # worker 0 found every process holding the secret in /proc, and none has it on its command line
    # the job's own processes must all be found; a launcher process beyond them (``holders``, e.g. the
    # workers' torchrun agent) is counted when the scan sees it, which its start-up order does not fix
    m = re.search(r"found=(\d+) leaked=(\d+)", r.stdout)
    assert m is not None, r.stdout
    assert len(labels) <= int(m.group(1)) <= len(labels) + holders and m.group(2) == "0", r.stdout
    (digest,) = digests
    if expected is not None:
        assert digest == _digest(expected)
    return digest


# ---- the secret, and where it may not go ---------------------------------------------------------
def test_a_job_secret_is_the_users_or_a_fresh_one():
    spec = JobSpec(["x"], num_workers=2, num_servers=1)
    fresh = job_secret(spec, {})
    assert len(fresh) == 64 and int(fresh, 16) >= 0 and job_secret(spec, {}) != fresh
    assert job_secret(spec, {"MXTORCH_PS_SECRET": USER_SECRET}) == USER_SECRET
    assert job_secret(JobSpec(["x"], 2, 0), {}) is None  # allreduce jobs: torch.distributed takes none


@pytest.mark.parametrize("flag", ["--env", "--env-worker", "--env-server"])
def test_the_secret_cannot_be_given_on_the_command_line(flag, capsys):
    code = main(["launch", "-n", "1", "-s", "1", flag, "MXTORCH_PS_SECRET:hunter2", "--dry-run", "python",
                 "t.py"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"mxtorch launch: error: {flag} MXTORCH_PS_SECRET:...: ")
    assert "export MXTORCH_PS_SECRET" in err and "hunter2" not in err
    with pytest.raises(LaunchError, match="can be read by every user"):
        JobSpec(["x"], 1, 1, server_env={"MXTORCH_PS_SECRET": "s"})


@pytest.mark.parametrize("launcher", ["local", "ssh", "mpi", "slurm"])
def test_dry_runs_never_show_the_secret(launcher, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MXTORCH_PS_SECRET", USER_SECRET)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts").write_text("alpha slots=2\n")
    host_args = [] if launcher == "local" else ["-H", "hosts"]
    assert main(["launch", "-n", "2", "-s", "1", "--launcher", launcher, *host_args, "--dry-run",
                 "python", "t.py"]) == 0
    out, err = capsys.readouterr()
    assert USER_SECRET not in out + err
    assert "every process of the job also gets MXTORCH_PS_SECRET" in err
    lines = [shlex.split(line) for line in out.splitlines()]
    assert len(lines) == 3  # scheduler, server, workers
    if launcher == "ssh":  # every remote shell first reads the secret from ssh's stdin
        assert all(line[-1].startswith(READ_SECRET + " && cd ") for line in lines)
    if launcher == "mpi":  # the name only: mpirun sends its own environment's value
        assert all(line[line.index(PY) - 2:line.index(PY)] == ["-x", "MXTORCH_PS_SECRET"] for line in lines)
    if launcher == "slurm":
        assert all(any(w.startswith("--export=ALL,") for w in line) for line in lines)


def test_remote_commands_receive_the_secret_on_stdin_or_in_their_environment(tmp_path):
    show = [PY, "-c", "import os, sys; print(os.environ.get('MXTORCH_PS_SECRET'), sys.stdin.readline())"]
    log = tmp_path / "out"
    for launcher, expected in (("ssh", "None s3cr3t"), ("mpi", "s3cr3t "), ("slurm", "s3cr3t ")):
        with open(log, "w") as f, _stdout_to(f):
            assert remote.run_commands([show], **remote.secret_delivery(launcher, "s3cr3t")) == 0
        assert log.read_text().strip() == expected.strip(), launcher
    assert remote.secret_delivery("ssh", None) == {}


class _stdout_to:
    """Point this process's fd 1 (which subprocesses inherit) at ``f`` for a while."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        sys.stdout.flush()
        self.saved = os.dup(1)
        os.dup2(self.f.fileno(), 1)

    def __exit__(self, *exc):
        os.dup2(self.saved, 1)
        os.close(self.saved)


# ---- real jobs ----------------------------------------------------------------------------------------
def _launch(tmp: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "mxtorch.cli.main", "launch", *args], capture_output=True, text=True,
                          timeout=JOB_TIMEOUT, env=env or _clean_env(tmp))


def test_local_job_processes_hold_a_fresh_secret_in_their_environment_only(tmp_path):
    done = tmp_path / "done"
    roles = ["--ps-roles", "same-command", "--env", f"SECRET_TEST_DONE:{done}", "python", ROLES]
    r = _launch(tmp_path, "-n", "2", "-s", "2", *roles)
    first = _check_job(r, workers=2, servers=2, expected=None)
    # a user's own secret is kept (processes started by hand can then join the job)
    done.unlink()
    env = _clean_env(tmp_path, MXTORCH_PS_SECRET=USER_SECRET)
    r = _launch(tmp_path, "-n", "1", "-s", "1", *roles, env=env)
    # the launcher holds it too: the user gave it
    assert _check_job(r, workers=1, servers=1, expected=USER_SECRET, holders=1) != first


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_ssh_job_processes_read_the_secret_from_stdin(tmp_path):
    shim = tmp_path / "bin"
    shim.mkdir()
    # what sshd does with `ssh HOST COMMAND`: the user's shell runs COMMAND, stdin forwarded
    (shim / "ssh").write_text('#!/bin/sh\nfor last; do :; done\nexec /bin/sh -c "$last"\n')
    (shim / "ssh").chmod(0o755)
    (tmp_path / "hosts").write_text("localhost slots=2\n")
    done = tmp_path / "done"
    env = _clean_env(tmp_path, PATH=f"{shim}{os.pathsep}{os.environ['PATH']}")
    r = _launch(tmp_path, "--launcher", "ssh", "-H", str(tmp_path / "hosts"), "-n", "2", "-s", "1",
                "--master-port", str(free_port()), "--ps-root-port", str(free_port()), "--ps-roles",
                "same-command", "--env", f"SECRET_TEST_DONE:{done}", PY, ROLES, env=env)
    _check_job(r, workers=2, servers=1, expected=None, holders=1)  # and the workers' torchrun agent


def _has_ps() -> bool:
    try:
        import mxtorch.kvstore.ps  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _has_ps(), reason="mxtorch.kvstore.ps (the parameter server) is missing")
def test_a_launched_job_refuses_a_process_that_does_not_know_its_secret(tmp_path):
    r = _launch(tmp_path, "-n", "1", "-s", "1", "python", str(SCRIPTS / "ps_intruder.py"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = [line.partition("]:")[2] for line in r.stdout.splitlines() if line.startswith("[worker0]:")]
    assert lines[0].startswith("intruder without a secret: refused: ")
    assert "requires a shared secret: set MXTORCH_PS_SECRET" in lines[0], lines
    assert lines[1].startswith("intruder with a wrong secret: refused: ")
    assert "does not know this job's MXTORCH_PS_SECRET" in lines[1], lines
    # the scheduler itself refuses a made-up answer to its challenge
    assert lines[2].startswith("intruder with a forged proof: refused: CHALLENGE then ERROR: "), lines
    assert "authentication failed: wrong MXTORCH_PS_SECRET" in lines[2]
    assert lines[3] == "job: sum=[1.0, 1.0]"  # the job itself went on


def _job_processes(marker: str) -> dict[int, tuple[str | None, bytes]]:
    """pid -> (its MXTORCH_PS_SECRET, its command line) of each process whose environment holds ``marker``."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read()
        except OSError:
            continue
        if env.get(b"SECRET_TEST_MARK") == marker.encode():
            secret = env.get(b"MXTORCH_PS_SECRET")
            found[int(pid)] = (secret.decode() if secret is not None else None, argv)
    return found


@pytest.mark.slow  # a training run; its launcher (launch_local_with_servers) is the local test's
@pytest.mark.skipif(not _has_ps(), reason="mxtorch.kvstore.ps (the parameter server) is missing")
def test_train_with_servers_gives_its_processes_a_secret_off_their_command_lines(tmp_path):
    import mxtorch as mx

    marker = os.urandom(8).hex()
    args = ["train", "--workers", "1", "--servers", "1", "--kvstore", "dist_sync", "--model", "mlp",
            "--data-root", mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT, "--epochs", "1", "--batch-size",
            "256", "--no-progress", "--output", str(tmp_path / "out")]
    job = subprocess.Popen([PY, "-m", "mxtorch.cli.main", *args], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, env=_clean_env(tmp_path, SECRET_TEST_MARK=marker))
    seen: dict[int, tuple[str | None, bytes]] = {}
    try:
        while job.poll() is None:  # the job's processes, as they come and go
            seen.update(_job_processes(marker))
            time.sleep(0.2)
    finally:
        _, err = job.communicate(timeout=JOB_TIMEOUT)
    assert job.returncode == 0, err[-3000:]
    roles = {"scheduler": [], "server": [], "train": []}
    for secret, argv in seen.values():
        words = argv.split(b"\0")
        for role in roles:
            if role.encode() in words:
                roles[role].append(secret)
    # the launching `mxtorch train` holds none; its scheduler, server and worker hold one, the same
    assert roles["scheduler"] and roles["server"] and len(roles["train"]) >= 2, seen
    secrets_seen = {s for s in roles["scheduler"] + roles["server"] + roles["train"] if s is not None}
    assert len(secrets_seen) == 1 and len(next(iter(secrets_seen))) == 64, seen
    assert roles["train"].count(None) == 1  # the launcher itself
    assert all(next(iter(secrets_seen)).encode() not in argv for _, argv in seen.values())
