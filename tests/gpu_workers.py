"""Rank functions of tests/test_gpu.py (importable by the ranks that run_workers starts)."""

from __future__ import annotations

from typing import Any


def allreduce_cuda_tensors(kind: str) -> dict[str, Any]:
    """Push/pull CUDA tensors through an allreduce-family store; report sums, devices and backend."""
    import torch

    import mxtorch as mx
    from mxtorch import distributed

    kv = mx.kv.create(kind)
    dev = torch.device("cuda", 0)
    small = torch.full((5,), float(kv.rank + 1), device=dev)
    big = torch.arange(1 << 20, dtype=torch.float32, device=dev) * (kv.rank + 1)
    half = torch.full((7,), 0.5 * (kv.rank + 1), device=dev, dtype=torch.float16)
    kv.init(0, torch.zeros_like(small))
    kv.init(1, torch.zeros_like(big))
    kv.init(2, torch.zeros_like(half))
    kv.pushpull(0, small)
    kv.pushpull(1, big)
    kv.pushpull(2, half)
    n = kv.num_workers
    tri = n * (n + 1) / 2
    torch.cuda.synchronize()
    return {
        "backend": distributed.group.backend(),
        "devices": [str(t.device) for t in (small, big, half)],
        "dtypes": [str(t.dtype) for t in (small, big, half)],
        "small_ok": bool(torch.all(small == tri).item()),
        "big_ok": bool(torch.equal(big, torch.arange(1 << 20, dtype=torch.float32, device=dev) * tri)),
        "half_ok": bool(torch.all(half == 0.5 * tri).item()),
    }


def hvd_trainer_on_cuda() -> list[float]:
    """hvd.DistributedTrainer on a CUDA net: returns the first weight after two steps (equal on ranks)."""
    import torch

    import mxtorch as mx
    import mxtorch.horovod as hvd
    from mxtorch import autograd, gluon
    from mxtorch.gluon import nn

    hvd.init()
    ctx = mx.gpu(0)
    torch.manual_seed(0)
    net = nn.Dense(3, in_units=4)
    net.initialize(mx.init.Xavier(), ctx=ctx)
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)
    tr = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    g = torch.Generator().manual_seed(hvd.rank())
    x = torch.randn(8, 4, generator=g).to(ctx.torch_device)
    y = torch.randint(0, 3, (8,), generator=g).float().to(ctx.torch_device)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(2):
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        tr.step(8)
    return net.weight.data().flatten().tolist()
