"""Step-time overhead of an mxtorch training loop against the hand-written PyTorch loop.

Same model, same optimizer (SGD, momentum 0.9, wd 1e-4), same batch, one context, measured
in the same run, interleaved in rounds so that machine noise hits both alike.  Prints the
median step time of each and the ratio mxtorch / torch (≤ 1.05 is the target).

    python bench/overhead.py [--steps 30] [--rounds 7] [--batch 128] [--models mlp,lenet]
                             [--device cuda] [--amp float16] [--profiler] [--hooks]

``--profiler`` times the mxtorch step (kvstore 'allreduce': its spans are on the path) with
``mx.profiler`` never started, then instrumented but off (started and stopped once before), and
on with ``profile_all`` (interleaved with off), and prints off / never-started (goal <= 1.01) and
on / off (goal <= 1.10); also what the spans cost while off: the spans a step opens times the
measured cost of one, as a share of the step.  The same run then times what ``mxtorch train`` adds
to every step: its step recorder (always on: a SpanClock timing the data and communication spans,
the step's row for steps.jsonl) and, with ``--tensorboard``, the TensorBoard hook's scalars (the real
hooks, fed what the loop gives them), against the bare step (goal <= 1.01 for ``--tensorboard``);
``--hooks`` times only these.

Where MXNet 1.9.1 is installed in its own venv (``.venv-mxnet``, see bench/mxnet_reference.py),
the same run also times MXNet's hybridized Gluon step on the same model and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

import torch
import torch.nn.functional as F
from _models import mx_train_step, torch_net


def make_torch_step(name: str, x: torch.Tensor, y: torch.Tensor,  # type: ignore[no-untyped-def]
                    amp_dtype: str | None = None):
    net = torch_net(name).to(x.device)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    yl = y.long()
    if amp_dtype:  # the reference AMP loop: autocast + GradScaler
        dtype = getattr(torch, amp_dtype)
        scaler = torch.amp.GradScaler(x.device.type, enabled=amp_dtype == "float16")

        def amp_step() -> None:
            with torch.autocast(x.device.type, dtype=dtype):
                loss = F.cross_entropy(net(x), yl)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)

        return amp_step

    def step() -> None:
        loss = F.cross_entropy(net(x), yl)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def time_steps(step, n: int) -> float:  # type: ignore[no-untyped-def]
    sync = torch.cuda.synchronize if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    if sync:
        sync()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    if sync:
        sync()
    return (time.perf_counter() - t0) / n


def profiler_rows(name: str, x: torch.Tensor, y: torch.Tensor, steps: int, rounds: int) -> None:
    import timeit

    import mxtorch as mx
    from mxtorch.profiler import span

    os.environ.setdefault("RANK", "0")  # a one-process job: the allreduce store and its spans run
    os.environ.setdefault("WORLD_SIZE", "1")
    step = mx_train_step(name, x, y, kvstore="allreduce")
    time_steps(step, 2 * steps)  # warm: the first phase must not pay for what later ones do not
    never = [time_steps(step, steps) for _ in range(rounds)]  # before any profiler ever ran
    trace = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"mxtorch-overhead-{os.getpid()}.json")
    mx.profiler.set_config(profile_all=True, filename=trace)
    mx.profiler.set_state("run")
    time_steps(step, 1)
    mx.profiler.set_state("stop")
    mx.profiler.dump()
    with open(trace) as f:
        spans = sum(1 for e in json.load(f)["traceEvents"] if str(e.get("name", "")).startswith("mxtorch/"))
    os.unlink(trace)
    times: dict[str, list[float]] = {"off": [], "on": []}
    for r in range(rounds):
        for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
            if mode == "on":
                mx.profiler.set_state("run")
            times[mode].append(time_steps(step, steps))
            if mode == "on":
                mx.profiler.set_state("stop")
    mx.profiler.dump()  # writes and forgets what the "on" rounds recorded
    os.unlink(trace)
    def off_span() -> None:
        with span("allreduce"):
            pass

    per_span = min(timeit.repeat(off_span, number=20000, repeat=5)) / 20000
    t_never, t_off, t_on = (statistics.median(v) for v in (never, times["off"], times["on"]))
    print(f"profiler ({name}): never started {t_never * 1e3:.3f} ms/step, instrumented but off "
          f"{t_off * 1e3:.3f}, on (profile_all) {t_on * 1e3:.3f}")
    print(f"  off / never started {t_off / t_never:.3f} (goal <= 1.01); on / off {t_on / t_off:.3f} "
          f"(goal <= 1.10)")
    print(f"  spans while off: {spans} per step x {per_span * 1e9:.0f} ns = "
          f"{100 * spans * per_span / t_off:.3f}% of the step")


class _LoopState:
    """What mxtorch train's hooks read of its loop (DataParallelRun), for a step timed outside it."""

    rank, lead, n_workers, start_step, kv = 0, True, 1, 0, None

    def __init__(self, batch: int) -> None:
        self.step, self.batch, self.loss_sum, self.n_seen, self.resumed = 0, batch, 0.0, 0, {}
        self.trainer = argparse.Namespace(learning_rate=0.01)


def observability_rows(name: str, x: torch.Tensor, y: torch.Tensor, steps: int, rounds: int) -> None:
    """The step bare, with mxtorch train's step recorder, and with the recorder and --tensorboard."""
    import tempfile

    from mxtorch.cli.train_config import TrainConfig
    from mxtorch.cli.train_steps import StepRecorder
    from mxtorch.cli.train_tensorboard import TensorBoardHook
    from mxtorch.profiler import span

    os.environ.setdefault("RANK", "0")  # a one-process job: the allreduce store and its spans run
    os.environ.setdefault("WORLD_SIZE", "1")
    step = mx_train_step(name, x, y, kvstore="allreduce")
    time_steps(step, 2 * steps)
    folder = tempfile.mkdtemp(prefix="mxtorch-overhead-")
    cfg = TrainConfig(output=os.path.join(folder, "run"), tensorboard=os.path.join(folder, "tb"))
    run = _LoopState(x.shape[0])
    recorder = StepRecorder(cfg)
    tb = TensorBoardHook(cfg, recorder)
    recorder.on_start(run)
    recorder.clock.stop()
    tb.on_start(run)

    def hooked(hooks: list) -> None:  # type: ignore[type-arg]
        def one() -> None:
            step()
            run.step += 1
            run.n_seen += run.batch
            run.loss_sum += 1.0
            for h in hooks:
                h.on_step(run)
        return one

    modes = {"bare": step, "recorder": hooked([recorder]), "tensorboard": hooked([recorder, tb])}
    times: dict[str, list[float]] = {m: [] for m in modes}
    order = list(modes)
    for r in range(rounds):
        for mode in order[r % 3:] + order[:r % 3]:  # rotated: no mode always runs first
            if mode != "bare":
                recorder.clock.start()
            times[mode].append(time_steps(modes[mode], steps))
            recorder.clock.stop()
    # the hooks alone, timed over many calls (the step's spans as in a step): a share of the bare step
    # that the noise of whole steps on a busy machine cannot hide
    def hooks_alone(hooks: list) -> float:  # type: ignore[type-arg]
        def one() -> None:
            for name in ("data.wait", "forward", "backward", "allreduce.wait", "trainer.step"):
                with span(name):
                    pass
            run.step += 1
            run.n_seen += run.batch
            for h in hooks:
                h.on_step(run)
        recorder.clock.start()
        best = min(time_steps(one, 2000) for _ in range(5))
        recorder.clock.stop()
        return best

    base = min(time_steps(lambda: [span(n).__exit__() for n in ("a", "b", "c", "d", "e")], 2000)
               for _ in range(5))
    cost_rec, cost_tb = hooks_alone([recorder]) - base, hooks_alone([recorder, tb]) - base
    tb.on_end(run)
    t = {m: statistics.median(v) for m, v in times.items()}
    print(f"mxtorch train's hooks ({name}): bare step {t['bare'] * 1e3:.3f} ms, with the step recorder "
          f"{t['recorder'] * 1e3:.3f}, with --tensorboard {t['tensorboard'] * 1e3:.3f}")
    print(f"  recorder / bare {t['recorder'] / t['bare']:.3f}; --tensorboard / bare "
          f"{t['tensorboard'] / t['bare']:.3f} (goal <= 1.01)")
    print(f"  the hooks alone: recorder {cost_rec * 1e6:.1f} us a step = {100 * cost_rec / t['bare']:.2f}% "
          f"of the bare step; recorder + --tensorboard {cost_tb * 1e6:.1f} us = "
          f"{100 * cost_tb / t['bare']:.2f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30, help="steps per round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--models", default="mlp,lenet")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (the GPU runs: CUDA-synchronised timing)")
    ap.add_argument("--amp", default="", choices=["", "float16", "bfloat16"],
                    help="mixed precision: mx.amp + loss scaling vs torch.autocast + GradScaler")
    default_mx = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv-mxnet",
                              "bin", "python")
    ap.add_argument("--mxnet-python", default=default_mx if os.path.exists(default_mx) else "",
                    help="python of a venv with mxnet 1.9.1 (empty: skip the MXNet column)")
    ap.add_argument("--profiler", action="store_true",
                    help="time the step with mx.profiler never started, off, and on (profile_all), then "
                         "with mxtorch train's hooks (the --tensorboard column)")
    ap.add_argument("--hooks", action="store_true",
                    help="only the hooks' rows of --profiler: the step bare, with mxtorch train's step "
                         "recorder, and with --tensorboard")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dev = torch.device(args.device)
    where = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"{torch.get_num_threads()} threads"
    print(f"torch {torch.__version__}, {where}, batch {args.batch}, amp {args.amp or 'off'}, "
          f"{args.rounds} rounds x {args.steps} steps, interleaved")
    if args.profiler or args.hooks:
        for name in args.models.split(","):
            x = torch.rand(args.batch, 1, 28, 28, device=dev)
            y = torch.randint(0, 10, (args.batch,), device=dev).float()
            if args.profiler:
                profiler_rows(name, x, y, args.steps, args.rounds)
            observability_rows(name, x, y, args.steps, args.rounds)
        return
    rows = []
    worst = 0.0
    for name in args.models.split(","):
        x = torch.rand(args.batch, 1, 28, 28, device=dev)
        y = torch.randint(0, 10, (args.batch,), device=dev).float()
        amp_dtype = args.amp or None
        steps = {"torch": make_torch_step(name, x, y, amp_dtype),
                 "mxtorch": mx_train_step(name, x, y, amp_dtype=amp_dtype)}
        for s in steps.values():  # warm-up
            time_steps(s, 5)
        times: dict[str, list[float]] = {k: [] for k in steps}
        for r in range(args.rounds):
            order = list(steps) if r % 2 == 0 else list(reversed(steps))
            for k in order:
                times[k].append(time_steps(steps[k], args.steps))
        t_ref = statistics.median(times["torch"])
        t_mx = statistics.median(times["mxtorch"])
        ratio = t_mx / t_ref
        worst = max(worst, ratio)
        rows.append((name, t_ref, t_mx, ratio))
    mxnet: dict[str, list[float]] = {}
    if args.mxnet_python and dev.type == "cpu" and not args.amp:
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mxnet_reference.py")
        env = dict(os.environ, OMP_NUM_THREADS=str(torch.get_num_threads()))
        r = subprocess.run([args.mxnet_python, script, "--models", args.models, "--batch", str(args.batch),
                            "--steps", str(args.steps), "--rounds", str(args.rounds)],
                           capture_output=True, text=True, env=env, timeout=1800)
        if r.returncode == 0:
            mxnet = json.loads(r.stdout.strip().splitlines()[-1])
        else:
            print(f"(MXNet reference failed: {r.stderr.strip().splitlines()[-1:]})")
    head = f"{'model':<8}{'torch ms/step':>15}{'mxtorch ms/step':>17}{'ratio':>8}"
    print(head + (f"{'MXNet 1.9.1 ms/step':>21}{'mxtorch/MXNet':>15}" if mxnet else ""))
    for name, t_ref, t_mx, ratio in rows:
        line = f"{name:<8}{t_ref * 1e3:>15.3f}{t_mx * 1e3:>17.3f}{ratio:>8.3f}"
        if name in mxnet:
            t_mxnet = statistics.median(mxnet[name])
            line += f"{t_mxnet:>21.3f}{t_mx * 1e3 / t_mxnet:>15.3f}"
        print(line)
    print(f"worst ratio mxtorch/torch {worst:.3f} (target <= 1.05)")


if __name__ == "__main__":
    main()
