"""Gradient compression inside the allreduce KVStore and the Trainer, with real processes."""

import os
import sys

import pytest
import torch

from mxtorch.distributed.testing import run_workers

sys.path.insert(0, os.path.dirname(__file__))
import compression_workers  # noqa: E402


@pytest.mark.parametrize("params", [
    {"type": "2bit", "threshold": 0.5},
    {"type": "1bit"},
    {"type": "fp16"},
    {"type": "bf16"},
    {"type": "topk", "ratio": 0.25},
])
def test_compressed_pushpull_sums_decompressed_payloads(params):
    res = run_workers(compression_workers.compressed_pushpull, 2, params, 2, timeout=120)
    for r in res:
        assert r["max_err"] < 1e-5
    if params["type"] == "2bit":
        # 37 values -> 3 packed int32 words per step, sent to the one peer, 3 steps
        assert res[0]["wire"] == 3 * 4 * 3
    if params["type"] == "fp16":
        # summable: all-reduced, 2(n-1)/n of the 37 fp16 values per step, 3 steps
        assert res[0]["wire"] == 3 * 37 * 2


@pytest.mark.parametrize("params", [{"type": "fp16"},
                                    pytest.param({"type": "2bit", "threshold": 0.5}, marks=pytest.mark.slow)])
def test_compressed_pushpull_on_three_workers(params):
    # three ranks: the fp16 sum is all-reduced (two roundings to fp16), 2bit payloads all-gathered
    res = run_workers(compression_workers.compressed_pushpull, 3, params, 3, timeout=180)
    for r in res:
        # (the ring may add the three fp16 payloads in another order than the replay: one fp16
        # rounding of a sum of magnitude < 8 apart at most)
        assert r["max_err"] < (4e-3 if params["type"] == "fp16" else 1e-5)
        assert torch.equal(r["last"], res[0]["last"])  # every replica gets the same bits
    per_step = int(37 * 2 * 2 * 2 / 3) if params["type"] == "fp16" else 3 * 4 * 2
    assert res[0]["wire"] == 3 * per_step


@pytest.mark.parametrize("params", [{"type": "fp16"}, {"type": "bf16"}, {"type": "topk", "ratio": 0.3},
                                    {"type": "2bit", "threshold": 0.5}])
def test_compressed_pushpull_of_many_keys_in_payload_buckets(params):
    # topk payloads hold values and int64 indices: two buckets of different dtypes; the big key's
    # payload (fp16: 1.4 MB) fills a bucket whose all-gather starts before the other keys are done
    for r in run_workers(compression_workers.compressed_pushpull_many, 2, params, 2, timeout=120):
        assert r["max_err"] < 1e-4


@pytest.mark.parametrize("world", [2, 3])
def test_powersgd_is_the_papers_algorithm_over_all_reduces(world):
    res = run_workers(compression_workers.powersgd_pushpull, world, world, 3, timeout=180)
    for r in res:
        assert r["max_err"] < 1e-4, r  # the rank-1 approximation of the sum, replayed
        assert r["residual_err"] < 1e-4, r  # each worker keeps M_i - P Q_i^T
        assert r["low_err"] < 1e-4 and r["low_residual"] < 1e-4, r  # a rank-1 sum is exact
        assert r["vec_err"] < 1e-6, r
        assert torch.equal(r["last"], res[0]["last"])  # every replica gets the same bits
    # per step two all-reduces (2(n-1)/n of their bytes each): the P's of both matrices with
    # the 1-d key (12 + 8 + 7 floats), then the two Q's (10 + 6 floats)
    share = 2 * (world - 1) / world
    assert res[0]["wire"] == 3 * (int((12 + 8 + 7) * 4 * share) + int((10 + 6) * 4 * share))


@pytest.mark.parametrize("params", [{"type": "2bit", "threshold": 0.05}, {"type": "fp16"},
                                    {"type": "powersgd", "rank": 1}])
def test_trainer_with_compression_keeps_replicas_equal(params):
    w0, w1 = run_workers(compression_workers.trainer_with_compression, 2, params, timeout=120)
    assert w0 == w1
