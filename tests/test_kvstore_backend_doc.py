"""docs/kvstore_backend.md's SumStore, run exactly as printed: registered by name and used by a
gluon.Trainer on two contexts, plain, with gradient compression and with overlap hooks."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest
import torch
from trainer_runs import train_on_two_contexts

import mxtorch as mx
from mxtorch.kvstore import KVStoreError, base

DOC = Path(__file__).resolve().parents[1] / "docs" / "kvstore_backend.md"


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
    trainer, copies = train_on_two_contexts(store, steps, compression_params=compression,
                                            update_on_kvstore=False)
    for c in copies:  # every context ends with the same weights
        torch.testing.assert_close(c[0], c[1], rtol=0, atol=0)
    return [c[0] for c in copies], trainer


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
