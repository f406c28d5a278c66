"""The worker side of bench/scaling.py: one rank replaying a model's training step.

Compute is a sleep (each layer's accelerator seconds x the dilation ``k``, to absolute deadlines
so that late wake-ups do not add up); communication is real: gloo all-reduces of gradient
buckets launched as their last layer's sleep ends (overlap) or after the backward, mxtorch's
allreduce store with a compressor (it compresses at step time, after the backward), or
mxtorch's ``dist_sync`` / ``dist_async`` store, each layer's gradients pushed and pulled by a
communication thread as soon as the layer is done; ZeRO, PowerSGD and pipelines:
:mod:`_scaling_layouts`.  Gradients are the model's sizes divided by
``scale`` (the links are shaped ``scale`` x slower too, so a byte takes the same dilated time).

Each schedule is timed over ``steps`` steps after ``warmup``; the rank reports, per schedule,
the mean step (dilated seconds), its process CPU seconds over that window and the window's
wall time, plus the measured per-message latency ``alpha`` (dilated seconds).
"""

from __future__ import annotations

import json
import os
import queue
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import torch
from _scaling_layouts import bucket_allreduces, layout_schedule, powersgd_grads
from _scaling_models import Layer, Replay, buckets

RESULT = "SCALING-RESULT "


def replay_from_config(cfg: dict[str, Any]) -> Replay:
    layers = tuple(Layer(n, float(s), tuple(int(x) for x in g), tuple(int(x) for x in r), int(a))
                   for n, s, g, r, a in cfg["layers"])
    return Replay(cfg["name"], float(cfg["forward_s"]), layers, cfg["batch"])


def replay_to_config(r: Replay) -> dict[str, Any]:
    return {"name": r.name, "forward_s": r.forward_s, "batch": r.batch,
            "layers": [[la.name, la.seconds, list(la.grads), list(la.rows), la.act] for la in r.layers]}


def _sleep_until(t: float) -> None:
    d = t - time.perf_counter()
    if d > 0:
        time.sleep(d)


class Step:
    """The compute of one step: forward, then each backward layer, calling ``on_layer(i)`` when done."""

    def __init__(self, replay: Replay, dilation: float) -> None:
        self.forward = replay.forward_s * dilation
        self.layer_s = [la.seconds * dilation for la in replay.layers]

    def run(self, on_layer: Callable[[int], None], hooks_block: bool = False) -> None:
        """``hooks_block``: ``on_layer`` runs on the backward's thread (a gradient hook), so the time
        it takes delays every later layer (otherwise the deadlines absorb it, as a separate thread's
        work would be)."""
        deadline = time.perf_counter() + self.forward
        _sleep_until(deadline)
        for i, s in enumerate(self.layer_s):
            deadline += s
            _sleep_until(deadline)
            t0 = time.perf_counter()
            on_layer(i)
            if hooks_block:
                deadline += time.perf_counter() - max(t0, deadline)


def scaled_grads(replay: Replay, scale: int) -> list[list[torch.Tensor]]:
    """Each layer's gradients, ``scale`` x smaller (at least one element), random values."""
    g = torch.Generator().manual_seed(int(os.environ.get("RANK", "0")))
    return [[torch.randn(max(1, n // scale), generator=g) for n in la.grads] for la in replay.layers]


# ---- schedules: each returns a callable doing one step ----------------------------------------------
def no_comm(step: Step) -> Callable[[], None]:
    return lambda: step.run(lambda i: None)


def allreduce_buckets(step: Step, replay: Replay, scale: int, bucket_bytes: int, overlap: bool
                      ) -> Callable[[], None]:
    """gloo all-reduces of flat buckets (bucket boundaries from the real sizes, DDP's rule)."""
    return bucket_allreduces(step, replay, scale, [b.members for b in buckets(replay, bucket_bytes)], overlap)


def compressed_store(step: Step, grads: list[list[torch.Tensor]], compression: dict[str, Any]
                     ) -> Callable[[], None]:
    """mxtorch's allreduce store with ``compression``: every gradient pushpulled after the backward."""
    import mxtorch as mx

    kv = mx.kv.create("allreduce")
    kv.set_gradient_compression(compression)
    keys = [f"g{li}.{gi}" for li, gs in enumerate(grads) for gi in range(len(gs))]
    flat = [t for gs in grads for t in gs]
    kv.init(keys, flat)

    def one() -> None:
        step.run(lambda i: None)
        kv.pushpull(keys, flat, out=flat)

    return one


class PSStep:
    """``dist_sync`` / ``dist_async``: a thread pushpulls each finished layer's gradients (every
    layer that is ready when it comes round, in one call) while the backward goes on."""

    def __init__(self, step: Step, grads: list[list[torch.Tensor]], mode: str) -> None:
        import mxtorch as mx

        self.step = step
        self.kv = mx.kv.create(mode)
        self.keys = [[f"g{li}.{gi}" for gi in range(len(gs))] for li, gs in enumerate(grads)]
        self.grads = grads
        self.kv.init([k for ks in self.keys for k in ks], [t for gs in grads for t in gs])
        total = sum(t.numel() for gs in grads for t in gs)
        per_server: dict[int, int] = {}
        self.layer_bytes: list[dict[int, int]] = []  # each layer's bytes on each server
        for ks, gs in zip(self.keys, grads):
            mine: dict[int, int] = {}
            for k, t in zip(ks, gs):
                for server, _, numel in self.kv.placement(k):
                    per_server[server] = per_server.get(server, 0) + numel
                    mine[server] = mine.get(server, 0) + numel * t.element_size()
            self.layer_bytes.append(mine)
        self.busiest_share = max(per_server.values()) / total
        self.ready: queue.Queue[int] = queue.Queue()
        self.t0 = 0.0  # the current step's start (perf_counter)
        self.calls: list[dict[str, Any]] = []  # the current step's calls (see :meth:`_record`)
        self.replies: list[tuple[int, float]] = []  # (server, perf_counter) of each reply this call
        client = self.kv._live()
        on_reply = client._on_reply

        def timed_reply(msg: Any) -> None:  # which server answered when (the bench's own probe)
            req = client.pending.get(msg.request_id)
            on_reply(msg)
            if req is not None:
                self.replies.append((req.server, time.perf_counter()))

        client._on_reply = timed_reply  # type: ignore[method-assign]
        self.done = threading.Event()
        self.error: list[BaseException] = []
        self.thread = threading.Thread(target=self._serve, name="ps-comm", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        last = len(self.grads) - 1
        while True:
            batch = [self.ready.get()]
            if batch[0] < 0:
                return
            while True:
                try:
                    batch.append(self.ready.get_nowait())
                except queue.Empty:
                    break
            keys = [k for li in batch for k in self.keys[li]]
            vals = [t for li in batch for t in self.grads[li]]
            self.replies = []
            t0 = time.perf_counter()
            try:
                if keys:
                    self.kv.pushpull(keys, vals, out=vals)
                self._record(batch, t0, time.perf_counter())
            except BaseException as e:  # reported by the step that waits for it
                self.error.append(e)
                self.done.set()
                return
            if last in batch:
                self.done.set()

    def _record(self, batch: list[int], t0: float, t1: float) -> None:
        """One call of this step: its layers, start and end (dilated seconds from the step's
        start), when each server's last reply came, and the bytes pushed to each server."""
        last: dict[int, float] = {}
        count: dict[int, int] = {}
        for server, t in self.replies:
            last[server] = max(last.get(server, 0.0), t)
            count[server] = count.get(server, 0) + 1
        per_server: dict[int, int] = {}
        for li in batch:
            for server, b in self.layer_bytes[li].items():
                per_server[server] = per_server.get(server, 0) + b
        self.calls.append({"layers": [batch[0], batch[-1]], "t0": t0 - self.t0, "t1": t1 - self.t0,
                           "bytes": {str(s): b for s, b in sorted(per_server.items())},
                           "replies": {str(s): count[s] for s in sorted(count)},
                           "last_reply": {str(s): round(t - self.t0, 6) for s, t in sorted(last.items())}})

    def __call__(self) -> None:
        self.done.clear()
        self.calls = []
        self.t0 = time.perf_counter()
        self.step.run(self.ready.put)
        self.done.wait()
        if self.error:
            raise RuntimeError(f"parameter-server communication failed: {self.error[0]}") from self.error[0]

    def latency(self, rounds: int) -> float:
        """Median seconds of a one-element pushpull (a round trip to a server)."""
        one = torch.zeros(1)
        self.kv.init("alpha", one)
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            self.kv.pushpull("alpha", one, out=one)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    def close(self) -> None:
        self.ready.put(-1)
        self.thread.join(timeout=60)


def _allreduce_alpha(world: int, rounds: int) -> float:
    """Per-message latency: a one-element all-reduce's median time over its 2(n-1) ring steps."""
    import torch.distributed as dist

    one = torch.zeros(1)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        dist.all_reduce(one)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / max(1, 2 * (world - 1))


def _arrival_skew(world: int, rounds: int, dilation: float) -> float:
    """What a blocking collective started right after compute costs beyond the same collective
    run back to back: the median of (sleep 1 ms x dilation / 40, then a one-element all-reduce)
    minus the sleep and the back-to-back all-reduce's median (ranks wake at different moments)."""
    import torch.distributed as dist

    one = torch.zeros(1)
    nap = 1e-3 * dilation / 40
    times, hot = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        time.sleep(nap)
        dist.all_reduce(one)
        times.append(time.perf_counter() - t0 - nap)
        t0 = time.perf_counter()
        dist.all_reduce(one)
        hot.append(time.perf_counter() - t0)
    return max(0.0, statistics.median(times) - statistics.median(hot))


def _timed(one: Callable[[], None], barrier: Callable[[], None], steps: int, warmup: int) -> dict[str, float]:
    for _ in range(warmup):
        one()
    barrier()
    cpu0, t0 = time.process_time(), time.perf_counter()
    for _ in range(steps):
        one()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    barrier()
    return {"step_s": wall / steps, "cpu_s": cpu, "wall_s": wall}


def cpu_stretch(barrier: Callable[[], None], cpu_s: float = 0.05) -> float:
    """Wall seconds per CPU second of busy work that every rank runs at once: how much longer CPU
    work takes than its CPU time on this machine now (the job's ranks and everyone else's
    processes share the cores)."""
    barrier()
    x = torch.ones(1 << 14)
    c0, t0 = time.process_time(), time.perf_counter()
    while time.process_time() - c0 < cpu_s:
        for _ in range(50):
            x.mul_(1.0000001)
    stretch = (time.perf_counter() - t0) / max(time.process_time() - c0, 1e-9)
    barrier()
    return stretch


def server_cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes ``pids`` have used so far (0 for one that is gone)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    """Run every schedule of ``cfg`` in this rank; returns what :func:`emit` prints."""
    torch.set_num_threads(1)
    replay = replay_from_config(cfg["replay"])
    k, scale = float(cfg["dilation"]), int(cfg["scale"])
    world = int(os.environ.get("WORLD_SIZE", "1"))
    step = Step(replay, k)
    grads = scaled_grads(replay, scale)
    out: dict[str, Any] = {"schedules": {}}
    ps_mode = cfg.get("ps")
    servers = [int(p) for p in os.environ.get("SCALING_SERVER_PIDS", "").split(",") if p]
    if ps_mode:
        ps = PSStep(step, grads, ps_mode)
        barrier: Callable[[], None] = ps.kv.barrier
        out["alpha_s"] = ps.latency(cfg["alpha_rounds"])
        out["busiest_share"] = ps.busiest_share
    elif world > 1:
        import torch.distributed as dist

        from mxtorch.distributed import group

        group.init("gloo")
        barrier = dist.barrier
        out["alpha_s"] = _allreduce_alpha(world, cfg["alpha_rounds"])
        out["skew_s"] = _arrival_skew(world, cfg["alpha_rounds"], k)
    else:
        def barrier() -> None:
            pass
        out["alpha_s"] = 0.0
    for sched in cfg["schedules"]:
        kind = sched["kind"]
        if kind == "none":
            one = no_comm(step)
        elif kind == "allreduce":
            one = allreduce_buckets(step, replay, scale, int(sched["bucket_bytes"]), bool(sched["overlap"]))
        elif kind == "compressed" and sched["compression"]["type"] == "powersgd":
            one = compressed_store(step, powersgd_grads(replay, scale), sched["compression"])
        elif kind == "compressed":
            one = compressed_store(step, grads, sched["compression"])
        elif kind in ("zero", "pipeline"):
            one = layout_schedule(sched, replay, k, scale, step)
        elif kind == "ps":
            one = ps
        else:
            raise ValueError(f"unknown schedule kind {kind!r}")
        s0 = server_cpu_s(servers)
        res = _timed(one, barrier, int(cfg["steps"]), int(cfg["warmup"]))
        res["server_cpu_s"] = server_cpu_s(servers) - s0
        if kind == "ps":  # the last timed step's calls, as the pushpulls went
            res["calls"] = ps.calls
        if kind in ("compressed", "ps"):  # the model adds their CPU work at this stretch
            res["stretch"] = cpu_stretch(barrier)
        out["schedules"][sched["name"]] = res
        del one
    if ps_mode:
        ps.close()
    elif world > 1:
        barrier()
        from mxtorch.distributed import group

        group.shutdown()
    return out


def emit(result: dict[str, Any]) -> None:
    print(RESULT + json.dumps(result), flush=True)
