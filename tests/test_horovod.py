"""mxtorch.horovod: the horovod.mxnet API on torch.distributed.

Single-process tests cover the JSON object codec, compression and argument errors; the
collectives and training run in real processes (gloo on 127.0.0.1, a free port each) through
the shared ``run_workers`` helper, and each rank checks its results against the definition of
the operation computed from every rank's inputs (see tests/horovod_workers.py).
"""

from __future__ import annotations

import math
import os
import pickle
import re
import sys

import numpy as np
import pytest
import torch

import mxtorch.horovod as hvd
from mxtorch.horovod import _codec
from mxtorch.horovod._distributed_trainer import _split

sys.path.insert(0, os.path.dirname(__file__))
import horovod_workers as workers  # noqa: E402

# ---- object codec (no processes) -----------------------------------------------------------------


def test_codec_round_trips_supported_values():
    value = {
        "none": None, "flag": True, "int": -3, "float": 0.5, "str": "é",
        "list": [1, [2, (3, 4)]], "tuple": (1, "a", None),
        "non_str_keys": {1: "one", (2, 3): "pair", None: 0},
        "__mxtorch__": "a user key that looks like the tag",
        "bytes": b"\x00\x01\xff", "bytearray": bytearray(b"xy"),
        "tensors": [torch.arange(6, dtype=dt).reshape(2, 3) for dt in
                    (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
                     torch.uint8)],
        "bool_tensor": torch.tensor([True, False]), "scalar_tensor": torch.tensor(2.5),
        "empty_tensor": torch.empty(0, 3), "non_contiguous": torch.arange(6.0).reshape(2, 3).t(),
        "ndarray": np.arange(6, dtype=np.float32).reshape(3, 2), "np_scalar": np.int16(7),
    }
    got = _codec.decode(_codec.encode(value))
    assert got.keys() == value.keys()
    plain = ("none", "flag", "int", "float", "str", "list", "tuple", "non_str_keys", "__mxtorch__", "bytes")
    for key in plain:
        assert got[key] == value[key], key
    assert got["bytearray"] == b"xy"
    for a, b in zip(got["tensors"], value["tensors"]):
        assert a.dtype == b.dtype and torch.equal(a, b)
    for key in ("bool_tensor", "scalar_tensor", "empty_tensor", "non_contiguous"):
        assert got[key].dtype == value[key].dtype and torch.equal(got[key], value[key]), key
    assert got["ndarray"].dtype == np.float32 and np.array_equal(got["ndarray"], value["ndarray"])
    assert got["np_scalar"] == 7 and got["np_scalar"].dtype == np.int16


def test_codec_keeps_special_floats():
    got = _codec.decode(_codec.encode([float("nan"), float("inf"), -float("inf")]))
    assert math.isnan(got[0]) and got[1:] == [float("inf"), -float("inf")]


class _WithReduce:
    def __reduce__(self):
        return (print, ("never",))


_cycle: list[object] = []
_cycle.append(_cycle)


@pytest.mark.parametrize("value,where", [
    ({1, 2}, "obj"),
    (_cycle, "obj: it is nested too deeply or contains itself"),
    ({"a": [0, _WithReduce()]}, "obj['a'][1]"),
    (np.array([object()], dtype=object), "obj"),
    (torch.eye(2).to_sparse(), "obj"),
])
def test_codec_refuses_unsupported_values(value, where):
    with pytest.raises(hvd.ObjectEncodingError, match=rf"cannot send {re.escape(where)}"):
        _codec.encode(value)


def test_decode_refuses_pickles_without_running_them(tmp_path):
    marker = tmp_path / "ran"
    raw = pickle.dumps(workers._Exploit(str(marker)))
    with pytest.raises(hvd.ObjectDecodingError, match="looks like a pickle.*never unpickles"):
        _codec.decode(raw, "rank 0")
    assert not marker.exists()


@pytest.mark.parametrize("payload,match", [
    (b"{}", "not an mxtorch JSON payload"),
    (_codec.MAGIC + b"{not json", "not valid JSON"),
    (_codec.MAGIC + b'{"__mxtorch__":"pickle","data":""}', "unknown tag 'pickle'"),
    (_codec.MAGIC + b'{"__mxtorch__":"tensor","dtype":"float32","shape":[2],"data":"AAAA"}', "data bytes"),
    (_codec.MAGIC + b'{"__mxtorch__":"tensor","dtype":"object","shape":[1],"data":""}', "unsupported tensor"),
    (_codec.MAGIC + b'{"__mxtorch__":"ndarray","dtype":"|O","shape":[1],"data":"AAAAAAAAAAA="}',
     "unsupported numpy dtype"),
    (_codec.MAGIC + b'{"__mxtorch__":"tensor","dtype":"int8","shape":[-1],"data":""}', "bad shape"),
])
def test_decode_refuses_malformed_payloads(payload, match):
    with pytest.raises(hvd.ObjectDecodingError, match=match):
        _codec.decode(payload)


# ---- compression and arguments (no processes) ----------------------------------------------------


def test_fp16_compression_round_trip():
    x = torch.randn(100, dtype=torch.float32) * 10
    payload, ctx = hvd.Compression.fp16.compress(x)
    assert payload.dtype == torch.float16
    back = hvd.Compression.fp16.decompress(payload, ctx)
    assert back.dtype == torch.float32
    torch.testing.assert_close(back, x, rtol=1e-3, atol=1e-3)
    for t in (torch.arange(4), torch.ones(2, dtype=torch.bfloat16), torch.ones(2, dtype=torch.float16)):
        p, c = hvd.Compression.fp16.compress(t)
        assert p is t and hvd.Compression.fp16.decompress(p, c) is t
    p, c = hvd.Compression.none.compress(x)
    assert p is x and hvd.Compression.none.decompress(p, c) is x


def test_uninitialized_use_is_a_clear_error():
    assert not hvd.is_initialized()
    for call in (hvd.size, hvd.rank, hvd.local_rank, lambda: hvd.allreduce(torch.ones(2)),
                 lambda: hvd.broadcast_object(1), lambda: hvd.DistributedTrainer([], "sgd")):
        with pytest.raises(hvd.NotInitializedError, match=r"hvd.init\(\)"):
            call()


def test_reduction_op_arguments():
    with pytest.raises(ValueError, match="either average"):
        hvd.allreduce(torch.ones(2), average=True, op=hvd.Sum)
    with pytest.raises(ValueError, match="unknown reduction op"):
        hvd.allreduce(torch.ones(2), op=42)
    with pytest.raises(ValueError, match="reducescatter supports"):
        hvd.reducescatter(torch.ones(2), op=hvd.Max)
    with pytest.raises(TypeError, match="hvd.ProcessSet"):
        hvd.allreduce(torch.ones(2), process_set=object())
    with pytest.raises(TypeError, match="torch.Tensor"):
        hvd.allreduce([1.0, 2.0])


def test_capabilities_are_honest():
    assert hvd.mpi_enabled() is False and hvd.mpi_built() is False
    assert hvd.gloo_built() == torch.distributed.is_gloo_available()
    assert hvd.nccl_built() == torch.distributed.is_nccl_available()
    assert hvd.gloo_enabled() is False  # not initialized


def test_one_process_job_without_a_launcher():
    import mxtorch as mx
    from mxtorch import autograd, gluon
    from mxtorch.distributed.env import world_info_from_env

    if world_info_from_env() is not None:
        pytest.skip("this test process was started by a launcher")
    hvd.init()
    try:
        assert hvd.is_initialized() and not torch.distributed.is_initialized()
        assert (hvd.size(), hvd.rank(), hvd.local_size(), hvd.cross_size()) == (1, 0, 1, 1)
        x = torch.arange(4.0)
        torch.testing.assert_close(hvd.allreduce(x, op=hvd.Sum, postscale_factor=2.0), x * 2)
        assert hvd.allgather(x.reshape(2, 2)).shape == (2, 2)
        assert hvd.broadcast_object({"a": 1}) == {"a": 1} and hvd.allgather_object(3) == [3]
        assert hvd.alltoall(x, splits=[3])[1].tolist() == [3]
        # a one-process DistributedTrainer is a plain Trainer, whatever the predivide factor
        weights = []
        for make in (lambda p: gluon.Trainer(p, "sgd", {"learning_rate": 0.1}, kvstore=None),
                     lambda p: hvd.DistributedTrainer(p, "sgd", {"learning_rate": 0.1},
                                                      gradient_predivide_factor=4.0)):
            net = workers._mlp(3)
            net.initialize(mx.init.Xavier())
            trainer = make(net.collect_params())
            data, label = workers._batch(0)
            for _ in range(2):
                with autograd.record():
                    loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(data), label)
                loss.backward()
                trainer.step(data.shape[0])
            weights.append(workers._weights(net))
        for a, b in zip(*weights):
            torch.testing.assert_close(a, b)
    finally:
        hvd.shutdown()
    assert not hvd.is_initialized()


def test_split_into_groups():
    assert _split(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert _split([1, 2], 5) == [[1], [2]]


# ---- real processes ------------------------------------------------------------------------------


def _run(fn, world_size, *args, timeout=60):
    from mxtorch.distributed.testing import run_workers

    return run_workers(fn, world_size, *args, timeout=timeout)


def _check(results, world_size):
    assert len(results) == world_size
    assert all(r == results[0] for r in results), results
    return results[0]


def test_collectives_two_ranks():
    done = _check(_run(workers.collectives, 2), 2)
    assert "reducescatter" in done and "alltoall" in done and "mxnet arrays" in done


def test_collectives_three_ranks_uneven_parts():
    # uneven allgather/alltoall/reducescatter parts, and fp16 sums accumulated in fp32
    done = _check(_run(workers.collectives, 3, timeout=90), 3)
    assert "fp16 sum" in done


def test_objects_and_pickle_refusal(tmp_path):
    marker = str(tmp_path / "exploit-ran")
    done = _check(_run(workers.objects, 2, marker), 2)
    assert "pickle refused" in done
    assert not os.path.exists(marker)


def test_errors_reach_every_rank_and_topology():
    done = _check(_run(workers.errors_and_topology, 2), 2)
    assert "mismatch" in done and "argument errors" in done


def test_distributed_training_equals_one_process():
    done = _check(_run(workers.training, 2, timeout=90), 2)
    assert "sgd ['use_optimizer']" in done and "broadcast_parameters" in done
