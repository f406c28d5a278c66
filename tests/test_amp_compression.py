"""AMP with a compressing store: overflows are caught before compression, on every worker, and
never reach the error-feedback residuals (real processes, 'horovod' + 2bit)."""

import os

import pytest
import torch

import mxtorch as mx
from mxtorch import amp, autograd, gluon
from mxtorch.amp import LossScaler
from mxtorch.distributed.testing import run_workers
from mxtorch.gluon import nn

LR = {"learning_rate": 0.1, "momentum": 0.9}
TWO_BIT = {"type": "2bit", "threshold": 0.05}


def _net():
    torch.manual_seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="tanh", in_units=10), nn.Dense(4, in_units=16))
    net.initialize(mx.init.Xavier())
    return net


def _batch(rank, step):
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(8, 10, generator=g), torch.randint(0, 4, (8,), generator=g).float()


def amp_with_2bit(bad_rank, bad_step, steps, use_amp):
    """``steps`` steps; with AMP, ``bad_rank`` gets an inf gradient at ``bad_step``; without AMP
    that step is left out (what a skipped step must amount to)."""
    rank = int(os.environ["RANK"])
    net = _net()
    trainer = gluon.Trainer(net.collect_params(), "sgd", LR, kvstore="horovod", compression_params=TWO_BIT)
    scaler = amp.init_trainer(trainer, LossScaler(init_scale=2.0 ** 10)) if use_amp else None
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    comp = trainer._kvstore.compressor
    out = {}
    for step in range(steps):
        if step == bad_step and not use_amp:
            continue
        x, y = _batch(rank, step)
        with autograd.record():
            loss = loss_fn(net(x), y)
        if use_amp:
            with amp.scale_loss(loss, trainer) as scaled:
                autograd.backward(scaled)
        else:
            loss.backward()
        if step == bad_step:
            if rank == bad_rank:
                next(iter(net.collect_params().values())).grad()[0, 0] = float("inf")
            before = [p.data().detach().clone() for p in net.collect_params().values()]
            residuals = {k: v.clone() for k, v in comp.state_dict()["residuals"].items()}
        trainer.step(x.shape[0])
        if step == bad_step:
            out["skipped"] = all(torch.equal(a, p.data().detach())
                                 for a, p in zip(before, net.collect_params().values()))
            out["residuals_kept"] = all(torch.equal(v, comp.residual(k)) for k, v in residuals.items())
            out["scale_after_overflow"] = scaler.loss_scale
    res = comp.state_dict()["residuals"].values()
    out["residuals_finite"] = all(bool(torch.isfinite(v).all()) for v in res)
    out["weights"] = [p.data().detach().clone() for p in net.collect_params().values()]
    return out


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_overflow_on_one_worker_skips_everywhere_before_compression():
    got = run_workers(amp_with_2bit, 2, 1, 2, 5, True, timeout=120)
    ref = run_workers(amp_with_2bit, 2, 1, 2, 5, False, timeout=120)
    for rank in (0, 1):
        r = got[rank]
        assert r["skipped"] and r["residuals_kept"] and r["residuals_finite"]
        assert r["scale_after_overflow"] == 2.0 ** 9
        # the loss scale is divided out before compression (exactly: it is a power of two), so
        # the run equals the fp32 run without the skipped step, bit for bit
        for a, b in zip(r["weights"], ref[rank]["weights"]):
            assert torch.equal(a, b)
    assert all(torch.equal(a, b) for a, b in zip(got[0]["weights"], got[1]["weights"]))
