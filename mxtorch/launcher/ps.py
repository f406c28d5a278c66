"""The parameter-server side of a job: a scheduler and ``-s`` servers beside the workers.

``mxtorch launch -n 4 -s 2 python train.py --kvstore dist_sync`` runs, on this machine, one
scheduler and two servers (``python -m mxtorch.cli.main scheduler`` / ``server``, which call
:func:`mxtorch.kvstore.ps.run_scheduler` / ``run_server``) and then the four workers through
torchrun's agent, exactly as without servers.  Every process gets MXNet's variables:

=====================  ==================================================================
``DMLC_ROLE``          ``scheduler``, ``server`` or ``worker``
``DMLC_PS_ROOT_URI``   the scheduler's address (127.0.0.1 locally, the first host remotely)
``DMLC_PS_ROOT_PORT``  the scheduler's port (``--ps-root-port``; default: a free port
                       locally, ``--master-port + 1`` on a cluster)
``DMLC_NUM_SERVER``    ``-s``;  ``DMLC_NUM_WORKER``: ``-n``
``DMLC_SERVER_ID``     servers: 0 .. S-1
``DMLC_NODE_HOST``     local servers: 127.0.0.1 (the address they advertise)
``DMLC_WORKER_ID``     workers: their ``RANK`` (under mpirun/srun, set by ``python -m
                       mxtorch.launcher``)
``MXTORCH_PS_SECRET``  every process: the job's secret (the launcher's own if set, else a
                       fresh one), never on a command line (:mod:`.secret`)
=====================  ==================================================================

``--ps-roles same-command`` is MXNet's ``tools/launch.py`` way instead: the scheduler and the
servers run the workers' own command with ``DMLC_ROLE=scheduler|server``, and the script
becomes its role when it creates the ``dist_*`` KVStore.

The job's exit status is the workers'.  The scheduler ends once every worker has said
goodbye, and stops the servers; whatever is still running :data:`PS_EXIT_GRACE_S` seconds
after the workers finished is stopped and reported.  A scheduler or server that fails while
the workers run (non-zero exit, or killed) stops the job at once, with a report naming it
and the end of its stderr.

On a cluster (``--launcher ssh|mpi|slurm``) the scheduler and the servers run on the first
host; :func:`remote_ps_commands` builds their command lines.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

from ..distributed.env import (
    DMLC_NODE_HOST,
    DMLC_NUM_SERVER,
    DMLC_NUM_WORKER,
    DMLC_PS_ROOT_PORT,
    DMLC_PS_ROOT_URI,
    DMLC_ROLE,
    DMLC_SERVER_ID,
    DMLC_WORKER_ID,
    MXTORCH_PS_SECRET,
    RANK,
)
from .job import JobSpec, LaunchError, resolve_command, worker_environment
from .remote import Host, _exports, _port, assign_workers
from .secret import READ_SECRET, job_secret, secret_environment

__all__ = ["PSRole", "ServerDied", "ps_roles", "role_environment", "with_worker_id", "worker_spec",
           "check_available", "remote_ps_commands", "local_ps_commands", "launch_local_with_servers",
           "PS_EXIT_GRACE_S"]

PS_EXIT_GRACE_S = 10.0
"""How long the scheduler and servers get to end on their own after the workers finished."""

_STOP_GRACE_S = 5.0  # SIGTERM -> SIGKILL
_POLL_S = 0.1
_TAIL_LINES = 30
_WAKE_SIGNAL = signal.SIGUSR1  # how the watcher thread interrupts the launcher's main thread

# Run as `sh -c SCRIPT mxtorch-worker CMD...`: sets DMLC_WORKER_ID from the RANK that torchrun (or
# `python -m mxtorch.launcher`) gave this worker, then becomes CMD (same pid, so signals and exit
# codes are the command's own).  A shell costs milliseconds; a Python wrapper would import torch.
_WORKER_ID_SCRIPT = f'{DMLC_WORKER_ID}="${RANK}"; export {DMLC_WORKER_ID}; exec "$@"'


@dataclasses.dataclass(frozen=True)
class PSRole:
    """One scheduler or server process: what it runs and the variables it gets."""

    role: str  # 'scheduler' or 'server' ('worker': a worker of an elastic job, :mod:`.ps_elastic`)
    index: int  # server rank (worker: its slot); 0 for the scheduler
    command: list[str]
    env: dict[str, str]

    @property
    def name(self) -> str:
        """How reports call it: ``scheduler``, ``server 1``."""
        return "scheduler" if self.role == "scheduler" else f"{self.role} {self.index}"

    @property
    def label(self) -> str:
        """Prefix of its output lines, as torchrun's ``[worker1]:``."""
        return self.name.replace(" ", "")


class ServerDied(BaseException):
    """The scheduler or a server ended (non-zero exit or killed) while the workers still ran.

    Raised in the launcher's main thread from a signal handler, possibly inside torch
    elastic's start-up code: it derives from BaseException (as KeyboardInterrupt does) so
    that no ``except Exception`` there takes it for a connection error and retries.
    """


def role_environment(spec: JobSpec, role: str, root_uri: str, root_port: int,
                     server_id: int | None = None) -> dict[str, str]:
    """Variables of a scheduler (``role='scheduler'``) or server process (user values last).

    ``--env`` (``spec.env``) reaches both; ``--env-server`` (``spec.server_env``) the servers.
    """
    env = {
        DMLC_ROLE: role,
        DMLC_NUM_WORKER: str(spec.num_workers),
        DMLC_NUM_SERVER: str(spec.num_servers),
        DMLC_PS_ROOT_URI: root_uri,
        DMLC_PS_ROOT_PORT: str(root_port),
    }
    if server_id is not None:
        env[DMLC_SERVER_ID] = str(server_id)
    env.update(spec.env)
    if role == "server":
        env.update(spec.server_env)
    return env


def _role_command(spec: JobSpec, role: str, python: str, resolve: bool) -> list[str]:
    if spec.ps_roles == "same-command":
        return resolve_command(spec.command) if resolve else list(spec.command)
    return [python, "-m", "mxtorch.cli.main", role]


def ps_roles(spec: JobSpec, root_uri: str, root_port: int, *, python: str = sys.executable,
             resolve: bool = True) -> list[PSRole]:
    """The scheduler, then servers 0 .. S-1, of ``spec`` (empty without servers).

    ``resolve``: turn a bare ``python`` of a same-command job into this interpreter (local
    jobs); remote hosts run the command as given.
    """
    if not spec.num_servers:
        return []
    roles = [PSRole("scheduler", 0, _role_command(spec, "scheduler", python, resolve),
                    role_environment(spec, "scheduler", root_uri, root_port))]
    for i in range(spec.num_servers):
        roles.append(PSRole("server", i, _role_command(spec, "server", python, resolve),
                            role_environment(spec, "server", root_uri, root_port, server_id=i)))
    return roles


def with_worker_id(command: Sequence[str]) -> list[str]:
    """``command`` run so that it sees ``DMLC_WORKER_ID`` = its ``RANK``."""
    return ["/bin/sh", "-c", _WORKER_ID_SCRIPT, "mxtorch-worker", *command]


def worker_spec(spec: JobSpec, resolve: bool = False) -> JobSpec:
    """The job as torchrun runs its workers: with servers, each also gets ``DMLC_WORKER_ID``.

    ``resolve``: first turn a bare ``python`` into this interpreter (local jobs; remote hosts
    find it on their PATH).  Under mpirun and srun the entry point ``python -m
    mxtorch.launcher`` sets ``DMLC_WORKER_ID`` itself.
    """
    if not spec.num_servers:
        return spec
    command = resolve_command(spec.command) if resolve else spec.command
    return dataclasses.replace(spec, command=with_worker_id(command))


def check_available(spec: JobSpec) -> None:
    """Raise :class:`LaunchError` if this mxtorch cannot run parameter servers."""
    if not spec.num_servers:
        return
    try:
        from ..kvstore import ps  # noqa: F401
    except ImportError as e:
        raise LaunchError(f"-s {spec.num_servers}: this mxtorch has no parameter server "
                          f"(mxtorch.kvstore.ps cannot be imported: {e}); launch with -s 0 and let the "
                          "workers use --kvstore allreduce (or horovod)") from e


# ---- cluster command lines -----------------------------------------------------------------------
def remote_ps_commands(launcher: str, spec: JobSpec, hosts: Sequence[Host] | None, *,
                       python: str = sys.executable, workdir: str | None = None) -> list[list[str]]:
    """Command lines starting the scheduler and the servers on the first host of ``hosts``.

    ``launcher`` is 'ssh', 'mpi' (one ``mpirun -np 1`` each) or 'slurm' (one ``srun`` step
    each, ``--overlap`` with the workers' step; without ``hosts``, on the allocation's first
    node, whose name the entry point ``python -m mxtorch.launcher`` finds in Slurm's node list).
    """
    if not spec.num_servers:
        return []
    first = assign_workers(hosts, spec.num_workers)[0][0] if hosts else None
    uri = first.address if first is not None else ""
    roles = ps_roles(spec, uri, _ps_port(spec), python=python, resolve=False)
    if launcher == "ssh":
        if first is None:
            raise LaunchError("--launcher ssh needs a hostfile: -H FILE (one host per line)")
        # the secret comes on ssh's stdin (run_commands(..., stdin=...)), never on this line
        cd = f"{READ_SECRET} && cd {shlex.quote(workdir or os.getcwd())}"
        return [["ssh", "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes", first.name,
                 f"{cd} && {_exports(r.env)} && {shlex.join(r.command)}"] for r in roles]
    if launcher == "mpi":
        if first is None:
            raise LaunchError("--launcher mpi needs a hostfile: -H FILE (one host per line)")
        out = []
        for r in roles:
            cmd = ["mpirun", "-np", "1", "-H", f"{first.name}:1"]
            for k, v in r.env.items():
                cmd += ["-x", f"{k}={v}"]
            out.append([*cmd, "-x", MXTORCH_PS_SECRET, *r.command])  # its value: from mpirun's environment
        return out
    if launcher == "slurm":
        out = []
        for r in roles:
            env = dict(r.env)
            where = ["--nodelist=" + first.address] if first is not None else ["--relative=0"]
            if first is None:
                del env[DMLC_PS_ROOT_URI]  # the entry point sets it to this node's name
            bad = [k for k, v in env.items() if "," in v]
            if bad:
                raise LaunchError(f"srun --export cannot carry values with ',' (in {', '.join(bad)}): "
                                  "set them in the job script instead")
            out.append(["srun", "--ntasks=1", "--nodes=1", *where, "--overlap", "--kill-on-bad-exit=1",
                        "--export=ALL," + ",".join(f"{k}={v}" for k, v in env.items()),
                        python, "-m", "mxtorch.launcher", *r.command])
        return out
    raise LaunchError(f"parameter servers cannot be started by the {launcher!r} launcher")


def _ps_port(spec: JobSpec) -> int:
    return spec.ps_root_port if spec.ps_root_port is not None else _port(spec) + 1


def local_ps_commands(spec: JobSpec, master_addr: str = "127.0.0.1") -> list[list[str]]:
    """``env VAR=... COMMAND`` lines equal to the scheduler and servers of a local launch (what
    ``--dry-run`` prints; the ports are :data:`~.job.DEFAULT_MASTER_PORT` ``+ 1`` unless given)."""
    out = []
    for r in ps_roles(spec, master_addr, _ps_port(spec)):
        env = dict(r.env)
        if r.role == "server":
            env.setdefault(DMLC_NODE_HOST, master_addr)
        out.append(["env", *(f"{k}={v}" for k, v in env.items()), *r.command])
    return out


# ---- local jobs ------------------------------------------------------------------------------------
class _Node:
    """A running scheduler or server: its process, its output copied line by line."""

    def __init__(self, role: PSRole, env: Mapping[str, str], log_dir: str, stdout: IO[str],
                 stderr: IO[str]) -> None:
        self.role = role
        self.stderr_path = os.path.join(log_dir, f"{role.label}.stderr")
        self.stdout_path = os.path.join(log_dir, f"{role.label}.stdout")
        self.started = time.monotonic()
        self.ended: float | None = None
        self.stopped = False  # the launcher terminated it
        try:
            self.proc = subprocess.Popen(role.command, env=dict(env), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as e:
            raise LaunchError(f"cannot start the {role.name} ({shlex.join(role.command)}): "
                              f"{e.strerror or e}") from e
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.threads = [
            threading.Thread(target=_copy_lines, args=(src, path, dest, role.label), daemon=True,
                             name=f"mxtorch-{role.label}-{kind}")
            for kind, src, path, dest in (("stdout", self.proc.stdout, self.stdout_path, stdout),
                                          ("stderr", self.proc.stderr, self.stderr_path, stderr))
        ]
        for t in self.threads:
            t.start()

    def poll(self) -> int | None:
        code = self.proc.poll()
        if code is not None and self.ended is None:
            self.ended = time.monotonic()
        return code

    def failed(self) -> bool:
        """It ended on its own with a non-zero status or a signal (not stopped by the launcher)."""
        code = self.poll()
        return code is not None and code != 0 and not self.stopped

    def drain(self, timeout: float = 2.0) -> None:
        """Wait until its output is copied (the process has ended)."""
        for t in self.threads:
            t.join(timeout)

    def stderr_tail(self) -> str:
        self.drain()
        try:
            with open(self.stderr_path, errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            lines = []
        if not lines:
            return "(it wrote nothing to stderr)"
        shown = lines[-_TAIL_LINES:]
        head = "" if len(shown) == len(lines) else f"(last {len(shown)} of {len(lines)} lines)\n"
        return head + "\n".join(shown)

    def describe_exit(self) -> str:
        code = self.proc.returncode
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"


def _copy_lines(stream: IO[bytes], path: str, dest: IO[str], label: str) -> None:
    # Whole lines, prefixed like torchrun's worker lines, so that outputs never interleave mid-line.
    with open(path, "wb") as log:
        for raw in iter(stream.readline, b""):
            log.write(raw)
            log.flush()
            line = raw.decode(errors="replace").rstrip("\n")
            with contextlib.suppress(ValueError, OSError):  # the destination may be closed at exit
                dest.write(f"[{label}]:{line}\n")
                dest.flush()
    stream.close()


class _LocalServers:
    """The scheduler and servers of a local job, and the watcher that stops the job if one fails."""

    def __init__(self, roles: Sequence[PSRole], base_env: Mapping[str, str], log_dir: str) -> None:
        self.log_dir = log_dir
        self.nodes: list[_Node] = []
        try:
            for r in roles:
                self.nodes.append(_Node(r, {**base_env, **r.env}, log_dir, sys.stdout, sys.stderr))
        except BaseException:
            self.stop_now()
            raise
        self._lock = threading.Lock()
        self._armed = False
        self._done = threading.Event()
        self.failure: _Node | None = None

    def first_failure(self) -> _Node | None:
        """The node that failed first (by the time it was seen to end), if any."""
        failed = [n for n in self.nodes if n.failed()]
        return min(failed, key=lambda n: n.ended or 0.0) if failed else None

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """While inside: a failing node raises :class:`ServerDied` in this (the main) thread."""
        main = threading.current_thread() is threading.main_thread()
        previous: Any = None
        if main:
            previous = signal.signal(_WAKE_SIGNAL, self._on_wake)
            self._armed = True
        watcher = threading.Thread(target=self._watch, daemon=True, name="mxtorch-ps-watch")
        watcher.start()
        try:
            yield
        finally:
            with self._lock:  # no wake-up signal can be sent after this
                self._armed = False
            self._done.set()
            watcher.join()
            if main:
                signal.signal(_WAKE_SIGNAL, previous)

    def _watch(self) -> None:
        main_id = threading.main_thread().ident
        while not self._done.wait(_POLL_S):
            node = self.first_failure()
            if node is None:
                continue
            with self._lock:
                self.failure = node
                if self._armed and main_id is not None:
                    signal.pthread_kill(main_id, _WAKE_SIGNAL)
            return

    def _on_wake(self, signum: int, frame: Any) -> None:
        if self._armed and self.failure is not None:
            self._armed = False  # raise once
            raise ServerDied(f"the {self.failure.role.name} failed")

    def finish(self, workers_ok: bool, out: IO[str]) -> None:
        """After the workers: give the nodes time to end on their own (when the workers
        succeeded), stop the rest, and say so."""
        if workers_ok:
            deadline = time.monotonic() + PS_EXIT_GRACE_S
            while time.monotonic() < deadline and any(n.poll() is None for n in self.nodes):
                time.sleep(_POLL_S)
            stuck = [n for n in self.nodes if n.poll() is None]
            if stuck:
                names = ", ".join(f"{n.role.name} (pid {n.proc.pid})" for n in stuck)
                print(f"mxtorch launch: the workers finished but {names} did not exit within "
                      f"{PS_EXIT_GRACE_S:g} s; stopped", file=out, flush=True)
        self.stop_now()
        if workers_ok:
            for n in self.nodes:
                if n.failed():
                    print(f"mxtorch launch: note: the {n.role.name} ended with {n.describe_exit()} (the "
                          f"workers succeeded):\n{_indent(n.stderr_tail())}", file=out, flush=True)

    def stop_now(self) -> None:
        """SIGTERM every node still running, SIGKILL those alive :data:`_STOP_GRACE_S` later."""
        alive = [n for n in self.nodes if n.proc.poll() is None]
        for n in alive:
            n.stopped = True
            with contextlib.suppress(ProcessLookupError):
                n.proc.terminate()
        deadline = time.monotonic() + _STOP_GRACE_S
        for n in alive:
            try:
                n.proc.wait(max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                n.proc.kill()
                n.proc.wait()
        for n in self.nodes:
            n.poll()
            n.drain()


def _child_pids() -> set[int]:
    """The pids of this process's living children (Linux: from /proc; elsewhere an empty set)."""
    me, found = os.getpid(), set[int]()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # it ended meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses; split after the last ')'
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == me and fields[0] != b"Z":
            found.add(int(entry))
    return found


def _stop_stray_children(exclude: set[int], grace: float = _STOP_GRACE_S) -> list[int]:
    """SIGTERM (then, after ``grace`` seconds, SIGKILL) and reap every child of this process not in
    ``exclude`` (the children it had before the workers were started); returns their pids.

    :class:`ServerDied` can interrupt torch elastic while it starts the workers, after a worker
    process exists but before elastic has recorded it, so elastic's own shutdown misses that
    worker; left alone it would run on (and hold the launcher's output open) after the job was
    declared failed.
    """
    pids = sorted(_child_pids() - exclude)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    waiting = set(pids)
    while waiting:
        for pid in list(waiting):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid  # reaped elsewhere (a Popen object that still knew it)
            if done:
                waiting.discard(pid)
        if not waiting:
            break
        if time.monotonic() >= deadline:
            for pid in waiting:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
            break
        time.sleep(_POLL_S)
    return pids


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _exit_status(code: int | None) -> int:
    if code is None or code == 0:
        return 1
    return min(code, 255) if code > 0 else 128 - code


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _failure_report(node: _Node, servers: _LocalServers, elapsed: float, stopped_job: bool) -> str:
    what = "while the workers were running; the job was stopped" if stopped_job else "during the job"
    lines = [f"mxtorch launch: the {node.role.name} failed ({node.describe_exit()}, pid {node.proc.pid}) "
             f"after {elapsed:.1f} s {what}.",
             f"---- {node.role.name} ({shlex.join(node.role.command)}) ----",
             node.stderr_tail(), "----"]
    for other in servers.nodes:
        if other is not node and other.failed():
            last = other.stderr_tail().splitlines()[-1:]
            lines.append(f"the {other.role.name} also failed ({other.describe_exit()}): "
                         f"{last[0] if last else ''}")
    lines.append(f"scheduler and server logs: {servers.log_dir}")
    return "\n".join(lines)


def launch_local_with_servers(spec: JobSpec, *, master_addr: str = "127.0.0.1",
                              report: IO[str] | None = None) -> int:
    """Run ``spec`` on this machine: its scheduler and servers, then its workers
    (:func:`mxtorch.launcher.launch_local`); returns the workers' exit status, or the failed
    scheduler's or server's when one failed first.
    """
    from .local import launch_local

    out = report if report is not None else sys.stderr
    if not spec.num_servers:
        return launch_local(spec, master_addr=master_addr, report=out)
    if spec.ps_roles == "separate":
        check_available(spec)
    if spec.ps_root_port is None:
        spec = dataclasses.replace(spec, ps_root_port=_free_port(master_addr))
    seen = worker_environment(spec, master_addr, spec.ps_root_port or 0)  # --env may name other values
    if not seen[DMLC_PS_ROOT_PORT].isdigit():
        raise LaunchError(f"--env {DMLC_PS_ROOT_PORT}:{seen[DMLC_PS_ROOT_PORT]}: not a port number; "
                          "use --ps-root-port PORT")
    roles = ps_roles(spec, seen[DMLC_PS_ROOT_URI], int(seen[DMLC_PS_ROOT_PORT]))
    hidden = secret_environment(job_secret(spec))  # every process of the job, no command line
    base = {**os.environ, **hidden}
    if "OMP_NUM_THREADS" not in base:
        base["OMP_NUM_THREADS"] = "1"  # as for the workers: the processes share this machine's cores
    for r in roles:
        if r.role == "server":  # advertise the loopback address the workers reach it on
            r.env.setdefault(DMLC_NODE_HOST, master_addr)
    log_dir = tempfile.mkdtemp(prefix="mxtorch-ps-")
    start = time.monotonic()
    keep_logs = False
    try:
        servers = _LocalServers(roles, base, log_dir)
        before = _child_pids()  # the servers, and whatever else the calling program runs
        try:
            with servers.watching():
                code = launch_local(worker_spec(spec, resolve=True), master_addr=master_addr, report=out,
                                    hidden_env=hidden)
        except ServerDied:
            code = None
            # workers that elastic started but had not recorded when it was interrupted
            _stop_stray_children(before | {n.proc.pid for n in servers.nodes})
        except BaseException:
            servers.stop_now()
            raise
        failed = servers.failure or servers.first_failure()
        if failed is not None and (code is None or code != 0):
            servers.stop_now()
            keep_logs = True
            elapsed = (failed.ended or time.monotonic()) - start
            print(_failure_report(failed, servers, elapsed, stopped_job=code is None),
                  file=out, flush=True)
            return code if code else _exit_status(failed.proc.returncode)
        servers.finish(code == 0, out)
        keep_logs = any(n.failed() for n in servers.nodes)
        if keep_logs:
            print(f"scheduler and server logs: {log_dir}", file=out, flush=True)
        return int(code or 0)
    finally:
        if not keep_logs:
            shutil.rmtree(log_dir, ignore_errors=True)
