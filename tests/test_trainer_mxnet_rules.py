"""MXNet's Trainer/KVStore rules, each checked against a hand computation.

- stores *sum* what is pushed; ``step(batch_size)`` rescales by ``1/batch_size`` only;
- ``update_on_kvstore`` None/True/False per store, with MXNet's errors;
- a store needs only ``broadcast``/``pushpull``/``type`` to serve a Trainer.
"""

from __future__ import annotations

import pytest
import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.gluon.trainer import TrainerConfigError, TrainerUsageError
from mxtorch.kvstore import KVStoreBase

CTX2 = [mx.cpu(0), mx.cpu(1)]


def _param(ctx=CTX2, **kw):
    x = gluon.Parameter("x", shape=(4,), **kw)
    x.initialize(ctx=ctx, init="zeros")
    return x


def _backward_scaled(x, scales):
    """d(scale_c * sum(w))/dw = scale_c on context c."""
    with autograd.record():
        ys = [(w * s).sum() for w, s in zip(x.list_data(), scales)]
    for y in ys:
        y.backward()


@pytest.mark.parametrize("kv", ["local", "device", "local_allreduce_cpu", "local_allreduce_device",
                                "local_update_cpu", "teststore"])
@pytest.mark.parametrize("update_on_kvstore", [None, False])
def test_contexts_sum_and_step_divides_by_batch_size_only(kv, update_on_kvstore):
    x = _param()
    trainer = gluon.Trainer([x], "sgd", {"learning_rate": 1.0}, kvstore=kv,
                            update_on_kvstore=update_on_kvstore)
    _backward_scaled(x, [1.0, 3.0])
    trainer.step(2)
    # summed gradient 1 + 3 = 4, rescaled by 1/2: w = 0 - 1.0 * 4 / 2
    for w in x.list_data():
        torch.testing.assert_close(w.detach(), torch.full((4,), -2.0))
    assert trainer._kvstore.type == kv


def test_store_names_are_kept():
    for name in ("local", "device", "local_allreduce_cpu", "local_allreduce_device", "local_update_cpu"):
        assert mx.kv.create(name).type == name


def test_update_on_kvstore_defaults_follow_the_store(monkeypatch):
    t = gluon.Trainer([_param()], "sgd", kvstore="local")
    t._init_kvstore()
    assert t._update_on_kvstore is True  # 'local' can run the optimizer
    t = gluon.Trainer([_param()], "sgd", kvstore="teststore")
    t._init_kvstore()
    assert t._update_on_kvstore is False  # it declares no optimizer capability
    t = gluon.Trainer([_param(ctx=[mx.cpu(0)])], "sgd", kvstore="device")
    t._init_kvstore()
    assert t._kvstore is None and t._update_on_kvstore is None  # one context: no store at all
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    t = gluon.Trainer([_param()], "sgd", kvstore="local")
    t._init_kvstore()
    assert t._update_on_kvstore is False
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "yes please")
    t = gluon.Trainer([_param()], "sgd", kvstore="local")
    with pytest.raises(mx.MXNetError, match="MXNET_UPDATE_ON_KVSTORE='yes please'"):
        t._init_kvstore()


def test_impossible_update_on_kvstore_is_a_value_error():
    t = gluon.Trainer([_param()], "sgd", kvstore="teststore", update_on_kvstore=True)
    with pytest.raises(ValueError, match="cannot run the optimizer"):
        t._init_kvstore()
    t = gluon.Trainer([_param(stype="row_sparse")], "sgd", kvstore="local", update_on_kvstore=False)
    with pytest.raises(TrainerConfigError, match="row-sparse weights"):
        t._init_kvstore()
    t = gluon.Trainer([_param(ctx=[mx.cpu(0)])], "sgd", kvstore="local", update_on_kvstore=True)
    with pytest.raises(ValueError, match="needs a KVStore"):
        t._init_kvstore()


def test_update_and_allreduce_refused_while_the_store_updates():
    x = _param()
    t = gluon.Trainer([x], "sgd", kvstore="local")
    _backward_scaled(x, [1.0, 1.0])
    with pytest.raises(TrainerUsageError, match="update_on_kvstore=False"):
        t.update(1)
    with pytest.raises(AssertionError):  # MXNet asserted: code catching AssertionError still works
        t.allreduce_grads()


def test_allreduce_then_update_on_the_contexts():
    x = _param()
    t = gluon.Trainer([x], "sgd", {"learning_rate": 0.5}, kvstore="local", update_on_kvstore=False)
    _backward_scaled(x, [1.0, 2.0])
    t.allreduce_grads()
    for g in x.list_grad():
        torch.testing.assert_close(g, torch.full((4,), 3.0))  # the sum, on every context
    t.update(3)
    for w in x.list_data():
        torch.testing.assert_close(w.detach(), torch.full((4,), -0.5))  # 0 - 0.5 * 3 / 3


def test_reset_kvstore_starts_again_from_the_first_context():
    x = _param()
    t = gluon.Trainer([x], "sgd", {"learning_rate": 1.0}, kvstore="local")
    _backward_scaled(x, [1.0, 1.0])
    t.step(1)
    assert t._kv_initialized and not t._params_to_init
    with torch.no_grad():
        x.list_data()[0].fill_(5.0)  # new values on context 0 only (as a load would write)
    t._reset_kvstore()
    assert t._kvstore is None and not t._kv_initialized and t._params_to_init == [x]
    _backward_scaled(x, [1.0, 1.0])
    t.step(2)
    # the store starts again from context 0's value 5, broadcast to every context, then 5 - 2/2
    for w in x.list_data():
        torch.testing.assert_close(w.detach(), torch.full((4,), 4.0))


class _MinimalStore(KVStoreBase):
    """What an MXNet user writes: no constructor argument, broadcast + pushpull only, and an
    is_capable that raises for capabilities it does not know (as MXNet's own stores do)."""

    def __init__(self):
        self.calls: list[str] = []

    @property
    def type(self):
        return "minimalrulestore"

    def broadcast(self, key, value, out, priority=0):
        self.calls.append("broadcast")
        for o in out if isinstance(out, list) else [out]:
            for t in o if isinstance(o, list) else [o]:
                t.copy_(value[0] if isinstance(value, list) else value)

    def pushpull(self, key, value, out=None, priority=0):
        self.calls.append("pushpull")
        values = value if isinstance(key, list) else [value]
        for vals in values:
            total = sum(v.detach().clone() for v in vals)
            for v in vals:
                v.copy_(total)

    def is_capable(self, capability):
        if capability == KVStoreBase.OPTIMIZER:
            return False
        raise ValueError(f"unknown capability {capability}")


def test_a_user_store_registered_by_class_name_serves_a_trainer():
    KVStoreBase.register(_MinimalStore)
    KVStoreBase.register(_MinimalStore)  # the same class again: no error
    store = mx.kv.create("_minimalstore")
    assert isinstance(store, _MinimalStore)
    x = _param()
    t = gluon.Trainer([x], "sgd", {"learning_rate": 1.0}, kvstore=store)
    _backward_scaled(x, [2.0, 4.0])
    t.step(3)
    assert t._update_on_kvstore is False and store.calls == ["broadcast", "pushpull"]
    for w in x.list_data():
        torch.testing.assert_close(w.detach(), torch.full((4,), -2.0))  # 0 - (2 + 4) / 3
    # by name, as MXNet code passes kvstore='mystore'
    y = _param()
    t = gluon.Trainer([y], "sgd", {"learning_rate": 1.0}, kvstore="_MinimalStore")
    _backward_scaled(y, [1.0, 1.0])
    t.step(1)
    assert isinstance(t._kvstore, _MinimalStore)
    for w in y.list_data():
        torch.testing.assert_close(w.detach(), torch.full((4,), -2.0))


def test_one_parameter_in_two_trainers_keeps_the_latest_for_dense_weights():
    x = _param()
    gluon.Trainer([x], "sgd")
    second = gluon.Trainer([x], "sgd")
    assert x._trainer is second


class _ServerLikeStore(_MinimalStore):
    """Declares what a parameter server declares: several processes, and the optimizer."""

    def is_capable(self, capability):
        return capability in (KVStoreBase.DISTRIBUTED, KVStoreBase.OPTIMIZER)

    def set_optimizer(self, optimizer):
        self.calls.append("set_optimizer")


def test_row_sparse_gradients_on_a_parameter_server_update_there():
    x = gluon.Parameter("x", shape=(4, 2), grad_stype="row_sparse")
    x.initialize(ctx=[mx.cpu(0)], init="zeros")
    store = _ServerLikeStore()
    t = gluon.Trainer([x], "sgd", kvstore=store, update_on_kvstore=False)
    with pytest.raises(ValueError, match="row-sparse gradients on the parameter-server store"):
        t._init_kvstore()  # where MXNet raises it: when the store is set up (at the latest, the first step)
    t = gluon.Trainer([x], "sgd", kvstore=store)
    assert t._update_on_kvstore is True and "set_optimizer" in store.calls


def test_a_stale_gradient_is_an_error_mxnet_code_catches_as_user_warning():
    x, unused = _param(), gluon.Parameter("unused", shape=(2,))
    unused.initialize(ctx=CTX2, init="zeros")
    t = gluon.Trainer([x, unused], "sgd", kvstore="local", update_on_kvstore=False)
    _backward_scaled(x, [1.0, 1.0])
    with pytest.raises(UserWarning, match="ignore_stale_grad=True"):
        t.step(1)


@pytest.mark.parametrize("update_on_kvstore", [None, False])
def test_factor_schedule_through_the_trainer_is_mxnets_repeated_product(update_on_kvstore):
    x = _param()
    sched = mx.lr_scheduler.FactorScheduler(2, factor=0.1, base_lr=1.0)
    t = gluon.Trainer([x], "sgd", {"learning_rate": 1.0, "lr_scheduler": sched},
                      update_on_kvstore=update_on_kvstore)
    want = 1.0
    for i in range(10):
        _backward_scaled(x, [1.0, 1.0])
        t.step(1)
        if i % 2 == 0:
            assert t.learning_rate == want  # exactly: 1 * 0.1 * 0.1 ..., not 0.1 ** k
            want *= 0.1
    assert t._update_on_kvstore is (update_on_kvstore is None)


def test_loading_new_values_resets_a_store_that_holds_the_weights(tmp_path):
    params = gluon.ParameterDict()
    x = params.get("x", shape=(4,))
    params.initialize(ctx=CTX2, init="zeros")
    t = gluon.Trainer(params, "sgd", {"learning_rate": 0.1}, kvstore="local")
    f = str(tmp_path / "x.params")
    params.save(f)  # zeros
    _backward_scaled(x, [1.0, 1.0])
    t.step(1)  # the store now holds -0.2
    params.load(f)  # back to zeros: the store must not bring -0.2 back
    assert t._kvstore is None and not t._kv_initialized
    _backward_scaled(x, [1.0, 1.0])
    t.step(1)
    for w in x.list_data():
        torch.testing.assert_close(w.detach(), torch.full((4,), -0.2))  # from the loaded zeros


def test_a_distributed_store_cannot_be_reset_by_a_load():
    x = _param(ctx=[mx.cpu(0)])
    t = gluon.Trainer([x], "sgd", kvstore=_ServerLikeStore())
    t._init_kvstore()
    assert t._update_on_kvstore
    with pytest.raises(RuntimeError, match="cannot reset the distributed KVStore"):
        x.set_data(torch.ones(4))
    assert x.data().eq(0).all()  # nothing changed
