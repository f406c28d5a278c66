"""``mxtorch plan``: rank the parallel layouts of a model-zoo network for a job (mxtorch.parallel.plan).

    mxtorch plan --model resnet50_v1 --batch-size 256 --world-size 8 --memory 16GiB [--bandwidth 10Gbit]
                 [--cores N]

Per-layer costs are measured here on a few samples of ``--input-shape`` (default: the model's
usual input).  Unless ``--bandwidth`` is given, the plan is for a job on this machine: a short
local probe with the job's process count (at most 8) measures the all-reduce bandwidth and latency
and each layout's fixed costs (tiny runs of every dp x pp x tp layout: the schedule's
per-micro-batch cost, tensor-parallel dispatch), and the job's processes share this machine's
usable CPUs (its affinity mask).  ``--bandwidth`` describes another machine or cluster: those fixed
costs are left out, each message costs 50 us and each process has cores of its own, unless
``--cores`` says how many the job's processes share.

``--cores N``: the job's processes share N cores; with more processes than cores a plan takes at
least all its processes' CPU work over the N cores and its pipeline slots stretch (the
``cores`` argument of ``mxtorch.parallel.plan``); ``--cores 0``: a core (or device) per process.
"""

from __future__ import annotations

import argparse
from typing import Any

_SHAPES = {"mlp": (1, 28, 28), "lenet": (1, 28, 28), "lenet_bn": (1, 28, 28)}


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("plan", help="rank data/pipeline/tensor-parallel layouts of a model for a job",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="mlp", help="model-zoo name")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=256, help="global batch")
    p.add_argument("--world-size", type=int, default=4, help="devices (processes) of the job")
    p.add_argument("--memory", default="16GiB", help="memory per device, e.g. 16GiB")
    p.add_argument("--bandwidth", default=None, help="e.g. 10Gbit (default: measured by a local probe)")
    p.add_argument("--input-shape", default=None, help="one sample's shape, e.g. 3,224,224")
    p.add_argument("--samples", type=int, default=4, help="samples the layers are timed on")
    p.add_argument("--top", type=int, default=10, help="plans to print")
    p.add_argument("--optimizer-states", type=int, default=1, help="state tensors per parameter (Adam: 2)")
    p.add_argument("--cores", type=int, default=None,
                   help="cores the job's processes share (default: this machine's usable CPUs without "
                        "--bandwidth, a core per process with it; 0: a core per process)")
    return p


def job_cores(args: argparse.Namespace) -> int | None:
    """The ``cores`` the plan is for: ``--cores`` (0: None, a core per process), else this machine's
    usable CPUs when the plan is for a job here (no ``--bandwidth``: the probe measures this machine)."""
    from mxtorch.parallel.planner import usable_cores

    if args.cores is not None:
        if args.cores < 0:
            raise SystemExit(f"--cores must be >= 0 (0: a core per process), got {args.cores}")
        return args.cores or None
    return usable_cores() if args.bandwidth is None else None


def run(args: argparse.Namespace) -> int:
    import torch

    import mxtorch as mx
    from mxtorch import parallel

    cores = job_cores(args)
    # user errors are one line (mxtorch.cli.main), not a traceback
    try:
        shape = (tuple(int(v) for v in args.input_shape.split(",")) if args.input_shape
                 else _SHAPES.get(args.model, (3, 224, 224)))
    except ValueError:
        raise SystemExit(f"--input-shape {args.input_shape!r}: write one sample's shape as integers, "
                         "e.g. 3,224,224") from None
    try:
        net = mx.gluon.model_zoo.vision.get_model(args.model, classes=args.classes)
    except ValueError as e:
        raise SystemExit(f"--model: {e}") from None
    net.initialize(mx.init.Xavier())
    sample = torch.randn(args.samples, *shape)
    with mx.autograd.predict_mode():
        net(sample)  # completes deferred shapes
    try:
        plans = parallel.plan(net, sample, world_size=args.world_size, memory_per_device=args.memory,
                              batch_size=args.batch_size, bandwidth=args.bandwidth,
                              optimizer_states=args.optimizer_states, cores=cores)
    except mx.MXNetError as e:
        raise SystemExit(str(e)) from None
    print(f"{args.model}, global batch {args.batch_size}, {args.world_size} devices with {args.memory} each: "
          f"{len(plans)} layouts fit" + (f"; the processes share {cores} cores" if cores else ""))
    print(f"{'#':>3} {'dp':>3} {'pp':>3} {'tp':>3} {'zero':>4} {'m':>3} {'schedule':<8} {'ckpt':<5} "
          f"{'step ms':>9} {'MiB/device':>11}  stages start at")
    for i, p in enumerate(plans[:args.top]):
        c = p.config
        print(f"{i + 1:>3} {c.dp:>3} {c.pp:>3} {c.tp:>3} {c.zero:>4} {p.micro_batches:>3} {p.schedule:<8} "
              f"{'yes' if p.checkpointing else 'no':<5} {p.predicted_step_s * 1e3:>9.1f} "
              f"{p.predicted_memory_bytes / 2**20:>11.1f}  {', '.join(p.split_points) or '-'}")
    print("\nwhy the first:\n" + plans[0].explain())
    return 0
