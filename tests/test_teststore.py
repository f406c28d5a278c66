"""The test store ('teststore', mxtorch/kvstore/teststore.py) drives gluon.Trainer: the same weights
as the local store, the calls the Trainer makes through the public store interface, and a missing
capability refused clearly."""

from __future__ import annotations

import pytest
import torch
from trainer_runs import train_on_two_contexts

from mxtorch.gluon.trainer import TrainerConfigError
from mxtorch.kvstore import Capability
from mxtorch.kvstore.teststore import TestStore


def _train(store, update_on_kvstore=None, steps=3):
    _, copies = train_on_two_contexts(store, steps, update_on_kvstore=update_on_kvstore)
    return [c[0] for c in copies]


def test_the_test_store_is_a_store_and_sums_pushed_values():
    store = TestStore()
    store.init("w", torch.zeros(3))
    store.push("w", [torch.ones(3), 2 * torch.ones(3)])
    out = torch.empty(3)
    store.pull("w", out=out)
    torch.testing.assert_close(out, torch.full((3,), 3.0))
    assert [m for m, _ in store.calls] == ["init", "push", "pull"]
    assert not store.is_capable("optimizer") and not store.is_capable(Capability.OVERLAP)


def test_trainer_with_the_test_store_matches_the_local_store():
    reference = _train("local", update_on_kvstore=False)
    store = TestStore()
    got = _train(store)
    for a, b in zip(got, reference):
        torch.testing.assert_close(a, b)
    # weights are initialized with broadcast, gradients reduced with pushpull, nothing else
    assert store.called("broadcast") >= 1 and store.called("pushpull") >= 3
    assert {m for m, _ in store.calls} <= {"broadcast", "pushpull"}


def test_update_on_the_test_store_runs_its_optimizer():
    reference = _train("local", update_on_kvstore=False)
    store = TestStore(capabilities=[Capability.OPTIMIZER])
    got = _train(store, update_on_kvstore=True)
    assert store.optimizer is not None and store.called("set_optimizer") == 1
    for a, b in zip(got, reference):
        torch.testing.assert_close(a, b)


def test_update_on_a_store_without_optimizer_is_refused():
    message = "'teststore' cannot run the optimizer: create the Trainer with update_on_kvstore=False"
    with pytest.raises(TrainerConfigError, match=message):
        _train(TestStore(), update_on_kvstore=True, steps=1)
