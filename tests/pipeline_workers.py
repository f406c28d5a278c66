"""Rank functions of tests/test_pipeline.py (importable by the ranks that run_workers starts)."""

from __future__ import annotations

from typing import Any

import torch

GLOBAL_BATCH = 16
IN, OUT = 8, 4


def build_mlp(seed: int = 0) -> Any:
    import mxtorch as mx
    from mxtorch.gluon import nn

    torch.manual_seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=IN), nn.Dense(16, activation="tanh", in_units=16),
            nn.Dense(16, activation="relu", in_units=16), nn.Dense(12, activation="tanh", in_units=16),
            nn.Dense(12, activation="relu", in_units=12), nn.Dropout(0.0), nn.Dense(OUT, in_units=12))
    net.initialize(mx.init.Xavier())
    return net


def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    x = torch.randn(GLOBAL_BATCH, IN, generator=g)
    return x, torch.randint(0, OUT, (GLOBAL_BATCH,), generator=g).float()


def reference(steps: int = 5) -> dict[str, Any]:
    """Single-process training on the global batch: parameters after ``steps`` and the output after."""
    from mxtorch import autograd, gluon

    net = build_mlp()
    x, y = data()
    tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    losses = []
    for _ in range(steps):
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        tr.step(GLOBAL_BATCH)
        losses.append(float(loss.detach().mean()))
    return {"params": {k: p.data().detach().clone() for k, p in net._collect_params_with_prefix().items()},
            "out": net(x).detach(), "losses": losses}


def train(dp: int, pp: int, schedule: str, micro: int, stages_per_rank: int, path: str,
          steps: int = 5, tp: int = 1, ckpt: bool = False) -> dict[str, Any]:
    """Pipelined training of build_mlp on this dp rank's share; saves to ``path``; infers on the batch."""
    from mxtorch import gluon, parallel

    net = build_mlp()
    x, y = data()
    pnet = parallel.parallelize(net, parallel.ParallelConfig(dp=dp, pp=pp, tp=tp), micro_batches=micro,
                                schedule=schedule, stages_per_rank=stages_per_rank,
                                kvstore="horovod" if dp > 1 else None, checkpoint_activations=ckpt)
    share = GLOBAL_BATCH // dp
    mine = slice(pnet.dp_rank * share, (pnet.dp_rank + 1) * share)
    xs, ys = x[mine], y[mine]
    tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                       kvstore=pnet.kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    losses = []
    for _ in range(steps):
        losses.append(pnet.train_step(xs, ys, loss_fn))
        tr.step(GLOBAL_BATCH)
    pnet.save_parameters(path)
    out = pnet(x)
    return {"losses": losses, "out": out, "stages": pnet.stages, "dp_rank": pnet.dp_rank,
            "pp_rank": pnet.pp_rank, "n_params": len(pnet.collect_params()), "bytes": pnet.param_bytes(),
            "plan": pnet.tp_plan, "allreduces": getattr(pnet.kvstore, "gradient_allreduces", None),
            "buckets": len(pnet.kvstore._grad_sync.buckets) if dp > 1 else None}


def train_all_schedules(path_prefix: str) -> dict[str, Any]:
    """pp=2 on two ranks: every schedule (the looped ones with two stages per rank)."""
    out = {}
    runs = [("gpipe", 4, 1), ("1f1b", 4, 1), ("interleaved", 4, 2), ("zero_bubble", 4, 2)]
    for schedule, micro, spr in runs:
        out[schedule] = train(1, 2, schedule, micro, spr, f"{path_prefix}-{schedule}.params")
    out["1f1b_ckpt"] = train(1, 2, "1f1b", 4, 1, f"{path_prefix}-1f1b_ckpt.params", ckpt=True)
    return out


def load_into_other_pp(path: str, pp: int) -> torch.Tensor:
    """A fresh net (other seed), parallelized with ``pp`` stages, loads ``path``; its inference output."""
    from mxtorch import parallel

    net = build_mlp(seed=0)
    pnet = parallel.parallelize(net, parallel.ParallelConfig(pp=pp), micro_batches=2, schedule="gpipe",
                                kvstore=None)
    pnet.load_parameters(path)
    return pnet(data()[0])


def errors() -> dict[str, str]:
    """The clear errors (two ranks): a world that does not match, a batch that does not divide, seeds."""
    import mxtorch as mx
    from mxtorch import gluon, parallel

    out: dict[str, str] = {}
    try:
        parallel.parallelize(build_mlp(), parallel.ParallelConfig(dp=1, pp=3))
    except mx.MXNetError as e:
        out["world"] = str(e)
    pnet = parallel.parallelize(build_mlp(), parallel.ParallelConfig(pp=2), micro_batches=3, kvstore=None)
    try:
        x, y = data()
        pnet.train_step(x, y, gluon.loss.SoftmaxCrossEntropyLoss())
    except mx.MXNetError as e:
        out["micro"] = str(e)
    try:
        parallel.parallelize(build_mlp(seed=pnet.pp_rank), parallel.ParallelConfig(pp=2), kvstore=None)
    except mx.MXNetError as e:
        out["seed"] = str(e)
    return out


def resnet_one_step() -> float:
    """A model-zoo resnet18_v1 (thumbnail, 10 classes) pipelined over two ranks trains one step."""
    import mxtorch as mx
    from mxtorch import gluon, parallel

    torch.manual_seed(0)
    net = mx.gluon.model_zoo.vision.get_model("resnet18_v1", classes=10, thumbnail=True)
    net.initialize(mx.init.Xavier())
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (4,), generator=g).float()
    net(x)
    pnet = parallel.parallelize(net, parallel.ParallelConfig(pp=2), micro_batches=2, schedule="1f1b",
                                sample_input=x[:2], kvstore=None)
    tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.05})
    before = {k: p.data().detach().clone() for k, p in pnet.collect_params().items()}
    loss = pnet.train_step(x, y, gluon.loss.SoftmaxCrossEntropyLoss())
    tr.step(4)
    changed = sum(not torch.equal(before[k], p.data()) for k, p in pnet.collect_params().items())
    assert changed > 0, "no parameter changed"
    return loss


def die_mid_pipeline(report: str) -> None:
    """Rank 1 is killed (SIGKILL) during the third step; rank 0 writes what it saw to ``report``."""
    import os
    import signal
    import time

    from mxtorch import gluon, parallel

    pnet = parallel.parallelize(build_mlp(), parallel.ParallelConfig(pp=2), micro_batches=2, kvstore=None)
    x, y = data()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for step in range(5):
        if step == 2 and pnet.pp_rank == 1:
            time.sleep(0.5)  # rank 0 is waiting for this stage's gradients by now
            os.kill(os.getpid(), signal.SIGKILL)
        t0 = time.monotonic()
        try:
            pnet.train_step(x, y, loss_fn)
        except Exception as e:
            with open(report, "w") as f:
                f.write(f"{time.monotonic() - t0:.2f}\n{type(e).__name__}: {e}")
            raise


def amp_and_grad_add() -> dict[str, Any]:
    """pp=2: AMP (bf16, loss scaling) with an overflow on stage 1 only; then grad_req='add' over two
    batches."""
    from mxtorch import amp, gluon, parallel
    from mxtorch.amp import LossScaler

    out: dict[str, Any] = {}
    amp.init("bfloat16")
    try:
        pnet = parallel.parallelize(build_mlp(), parallel.ParallelConfig(pp=2), micro_batches=4, kvstore=None)
        tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
        scaler = amp.init_trainer(tr, LossScaler(init_scale=2.0 ** 8))
        x, y = data()
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        try:
            pnet.train_step(x, y, loss_fn)
        except Exception as e:
            out["no_trainer"] = str(e)
        losses = []
        for _ in range(3):
            losses.append(pnet.train_step(x, y, loss_fn, trainer=tr))
            tr.step(GLOBAL_BATCH)
        before = [p.data().detach().clone() for p in pnet.collect_params().values()]
        handle = None
        if pnet.pp_rank == 1:  # an overflow during backward on one stage only: both must skip the step
            first = next(iter(pnet.collect_params().values())).data()
            handle = first.register_hook(lambda g: g * float("inf"))
        pnet.train_step(x, y, loss_fn, trainer=tr)
        if handle is not None:
            handle.remove()
        tr.step(GLOBAL_BATCH)
        now = [p.data() for p in pnet.collect_params().values()]
        out["unchanged"] = all(torch.equal(b, a) for b, a in zip(before, now))
        out["scale"] = scaler.loss_scale
        out["losses"] = losses
    finally:
        amp.reset()
    # grad_req='add': two local batches accumulate, one step of their sum equals one step on both
    pnet = parallel.parallelize(build_mlp(), parallel.ParallelConfig(pp=2), micro_batches=2, kvstore=None)
    params = pnet.collect_params()
    params.setattr("grad_req", "add")
    tr = gluon.Trainer(params, "sgd", {"learning_rate": 0.1})
    x, y = data()
    half = GLOBAL_BATCH // 2
    pnet.train_step(x[:half], y[:half], gluon.loss.SoftmaxCrossEntropyLoss())
    pnet.train_step(x[half:], y[half:], gluon.loss.SoftmaxCrossEntropyLoss())
    tr.step(GLOBAL_BATCH)
    out["add"] = {k: p.data().detach().clone() for k, p in pnet._own_params().items()}
    return out


def build_convnet(seed: int = 0) -> Any:
    import mxtorch as mx
    from mxtorch.gluon import nn

    torch.manual_seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, kernel_size=3, in_channels=1, activation="relu"), nn.MaxPool2D(2),
            nn.Flatten(), nn.Dense(16, activation="relu", in_units=36), nn.Dense(OUT, in_units=16))
    net.initialize(mx.init.Xavier())
    return net


def image_data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, OUT, (8,), generator=g).float()


def one_process(net: Any, x: torch.Tensor, y: torch.Tensor, steps: int) -> dict[str, Any]:
    """``steps`` SGD-momentum steps of ``net`` on the whole batch in this process: the reference."""
    from mxtorch import autograd, gluon

    tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    losses = []
    for _ in range(steps):
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        tr.step(x.shape[0])
        losses.append(float(loss.detach().mean()))
    return {"params": {k: p.data().detach().clone() for k, p in net._collect_params_with_prefix().items()},
            "out": net(x).detach(), "losses": losses}


def convnet_reference(steps: int = 5) -> dict[str, torch.Tensor]:
    return one_process(build_convnet(), *image_data(), steps)["params"]


def train_convnet_tp(path: str, steps: int = 5, dp: int = 1, pp: int = 1) -> dict[str, Any]:
    """The convnet with tp=2 (its Dense pair split, the convolution replicated), saved to ``path``;
    with ``pp=2`` the second stage is the Dense pair, with ``dp=2`` each replica takes half the batch."""
    from mxtorch import gluon, parallel

    cfg = parallel.ParallelConfig(dp=dp, pp=pp, tp=2)
    pnet = parallel.parallelize(build_convnet(), cfg, micro_batches=2,
                                schedule="gpipe" if pp == 1 else "1f1b",
                                kvstore="horovod" if dp > 1 else None,
                                split_points=["3"] if pp == 2 else None)
    x, y = image_data()
    share = x.shape[0] // dp
    mine = slice(pnet.dp_rank * share, (pnet.dp_rank + 1) * share)
    tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                       kvstore=pnet.kvstore)
    for _ in range(steps):
        pnet.train_step(x[mine], y[mine], gluon.loss.SoftmaxCrossEntropyLoss())
        tr.step(8)
    pnet.save_parameters(path)
    return {"plan": pnet.tp_plan}
