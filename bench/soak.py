"""Chaos soak on the emulated cluster: training jobs that must survive faults injected at random.

It makes a cluster of ``--hosts`` network namespaces (``mxtorch.cluster``, 1 Gbit/s links),
runs each job of ``--jobs`` once undisturbed (the reference), then for ``--minutes`` runs the
jobs in turn (a round each) while injecting faults drawn from ``--seed``:

* ``worker-kill`` (horovod: an elastic ``mxtorch launch --elastic 2:H`` job): SIGKILL of the
  training worker on a random host; the agents restart the workers from the newest checkpoint;
* ``server-kill`` (dist_sync: 2 workers, 2 servers writing a snapshot every 50 updates and a
  write-ahead log of each update): SIGKILL of a random server, started again at once; it
  restores its snapshot and replays its log;
* ``partition``: a random host's link goes down for 2 s, then up;
* ``hostile``: random bytes, malformed headers, forged and oversize messages sent to the
  scheduler and the servers from a random host (``bench/_soak_hostile.py``);
* ``cpu-hog``: two busy processes on a random host for ``--hog-seconds``.

Every round injects each of its job's faults once, in a random order, at random moments of the
training (a fault waits until the job made progress after the previous one).  The jobs train
the MLP on the embedded Fashion-MNIST subset, one thread per process.  At the end it prints
the faults injected and survived (the round completed, no process was declared dead or
dropped that was not killed, final values consistent), the steps done again after restarts,
and each round's held-out accuracy against the undisturbed run, then the verdict against the
goal: every fault survived, no data lost, accuracy within 1 point.

    sudo .venv/bin/python bench/soak.py --minutes 10 [--seed 0] [--jobs horovod,dist_sync]

Needs root (network namespaces).  The exit status is 0 whatever the verdict; 2 when the bench
is misused.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ACCURACY_POINTS = 1.0
"""The goal: every round's held-out accuracy within this many points of the undisturbed run's."""
PARAM_TOLERANCE = 1e-5
"""dist_sync: largest |difference| from the undisturbed run's parameters that counts as no update lost."""
PARTITION_S = 2.0
PS_DEAD_S = 20.0
"""A killed server's connections close at once, so the scheduler declares it dead after
MXTORCH_PS_DEAD_S (default 5 s) unless its replacement registered first; importing torch alone
took 5-6 s on this 2-core machine at load 10."""
FAULT_KINDS = ("worker-kill", "server-kill", "partition", "hostile", "cpu-hog")
HOG_PROCESSES = 2


@dataclass
class Fault:
    """One fault of a round: what, where, when, and what became of the job after it."""

    round: int
    job: str
    kind: str
    target: str
    at: float = 0.0  # seconds since the soak started
    ended: float = 0.0  # the same, when the injection ended (the link back up, the burst sent)
    step: int = 0  # steps done when it was injected
    detail: str = ""
    recovered_s: float | None = None  # from ``ended`` until the job completed 2 more steps
    injected: bool = False
    survived: bool | None = None


@dataclass
class Round:
    """One run of a job under faults, and how it ended against the undisturbed run."""

    index: int
    job: str
    faults: list[Fault] = field(default_factory=list)
    ok: bool = False
    error: str = ""
    accuracy: float | None = None
    accuracy_ref: float | None = None
    steps: int = 0
    steps_lost: int = 0
    param_diff: float | None = None
    false_deaths: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _say(t0: float, msg: str) -> None:
    print(f"[{time.monotonic() - t0:7.1f} s] {msg}", flush=True)


def draw_round(rng: random.Random, job: str, hosts: list[str], servers: int, train_s: float,
               index: int, only: tuple[str, ...] = FAULT_KINDS) -> list[tuple[float, Fault]]:
    """The faults of one round of ``job``: each kind (of ``only``) once, in a random order, at random
    offsets (seconds after the first training step) within the first 70% of an undisturbed run."""
    from _soak_jobs import FAULTS_OF

    kinds = [k for k in FAULTS_OF[job] if k in only]
    rng.shuffle(kinds)
    offsets = sorted(rng.uniform(0.05, 0.7) * train_s for _ in kinds)
    out = []
    for off, kind in zip(offsets, kinds):
        target = f"server{rng.randrange(servers)}" if kind == "server-kill" else rng.choice(hosts)
        out.append((off, Fault(index, job, kind, target)))
    return out


def _make_job(kind: str, cluster: Any, folder: str, args: argparse.Namespace) -> Any:
    from _soak_jobs import DistSyncJob, ElasticHorovodJob

    os.makedirs(folder)
    if kind == "horovod":
        return ElasticHorovodJob(cluster, folder, epochs=args.epochs, seed=args.seed,
                                 timeout=args.round_timeout)
    return DistSyncJob(cluster, folder, epochs=args.epochs, seed=args.seed, timeout=args.round_timeout,
                       dead_s=args.ps_dead_s or None)


def _param_diff(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
    if a is None or b is None or set(a) != set(b):
        return None
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


class FaultInjector:
    """Injects one fault into a running job of the cluster; cleans up what it started."""

    def __init__(self, cluster: Any, args: argparse.Namespace, rng: random.Random) -> None:
        self.cluster, self.args, self.rng = cluster, args, rng
        self.hogs: list[subprocess.Popen[bytes]] = []

    def inject(self, job: Any, fault: Fault) -> None:
        getattr(self, "_" + fault.kind.replace("-", "_"))(job, fault)

    def _worker_kill(self, job: Any, fault: Fault) -> None:
        deadline = time.monotonic() + 20
        pids: list[int] = []
        while not pids and time.monotonic() < deadline and job.running():
            pids = job.worker_pids(fault.target)
            if not pids:
                time.sleep(0.2)  # the workers are restarting: wait for this host's
        if not pids:
            fault.detail = "no worker process to kill"
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        fault.detail = f"SIGKILL pid {', '.join(map(str, pids))}"
        fault.injected = True

    def _server_kill(self, job: Any, fault: Fault) -> None:
        rank = int(fault.target.removeprefix("server"))
        job.restart_server(rank)
        fault.detail = f"SIGKILL, started again (pid {job.nodes.procs[fault.target].pid})"
        fault.injected = True

    def _partition(self, job: Any, fault: Fault) -> None:
        self.cluster.link_down(fault.target)
        try:
            time.sleep(PARTITION_S)
        finally:
            self.cluster.link_up(fault.target)
        fault.detail = f"link down {PARTITION_S:g} s"
        fault.injected = True

    def _cpu_hog(self, job: Any, fault: Fault) -> None:
        argv = [sys.executable, os.path.abspath(__file__), "--hog", str(self.args.hog_seconds)]
        for _ in range(HOG_PROCESSES):
            self.hogs.append(self.cluster.popen(fault.target, argv, stdin=subprocess.DEVNULL))
        fault.detail = f"{HOG_PROCESSES} busy processes for {self.args.hog_seconds:g} s"
        fault.injected = True

    def _hostile(self, job: Any, fault: Fault) -> None:
        spec = json.dumps({"targets": job.targets(), "seed": self.rng.randrange(2**31)})
        argv = [sys.executable, os.path.abspath(__file__), "--hostile", spec]
        r = self.cluster.run(fault.target, argv, capture_output=True, text=True, timeout=120)
        fault.injected = True
        if r.returncode != 0:
            fault.detail = f"sender failed ({r.returncode}): {r.stderr.strip()[-300:]}"
            return
        report = json.loads(r.stdout.strip().splitlines()[-1])
        fault.detail = "; ".join(f"{name}: {v['sent']} sent, {v['replies']} answered"
                                 + (f", {len(v['errors'])} send errors" if v["errors"] else "")
                                 for name, v in report.items())
        dead = [n for n in job.nodes.procs if not job.node_alive(n)]
        if dead:
            fault.detail += f"; GONE after it: {', '.join(dead)}"

    def clean(self) -> None:
        for p in self.hogs:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.hogs.clear()


class _Watch:
    """The job's step count over time: whether it still runs and trains (not stalled)."""

    def __init__(self, job: Any, stall_s: float, deadline: float) -> None:
        self.job, self.stall_s, self.deadline = job, stall_s, deadline
        self.steps, self.since = job.steps(), time.monotonic()

    def stalled(self) -> bool:
        now, steps = time.monotonic(), self.job.steps()
        if steps != self.steps:
            self.steps, self.since = steps, now
        return now - self.since > self.stall_s or now > self.deadline

    def live(self) -> bool:
        """Running, and not stalled."""
        return self.job.running() and not self.stalled()


def _wait_progress(watch: _Watch, fault: Fault, t0: float) -> None:
    """Wait until the job completed 2 steps after ``fault`` (or ended); record how long that took."""
    while watch.live():
        if watch.steps >= fault.step + 2:
            fault.recovered_s = time.monotonic() - (t0 + fault.ended)
            _say(t0, f"  ... {fault.kind} {fault.target}: training again {fault.recovered_s:.1f} s after it "
                     f"(step count {watch.steps})")
            return
        time.sleep(0.1)


def run_round(cluster: Any, kind: str, folder: str, args: argparse.Namespace,
              schedule: list[tuple[float, Fault]], injector: FaultInjector | None,
              t0: float) -> tuple[Any, float, float]:
    """One run of job ``kind`` with the faults of ``schedule`` (each injected once the job trains
    again after the one before); returns its JobResult, seconds until its first step and seconds
    from there to its end.  A job without a step for ``--stall-timeout`` seconds is stopped."""
    job = _make_job(kind, cluster, folder, args)
    started = time.monotonic()
    watch = _Watch(job, args.stall_timeout, started + args.round_timeout)
    try:
        while watch.steps == 0 and watch.live():
            time.sleep(0.2)
        train0 = time.monotonic()
        last: Fault | None = None
        for offset, fault in schedule:
            if last is not None:
                _wait_progress(watch, last, t0)
            while watch.live() and time.monotonic() < train0 + offset:
                time.sleep(0.1)
            if not watch.live():
                break
            assert injector is not None
            fault.at = time.monotonic() - t0
            injector.inject(job, fault)
            fault.ended, fault.step = time.monotonic() - t0, job.steps()
            _say(t0, f"round {fault.round} {kind}: {fault.kind} {fault.target} at step count {fault.step}: "
                     f"{fault.detail}")
            last = fault if fault.injected else last
        if last is not None and last.recovered_s is None:
            _wait_progress(watch, last, t0)
        while watch.live():
            time.sleep(0.2)
        stalled = job.running()
        if stalled:  # every worker's Python stacks go to its stderr, shown with the round's failure
            deaths = job.false_deaths()  # before the soak's own stop kills the workers
            job.dump_stacks()
            time.sleep(2.0)
        result = job.finish(5.0 if stalled else 60.0)
        if stalled:
            result.ok, result.false_deaths = False, deaths
            result.error = (f"no training step for {args.stall_timeout:g} s (stopped at step count "
                            f"{watch.steps})" if time.monotonic() <= watch.deadline else
                            f"still running after --round-timeout {args.round_timeout:g} s (stopped)")
        if last is not None and last.recovered_s is None and result.ok:
            last.recovered_s = time.monotonic() - (t0 + last.ended)  # it finished: it trained again
        return result, train0 - started, time.monotonic() - train0
    finally:
        if injector is not None:
            injector.clean()
        job.stop()


def _verdict_marks(rounds: list[Round], refs: dict[str, Any]) -> None:
    for r in rounds:
        ref = refs[r.job]
        r.steps_lost = r.steps - ref.steps
        for f in r.faults:
            if f.injected:
                f.survived = r.ok and not r.false_deaths and f.recovered_s is not None and _consistent(r)


def _consistent(r: Round) -> bool:
    acc_ok = r.accuracy is not None and r.accuracy_ref is not None and \
        abs(r.accuracy - r.accuracy_ref) * 100 <= ACCURACY_POINTS
    if r.job == "dist_sync":
        return acc_ok and r.param_diff is not None and r.param_diff <= PARAM_TOLERANCE
    return acc_ok


def report(rounds: list[Round], refs: dict[str, Any], args: argparse.Namespace, seconds: float,
           cluster_desc: str) -> str:
    """The soak's table and verdict (what it prints at the end)."""
    _verdict_marks(rounds, refs)
    faults = [f for r in rounds for f in r.faults if f.injected]
    lines = [f"chaos soak: {args.minutes:g} min of faults (seed {args.seed}) on {cluster_desc}; jobs "
             f"{', '.join(args.jobs)}; mlp on the embedded Fashion-MNIST subset, {args.epochs} epochs, "
             f"batch 64; total {seconds / 60:.1f} min", ""]
    lines.append(f"{'fault':<24}{'injected':>9}{'survived':>9}{'training again after it (median, max)':>40}")
    kinds = sorted({(f.job, f.kind) for f in faults}, key=lambda jk: (jk[0], jk[1]))
    for job, kind in kinds:
        fs = [f for f in faults if (f.job, f.kind) == (job, kind)]
        rec = sorted(f.recovered_s for f in fs if f.recovered_s is not None)
        timing = f"{rec[len(rec) // 2]:.1f} s, {rec[-1]:.1f} s" if rec else "-"
        name = f"{kind} ({job})"
        lines.append(f"{name:<24}{len(fs):>9}{sum(bool(f.survived) for f in fs):>9}{timing:>40}")
    survived = sum(bool(f.survived) for f in faults)
    lines.append(f"{'all':<24}{len(faults):>9}{survived:>9}")
    lines += ["", f"{'round':<7}{'job':<11}{'faults':>7}  {'outcome':<10}{'steps (undisturbed)':>21}"
                  f"{'steps lost':>11}{'accuracy (undisturbed)':>24}{'max |dparam|':>14}"]
    for r in rounds:
        ref = refs[r.job]
        acc = "-" if r.accuracy is None else f"{r.accuracy:.4f} ({ref.accuracy:.4f})"
        diff = "-" if r.param_diff is None else f"{r.param_diff:.2e}"
        outcome = "ok" if r.ok and not r.false_deaths else "FAILED"
        lines.append(f"{r.index:<7}{r.job:<11}{sum(f.injected for f in r.faults):>7}  {outcome:<10}"
                     f"{f'{r.steps} ({ref.steps})':>21}{r.steps_lost:>11}{acc:>24}{diff:>14}")
    problems = [r for r in rounds if not r.ok or r.false_deaths]
    for r in problems:
        lines.append(f"  round {r.index}: {r.error or 'completed'}"
                     + (f"; declared dead / dropped: {'; '.join(r.false_deaths)}" if r.false_deaths else ""))
    lost = [r for r in rounds
            if r.job == "dist_sync" and (r.param_diff is None or r.param_diff > PARAM_TOLERANCE)]
    worst = max((abs(r.accuracy - refs[r.job].accuracy) * 100 for r in rounds if r.accuracy is not None),
                default=None)
    no_acc = [r for r in rounds if r.accuracy is None]
    acc_ok = worst is not None and worst <= ACCURACY_POINTS and not no_acc
    lines += ["", "verdict (goal: every fault survived, no data lost, accuracy within 1 point):",
              f"  every fault survived: {'yes' if faults and survived == len(faults) else 'NO'} "
              f"({survived} of {len(faults)})",
              f"  no data lost: {'yes' if rounds and not lost and all(r.ok for r in rounds) else 'NO'} "
              f"(dist_sync parameters equal to the undisturbed run's within {PARAM_TOLERANCE:g} in "
              f"{sum(1 for r in rounds if r.job == 'dist_sync') - len(lost)} of "
              f"{sum(1 for r in rounds if r.job == 'dist_sync')} rounds; every round reached the undisturbed "
              f"run's final step: {'yes' if all(r.ok and r.steps_lost >= 0 for r in rounds) else 'NO'}; "
              f"steps done again after restarts: {sum(max(r.steps_lost, 0) for r in rounds)})",
              f"  accuracy within {ACCURACY_POINTS:g} point: {'yes' if acc_ok else 'NO'} (largest difference "
              + ("-" if worst is None else f"{worst:.2f}") + " points"
              + (f"; rounds without an accuracy: {', '.join(str(r.index) for r in no_acc)}" if no_acc else "")
              + ")"]
    return "\n".join(lines)


def _chaos_round(cluster: Any, kind: str, index: int, root: str, args: argparse.Namespace,
                 ref: Any, train_s: float, injector: FaultInjector, t0: float) -> Round:
    hosts = [h.name for h in cluster.hosts]
    schedule = draw_round(injector.rng, kind, hosts, 2, train_s, index, args.faults)
    plan = ", ".join(f"{f.kind} {f.target} at +{o:.0f} s" for o, f in schedule)
    _say(t0, f"round {index}: {kind}, faults {plan}")
    started = time.monotonic()
    folder = os.path.join(root, f"round-{index:02d}-{kind}")
    res, _, _ = run_round(cluster, kind, folder, args, schedule, injector, t0)
    r = Round(index, kind, [f for _, f in schedule], ok=res.ok, error=res.error, accuracy=res.accuracy,
              accuracy_ref=ref.accuracy, steps=res.steps, false_deaths=res.false_deaths,
              param_diff=_param_diff(res.params, ref.params), seconds=time.monotonic() - started)
    acc = "-" if res.accuracy is None else f"{res.accuracy:.4f}"
    outcome = "ok" if res.ok else "FAILED: " + res.error
    deaths = f"; declared dead / dropped: {res.false_deaths}" if res.false_deaths else ""
    _say(t0, f"round {index} {kind}: {outcome}; accuracy {acc} (undisturbed {ref.accuracy:.4f}), "
             f"{res.steps} steps{deaths}")
    if not res.ok and res.log_tail:
        print(res.log_tail, flush=True)
    return r


def soak(args: argparse.Namespace) -> None:
    """Make the cluster, run the undisturbed references, then rounds under faults; print the report."""
    import shutil
    import tempfile

    from mxtorch.cluster import Cluster

    t0 = time.monotonic()
    root = args.out or tempfile.mkdtemp(prefix="mxtorch-soak-")
    os.makedirs(root, exist_ok=True)
    with Cluster.up(args.hosts, "1gbit", owned=True) as cluster:
        _say(t0, f"cluster {cluster.name}: {', '.join(h.name + ' ' + h.address for h in cluster.hosts)}; "
                 f"runs in {root}")
        refs: dict[str, Any] = {}
        train_s: dict[str, float] = {}
        for kind in args.jobs:
            _say(t0, f"undisturbed {kind} run ...")
            res, start_s, seconds = run_round(cluster, kind, os.path.join(root, f"reference-{kind}"), args,
                                              [], None, t0)
            if not res.ok:
                print(f"bench/soak.py: the undisturbed {kind} run failed ({res.error}); nothing to compare "
                      f"against:\n{res.log_tail}", flush=True)
                return
            refs[kind], train_s[kind] = res, seconds
            _say(t0, f"undisturbed {kind}: accuracy {res.accuracy:.4f}, {res.steps} steps; {start_s:.0f} s "
                     f"to the first step, {seconds:.0f} s from there to the end")
        stop_at = time.monotonic() + args.minutes * 60
        rounds: list[Round] = []
        injector = FaultInjector(cluster, args, random.Random(args.seed))
        # rounds start until --minutes are over; every job gets one, however short that is
        while time.monotonic() < stop_at or len(rounds) < len(args.jobs):
            kind = args.jobs[len(rounds) % len(args.jobs)]
            rounds.append(_chaos_round(cluster, kind, len(rounds) + 1, root, args, refs[kind],
                                       train_s[kind], injector, t0))
        where = f"{args.hosts} hosts (1 Gbit/s links)"
        print("\n" + report(rounds, refs, args, time.monotonic() - t0, where), flush=True)
    if not args.keep and args.out is None:
        shutil.rmtree(root, ignore_errors=True)


def _hog(seconds: float) -> None:
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:  # a CPU hog is this fault's whole point; bounded by `seconds`
        x += 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench/soak.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0, help="how long faults are injected (default 10)")
    ap.add_argument("--seed", type=int, default=0, help="draws the fault schedule (default 0)")
    ap.add_argument("--hosts", type=int, default=3, help="cluster hosts, at least 3 (default 3)")
    ap.add_argument("--jobs", default="horovod,dist_sync",
                    help="jobs soaked in turn (default horovod,dist_sync)")
    ap.add_argument("--faults", default=",".join(FAULT_KINDS),
                    help=f"the kinds of fault to inject (default all: {','.join(FAULT_KINDS)})")
    ap.add_argument("--epochs", type=int, default=6, help="epochs of each job run (default 6)")
    ap.add_argument("--hog-seconds", type=float, default=15.0, help="how long a CPU hog runs (default 15)")
    ap.add_argument("--ps-dead-s", type=float, default=PS_DEAD_S,
                    help=f"MXTORCH_PS_DEAD_S of the dist_sync job (default {PS_DEAD_S:g}: a killed server's "
                         "replacement must register before the scheduler gives up on it); 0: the default")
    ap.add_argument("--round-timeout", type=float, default=600.0,
                    help="seconds one job run may take (default 600)")
    ap.add_argument("--stall-timeout", type=float, default=180.0,
                    help="a job without a training step for this many seconds has failed (default 180)")
    ap.add_argument("--out", default=None,
                    help="keep the runs' files in this folder (default: a temporary one, removed)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--train-worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--hog", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--hostile", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not args.minutes > 0:
        ap.error(f"--minutes must be > 0, got {args.minutes:g}")
    if args.hosts < 3:
        ap.error(f"--hosts {args.hosts}: the soak needs at least 3 hosts (an elastic 2:H job that loses one, "
                 "two dist_sync workers and two servers)")
    from mxtorch.cluster import MAX_HOSTS

    if args.hosts > MAX_HOSTS:
        ap.error(f"--hosts {args.hosts}: at most {MAX_HOSTS}")
    jobs = [j.strip() for j in args.jobs.split(",") if j.strip()]
    from _soak_jobs import JOB_TYPES

    unknown = [j for j in jobs if j not in JOB_TYPES]
    if not jobs or unknown or len(set(jobs)) != len(jobs):
        ap.error(f"--jobs {args.jobs!r}: give one or both of {', '.join(JOB_TYPES)}, comma separated, "
                 "each once")
    args.jobs = jobs
    faults = tuple(f.strip() for f in args.faults.split(",") if f.strip())
    if not faults or any(f not in FAULT_KINDS for f in faults):
        ap.error(f"--faults {args.faults!r}: give some of {', '.join(FAULT_KINDS)}, comma separated")
    args.faults = faults
    if args.epochs < 1:
        ap.error(f"--epochs must be >= 1, got {args.epochs}")
    if not args.hog_seconds > 0 or not args.round_timeout > 0 or not args.stall_timeout > 0:
        ap.error("--hog-seconds, --round-timeout and --stall-timeout must be > 0")
    if not args.ps_dead_s >= 0:
        ap.error(f"--ps-dead-s must be >= 0, got {args.ps_dead_s:g}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.train_worker is not None:
        from _soak_jobs import train_worker

        return train_worker(json.loads(args.train_worker))
    if args.hog is not None:
        _hog(args.hog)
        return 0
    if args.hostile is not None:
        from _soak_hostile import send_all

        spec = json.loads(args.hostile)
        print(json.dumps(send_all([tuple(t) for t in spec["targets"]], spec["seed"])), flush=True)
        return 0
    from mxtorch.cluster import support_problem

    problem = support_problem()
    if problem is not None:
        print(f"bench/soak.py: error: the soak needs network namespaces: {problem}", file=sys.stderr)
        return 2
    soak(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
