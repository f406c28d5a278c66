"""Parameter-server benchmark: dist_sync against raw ZeroMQ, 'horovod', dist_async and MXNet 1.9.1.

Prints, measured in one run (every job on 127.0.0.1, started by
:func:`mxtorch.kvstore.ps.testing.ps_cluster`):

(a) push+pull of a model (default 100 MiB of fp32, cut into 25 keys of 4 MiB and, as a second
    layout, kept as one key) from one worker through 1 and 2 servers: ``kv.pushpull`` of
    dist_sync against raw transfers of the same bytes *between the same processes*.  Each
    server process also runs an echo thread for a plain ZeroMQ ROUTER (zero-copy both ways,
    ZeroMQ's default socket options) and one for a plain TCP socket; the worker sends every
    key slice the PS would send (``kv.placement``), to the server the PS would send it to, in
    frames of the same sizes, and waits for all of it to come back; a second raw ZeroMQ transfer
    (ZMQ+cp) also copies each slice it gets back into the tensor it belongs to, as any receiver
    of a key cut into slices must, and shows what that placing costs.  A third raw ZeroMQ
    transfer sends the same bytes in frames of at most ``--frame-mib`` (4 MiB), which shows
    what the PS's frame sizes cost.  All are timed in interleaved rounds (the order rotates);
    medians.  GB/s counts the bytes the worker sends plus those it receives (2 x the model);
    ``PS/ZMQ`` is the median over rounds of raw ZeroMQ time / PS time (target >= 0.8).  Where
    MXNet 1.9.1 is installed in its own venv (``--mxnet-python``, default
    ``.venv-mxnet/bin/python``), MXNet's own dist_sync (1 scheduler, the same number of servers,
    1 worker, DMLC_* on 127.0.0.1) pushes and pulls the same layouts in the same run
    (bench/mxnet_ps_reference.py); without the venv that column is left out, with a note.
(b) the training step of a Gluon ``Trainer`` on 2 workers with ``kvstore='dist_sync'`` (the
    optimizer runs on the servers, MXNet's default) against ``kvstore='horovod'`` (gloo ring
    allreduce during backward, optimizer on the workers): same model (bench/_models.py), same
    processes, interleaved rounds; the ratio, the time spent inside ``trainer.step`` and the
    bytes each moves per step.
(c) the same step with worker 1 sleeping ``--slow-ms`` before every step: steps/s of the fast
    worker, the slow worker and both, for dist_sync and dist_async, each worker timed on its
    own.  In dist_sync every worker runs ``--slow-steps`` steps (they go in lockstep); in
    dist_async every worker runs steps for as long as the slow worker's sleeps of those steps
    take (``--slow-steps`` x ``--slow-ms``).

(d) ZeroMQ's CURVE encryption against plain ZeroMQ, round trips of ``--curve-kib`` (4 KiB to
    64 MiB) between this process and an echo process (bench/_curve.py): what encrypting the
    parameter server's traffic would cost; its HMAC authentication costs nothing per message.
(e) the servers' write-ahead log on against off: a dist_sync Trainer step and a pushpull of
    ``--wal-mib``, one job per setting and round (bench/_wal.py); the ratio on/off.

    python bench/ps.py [--size-mib 100] [--keys 25,1] [--servers 1,2] [--rounds 7] [--reps 2]
                       [--model mlp] [--train-servers 2] [--slow-ms 100] [--parts bw,train,slow,curve,wal]

On a machine with fewer cores than processes the numbers measure shared CPUs as much as the
transport: the load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import torch

MiB = 1 << 20
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MXNET_PYTHON = os.path.join(os.path.dirname(BENCH_DIR), ".venv-mxnet", "bin", "python")
MXNET_VENV_HINT = 'python3 -m venv .venv-mxnet && .venv-mxnet/bin/pip install mxnet==1.9.1 "numpy<1.24"'
_LEN = struct.Struct("<Q")
_RAW_TIMEOUT_S = 120.0


def split_model(total_bytes: int, num_keys: int) -> list[int]:
    """Element counts of ``num_keys`` fp32 keys holding ``total_bytes`` (sizes differ by at most one).

    >>> split_model(100 * MiB, 25)[:2], sum(split_model(100 * MiB, 25)) * 4 == 100 * MiB
    ([1048576, 1048576], True)
    """
    numel = total_bytes // 4
    if num_keys < 1 or numel < num_keys:
        raise ValueError(f"cannot cut {total_bytes} bytes into {num_keys} fp32 keys: use 1..{numel} keys")
    base, extra = divmod(numel, num_keys)
    return [base + (1 if i < extra else 0) for i in range(num_keys)]


# ---- raw transfers: echo threads in the server processes --------------------------------------------
def _zmq_echo(sock: Any) -> None:
    # ROUTER: [identity, header, data] comes in and goes back as is; the data frame is re-sent
    # from the received message (reference counted, no copy).
    import zmq

    try:
        while True:
            sock.send_multipart(sock.recv_multipart(copy=False), copy=False)
    except zmq.ZMQError:
        pass


def _recv_exact(conn: socket.socket, view: memoryview) -> bool:
    got = 0
    while got < len(view):
        n = conn.recv_into(view[got:])
        if n == 0:
            return False
        got += n
    return True


def _tcp_echo_connection(conn: socket.socket) -> None:
    head = bytearray(_LEN.size)
    buf = bytearray(0)
    with conn:
        while _recv_exact(conn, memoryview(head)):
            (n,) = _LEN.unpack(head)
            if len(buf) < n:
                buf = bytearray(n)
            view = memoryview(buf)[:n]
            if not _recv_exact(conn, view):
                return
            conn.sendall(head)
            conn.sendall(view)


def _tcp_echo(listener: socket.socket) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_tcp_echo_connection, args=(conn,), daemon=True).start()


def server_with_echo(port_dir: str, timeout: float) -> None:
    """A PS server process that also echoes raw ZeroMQ and TCP transfers (run by ``ps_cluster``).

    Binds both echo sockets to free ports, writes them to ``port_dir/server<rank>.json``, then
    serves as a parameter server until the job ends (and exits the process).
    """
    import zmq

    from mxtorch.kvstore.ps import become_role

    _watchdog({"timeout": timeout})
    try:
        rank = int(os.environ["DMLC_SERVER_ID"])
        ctx = zmq.Context()
        router = ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.SNDHWM, 0)
        router.setsockopt(zmq.RCVHWM, 0)
        zmq_port = router.bind_to_random_port("tcp://127.0.0.1")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        tmp = os.path.join(port_dir, f".server{rank}.json")
        with open(tmp, "w") as f:
            json.dump({"zmq": zmq_port, "tcp": listener.getsockname()[1]}, f)
        os.replace(tmp, os.path.join(port_dir, f"server{rank}.json"))
    except BaseException:
        traceback.print_exc()  # to this server's log, which the job's error quotes
        sys.stderr.flush()
        os._exit(1)  # a non-zero exit ends the job at once (see run_job)
    threading.Thread(target=_zmq_echo, args=(router,), name="zmq-echo", daemon=True).start()
    threading.Thread(target=_tcp_echo, args=(listener,), name="tcp-echo", daemon=True).start()
    become_role()


# ---- raw transfers: the worker's side ----------------------------------------------------------------
class RawLinks:
    """The worker's raw ZeroMQ DEALER and TCP connection to every server's echo threads."""

    def __init__(self, port_dir: str, num_servers: int) -> None:
        import zmq

        self.ctx = zmq.Context()
        self.poller = zmq.Poller()
        self.dealers: list[Any] = []
        self.conns: list[socket.socket] = []
        for r in range(num_servers):
            with open(os.path.join(port_dir, f"server{r}.json")) as f:
                ports = json.load(f)
            d = self.ctx.socket(zmq.DEALER)
            d.setsockopt(zmq.SNDHWM, 0)
            d.setsockopt(zmq.RCVHWM, 0)
            d.connect(f"tcp://127.0.0.1:{ports['zmq']}")
            self.poller.register(d, zmq.POLLIN)
            self.dealers.append(d)
            c = socket.create_connection(("127.0.0.1", ports["tcp"]), timeout=_RAW_TIMEOUT_S)
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.conns.append(c)
        self._scratch: list[bytearray] = [bytearray(0) for _ in range(num_servers)]

    def zmq_roundtrip(self, slices: list[tuple[int, torch.Tensor]], check: bool = False,
                      dests: list[torch.Tensor] | None = None) -> None:
        """Send every slice to its server's echo ROUTER (zero-copy) and wait for all of them back;
        with ``dests`` (one tensor per slice), copy each slice that comes back into its own."""
        import zmq

        for i, (server, data) in enumerate(slices):
            d = self.dealers[server]
            d.send(_LEN.pack(i), zmq.SNDMORE)
            d.send(data.numpy(), copy=False)
        left = len(slices)
        deadline = time.monotonic() + _RAW_TIMEOUT_S
        while left:
            if time.monotonic() > deadline:
                raise TimeoutError(f"raw ZeroMQ echo: {left} of {len(slices)} slices did not come back "
                                   f"within {_RAW_TIMEOUT_S:g} s")
            for sock, _ in self.poller.poll(1000):
                while True:
                    try:
                        head, data = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    left -= 1
                    if dests is not None:
                        (i,) = _LEN.unpack(head.bytes)
                        dests[i].copy_(torch.frombuffer(data.buffer, dtype=dests[i].dtype))
                    if check:
                        (i,) = _LEN.unpack(head.bytes)
                        got = torch.frombuffer(data.buffer, dtype=slices[i][1].dtype)
                        if not torch.equal(got, slices[i][1]):
                            raise RuntimeError(f"raw ZeroMQ echo returned different bytes for slice {i}")

    def tcp_roundtrip(self, slices: list[tuple[int, torch.Tensor]], check: bool = False) -> None:
        """Send every slice over its server's TCP connection and receive it back (into a reused buffer)."""
        per_server: dict[int, list[torch.Tensor]] = {}
        for server, data in slices:
            per_server.setdefault(server, []).append(data)
        errors: list[BaseException] = []

        def receive(server: int, expected: list[torch.Tensor]) -> None:
            try:
                conn = self.conns[server]
                head = bytearray(_LEN.size)
                for data in expected:
                    if not _recv_exact(conn, memoryview(head)):
                        raise ConnectionError(f"server {server}'s TCP echo closed the connection")
                    (n,) = _LEN.unpack(head)
                    expected_bytes = data.numel() * data.element_size()
                    if n != expected_bytes:
                        raise RuntimeError(f"TCP echo sent {n} bytes, expected {expected_bytes}")
                    if len(self._scratch[server]) < n:
                        self._scratch[server] = bytearray(n)
                    view = memoryview(self._scratch[server])[:n]
                    if not _recv_exact(conn, view):
                        raise ConnectionError(f"server {server}'s TCP echo closed the connection")
                    if check and not torch.equal(torch.frombuffer(view, dtype=data.dtype), data):
                        raise RuntimeError("TCP echo returned different bytes")
            except BaseException as e:
                errors.append(e)

        receivers = [threading.Thread(target=receive, args=(s, ds), daemon=True)
                     for s, ds in per_server.items()]
        for t in receivers:
            t.start()
        for server, data in slices:
            conn = self.conns[server]
            raw = data.numpy()
            conn.sendall(_LEN.pack(raw.nbytes))
            conn.sendall(raw.data.cast("B"))
        for t in receivers:
            t.join(_RAW_TIMEOUT_S)
            if t.is_alive():
                raise TimeoutError(f"raw TCP echo did not come back within {_RAW_TIMEOUT_S:g} s")
        if errors:
            raise errors[0]

    def close(self) -> None:
        for c in self.conns:
            c.close()
        for d in self.dealers:
            d.close(linger=0)
        self.ctx.term()


# ---- (a) push+pull through the servers -----------------------------------------------------------------
def _interleaved(fns: dict[str, Callable[[], Any]], rounds: int, reps: int,
                 barrier: Callable[[], Any] | None = None) -> dict[str, list[float]]:
    """Seconds per call of each function, one value per round; the order rotates every round."""
    names = list(fns)
    times: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            if barrier is not None:
                barrier()
            t0 = time.perf_counter()
            for _ in range(reps):
                fns[k]()
            times[k].append((time.perf_counter() - t0) / reps)
    return times


def _capped(slices: list[tuple[int, torch.Tensor]], frame_bytes: int) -> list[tuple[int, torch.Tensor]]:
    """The same slices cut into frames of at most ``frame_bytes``."""
    out: list[tuple[int, torch.Tensor]] = []
    for server, data in slices:
        n = max(1, frame_bytes // data.element_size())
        out.extend((server, data.narrow(0, off, min(n, data.numel() - off)))
                   for off in range(0, data.numel(), n))
    return out


def _watchdog(cfg: dict[str, Any]) -> None:
    # A stuck process prints every thread's stack to its stderr, which the job's error quotes.
    faulthandler.dump_traceback_later(max(5.0, cfg["timeout"] - 15.0))


def _time_layout(kv: Any, raw: RawLinks, li: int, numels: list[int], cfg: dict[str, Any]) -> dict[str, Any]:
    g = torch.Generator().manual_seed(li)
    keys = [f"L{li}k{i}" for i in range(len(numels))]
    grads = [torch.rand(n, generator=g) for n in numels]
    outs = [torch.empty(n) for n in numels]
    kv.init(keys, [torch.zeros(n) for n in numels])
    slices = [(server, grad.narrow(0, off, size))
              for k, grad in zip(keys, grads) for server, off, size in kv.placement(k)]
    # where each slice lands on the worker: a receiver must place what it gets in its tensors
    dests = [out.narrow(0, off, size) for k, out in zip(keys, [torch.empty(n) for n in numels])
             for _, off, size in kv.placement(k)]
    capped = _capped(slices, cfg["frame_bytes"])
    # first calls: warm up, and check that each path really moves the bytes
    kv.pushpull(keys, grads, out=outs)
    if not all(torch.equal(o, gr) for o, gr in zip(outs, grads)):
        raise RuntimeError("dist_sync pushpull returned values other than the pushed ones")
    raw.zmq_roundtrip(slices, check=True)
    raw.tcp_roundtrip(slices, check=True)
    fns: dict[str, Callable[[], Any]] = {
        "ps": lambda: kv.pushpull(keys, grads, out=outs),
        "zmq": lambda: raw.zmq_roundtrip(slices),
        "zmq_copy": lambda: raw.zmq_roundtrip(slices, dests=dests),
        "tcp": lambda: raw.tcp_roundtrip(slices),
    }
    if len(capped) != len(slices):
        fns["zmq_capped"] = lambda: raw.zmq_roundtrip(capped)
    for fn in fns.values():
        fn()
    times: dict[str, Any] = _interleaved(fns, cfg["rounds"], cfg["reps"])
    times.setdefault("zmq_capped", times["zmq"])  # the PS's frames are within the cap already
    times["frames"] = [float(len(slices)), max(d.numel() * d.element_size() for _, d in slices) / MiB]
    return times


def bandwidth_worker(cfg: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """Worker of an (a) job: PS pushpull vs raw ZeroMQ (the PS's frames, and frames capped at
    ``frame_bytes``) vs raw TCP, per layout; seconds per round, and the PS's frame count and
    largest frame (MiB)."""
    import mxtorch as mx

    _watchdog(cfg)
    torch.set_num_threads(cfg["threads"])
    kv = mx.kv.create("dist_sync")
    raw = RawLinks(cfg["port_dir"], kv.num_servers)
    try:
        return {str(li): _time_layout(kv, raw, li, numels, cfg) for li, numels in enumerate(cfg["layouts"])}
    finally:
        raw.close()


@contextlib.contextmanager
def _port_dir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="mxtorch-bench-ps-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _stop_workers_if_a_role_fails(c: Any, roles: dict[str, Any], done: threading.Event) -> None:
    # The scheduler and servers exit with 0 only once the workers are done: any other exit
    # means the workers would wait for them until the timeout, so end the workers now.
    while not done.wait(0.2):
        if any(p.exitcode not in (None, 0) for p in roles.values()):
            for r in range(c.num_workers):
                c.kill_worker(r)
            return


def _role_logs(c: Any, roles: dict[str, Any]) -> dict[str, str]:
    out = {}
    for name, p in roles.items():
        text = c.stderr(name).strip()
        if text or p.exitcode not in (None, 0):
            out[name] = f"exit code {p.exitcode}; its stderr:\n{text or '(empty)'}"
    return out


def run_job(worker_fn: Callable[[dict[str, Any]], Any], cfg: dict[str, Any], num_workers: int,
            num_servers: int, timeout: float, env: dict[str, str] | None = None,
            server_fn: Callable[[str, float], None] | None = None) -> list[Any]:
    """Run ``worker_fn(cfg)`` on every worker of a local job; the results by rank.

    ``server_fn(port_dir, timeout)``: what the server processes run (e.g. :func:`server_with_echo`)
    instead of a plain server.  Raises :class:`~mxtorch.kvstore.ps.testing.PSJobFailed` with the
    failing processes' output; a scheduler or server exiting with an error ends the job at once.
    """
    from mxtorch.distributed.testing import WorkerTimeout
    from mxtorch.kvstore.ps.testing import PSJobFailed, ps_cluster

    # authenticated, as every job a launcher starts: what is measured is what users run
    env = {"MXTORCH_PS_SECRET": secrets.token_hex(32), **(env or {})}
    with _port_dir() as port_dir, ps_cluster(num_workers, num_servers, env=env, timeout=timeout,
                                             start=False) as c:
        c.start_scheduler()
        for r in range(num_servers):
            if server_fn is not None:
                c.start_server(r, server_fn, port_dir, timeout)
            else:
                c.start_server(r)
        c.start_workers(worker_fn, {**cfg, "port_dir": port_dir, "timeout": timeout})
        roles = {"scheduler": c.scheduler, **{f"server {r}": p for r, p in enumerate(c.servers)}}
        done = threading.Event()
        watcher = threading.Thread(target=_stop_workers_if_a_role_fails, args=(c, roles, done), daemon=True)
        watcher.start()
        try:
            outcomes = c.join_workers()
        except WorkerTimeout as e:
            failures = {f"worker {r}": text or "(no output)" for r, text in e.output.items()}
            failures.update(_role_logs(c, roles))
            raise PSJobFailed(failures) from e
        finally:
            done.set()
            watcher.join()
        failures = {f"worker {o.rank}": o.error for o in outcomes if not o.ok}
        if failures:
            failures.update(_role_logs(c, roles))
            raise PSJobFailed(failures)
        for name, code in c.wait_exit().items():
            if code != 0:
                failures[name] = f"exit code {code} after the workers finished; its stderr:\n{c.stderr(name)}"
        if failures:
            raise PSJobFailed(failures)
        return [o.value for o in outcomes]


# ---- MXNet 1.9.1's own dist_sync --------------------------------------------------------------------------
def _tail(path: str, n: int = 1500) -> str:
    with open(path, errors="replace") as f:
        return f.read()[-n:].strip() or "(no output)"


def run_mxnet(python: str, num_servers: int, layouts: list[list[int]], rounds: int, reps: int,
              threads: int, timeout: float) -> dict[str, list[float]]:
    """Time MXNet's dist_sync push+pull of ``layouts`` (1 worker, ``num_servers`` servers); seconds/round.

    Runs bench/mxnet_ps_reference.py under ``python`` as the scheduler, the servers and the
    worker.  Raises RuntimeError, quoting the output of the process that failed, when one exits
    with an error or the worker has not finished within ``timeout`` seconds; kills them all.
    """
    from mxtorch.distributed.testing import free_port

    script = os.path.join(BENCH_DIR, "mxnet_ps_reference.py")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "MXTORCH_", "PS_"))}
    base.update(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(free_port()),
                DMLC_NUM_SERVER=str(num_servers), DMLC_NUM_WORKER="1", DMLC_NODE_HOST="127.0.0.1",
                DMLC_INTERFACE="lo", OMP_NUM_THREADS=str(threads), MXNET_CPU_WORKER_NTHREADS=str(threads))
    args = [python, script, "--layouts", json.dumps(layouts), "--rounds", str(rounds), "--reps", str(reps)]
    with tempfile.TemporaryDirectory(prefix="mxtorch-bench-mxnet-") as logs:
        procs: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
        try:
            roles = [("scheduler", "scheduler")] + [(f"server {i}", "server") for i in range(num_servers)]
            for name, role in [*roles, ("worker", "worker")]:
                path = os.path.join(logs, name.replace(" ", ""))
                with open(path, "wb") as log:
                    procs[name] = (subprocess.Popen(args, env={**base, "DMLC_ROLE": role}, stdout=log,
                                                    stderr=subprocess.PIPE if role == "worker" else log,
                                                    start_new_session=True), path)
            worker, worker_log = procs["worker"]
            deadline = time.monotonic() + timeout
            while worker.poll() is None:
                for name, (p, path) in procs.items():
                    if p.poll() not in (None, 0):
                        raise RuntimeError(f"MXNet's {name} exited with code {p.returncode}: {_tail(path)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"MXNet's dist_sync worker did not finish within {timeout:g} s; "
                                       f"scheduler: {_tail(procs['scheduler'][1], 300)}")
                time.sleep(0.1)
            err = worker.stderr.read().decode(errors="replace") if worker.stderr is not None else ""
            if worker.returncode != 0:
                raise RuntimeError(f"MXNet's worker exited with code {worker.returncode}: {err[-1500:]}")
            for p, _ in procs.values():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(30)  # the scheduler and servers end with the job
            with open(worker_log) as f:
                lines = f.read().strip().splitlines()
            return dict(json.loads(lines[-1]))
        finally:
            for p, _ in procs.values():
                if p.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
                if p.stderr is not None:
                    p.stderr.close()


# ---- (b) and (c) training steps ----------------------------------------------------------------------------
def _data(name: str, batch: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(rank)
    shape = (batch, 3, 32, 32) if name == "resnet18" else (batch, 1, 28, 28)
    return torch.rand(shape, generator=g), torch.randint(0, 10, (batch,), generator=g)


def _trainer_step(name: str, x: torch.Tensor, y: torch.Tensor,
                  kvstore: str) -> tuple[Callable[[], float], int]:
    """A training step closure (as bench/_models.mx_train_step) returning the seconds spent in
    ``trainer.step``; and the bytes of the model's trainable parameters."""
    from _models import mx_net

    import mxtorch as mx
    from mxtorch import autograd, gluon

    net = mx_net(name)
    net.initialize(mx.init.Xavier())
    net(x)
    params = net.collect_params()
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 0.01, "momentum": 0.9, "wd": 1e-4},
                            kvstore=kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    # the global batch: stores sum over workers (MXNet's rule)
    batch = x.shape[0] * (trainer._kvstore.num_workers if trainer._kvstore is not None else 1)
    nbytes = sum(p.data().numel() * p.data().element_size() for p in params.values() if p.grad_req != "null")

    def step() -> float:
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        t0 = time.perf_counter()
        trainer.step(batch)
        return time.perf_counter() - t0

    return step, nbytes


def _slowed(step: Callable[[], float], kv: Any, sleep_s: float, steps: int = 0,
            seconds: float = 0.0) -> float:
    """Run ``steps`` steps (or steps for ``seconds``), each after sleeping ``sleep_s``; this
    worker's steps per second."""
    kv.barrier()
    t0 = time.perf_counter()
    done = 0
    while done < steps or time.perf_counter() - t0 < seconds:
        if sleep_s:
            time.sleep(sleep_s)  # before the step: in dist_sync both workers end with the last one
        step()
        done += 1
    rate = done / (time.perf_counter() - t0)
    kv.barrier()
    return rate


def train_worker(cfg: dict[str, Any]) -> dict[str, Any]:
    """Worker of a dist_sync job: (b) dist_sync vs 'horovod' steps, then (c) the slowed dist_sync steps."""
    import mxtorch as mx
    from mxtorch.distributed import group

    _watchdog(cfg)
    torch.set_num_threads(cfg["threads"])
    kv = mx.kv.create("dist_sync")
    x, y = _data(cfg["model"], cfg["batch"], kv.rank)
    res: dict[str, Any] = {}
    sync_step, nbytes = _trainer_step(cfg["model"], x, y, "dist_sync")
    res["param_bytes"] = nbytes
    try:
        if cfg["train"]:
            hvd_step, _ = _trainer_step(cfg["model"], x, y, "horovod")
            for _ in range(cfg["warmup"]):
                sync_step()
                hvd_step()
            inside: dict[str, list[float]] = {"dist_sync": [], "horovod": []}

            def run(which: str, fn: Callable[[], float]) -> Callable[[], None]:
                def steps() -> None:
                    inside[which].append(statistics.fmean(fn() for _ in range(cfg["steps"])))
                return steps

            fns = {"dist_sync": run("dist_sync", sync_step), "horovod": run("horovod", hvd_step)}
            times = _interleaved(fns, cfg["rounds"], 1, barrier=kv.barrier)
            res["train"] = {k: [t / cfg["steps"] for t in v] for k, v in times.items()}
            res["inside"] = inside
        if cfg["slow"]:
            for _ in range(cfg["warmup"]):
                sync_step()
            sleep = cfg["slow_ms"] / 1e3 if kv.rank == 1 else 0.0
            res["slow"] = _slowed(sync_step, kv, sleep, steps=cfg["slow_steps"])
    finally:
        if group.is_initialized():
            group.shutdown()
    return res


def async_worker(cfg: dict[str, Any]) -> dict[str, Any]:
    """Worker of a dist_async job: (c) the slowed steps."""
    import mxtorch as mx

    _watchdog(cfg)
    torch.set_num_threads(cfg["threads"])
    kv = mx.kv.create("dist_async")
    x, y = _data(cfg["model"], cfg["batch"], kv.rank)
    step, _ = _trainer_step(cfg["model"], x, y, "dist_async")
    for _ in range(cfg["warmup"]):
        step()
    sleep = cfg["slow_ms"] / 1e3 if kv.rank == 1 else 0.0
    # steps at different rates cannot deadlock here: every worker runs for the same time
    return {"slow": _slowed(step, kv, sleep, seconds=cfg["slow_steps"] * cfg["slow_ms"] / 1e3)}


# ---- the run --------------------------------------------------------------------------------------------
def _load() -> str:
    try:
        return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        return "load average unknown"


def _med(xs: list[float]) -> float:
    return statistics.median(xs)


def _print_bandwidth(args: argparse.Namespace, layouts: list[list[int]], ours: dict[int, Any],
                     mxnet: dict[int, Any], mxnet_note: str) -> None:
    total = sum(layouts[0]) * 4
    cap = f"{args.frame_mib:g}"
    print(f"\n(a) push+pull of a {total / MiB:g} MiB fp32 model, 1 worker, dist_sync; ms per push+pull, GB/s "
          f"of (sent + received) bytes; median of {args.rounds} interleaved rounds x {args.reps}")
    head = (f"{'servers':>7}{'keys':>5}{'frames':>7}{'max MiB':>8}{'PS ms':>8}{'PS GB/s':>8}{'ZMQ ms':>8}"
            f"{'ZMQ GB/s':>9}{'PS/ZMQ':>7}{'ZMQ+cp ms':>10}{'PS/ZMQ+cp':>10}{f'ZMQ<={cap}MiB':>12}"
            f"{'TCP GB/s':>9}")
    if mxnet:
        head += f"{'MXNet ms':>9}{'MXNet GB/s':>11}{'PS/MXNet':>9}"
    print(head)
    moved = 2 * total / 1e9
    for servers, per_layout in ours.items():
        for li, numels in enumerate(layouts):
            t = per_layout[str(li)]
            ps, zq, zc, tcp = _med(t["ps"]), _med(t["zmq"]), _med(t["zmq_capped"]), _med(t["tcp"])
            paired = _med([z / p for z, p in zip(t["zmq"], t["ps"])])  # rounds ran side by side
            paired_cp = _med([z / p for z, p in zip(t["zmq_copy"], t["ps"])])
            frames, largest = t["frames"]
            line = (f"{servers:>7}{len(numels):>5}{int(frames):>7}{largest:>8.1f}{ps * 1e3:>8.1f}"
                    f"{moved / ps:>8.3f}{zq * 1e3:>8.1f}{moved / zq:>9.3f}{paired:>7.3f}"
                    f"{_med(t['zmq_copy']) * 1e3:>10.1f}{paired_cp:>10.3f}{moved / zc:>12.3f}"
                    f"{moved / tcp:>9.3f}")
            m = mxnet.get(servers, {}).get(str(li))
            if m:
                tm = _med(m)
                line += f"{tm * 1e3:>9.1f}{moved / tm:>11.3f}{tm / ps:>9.3f}"
            print(line)
    print("frames: data frames per push (the PS's key slices; the raw ZMQ and TCP transfers send the same); "
          "PS/ZMQ = median over rounds of raw ZeroMQ time / PS time (target >= 0.8);")
    print("ZMQ+cp: the raw ZeroMQ transfer that also copies each slice it gets back into the tensor it "
          "belongs to, as any receiver of a key cut into slices must (the PS makes a whole-key slice the "
          "out's storage instead, where nothing else shares it);")
    print(f"ZMQ<={cap}MiB: the same bytes in frames of at most {cap} MiB (--frame-mib); TCP: one plain "
          "socket per server, received into a reused buffer"
          + ("; PS/MXNet = MXNet time / PS time (> 1: mxtorch faster)" if mxnet else ""))
    if mxnet_note:
        print(mxnet_note)


def _print_training(args: argparse.Namespace, res: list[dict[str, Any]]) -> None:
    r0 = res[0]
    t_sync, t_hvd = _med(r0["train"]["dist_sync"]), _med(r0["train"]["horovod"])
    in_sync, in_hvd = _med(r0["inside"]["dist_sync"]), _med(r0["inside"]["horovod"])
    m = r0["param_bytes"] / MiB
    n = len(res)
    print(f"\n(b) training step, {args.model} ({m:.2f} MiB of parameters), batch {args.batch} per worker, "
          f"{n} workers, SGD momentum; ms, median of {args.rounds} interleaved rounds x {args.steps} steps "
          "(worker 0)")
    print(f"{'store':>10}{'step ms':>9}{'in trainer.step':>17}{'MiB moved per step (all processes)':>37}")
    print(f"{'horovod':>10}{t_hvd * 1e3:>9.2f}{in_hvd * 1e3:>17.2f}{2 * (n - 1) * m:>37.2f}")
    print(f"{'dist_sync':>10}{t_sync * 1e3:>9.2f}{in_sync * 1e3:>17.2f}{2 * n * m:>37.2f}")
    print(f"ratio dist_sync/horovod {t_sync / t_hvd:.3f}")
    print(f"why: dist_sync sends every gradient to a server and every weight back (2n x the model: "
          f"{2 * n * m:.1f} MiB) against 2(n-1) x ({2 * (n - 1) * m:.1f} MiB)")
    print("     for the ring allreduce; it starts only after backward (horovod reduces buckets during "
          f"backward), and the {args.train_servers} server(s)")
    print(f"     sum and run SGD in Python: {in_sync * 1e3:.1f} ms in trainer.step against "
          f"{in_hvd * 1e3:.1f} ms")


def _mxnet_python(args: argparse.Namespace) -> tuple[str, str]:
    """The MXNet venv's python to run (empty: none), and why the MXNet column is left out."""
    if not args.mxnet_python:
        return "", "(MXNet column left out: --mxnet-python is empty)"
    if args.mxnet_python == DEFAULT_MXNET_PYTHON and not os.path.exists(DEFAULT_MXNET_PYTHON):
        return "", f"(MXNet column left out: no .venv-mxnet; make it with: {MXNET_VENV_HINT})"
    if not os.path.exists(args.mxnet_python):
        return "", (f"(MXNet column left out: {args.mxnet_python} does not exist; make the venv with: "
                    f"{MXNET_VENV_HINT})")
    return args.mxnet_python, ""


def bench_bandwidth(args: argparse.Namespace) -> None:
    """(a): one job per server count (and MXNet's, where its venv is), then the table."""
    total = int(args.size_mib * MiB) // 4 * 4
    layouts = [split_model(total, int(k)) for k in args.keys.split(",")]
    cfg = {"layouts": layouts, "rounds": args.rounds, "reps": args.reps, "threads": args.threads,
           "frame_bytes": int(args.frame_mib * MiB)}
    ours: dict[int, Any] = {}
    mxnet: dict[int, Any] = {}
    mxnet_python, note = _mxnet_python(args)
    for servers in [int(s) for s in args.servers.split(",")]:
        ours[servers] = run_job(bandwidth_worker, cfg, 1, servers, args.timeout,
                                server_fn=server_with_echo)[0]
        if mxnet_python:
            try:
                mxnet[servers] = run_mxnet(mxnet_python, servers, layouts, args.rounds, args.reps,
                                           args.threads, min(args.timeout, 300.0))
            except (RuntimeError, OSError, ValueError) as e:
                note = f"(MXNet column incomplete, {servers} server(s): {str(e)[:600]})"
    _print_bandwidth(args, layouts, ours, mxnet, note)


def bench_training(args: argparse.Namespace, parts: set[str]) -> None:
    """(b) and (c): a dist_sync job (both), a dist_async job (c); then their tables."""
    from mxtorch.distributed.testing import free_port

    cfg = {"model": args.model, "batch": args.batch, "steps": args.steps, "rounds": args.rounds,
           "warmup": args.warmup, "threads": args.threads, "slow_ms": args.slow_ms,
           "slow_steps": args.slow_steps, "train": "train" in parts, "slow": "slow" in parts}
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}  # the 'horovod' store's gloo
    res = run_job(train_worker, cfg, 2, args.train_servers, args.timeout, env=env)
    if "train" in parts:
        _print_training(args, res)
    if "slow" not in parts:
        return
    res_async = run_job(async_worker, cfg, 2, args.train_servers, args.timeout)
    window = args.slow_steps * args.slow_ms / 1e3
    print(f"\n(c) {args.model} steps with worker 1 sleeping {args.slow_ms:g} ms before each step; steps/s, "
          f"each worker timed on its own: dist_sync {args.slow_steps} steps, dist_async {window:g} s")
    print(f"{'store':>11}{'fast (w0)':>11}{'slow (w1)':>11}{'total':>9}")
    rates = {}
    for name, rr in (("dist_sync", res), ("dist_async", res_async)):
        fast, slow = rr[0]["slow"], rr[1]["slow"]
        rates[name] = fast + slow
        print(f"{name:>11}{fast:>11.2f}{slow:>11.2f}{fast + slow:>9.2f}")
    print(f"dist_async/dist_sync total throughput {rates['dist_async'] / rates['dist_sync']:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="bw,train,slow,curve,wal",
                    help="which of bw (a), train (b), slow (c), curve (d), wal (e) to run")
    ap.add_argument("--size-mib", type=float, default=100, help="(a) model size")
    ap.add_argument("--keys", default="25,1", help="(a) the model cut into this many keys (one layout each)")
    ap.add_argument("--servers", default="1,2", help="(a) server counts")
    ap.add_argument("--rounds", type=int, default=11, help="interleaved rounds of (a) and (b)")
    ap.add_argument("--reps", type=int, default=2, help="(a) push+pulls per round and method")
    ap.add_argument("--frame-mib", type=float, default=4.0,
                    help="(a) frame cap of the capped raw ZeroMQ transfer")
    ap.add_argument("--model", default="mlp", help="(b), (c): mlp, lenet or resnet18 (bench/_models.py)")
    ap.add_argument("--batch", type=int, default=64, help="(b), (c): per worker")
    ap.add_argument("--steps", type=int, default=10, help="(b): steps per round")
    ap.add_argument("--warmup", type=int, default=3, help="(b), (c): untimed steps first")
    ap.add_argument("--train-servers", type=int, default=2, help="(b), (c): servers of the training jobs")
    ap.add_argument("--slow-ms", type=float, default=100.0, help="(c): worker 1 sleeps this long every step")
    ap.add_argument("--slow-steps", type=int, default=30, help="(c): steps each worker runs")
    ap.add_argument("--curve-kib", default="4,1024,16384,65536", help="(d) message sizes in KiB")
    ap.add_argument("--wal-mib", type=float, default=32, help="(e) bytes pushpulled per step in the big job")
    ap.add_argument("--wal-rounds", type=int, default=3, help="(e) jobs per setting")
    ap.add_argument("--wal-snapshot-every", type=int, default=50, help="(e) MXTORCH_PS_SNAPSHOT_EVERY")
    ap.add_argument("--wal-fsync", action="store_true", help="(e) also time MXTORCH_PS_WAL_FSYNC=1")
    ap.add_argument("--wal-dir", default=None, help="(e) where the servers write (default: the temp folder)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds any one job may last")
    ap.add_argument("--mxnet-python", default=DEFAULT_MXNET_PYTHON,
                    help="python of a venv with mxnet 1.9.1 (default: .venv-mxnet's, where it exists; empty: "
                         "leave out the MXNet column)")
    args = ap.parse_args()
    parts = {p for p in args.parts.split(",") if p}
    unknown = parts - {"bw", "train", "slow", "curve", "wal"}
    if unknown:
        ap.error(f"--parts: unknown part(s) {sorted(unknown)}; use bw, train, slow, curve, wal")
    print(f"torch {torch.__version__}, {args.threads} torch thread(s) per process, {os.cpu_count()} CPUs, "
          f"127.0.0.1; {_load()} at the start")
    t_start = time.perf_counter()
    if "bw" in parts:
        bench_bandwidth(args)
    if parts & {"train", "slow"}:
        bench_training(args, parts)
    if "curve" in parts:
        from _curve import run as bench_curve

        bench_curve(tuple(int(k) for k in args.curve_kib.split(",")), args.rounds, args.timeout)
    if "wal" in parts:
        from _wal import bench_wal

        bench_wal(args, run_job)
    print(f"\n{_load()} at the end; {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
