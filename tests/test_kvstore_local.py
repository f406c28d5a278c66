import pytest
import torch

import mxtorch as mx
from mxtorch import kv
from mxtorch.kvstore import KVStoreBase, KVStoreError


@pytest.mark.parametrize("name", ["local", "device"])
def test_push_sums_and_pull_copies(name):
    store = kv.create(name)
    assert store.type == name and store.rank == 0 and store.num_workers == 1
    store.init(3, torch.ones(2, 3))
    store.push(3, [torch.ones(2, 3), 2 * torch.ones(2, 3), 3 * torch.ones(2, 3)])
    outs = [torch.zeros(2, 3), torch.zeros(2, 3)]
    store.pull(3, out=outs)
    for o in outs:
        torch.testing.assert_close(o, torch.full((2, 3), 6.0))


def test_str_keys_and_lists_of_keys():
    store = kv.create("local")
    store.init(["a", "b"], [torch.zeros(2), torch.zeros(3)])
    store.push(["a", "b"], [[torch.ones(2)] * 2, torch.full((3,), 4.0)])
    a, b = torch.empty(2), torch.empty(3)
    store.pull(["a", "b"], out=[a, b])
    torch.testing.assert_close(a, torch.full((2,), 2.0))
    torch.testing.assert_close(b, torch.full((3,), 4.0))


def test_pushpull_in_place_and_out():
    store = kv.create("device")
    store.init(0, torch.zeros(4))
    vals = [torch.ones(4), torch.arange(4.0)]
    store.pushpull(0, vals)
    for v in vals:
        torch.testing.assert_close(v, torch.tensor([1.0, 2.0, 3.0, 4.0]))
    out = torch.empty(4)
    store.pushpull(0, [torch.ones(4)], out=out)
    torch.testing.assert_close(out, torch.ones(4))


def test_broadcast():
    store = kv.create("local")
    outs = [torch.zeros(2), torch.zeros(2)]
    store.broadcast("w", torch.tensor([1.0, 2.0]), out=outs)
    for o in outs:
        torch.testing.assert_close(o, torch.tensor([1.0, 2.0]))


def test_updater_on_store_applies_optimizer():
    store = kv.create("local")
    assert store.is_capable(KVStoreBase.OPTIMIZER)
    store.set_optimizer(mx.optimizer.create("sgd", learning_rate=0.5))
    store.init(0, torch.ones(3))
    store.push(0, [torch.ones(3), torch.ones(3)])  # merged gradient 2
    out = torch.empty(3)
    store.pull(0, out=out)
    torch.testing.assert_close(out, torch.zeros(3))  # 1 - 0.5 * 2


def test_custom_updater():
    store = kv.create("local")
    store._set_updater(lambda key, grad, stored: stored.add_(grad * 10))
    store.init(1, torch.zeros(2))
    store.push(1, torch.ones(2))
    out = torch.empty(2)
    store.pull(1, out=out)
    torch.testing.assert_close(out, torch.full((2,), 10.0))


def test_errors():
    with pytest.raises(KVStoreError, match=r"unknown KVStore type 'dist_bogus'.*'local'"):
        kv.create("dist_bogus")
    store = kv.create("local")
    store.init(0, torch.zeros(2))
    with pytest.raises(KVStoreError, match="duplicate init of key 0"):
        store.init(0, torch.zeros(2))
    with pytest.raises(KVStoreError, match="key 5 has not been initialized"):
        store.push(5, torch.zeros(2))
    with pytest.raises(KVStoreError, match=r"shape mismatch for key 0: stored \(2,\), pushed \(3,\)"):
        store.push(0, torch.zeros(3))
    with pytest.raises(KVStoreError, match="do not mix int and str keys"):
        store.init("x", torch.zeros(1))
    with pytest.raises(KVStoreError, match="pull needs out"):
        store.pull(0)
    with pytest.raises(KVStoreError, match="needs row_ids"):
        store.row_sparse_pull(0, out=mx.nd.sparse.zeros("row_sparse", (2,)))
    with pytest.raises(KVStoreError, match="needs row_sparse outs"):
        store.row_sparse_pull(0, out=torch.zeros(2), row_ids=[0])
    with pytest.raises(KVStoreError, match="no optimizer is set"):
        store.save_optimizer_states("x")


def test_registry_follows_mxnet_rules_for_custom_stores():
    @kv.register
    class EchoStore(kv.LocalKVStore):
        pass

    assert "echostore" in kv.registered_names()
    assert isinstance(kv.create("EchoStore"), EchoStore)
    kv.register(EchoStore)  # the same class again (a module imported twice): nothing changes
    assert isinstance(kv.create("echostore"), EchoStore)

    class Other(kv.LocalKVStore):
        pass

    Other.__name__ = "EchoStore"  # another class under a name already taken: MXNet warns and replaces
    with pytest.warns(UserWarning, match=r"KVStore type 'echostore': .*Other replaces .*EchoStore"):
        kv.register(Other)
    assert type(kv.create("echostore")) is Other
    kv.base._REGISTRY.remove("echostore")


def test_optimizer_states_round_trip(tmp_path):
    store = kv.create("local")
    store.set_optimizer(mx.optimizer.create("sgd", learning_rate=0.1, momentum=0.9))
    store.init(0, torch.ones(3))
    store.push(0, torch.ones(3))
    f = str(tmp_path / "opt.states")
    store.save_optimizer_states(f)
    store2 = kv.create("local")
    store2.set_optimizer(mx.optimizer.create("sgd", learning_rate=0.1, momentum=0.9))
    store2.init(0, torch.ones(3))
    store2.load_optimizer_states(f)
    store.push(0, torch.ones(3))
    store2.push(0, torch.ones(3))
    a, b = torch.empty(3), torch.empty(3)
    store.pull(0, out=a)
    store2.pull(0, out=b)
    # store2 starts from weight 1 but with the saved momentum: one step differs only by the weight
    torch.testing.assert_close(a - b, torch.full((3,), -0.1))
