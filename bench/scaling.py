"""Time-dilated scaling benchmark: workers on the emulated cluster replay a real model's training step.

Each worker host (``mxtorch.cluster``: a network namespace, its link shaped by tc) runs one rank
that replays resnet50_v1's or a 24-layer d=1024 transformer's (~355M parameters) step: the
forward and every backward layer are sleeps of FLOPs / FLOP/s (default an H100 at 40 % MFU),
and the gradients, in backward order, really cross the links: gloo all-reduces of buckets (with
overlap, or after the backward), mxtorch's allreduce store with fp16 / 2bit / PowerSGD
compression, mxtorch's ``dist_sync`` / ``dist_async`` parameter servers on hosts of their own,
ZeRO 1/2/3 (the collectives ZeroTrainer runs, sized by the model's layers), or pipelines (GPipe
or 1F1B microbatches over ``pp`` stages, ``N / pp`` replicas all-reducing each stage's gradients;
``_scaling_layouts``).

Time is dilated by ``k``: every sleep is k x longer and every link k x slower, so the machine's
CPUs (which run all hosts) are not the bottleneck; gradients may also be ``s`` x smaller with
the links ``s`` x slower again (a byte then takes the same dilated time).  The bench measures the
processes' CPU time and refuses (prints no figure for) any schedule whose CPU use exceeds 50 % of
the machine.  Reported times are real (dilated / k).

Scaling efficiency = the step's accelerator time (forward + backward: one worker's step) / the
schedule's step (weak scaling: each worker keeps its batch); the same job's step with no
communication is measured too ("no-comm"), to show how faithful the sleeps are.  Beside it:
the alpha-beta model's efficiency for that schedule (``_scaling_models``; beta from the link
rate, alpha from a tiny message measured in the job; for the compressed stores and the parameter
servers, plus the CPU work measured in the job, see :func:`cpu_work_s`) and the ratio measured / model.

    .venv/bin/python bench/scaling.py [--quick] [--plot docs/scaling.png]     # as root

``--local`` runs the replay on 127.0.0.1 without a cluster or shaping (no root; a smoke test).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the bench's own modules

import _scaling_models as M  # noqa: E402
from _scaling_replay import RESULT, emit, replay_to_config, worker  # noqa: E402

MIB = 1 << 20
CPU_LIMIT = 0.5
COMPRESSIONS = {"fp16": {"type": "fp16"}, "2bit": {"type": "2bit", "threshold": 0.5},
                "powersgd": {"type": "powersgd", "rank": 1}}
"""powersgd: rank 1 on matrices whose sides are sqrt(s) x smaller sends sqrt(s) x fewer bytes per
side than full size at rank sqrt(s): x s, the same bytes (the bench replays rank sqrt(s))."""
DEFAULTS = {  # model: (batch per worker, dilation k, gradient scale s): CPU under 50 % at 16 workers
    "resnet50": (256, 40.0, 16),
    "transformer": (8, 10.0, 64),
}
KINDS = ("allreduce", "fp16", "2bit", "powersgd", "ps", "zero", "pipeline")
PIPES = ("gpipe", "1f1b")


@dataclass(frozen=True)
class Schedule:
    name: str
    kind: str  # none | allreduce | compressed | ps | zero | pipeline
    bucket_mib: float = 25.0
    overlap: bool = True
    compression: str = ""
    servers: int = 0
    mode: str = ""
    stage: int = 0  # zero: the ZeRO stage
    pp: int = 0  # pipeline: stages (the job's workers are pp x dp)
    micro: int = 0  # pipeline: microbatches per step
    pipe: str = ""  # pipeline: gpipe | 1f1b

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "bucket_bytes": int(self.bucket_mib * MIB),
                "overlap": self.overlap, "compression": COMPRESSIONS.get(self.compression),
                "stage": self.stage, "pp": self.pp, "micro": self.micro, "pipe": self.pipe}

    def fits(self, n: int) -> bool:
        """Whether ``n`` workers can run it (a pipeline needs a multiple of its stages)."""
        return self.kind != "pipeline" or n % self.pp == 0

    @property
    def cpu_bound(self) -> bool:
        """Whether the model adds the schedule's CPU work (it runs between its transfers, not under
        them): compressed stores and servers."""
        return self.kind in ("compressed", "ps")

    def predict(self, replay: M.Replay, n: int, alpha: float, beta: float, scale: int,
                busiest_share: float | None, cpu_s: float = 0.0, skew: float = 0.0) -> float:
        """The alpha-beta model's step (real seconds); ``cpu_s``: the CPU work added (see
        cpu_work_s); ``skew``: the arrival skew of a blocking collective (ZeRO's)."""
        if self.kind == "zero":  # each blocking collective: + the ranks' arrival skew
            return M.predict_zero(replay, n, self.stage, alpha, beta, scale, skew)
        return self._network(replay, n, alpha, beta, scale, busiest_share) + cpu_s  # work between transfers

    def _network(self, replay: M.Replay, n: int, alpha: float, beta: float, scale: int,
                 busiest_share: float | None) -> float:
        if self.kind == "none":
            return replay.compute_s
        if self.kind == "ps":
            messages = M.ps_layer_messages(replay, self.servers, scale)
            return M.predict_ps_calls(replay, n, alpha, beta, messages)
        if self.kind == "pipeline":
            return M.predict_pipeline(replay, self.pp, n // self.pp, self.micro, self.pipe, alpha, beta,
                                      int(self.bucket_mib * MIB))
        if self.kind == "compressed":
            from mxtorch.kvstore.allreduce.compressed import PAYLOAD_BUCKET_BYTES

            if self.compression == "powersgd":
                rank = int(COMPRESSIONS["powersgd"]["rank"])
                return M.predict_powersgd(replay, n, rank, alpha, beta, scale, PAYLOAD_BUCKET_BYTES)
            ratio = 0.5 if self.compression == "fp16" else 1 / 16
            # the store exchanges payload buckets of PAYLOAD_BUCKET_BYTES (of scaled-down gradients)
            bucket = int(PAYLOAD_BUCKET_BYTES * scale / ratio)
            return M.predict_allreduce(replay, n, alpha, beta, bucket, False, ratio,
                                       gather=self.compression != "fp16")
        return M.predict_allreduce(replay, n, alpha, beta, int(self.bucket_mib * MIB), self.overlap)


def schedules(args: argparse.Namespace) -> tuple[list[Schedule], list[Schedule]]:
    """(collective schedules, parameter-server schedules) the options ask for."""
    coll = [Schedule(f"allreduce overlap {b:g} MiB", "allreduce", b, True) for b in args.buckets]
    if args.no_overlap:
        coll.append(Schedule(f"allreduce no overlap {args.buckets[len(args.buckets) // 2]:g} MiB",
                             "allreduce", args.buckets[len(args.buckets) // 2], False))
    coll += [Schedule(f"{c} (mxtorch store)", "compressed", compression=c) for c in args.compression]
    coll += [Schedule(f"zero {z}", "zero", stage=z) for z in args.zero]
    coll += [Schedule(f"{pipe} pp={pp} x dp", "pipeline", pp=pp, micro=args.microbatches, pipe=pipe)
             for pipe, pp in args.pipelines]
    ps = [Schedule(f"{mode} {s} server{'s' if s > 1 else ''}", "ps", servers=s, mode=mode)
          for mode in args.ps_modes for s in args.ps_servers]
    return coll, ps


# ---- running jobs ------------------------------------------------------------------------------------
def _job_config(replay: M.Replay, k: float, scale: int, scheds: list[Schedule], args: argparse.Namespace,
                ps_mode: str | None = None) -> dict[str, Any]:
    return {"replay": replay_to_config(replay), "dilation": k, "scale": scale,
            "schedules": [Schedule("none", "none").config()] + [s.config() for s in scheds],
            "steps": args.steps, "warmup": args.warmup, "alpha_rounds": args.alpha_rounds, "ps": ps_mode}


def ps_env(scale: int) -> dict[str, str]:
    """Keys split over the servers as the full-size gradients would be (bound and slices scaled)."""
    from mxtorch.kvstore.ps.config import DEFAULT_BIGARRAY_BOUND, DEFAULT_PIECE_BYTES

    return {"MXNET_KVSTORE_BIGARRAY_BOUND": str(max(1, DEFAULT_BIGARRAY_BOUND // scale)),
            "MXTORCH_PS_PIECE_BYTES": str(max(4096, DEFAULT_PIECE_BYTES // scale))}


def _parse_results(results: list[tuple[int, str, str]], what: str) -> list[dict[str, Any]]:
    out = []
    for r, (code, stdout, err) in enumerate(results):
        line = next((ln for ln in stdout.splitlines() if ln.startswith(RESULT)), None)
        if code != 0 or line is None:
            raise SystemExit(f"bench/scaling.py: {what}: rank {r} failed (exit code {code}):\n{err[-4000:]}")
        out.append(json.loads(line[len(RESULT):]))
    return out


def run_on_cluster(cluster: Any, n: int, cfg: dict[str, Any], servers: int, env: dict[str, str],
                   args: argparse.Namespace, port: int) -> list[dict[str, Any]]:
    from mxtorch.cluster.testing import HostJob, ParameterServerNodes

    argv = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(cfg)]
    env = {"MXTORCH_DIST_TIMEOUT": str(args.dist_timeout), **env}
    with contextlib.ExitStack() as stack:
        if servers:
            nodes = stack.enter_context(ParameterServerNodes(
                cluster, n, servers, scheduler_host=n, server_hosts=list(range(n, n + servers)),
                env=env, root_port=port))
            env.update(nodes.worker_env())
            env["SCALING_SERVER_PIDS"] = ",".join(str(p.pid) for p in nodes.procs.values())
        job = stack.enter_context(HostJob(cluster, argv, n, hosts=list(range(n)), env=env, port=port))
        results = job.wait(args.job_timeout)
    return _parse_results(results, f"{n} workers, {servers} servers")


def run_local(n: int, cfg: dict[str, Any], servers: int, env: dict[str, str], timeout: float
              ) -> list[dict[str, Any]]:
    """The replay on 127.0.0.1, no shaping (the project's process harnesses)."""
    if servers:
        from mxtorch.kvstore.ps.testing import run_ps_job

        return run_ps_job(worker, n, servers, cfg, timeout=timeout, env=env)
    from mxtorch.distributed.testing import run_workers

    return run_workers(worker, n, cfg, timeout=timeout, env=env)


# ---- one row of the table --------------------------------------------------------------------------
@dataclass
class Point:
    model: str
    n: int
    schedule: str
    step_s: float  # real seconds (median over the ranks)
    efficiency: float  # ideal_s / step_s
    predicted_s: float
    model_efficiency: float  # ideal_s / predicted_s
    cpu: float  # share of the machine's CPU time used by the job's processes in the timed window
    alpha_s: float
    ideal_s: float = 0.0  # the step's accelerator time: forward + backward
    none_s: float = 0.0  # the same job's step with no communication, as measured (the sleeps' fidelity)
    busiest_share: float | None = None  # parameter servers: the busiest server's share of the bytes
    cpu_model_s: float = 0.0  # the CPU work the model adds to the network's step (real seconds)

    @property
    def ratio(self) -> float:
        return self.efficiency / self.model_efficiency if self.model_efficiency else float("nan")

    @property
    def refused(self) -> bool:
        return self.cpu > CPU_LIMIT


def cpu_work_s(s: Schedule, per_rank: list[dict[str, Any]], steps: int, cores: int, k: float,
               share: float | None) -> float:
    """The CPU work of a step that no sleep or link time covers (real seconds: measured ÷ k).

    Compressed stores: the median worker's CPU time per step beyond the no-comm step's
    (compressing, decoding, summing: between the transfers, not under them), times the stretch
    measured right after the timed window (wall ÷ CPU seconds of busy work all ranks ran at
    once: the job's ranks and the machine's other processes share its cores; without one, the
    ranks spread over the cores).  Parameter servers: the busiest server's CPU seconds per step
    (it parses, sums and answers every message itself), not stretched: a server's work comes
    in small pieces as messages arrive, which the scheduler serves promptly, and stretched it
    overshoots (1.2-1.5x the measured step with one server).  Other schedules: 0 (gloo's work
    runs under the wire).
    """
    if not s.cpu_bound:
        return 0.0
    rows = [r["schedules"][s.name] for r in per_rank]
    stretches = [x["stretch"] for x in rows if "stretch" in x]
    stretch = statistics.median(stretches) if stretches else max(1.0, len(rows) / cores)
    if s.kind == "ps":
        server = rows[0]["server_cpu_s"] / steps
        return server * (share if share is not None and s.servers > 1 else 1.0) / k
    extra = [max(0.0, x["cpu_s"] - r["schedules"]["none"]["cpu_s"]) / steps for x, r in zip(rows, per_rank)]
    return statistics.median(extra) * stretch / k


def points_of(replay: M.Replay, n: int, per_rank: list[dict[str, Any]], scheds: list[Schedule], k: float,
              scale: int, beta: float, cores: int, steps: int) -> list[Point]:
    alpha = statistics.median(r["alpha_s"] for r in per_rank) / k
    skew = statistics.median(r.get("skew_s", 0.0) for r in per_rank) / k
    share = per_rank[0].get("busiest_share")
    none = statistics.median(r["schedules"]["none"]["step_s"] for r in per_rank) / k
    ideal = replay.compute_s
    out = []
    for s in scheds:
        rows = [r["schedules"][s.name] for r in per_rank]
        step = statistics.median(x["step_s"] for x in rows) / k
        wall = max(x["wall_s"] for x in rows)
        cpu = (sum(x["cpu_s"] for x in rows) + rows[0]["server_cpu_s"]) / (wall * cores)
        work = cpu_work_s(s, per_rank, steps, cores, k, share)
        predicted = s.predict(replay, n, alpha, beta, scale, share, work, skew)
        out.append(Point(replay.name, n, s.name, step, M.efficiency(ideal, step), predicted,
                         M.efficiency(ideal, predicted), cpu, alpha, ideal, none,
                         share if s.kind == "ps" else None, work))
    return out


def _upgrade(p: dict[str, Any]) -> dict[str, Any]:
    """A point saved before ``ideal_s`` existed (efficiency was then no-comm step / step)."""
    if "ideal_s" not in p:
        p = dict(p, none_s=p["efficiency"] * p["step_s"], ideal_s=p["model_efficiency"] * p["predicted_s"])
        p["efficiency"] = M.efficiency(p["ideal_s"], p["step_s"])
    return p


def save_points(path: str, points: list[Point]) -> None:
    with open(path, "w") as f:
        json.dump([p.__dict__ for p in points], f, indent=1)


def format_table(points: list[Point]) -> str:
    head = (f"{'model':<20}{'N':>4}  {'schedule':<30}{'step ms':>9}{'eff':>7}{'model':>7}"
            f"{'meas/model':>11}{'CPU':>6}{'no-comm ms':>11}")
    lines = [head, "-" * len(head)]
    for p in points:
        if p.refused:
            lines.append(f"{p.model:<20}{p.n:>4}  {p.schedule:<30}  refused: CPU {p.cpu:.0%} > "
                         f"{CPU_LIMIT:.0%} (raise --dilation or --scale)")
            continue
        lines.append(f"{p.model:<20}{p.n:>4}  {p.schedule:<30}{p.step_s * 1e3:>9.1f}{p.efficiency:>7.2f}"
                     f"{p.model_efficiency:>7.2f}{p.ratio:>11.2f}{p.cpu:>6.0%}{p.none_s * 1e3:>11.1f}")
    return "\n".join(lines)


def draw(path: str, points: list[Point], title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"\n(no plot: matplotlib is not installed; `pip install -e \".[bench]\"` adds it, then run "
              f"again to get {path})")
        return
    models = list(dict.fromkeys(p.model for p in points))
    fig, axes = plt.subplots(1, len(models), figsize=(7.5 * len(models), 5.5), squeeze=False)
    for ax, model in zip(axes[0], models):
        mine = [p for p in points if p.model == model and not p.refused]
        names = list(dict.fromkeys(p.schedule for p in mine))
        colors = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")  # one colour per schedule
        for i, name in enumerate(names):
            pts = sorted((p for p in mine if p.schedule == name), key=lambda p: p.n)
            xs = [p.n for p in pts]
            ax.plot(xs, [p.efficiency for p in pts], "o-", color=colors(i % colors.N), label=name)
            ax.plot(xs, [p.model_efficiency for p in pts], "--", color=colors(i % colors.N), alpha=0.6)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({p.n for p in points}), [str(n) for n in sorted({p.n for p in points})])
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("workers")
        ax.set_ylabel("scaling efficiency (solid: measured, dashed: alpha-beta model)")
        ax.set_title(model, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"\nplot: {path}")


# ---- options -------------------------------------------------------------------------------------------
def _floats(text: str, what: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} {text!r} is not a comma-separated list of numbers"
                                         ) from None
    if not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError(f"{what} {text!r}: give positive numbers, e.g. 1,25,100")
    return vals


def _pipeline(text: str) -> tuple[str, int]:
    pipe, _, pp = text.partition(":")
    if pipe not in PIPES or not pp.isdigit() or int(pp) < 2:
        raise argparse.ArgumentTypeError(f"--pipelines {text!r}: give SCHEDULE:STAGES, SCHEDULE one of "
                                         f"{', '.join(PIPES)} and STAGES >= 2, e.g. 1f1b:4")
    return pipe, int(pp)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench/scaling.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet50,transformer", help="resnet50, transformer (default both)")
    ap.add_argument("--workers", default="2,4,8,16", help="worker counts (default 2,4,8,16)")
    ap.add_argument("--rate", default="25gbit", help="the real links' rate (default 25gbit)")
    ap.add_argument("--flops", type=float, default=M.DEFAULT_MFU * M.H100_BF16_FLOPS,
                    help="accelerator FLOP/s (default 0.4 x 989e12: an H100 at 40%% MFU, bf16)")
    ap.add_argument("--dilation", type=float, default=None, help="time dilation k (default per model)")
    ap.add_argument("--scale", type=int, default=None, help="gradients s x smaller, links s x slower "
                    "(default per model)")
    ap.add_argument("--resnet-batch", type=int, default=DEFAULTS["resnet50"][0], help="images per worker")
    ap.add_argument("--transformer-batch", type=int, default=DEFAULTS["transformer"][0],
                    help="1024-token sequences per worker")
    ap.add_argument("--buckets", default="1,25,100", help="all-reduce bucket sizes, MiB (default 1,25,100)")
    ap.add_argument("--no-overlap", action=argparse.BooleanOptionalAction, default=True,
                    help="also all-reduce every bucket after the backward (the middle bucket size)")
    ap.add_argument("--compression", default="fp16,2bit,powersgd", help="compressors through mxtorch's "
                    "allreduce store ('' for none; powersgd: rank sqrt(s) at full size)")
    ap.add_argument("--zero", default="1,2,3", help="ZeRO stages replayed as ZeroTrainer sends them "
                    "('' for none)")
    ap.add_argument("--pipelines", default="gpipe:4,1f1b:2,1f1b:4", help="pipeline schedules as "
                    "SCHEDULE:STAGES (gpipe, 1f1b; on N workers: STAGES x N/STAGES replicas; '' for none)")
    ap.add_argument("--microbatches", type=int, default=8, help="microbatches per pipeline step (default 8)")
    ap.add_argument("--ps-servers", default="1,4", help="parameter-server counts ('' for none)")
    ap.add_argument("--ps-modes", default="dist_sync,dist_async", help="dist_sync, dist_async")
    ap.add_argument("--transformer-schedules", default="allreduce,fp16,powersgd,zero,pipeline",
                    help=f"which of {','.join(KINDS)} the transformer runs (its steps are long; default "
                    "all but 2bit and ps)")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per schedule (default 3)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
    ap.add_argument("--alpha-rounds", type=int, default=10, help="tiny messages timed for alpha")
    ap.add_argument("--quick", action="store_true", help="a short run: resnet50, 2 and 4 workers, 25 MiB "
                    "buckets, one server, 2 steps")
    ap.add_argument("--shaper", default="tbf", choices=("tbf", "htb"),
                    help="the links' tc shaper (mxtorch.cluster; default tbf)")
    ap.add_argument("--local", action="store_true", help="127.0.0.1, no cluster, no shaping (a smoke test)")
    ap.add_argument("--plot", default="", help="write the efficiency curves to this PNG")
    ap.add_argument("--json", default="", help="write every point to this JSON file (as the run goes)")
    ap.add_argument("--replot", default="", help="measure nothing: print the table of a --json file (and "
                    "--plot it)")
    ap.add_argument("--rescore", default="", help="measure nothing: recompute the models of a run from its "
                    "--json FILE's FILE.ranks (give the run's options too) and print the table")
    ap.add_argument("--dist-timeout", type=float, default=600.0, help="MXTORCH_DIST_TIMEOUT of the ranks")
    ap.add_argument("--job-timeout", type=float, default=1800.0, help="seconds one job may take")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        return args
    if args.quick:
        args.models, args.workers, args.buckets = "resnet50", "2,4", "25"
        args.ps_servers, args.ps_modes, args.steps = "1", "dist_sync", 2
        args.zero, args.pipelines = "1,3", "1f1b:2"
    try:
        args.models = [m for m in args.models.split(",") if m]
        bad = [m for m in args.models if m not in DEFAULTS]
        if bad or not args.models:
            raise argparse.ArgumentTypeError(f"--models {','.join(args.models)!r}: choose from "
                                             f"{', '.join(DEFAULTS)}")
        args.workers = [int(x) for x in _floats(args.workers, "--workers")]
        if any(n < 2 for n in args.workers):
            raise argparse.ArgumentTypeError(f"--workers {args.workers}: each count must be >= 2")
        args.buckets = _floats(args.buckets, "--buckets")
        args.compression = [c for c in args.compression.split(",") if c]
        if any(c not in COMPRESSIONS for c in args.compression):
            raise argparse.ArgumentTypeError(f"--compression {args.compression}: choose from "
                                             f"{', '.join(COMPRESSIONS)}")
        args.zero = [int(x) for x in _floats(args.zero, "--zero")] if args.zero else []
        if any(z not in (1, 2, 3) for z in args.zero):
            raise argparse.ArgumentTypeError(f"--zero {args.zero}: the stages are 1, 2 and 3")
        args.pipelines = [_pipeline(p) for p in args.pipelines.split(",") if p]
        servers = args.ps_servers
        args.ps_servers = [int(x) for x in _floats(servers, "--ps-servers")] if servers else []
        args.transformer_schedules = [x for x in args.transformer_schedules.split(",") if x]
        if any(x not in KINDS for x in args.transformer_schedules):
            raise argparse.ArgumentTypeError(f"--transformer-schedules {args.transformer_schedules}: choose "
                                             f"from {', '.join(KINDS)}")
        args.ps_modes = [m for m in args.ps_modes.split(",") if m]
        if any(m not in ("dist_sync", "dist_async") for m in args.ps_modes):
            raise argparse.ArgumentTypeError(f"--ps-modes {args.ps_modes}: choose dist_sync, dist_async")
        for name in ("steps", "alpha_rounds", "flops", "microbatches"):
            if getattr(args, name) <= 0:
                raise argparse.ArgumentTypeError(f"--{name.replace('_', '-')} must be > 0")
        if args.warmup < 0 or (args.dilation is not None and args.dilation <= 0) or \
                (args.scale is not None and args.scale < 1):
            raise argparse.ArgumentTypeError("--warmup must be >= 0, --dilation > 0, --scale >= 1")
        from mxtorch.cluster import ClusterError, parse_rate

        try:
            args.rate_bits = parse_rate(args.rate)
        except ClusterError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        if args.rate_bits is None:
            raise argparse.ArgumentTypeError("--rate must be a rate, e.g. 25gbit")
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))
    return args


def build_replays(args: argparse.Namespace) -> list[tuple[M.Replay, float, int]]:
    """(replay, dilation, scale) of each model asked for."""
    out = []
    for name in args.models:
        _, k, s = DEFAULTS[name]
        replay = (M.resnet50(args.resnet_batch, args.flops) if name == "resnet50"
                  else M.transformer(args.transformer_batch, args.flops))
        out.append((replay, args.dilation or k, args.scale or s))
    return out


def main(argv: list[str] | None = None) -> list[Point]:
    args = parse_args(argv)
    if args.worker is not None:
        emit(worker(json.loads(args.worker)))
        return []
    if args.replot:
        with open(args.replot) as f:
            points = [Point(**_upgrade(p)) for p in json.load(f)]
        print(format_table(points))
        if args.plot:
            draw(args.plot, points, f"bench/scaling.py: {args.rate} links, {args.flops / 1e12:.0f} TFLOP/s "
                 "per worker")
        return points
    if args.rescore:
        points = rescore(args)
        report(args, points, 0.0, os.cpu_count() or 1)
        return points
    if not args.local:
        from mxtorch.cluster import support_problem

        problem = support_problem()
        if problem is not None:
            raise SystemExit(f"bench/scaling.py needs network namespaces (or --local): {problem}")
    coll, ps = schedules(args)
    cores = os.cpu_count() or 1
    beta = M.link_beta(args.rate_bits)
    started = time.monotonic()
    points: list[Point] = []
    raw: list[dict[str, Any]] = []  # every job's per-rank results, to recompute the models from
    with contextlib.ExitStack() as stack:
        cluster = None
        if not args.local:
            from mxtorch.cluster import Cluster

            hosts = max(args.workers) + max(args.ps_servers or [0])
            cluster = stack.enter_context(Cluster.up(hosts, args.rate_bits, shaper=args.shaper, owned=True))
        port = 29500
        for replay, k, scale in build_replays(args):
            if cluster is not None:
                # the dilated, scaled link: a scaled-down byte takes k x its real time
                cluster.set_bandwidth(None, max(1, int(args.rate_bits / (k * scale))))
            mine_coll, mine_ps = coll, ps
            if replay.name.startswith("transformer"):
                kinds = args.transformer_schedules
                mine_coll = [s for s in coll if (s.compression or s.kind) in kinds]
                mine_ps = ps if "ps" in kinds else []
            jobs: list[tuple[list[Schedule], int, str | None]] = [(mine_coll, 0, None)] + [
                ([s], s.servers, s.mode) for s in mine_ps]
            for n in args.workers:
                for all_scheds, servers, mode in jobs:
                    scheds = [s for s in all_scheds if s.fits(n)]
                    if not scheds:
                        continue
                    cfg = _job_config(replay, k, scale, scheds, args, mode)
                    env = ps_env(scale) if servers else {}
                    print(f"... {replay.name}: {n} workers, {', '.join(s.name for s in scheds)}",
                          file=sys.stderr, flush=True)
                    port += 2
                    per_rank = (run_local(n, cfg, servers, env, args.job_timeout) if cluster is None
                                else run_on_cluster(cluster, n, cfg, servers, env, args, port))
                    points += points_of(replay, n, per_rank, scheds, k, scale, beta, cores, args.steps)
                    raw.append({"model": replay.name, "n": n, "k": k, "scale": scale, "per_rank": per_rank})
                    if args.json:  # as it goes: a long run that fails later keeps what it measured
                        save_points(args.json, points)
                        with open(args.json + ".ranks", "w") as f:
                            json.dump(raw, f)
    report(args, points, time.monotonic() - started, cores)
    return points


def rescore(args: argparse.Namespace) -> list[Point]:
    """The points of a run's saved per-rank results, with the models as they are now."""
    with open(args.rescore) as f:
        jobs = json.load(f)
    coll, ps = schedules(args)
    replays = {replay.name: replay for replay, _, _ in build_replays(args)}
    beta, cores = M.link_beta(args.rate_bits), os.cpu_count() or 1
    points: list[Point] = []
    for job in jobs:
        ran = job["per_rank"][0]["schedules"]
        scheds = [s for s in coll + ps if s.name in ran]
        points += points_of(replays[job["model"]], job["n"], job["per_rank"], scheds, job["k"], job["scale"],
                            beta, cores, args.steps)
    return points


def report(args: argparse.Namespace, points: list[Point], seconds: float, cores: int) -> None:
    where = "127.0.0.1, no shaping (--local)" if args.local else f"emulated cluster, {args.rate} links"
    print(f"\nbench/scaling.py: {where}; {args.flops / 1e12:.0f} TFLOP/s per worker; {cores} CPU cores; "
          f"{args.steps} timed steps per schedule; {seconds:.0f} s")
    for name in args.models:
        batch, k, s = DEFAULTS[name]
        print(f"  {name}: dilation k={args.dilation or k:g}, gradients and link rate / s={args.scale or s}")
    print("eff = forward + backward accelerator time / measured step; model = the alpha-beta model's; "
          "CPU = the job's processes' CPU time / (wall x cores); no-comm = the job's step without "
          "communication, measured\n")
    print(format_table(points))
    if args.json:
        save_points(args.json, points)
    if args.plot:
        draw(args.plot, points, f"bench/scaling.py: {where}, {args.flops / 1e12:.0f} TFLOP/s per worker")


if __name__ == "__main__":
    main()
