"""Tensor parallelism beyond Dense pairs (mxtorch.parallel.tensor, .tp_loss): vocab-parallel
Embedding, the vocab-parallel softmax cross-entropy, output-channel-parallel convolutions.

Real processes (tp=2, and dp=2 x pp=2 x tp=2 for the convnet; gloo on 127.0.0.1); the rank functions
are in tests/tp_workers.py.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

from mxtorch.base import MXNetError
from mxtorch.gluon.loss import SoftmaxCrossEntropyLoss
from mxtorch.gluon.serialization import load_tensors
from mxtorch.parallel.split import chain_units
from mxtorch.parallel.tensor import auto_plan, check_plan

sys.path.insert(0, os.path.dirname(__file__))
import tp_workers as w  # noqa: E402


def test_parallel_cross_entropy_equals_the_ordinary_one_value_and_gradient(run_ranks):
    results = run_ranks(w.parallel_ce, 2, timeout=60)
    for i, c in enumerate(w.ce_cases()):
        pred = c["pred"].clone().requires_grad_()
        loss = SoftmaxCrossEntropyLoss(axis=c["axis"], weight=c["weight"])(pred, c["label"], c["sw"])
        (loss * torch.arange(1, loss.numel() + 1, dtype=loss.dtype).reshape(loss.shape)).sum().backward()
        axis = c["axis"] % pred.dim()
        n = pred.shape[axis] // 2
        for rank, r in enumerate(results):
            got = r["cases"][i]
            torch.testing.assert_close(got["loss"], loss.detach(), rtol=0, atol=1e-6)
            torch.testing.assert_close(got["grad"], pred.grad.narrow(axis, rank * n, n), rtol=0, atol=1e-6)
    assert "label 10 is out of range for 10 classes" in results[0]["error"]


def test_vocab_parallel_embedding_and_output_train_like_one_process(run_ranks, tmp_path):
    path = str(tmp_path / "lm.params")
    ref = w.lm_reference()
    r0, r1 = run_ranks(w.train_lm, 2, path, timeout=90)
    got = load_tensors(path)
    assert set(got) == set(ref["params"])
    for k, v in ref["params"].items():
        torch.testing.assert_close(got[k], v, rtol=0, atol=1e-5, msg=lambda m, k=k: f"{k}: {m}")
    half = w.VOCAB // 2
    for r in (r0, r1):
        mine = ref["out"][:, r["tp_rank"] * half:(r["tp_rank"] + 1) * half]  # logits stay split
        torch.testing.assert_close(r["out"], mine, rtol=0, atol=1e-5)
        torch.testing.assert_close(r["loaded_out"], mine, rtol=0, atol=1e-5)
    full = sum(v.numel() * 4 for v in ref["params"].values())
    assert r0["bytes"] <= 0.55 * full
    assert r0["auto_plan"] == {"0": "vocab", "1": "colwise", "2": "rowwise"}


def test_convnet_channel_parallel_trains_like_one_process(run_ranks, tmp_path):
    path = str(tmp_path / "conv.params")
    r0, _ = run_ranks(w.train_convnet, 2, path, timeout=90)
    # conv -> conv (row convolution), conv -> Flatten -> Dense (row Dense reading channel shards)
    assert r0["plan"] == {"0": "colwise", "1": "rowwise", "3": "colwise", "5": "rowwise"}
    ref = w.convnet_reference()
    got = load_tensors(path)
    for k, v in ref.items():
        torch.testing.assert_close(got[k], v, rtol=0, atol=1e-5, msg=lambda m, k=k: f"{k}: {m}")
    full = sum(v.numel() * 4 for v in ref.values())
    assert r0["bytes"] <= 0.55 * full


def test_auto_plan_pairs_convolutions_and_checks_plans():
    from mxtorch.gluon import nn

    units = chain_units(w.build_convnet())
    assert auto_plan(units, 2) == {"0": "colwise", "1": "rowwise", "3": "colwise", "5": "rowwise"}
    assert auto_plan(units, 3) == {}  # 8 channels do not split three ways; 16 -> Dense(144/3) would not
    check_plan(units, {"1": "colwise", "3": "rowwise"})  # conv -> pool -> conv
    with pytest.raises(MXNetError, match="no 'rowwise' layer"):
        check_plan(units, {"0": "colwise"})
    with pytest.raises(MXNetError, match="'rowwise' but the layer feeding it is not 'colwise'"):
        check_plan(units, {"5": "rowwise"})
    with pytest.raises(MXNetError, match="'vocab' splits an Embedding"):
        check_plan(units, {"0": "vocab"})
    lm = chain_units(w.build_lm())
    check_plan(lm, w.LM_PLAN)  # the last Dense may stay split (for the parallel loss)
    with pytest.raises(MXNetError, match="splits Dense layers and convolutions"):
        check_plan(lm, {"0": "colwise"})
    seq = nn.HybridSequential()
    seq.add(nn.Conv2D(4, 3, in_channels=1), nn.Flatten(), nn.Dense(4, in_units=36, flatten=False))
    seq.initialize()
    assert auto_plan(chain_units(seq), 2) == {"0": "colwise", "2": "rowwise"}  # Flatten makes it 2-D


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_convnet_data_pipeline_tensor_3d_on_eight_processes(run_ranks, tmp_path):
    """dp=2 x pp=2 x tp=2: convolution pairs split over tp inside two 1F1B stages, the dp gradients
    summed by the default store; 5 steps equal one process on the global batch."""
    path = str(tmp_path / "conv3d.params")
    res = run_ranks(w.train_convnet3d, 8, path, timeout=600)
    ref = w.convnet3d_reference()
    plan = {"0": "colwise", "1": "rowwise", "2": "colwise", "3": "rowwise", "4": "colwise", "7": "rowwise"}
    assert sorted(r["ranks"] for r in res) == [(d, p, t) for d in (0, 1) for p in (0, 1) for t in (0, 1)]
    got = load_tensors(path)
    assert set(got) == set(ref["params"])
    for k, v in ref["params"].items():
        torch.testing.assert_close(got[k], v, rtol=0, atol=1e-5, msg=lambda m, k=k: f"{k}: {m}")
    for r in res:
        assert r["plan"] == plan and r["store"] == "AllreduceKVStore"
        assert r["stage_paths"] == [["0", "1"], ["2", "3", "4", "5", "6", "7"]]  # pairs are not cut
        torch.testing.assert_close(r["out"], ref["out"], rtol=0, atol=1e-5)
        torch.testing.assert_close(r["loaded_out"], ref["out"], rtol=0, atol=1e-5)
        stage = sum(v.numel() * 4 for k, v in ref["params"].items()
                    if k.split(".")[0] in r["stage_paths"][r["ranks"][1]])
        assert r["bytes"] <= 0.55 * stage  # this rank's half of its stage (row biases replicated)
    # train_step's loss is the global batch's mean, on every rank
    for r in res:
        assert r["losses"] == pytest.approx(ref["losses"], abs=1e-5)
