"""The store interface: capabilities as an enum, overlap hooks and the compressor as part of it,
backends that load only when used."""

from __future__ import annotations

import subprocess
import sys

import pytest

import mxtorch as mx
from mxtorch import kvstore as kv
from mxtorch.kvstore import Capability, KVStoreBase, KVStoreError


def test_capabilities_are_an_enum_that_mxnet_strings_still_match():
    assert KVStoreBase.OPTIMIZER is Capability.OPTIMIZER and Capability.OVERLAP == "overlap"
    store = kv.create("local")
    assert store.is_capable(Capability.OPTIMIZER) and store.is_capable("optimizer")
    assert not store.is_capable(Capability.OVERLAP) and str(Capability.ASYNC) == "async"
    assert {c.value for c in Capability} == {"optimizer", "gradient_compression", "distributed", "overlap",
                                             "async"}


def test_a_store_without_overlap_refuses_the_gradient_hooks_clearly():
    store = kv.create("local")
    with pytest.raises(KVStoreError, match="does not reduce gradients during backward.*'overlap'"):
        store.attach_gradient_hooks([])
    with pytest.raises(KVStoreError, match="use pushpull"):
        store.synchronize_gradients([])
    assert store.compressor is None


def test_unknown_store_names_list_the_known_ones_including_lazy_backends():
    with pytest.raises(KVStoreError, match=r"unknown KVStore type 'dist_snyc': known KVStore types are \[.*"
                                           r"'dist_sync'.*'horovod'.*'local'"):
        kv.create("dist_snyc")
    assert kv.is_registered("DIST_SYNC") and "nccl" in mx.kv.KVStoreBase.kv_registry


_PROBE = """
import sys
import mxtorch as mx
from mxtorch import autograd, gluon
net = gluon.nn.Dense(2, in_units=3)
net.initialize()
trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1}, kvstore='local')
with autograd.record():
    loss = net(mx.nd.ones((4, 3))).sum()
loss.backward()
trainer.step(4)
heavy = ['zmq', 'mxtorch.kvstore.ps', 'mxtorch.kvstore.allreduce', 'mxtorch.distributed.group']
print(sorted(m for m in heavy if m in sys.modules))
mx.kv.AllreduceKVStore  # named: now it loads
print('mxtorch.kvstore.allreduce' in sys.modules, 'zmq' in sys.modules)
"""


def test_single_process_training_loads_no_distributed_backend():
    r = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split("\n")[:2] == ["[]", "True False"], r.stdout
