"""Gradient compression with a ZeroTrainer: real processes over gloo against a plain Trainer on the
'allreduce' store with the same compression, and the refusals (one line, before any work)."""

from __future__ import annotations

import os
import sys

import pytest
import torch
import torch.distributed as dist

from mxtorch import compression
from mxtorch.base import MXNetError
from mxtorch.compression import CompressionError
from mxtorch.distributed.testing import run_workers
from mxtorch.parallel.zero import ZeroTrainer

sys.path.insert(0, os.path.dirname(__file__))
import zero_compression_workers  # noqa: E402
import zero_workers  # noqa: E402


def test_zero_compression_matches_the_allreduce_store(tmp_path) -> None:
    """2 ranks, 5 Adam steps: zero=1 with fp16 and with 2-bit (threshold 0.5, error feedback; also with
    AMP and an overflow on one rank, which must skip the step before anything is compressed), zero=2
    and zero=3 with fp16 (also with AMP: the scaled gradients reduced in fp16, 2**16 times ~0.1 stays
    in range and a power-of-two scale rounds alike) end with the parameters of a plain
    Trainer(kvstore='allreduce') with the same compression_params; the uncompressed ZeroTrainer does
    not (so the comparison sees compression); the reductions and their compression show as spans; the
    2-bit trainer's states hold this rank's residuals under its rank in the data-parallel group, load
    into a new trainer on that rank and are refused on the other."""
    w = zero_compression_workers
    results = run_workers(w.compressed_stages, 2, str(tmp_path), timeout=120)
    for rank, res in enumerate(results):
        for zero, name, amp in (*((z, n, False) for z, n in w.CASES), *w.AMP_CASES):
            for k, (got, want) in enumerate(zip(res[zero, name, amp], res["store", name, amp])):
                torch.testing.assert_close(got, want, atol=1e-5, rtol=0, msg=lambda m, z=zero, n=name, a=amp,
                                           k=k, r=rank: f"zero={z} {n} amp={a} rank {r} #{k}: {m}")
        assert res["compressors"] == {f"{z} {n}": n for z, n in w.CASES}
        for name, least in (("fp16", 5e-5), ("2bit", 0.05)):  # fp16 moves them ~1.5e-4, 2-bit ~0.4
            plain, store = res[1, None, False], res["store", name, False]
            apart = max(float((a - b).abs().max()) for a, b in zip(plain, store))
            assert apart > least, (rank, name, apart)
        spans = res["spans"]  # every reduction, its compression inside it
        assert {"mxtorch/zero.reduce_gradients", "mxtorch/compression.encode",
                "mxtorch/compression.decode"} <= spans[1, "2bit"], spans[1, "2bit"]
        for zero, phase in ((2, "reduce_bucket"), (3, "reduce_scatter_gradients")):
            assert {f"mxtorch/zero.{phase}", "mxtorch/compression.encode"} <= spans[zero, "fp16"], spans
        assert res["reload"]["same"], rank  # save_states / load_states carry this rank's residuals
        assert "rank" in res["reload"]["refused"] and "\n" not in res["reload"]["refused"], res["reload"]
        assert res["2bit states"] == {"type": "2bit", "rank": rank, "num_workers": 2, "residuals": 8}
    for k, (a, b) in enumerate(zip(results[0][2, "fp16", False], results[1][2, "fp16", False])):
        assert torch.equal(a, b), k  # the replicas agree


@pytest.mark.parametrize("zero, params", [(2, {"type": "2bit", "threshold": 0.5}), (3, {"type": "1bit"}),
                                          (2, {"type": "topk", "ratio": 0.1}), (3, {"type": "powersgd"})])
def test_zero_2_and_3_refuse_payloads_that_do_not_add_up(zero: int, params: dict) -> None:
    net = zero_workers.tiny_net(1)
    with pytest.raises(MXNetError) as e:
        ZeroTrainer(net.collect_params(), "adam", zero=zero, compression_params=params)
    msg = str(e.value)
    assert "\n" not in msg and f"compression {params['type']!r}" in msg
    assert f"zero={zero} use 'fp16' or 'bf16', or zero=1" in msg
    assert not dist.is_initialized()  # refused before joining a job


@pytest.mark.parametrize("params", [{"type": "nope"}, {"threshold": 0.5}, {"type": "2bit", "thresh": 1},
                                    "fp16"])
def test_bad_compression_params_get_the_stores_errors(params: object) -> None:
    """The errors ``compression.create`` gives the 'allreduce' store's set_gradient_compression."""
    with pytest.raises((CompressionError, TypeError)) as want:
        compression.create(params)  # type: ignore[arg-type]
    net = zero_workers.tiny_net(1)
    with pytest.raises(want.type) as got:
        ZeroTrainer(net.collect_params(), "adam", zero=1, compression_params=params)  # type: ignore[arg-type]
    assert str(got.value) == str(want.value) and "\n" not in str(got.value)
    assert not dist.is_initialized()
