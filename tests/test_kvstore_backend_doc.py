"""docs/kvstore_backend.md's SumStore, run exactly as printed: registered by name and used by a
gluon.Trainer on two contexts, plain, with gradient compression and with overlap hooks."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest
import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.kvstore import KVStoreError, base

DOC = Path(__file__).resolve().parents[1] / "docs" / "kvstore_backend.md"
CTXS = [mx.cpu(0), mx.cpu(1)]


@pytest.fixture(scope="module")
def sumstore():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    code = blocks[0]
    assert code.startswith('"""SumStore') and len(code.splitlines()) < 100
    module = types.ModuleType("sumstore_doc")
    exec(compile(code, str(DOC), "exec"), module.__dict__)  # noqa: S102 - our own documentation
    yield module
    base._REGISTRY.remove("sumstore")


def _train(store, compression=None, steps=3):
    torch.manual_seed(0)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(8, activation="relu", in_units=6), gluon.nn.Dense(3, in_units=8))
    net.initialize(mx.init.Xavier(), ctx=CTXS)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                            kvstore=store, compression_params=compression, update_on_kvstore=False)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 6, generator=g), torch.randint(0, 3, (16,), generator=g)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(steps):
        with autograd.record():
            losses = [loss_fn(net(xs), ys) for xs, ys in zip(gluon.utils.split_and_load(x, CTXS),
                                                            gluon.utils.split_and_load(y, CTXS))]
        autograd.backward(losses)
        trainer.step(16)
    weights = [p.list_data() for p in net.collect_params().values()]
    for copies in weights:  # every context ends with the same weights
        torch.testing.assert_close(copies[0], copies[1], rtol=0, atol=0)
    return [c[0].detach().clone() for c in weights], trainer


def test_the_documented_store_trains_like_the_local_store(sumstore):
    reference, _ = _train("local")
    store = sumstore.SumStore(capabilities=())
    got, trainer = _train(store)
    assert trainer._kvstore is store and mx.kv.create("SumStore").type == "sumstore"
    for a, b in zip(got, reference):
        torch.testing.assert_close(a, b)


def test_overlap_hooks_see_every_gradient_and_give_the_same_result(sumstore):
    reference, _ = _train("local")
    store = sumstore.SumStore(capabilities=("overlap",))
    got, _ = _train(store)
    # the Trainer sets its store up at the first step (as MXNet), so backwards 2 and 3 are hooked:
    assert store.seen_in_backward == 2 * 4 * 2  # x 4 parameters x 2 contexts
    for a, b in zip(got, reference):
        torch.testing.assert_close(a, b)


def test_compression_goes_through_the_store_and_its_residuals_are_saved(sumstore, tmp_path):
    plain, _ = _train(sumstore.SumStore(capabilities=()))
    store = sumstore.SumStore()
    got, trainer = _train(store, compression={"type": "2bit", "threshold": 0.05})
    assert store.compressor is not None and store.compressor.residual("0.0") is not None
    assert any(not torch.allclose(a, b) for a, b in zip(got, plain))  # 2-bit gradients change the result
    trainer.save_states(str(tmp_path / "t.states"))
    before = store.compressor.residual("0.0").clone()
    store.compressor.reset()
    trainer.load_states(str(tmp_path / "t.states"))
    torch.testing.assert_close(store.compressor.residual("0.0"), before, rtol=0, atol=0)


def test_a_store_without_the_capability_is_refused_clearly(sumstore):
    with pytest.raises(KVStoreError, match="'sumstore' does not support gradient compression"):
        _train(sumstore.SumStore(capabilities=()), compression={"type": "fp16"}, steps=1)
