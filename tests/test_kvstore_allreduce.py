"""kvstore 'allreduce' / 'horovod': real 2-process jobs on 127.0.0.1 (gloo)."""

from __future__ import annotations

import sys

import dist_workers as w
import pytest
import torch
from torch.testing import assert_close

from mxtorch import kv
from mxtorch.distributed import env
from mxtorch.distributed.env import DistributedConfigError
from mxtorch.distributed.testing import run_script, run_workers
from mxtorch.kvstore import KVStoreError


def test_registered_names():
    for name in ("allreduce", "horovod", "nccl"):
        assert kv.is_registered(name)


def test_creating_without_a_launch_says_how_to_launch(monkeypatch):
    for name in [n for n in env.__all__ if n.isupper()]:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(DistributedConfigError, match="KVStore 'horovod'.*mxtorch launch -n N"):
        kv.create("horovod")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error shown without GPUs")
def test_nccl_store_without_gpus_is_a_clear_error():
    with pytest.raises(KVStoreError, match="needs CUDA GPUs.*kvstore='allreduce'"):
        kv.create("nccl")


def test_pushpull_broadcast_init_sum_exactly():
    r0, r1 = run_workers(w.kv_semantics, 2, timeout=60)
    for rank, res in enumerate((r0, r1)):
        assert res["meta"] == ("horovod", rank, 2, rank, True, False, True)
        for dtype in (torch.float32, torch.float16, torch.int64):
            expected = (2 * torch.arange(6).reshape(2, 3) + 10).to(dtype)
            assert_close(res[f"inplace_{dtype}"], expected, rtol=0, atol=0)
        value, out = res["out_of_place"]
        assert_close(value, torch.full((4,), float(rank + 1)))  # out given: value untouched
        assert_close(out, torch.full((4,), 3.0))
        for o in res["list"]:  # (1 + 10) + (2 + 20)
            assert_close(o, torch.full((2,), 33.0))
        head, total, smalls = res["batched"]
        assert_close(head, torch.full((3,), 3.0))
        assert total == 3.0 * (1 << 21)
        for k, s in enumerate(smalls):
            assert_close(s, torch.full((k + 1,), 3.0))
        value, outs = res["broadcast"]
        assert_close(value, torch.full((3,), float(rank + 7)))
        for o in outs:
            assert_close(o, torch.full((3,), 7.0))  # rank 0's
        a, b = res["broadcast_list"]
        assert_close(a, torch.ones(2, 2))
        assert_close(b, torch.full((5,), 3.0).half())
        assert_close(res["init"], torch.full((2,), 5.0))
        assert_close(res["reshaped"], torch.full((5,), 1.0))
        for op in ("push", "pull"):
            assert f"so {op} is not meaningful: use pushpull" in res[f"{op}_error"]


def test_shape_dtype_and_key_mismatches_raise_on_every_rank():
    results = run_workers(w.kv_mismatch, 2, timeout=60)
    for rank, msgs in enumerate(results):
        assert msgs["shape"].startswith(f"rank {rank}: pushpull")
        assert "key 'w': rank 1 has shape (3, 5) float32, expected rank 0's (3, 4) float32" in msgs["shape"]
        assert "key 7: rank 1 has shape (2,) float16, expected rank 0's (2,) float32" in msgs["dtype"]
        assert "rank 1 passed keys ['b', 'a'] but rank 0 passed ['a', 'b']" in msgs["keys"]
        assert msgs["after"] == "[2.0, 2.0]"


def test_stuck_peer_ends_in_an_error_within_the_timeout():
    r0, r1 = run_workers(w.kv_stuck_peer, 2, 4.0, timeout=60, env={"MXTORCH_DIST_TIMEOUT": "2"})
    assert r0["error"] is not None and "rank 0 of 2: pushpull of key(s) 'warm' failed" in r0["error"]
    assert "MXTORCH_DIST_TIMEOUT" in r0["error"]
    assert 1.5 < r0["elapsed"] < 5.0


def test_dead_peer_ends_in_an_error_not_a_hang():
    results = run_script([sys.executable, "-c", w.DEAD_PEER_SCRIPT], 2, timeout=60,
                         env={"MXTORCH_DIST_TIMEOUT": "10"})
    rc, out, err = results[0]
    assert rc == 0, err
    assert "ERROR after" in out and "rank 0 of 2: pushpull of key(s) 0 failed" in out, out + err
    assert float(out.split("ERROR after ")[1].split("s:")[0]) < 10.0


def test_gradient_hooks_start_buckets_during_backward():
    for res in run_workers(w.overlap_probe, 2, timeout=60):
        assert res["hooked"] and res["buckets"] >= 4
        assert res["launched_by_hooks"] == [res["buckets"]]  # all started before backward ended
        assert res["launched_at_end"] == res["buckets"]
        for got, expected in zip(res["got"], res["expected"]):
            assert_close(got, expected)


def test_accumulated_gradients_are_reduced_once_per_step_after_the_last_pass():
    for res in run_workers(w.accumulation_probe, 2, timeout=60):
        n = res["buckets"]
        assert n >= 3
        # nothing starts during passes 1 and 2; every bucket during pass 3 (its end-of-backward
        # callback, queued by the hooks that took the gradients, finds all of them started)
        assert res["started"] == [0, 0, n, n, n, 2 * n]
        assert res["launched"] == [n, n]
        assert res["allreduces"] == 2 * n  # once per bucket and step, nothing redone at step time
        for got_step, expected_step in zip(res["got"], res["expected"]):
            for got, expected in zip(got_step, expected_step):
                assert_close(got, expected)


def test_backward_passes_per_step_must_be_a_positive_int():
    from mxtorch.kvstore.allreduce.store import AllreduceKVStore

    kv = AllreduceKVStore.__new__(AllreduceKVStore)  # the setter alone: no process group needed
    for bad in (0, -1, 2.0, True, "3"):
        with pytest.raises(ValueError, match="backward_passes_per_step must be a positive int"):
            kv.backward_passes_per_step = bad

# name, model, micro-batches per step, grad_req, contexts per worker
SCENARIOS = [
    ("mlp", "mlp", 1, "write", 1),      # ranks start from different weights: broadcast at Trainer init
    ("heads", "heads", 1, "write", 1),  # a head without gradient on one rank, then on every rank
    ("conv", "conv", 1, "write", 1),    # shapes inferred at the first forward: set up at the first step
    ("add", "mlp", 2, "add", 1),        # grad_req='add': reduced at step time, no hooks
    ("twice", "mlp", 2, "write", 1),    # two backward passes before a step with hooks attached
    ("ctx2", "mlp", 1, "write", 2),     # two CPU replicas per worker: reduced at step time, no hooks
]


def test_two_workers_train_like_one_process_on_the_whole_batch():
    results = run_workers(w.trainer_scenarios, 2, SCENARIOS, timeout=80)
    for name, model, micro, grad_req, _ in SCENARIOS:
        reference = w.train(model, None, [0, 1], 0 if model == "conv" else 100, micro_batches=micro,
                            grad_req=grad_req)
        for rank, res in enumerate(results):
            assert len(res[name]) == len(reference)
            for i, (got, expected) in enumerate(zip(res[name], reference)):
                where = f"{name}, rank {rank}, param {i}"
                assert_close(got, expected, msg=lambda m, where=where: f"{where}: {m}")


def test_a_worker_leaving_between_backward_and_step_exits_cleanly():
    # the backward started the gradient buckets' all-reduces; leaving without trainer.step must
    # neither abort the interpreter (gloo work still in flight at exit) nor hang
    assert run_workers(w.backward_then_leave, 2, timeout=60) == [1, 1]
