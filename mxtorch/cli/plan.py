"""``mxtorch plan``: rank the parallel layouts of a model-zoo network for a job (mxtorch.parallel.plan).

    mxtorch plan --model resnet50_v1 --batch-size 256 --world-size 8 --memory 16GiB [--bandwidth 10Gbit]

Per-layer costs are measured here on a few samples of ``--input-shape`` (default: the model's
usual input).  Unless ``--bandwidth`` is given, a short local probe with the job's process count
(at most 8) measures the all-reduce bandwidth and latency and each layout's fixed costs (tiny runs
of every dp x pp x tp layout: the schedule's per-micro-batch cost, tensor-parallel dispatch); with
``--bandwidth`` those fixed costs are left out and each message costs 50 us.
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
    return p


def run(args: argparse.Namespace) -> int:
    import torch

    import mxtorch as mx
    from mxtorch import parallel

    net = mx.gluon.model_zoo.vision.get_model(args.model, classes=args.classes)
    net.initialize(mx.init.Xavier())
    if args.input_shape:
        shape = tuple(int(v) for v in args.input_shape.split(","))
    else:
        shape = _SHAPES.get(args.model, (3, 224, 224))
    sample = torch.randn(args.samples, *shape)
    with mx.autograd.predict_mode():
        net(sample)  # completes deferred shapes
    try:
        plans = parallel.plan(net, sample, world_size=args.world_size, memory_per_device=args.memory,
                              batch_size=args.batch_size, bandwidth=args.bandwidth,
                              optimizer_states=args.optimizer_states)
    except mx.MXNetError as e:
        raise SystemExit(str(e)) from None
    print(f"{args.model}, global batch {args.batch_size}, {args.world_size} devices with {args.memory} each: "
          f"{len(plans)} layouts fit")
    print(f"{'#':>3} {'dp':>3} {'pp':>3} {'tp':>3} {'m':>3} {'schedule':<8} {'ckpt':<5} {'step ms':>9} "
          f"{'MiB/device':>11}  stages start at")
    for i, p in enumerate(plans[:args.top]):
        c = p.config
        print(f"{i + 1:>3} {c.dp:>3} {c.pp:>3} {c.tp:>3} {p.micro_batches:>3} {p.schedule:<8} "
              f"{'yes' if p.checkpointing else 'no':<5} {p.predicted_step_s * 1e3:>9.1f} "
              f"{p.predicted_memory_bytes / 2**20:>11.1f}  {', '.join(p.split_points) or '-'}")
    print("\nwhy the first:\n" + plans[0].explain())
    return 0
