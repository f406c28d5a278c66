"""AMP with row-sparse gradients (nn.Embedding(sparse_grad=True)): unscaling reaches the sparse
gradient itself, also when autograd left it uncoalesced (duplicate rows), both when the user
unscales (amp.unscale, e.g. to clip) and when a compressing store unscales before compression."""

import os

import pytest
import torch

import mxtorch as mx
from mxtorch import amp, autograd, gluon
from mxtorch.amp import LossScaler
from mxtorch.distributed.testing import run_workers
from mxtorch.gluon import nn

SCALE = 2.0 ** 10  # a power of two: scaling then unscaling is exact


class EmbedNet(nn.Block):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 6, sparse_grad=True)
        self.out = nn.Dense(4, in_units=12)

    def forward(self, x):
        return self.out(self.emb(x).reshape(x.shape[0], -1))


def _net():
    torch.manual_seed(0)
    net = EmbedNet()
    net.initialize(mx.init.Xavier())
    return net


def _batch(rank, step):
    g = torch.Generator().manual_seed(1000 * rank + step)
    # 8 samples x 2 ids out of 5 rows: repeated rows, so the sparse gradient is uncoalesced
    return torch.randint(0, 5, (8, 2), generator=g), torch.randint(0, 4, (8,), generator=g).float()


def _backward(net, trainer, x, y, use_amp):
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    with autograd.record():
        loss = loss_fn(net(x), y)
    if use_amp:
        with amp.scale_loss(loss, trainer) as scaled:
            autograd.backward(scaled)
    else:
        loss.backward()


@pytest.fixture(autouse=True)
def _amp_off():
    amp.reset()
    yield
    amp.reset()


def test_amp_unscale_reaches_an_uncoalesced_sparse_gradient():
    net = _net()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    amp.init_trainer(trainer, LossScaler(init_scale=SCALE))
    x, y = _batch(0, 0)
    _backward(net, trainer, x, y, True)
    g = net.emb.weight.grad()
    assert g.is_sparse and not g.is_coalesced()
    scaled = g.coalesce().to_dense().clone()
    assert amp.unscale(trainer) is False
    assert torch.equal(net.emb.weight.grad().coalesce().to_dense(), scaled / SCALE)


def _train(use_amp, steps=4):
    net = _net()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    if use_amp:
        amp.init_trainer(trainer, LossScaler(init_scale=SCALE))
    for step in range(steps):
        x, y = _batch(0, step)
        _backward(net, trainer, x, y, use_amp)
        if use_amp:
            amp.unscale(trainer)  # as a script that clips gradients does
        trainer.step(x.shape[0])
    return [p.data().detach().clone() for p in net.collect_params().values()]


def test_user_unscaled_sparse_training_equals_fp32():
    for a, b in zip(_train(True), _train(False)):
        assert torch.equal(a, b)


def sparse_amp_with_2bit(steps, use_amp):
    rank = int(os.environ["RANK"])
    net = _net()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                            kvstore="horovod", compression_params={"type": "2bit", "threshold": 0.05})
    if use_amp:
        amp.init_trainer(trainer, LossScaler(init_scale=SCALE))
    for step in range(steps):
        x, y = _batch(rank, step)
        _backward(net, trainer, x, y, use_amp)
        trainer.step(x.shape[0])
    residuals = trainer._kvstore.compressor.state_dict()["residuals"]
    return {"weights": [p.data().detach().clone() for p in net.collect_params().values()],
            "residuals": {k: v.clone() for k, v in residuals.items()}}


def test_compressing_store_sees_unscaled_dense_gradients_next_to_sparse_ones():
    got = run_workers(sparse_amp_with_2bit, 2, 4, True, timeout=120)
    ref = run_workers(sparse_amp_with_2bit, 2, 4, False, timeout=120)
    for rank in (0, 1):
        # the scale is divided out before compression, so 2bit quantizes the true gradients and
        # keeps the same residuals: the AMP run equals the fp32 run bit for bit
        assert got[rank]["residuals"].keys() == ref[rank]["residuals"].keys()
        for k, v in ref[rank]["residuals"].items():
            assert torch.equal(got[rank]["residuals"][k], v), k
        for a, b in zip(got[rank]["weights"], ref[rank]["weights"]):
            assert torch.equal(a, b)
