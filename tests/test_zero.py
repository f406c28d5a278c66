"""Sharded data parallelism (ZeRO 1/2): real processes over gloo against one process on the global batch."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest
import torch

from mxtorch import parallel
from mxtorch.base import MXNetError
from mxtorch.distributed.testing import run_workers
from mxtorch.parallel.zero import shard_owners

sys.path.insert(0, os.path.dirname(__file__))
import zero_workers  # noqa: E402


def test_shard_owners_balance_whole_parameters() -> None:
    assert shard_owners([64, 8, 64, 8], 2) == [0, 0, 1, 1]
    assert shard_owners([10, 1, 1, 1], 3) == [0, 1, 2, 1]
    assert shard_owners([5], 4) == [0]


def test_zero_stage_is_checked() -> None:
    assert parallel.ParallelConfig(dp=2, zero=2).zero == 2
    with pytest.raises(ValueError, match="zero must be one of"):
        parallel.ParallelConfig(dp=2, zero=4)
    assert parallel.ParallelConfig(dp=2, zero=3).zero == 3


@pytest.mark.parametrize("world", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_zero_1_and_2_match_one_process(world: int, tmp_path) -> None:
    """Also with AMP, where one rank's overflow in one gradient (owned by another rank at the
    step it happens) must skip the step everywhere, as it does in one process."""
    refs = {with_amp: zero_workers.reference(with_amp) for with_amp in (False, True)}
    ref_weights, replica_bytes, _ = refs[False]
    path = str(tmp_path / "zero2.params")
    results = run_workers(zero_workers.zero_stages, world, path, timeout=240)
    for zero, with_amp in ((1, False), (2, False), (1, True), (2, True)):
        for rank, res in enumerate(results):
            got = res[zero, with_amp]
            for k, w in enumerate(refs[with_amp][0]):
                torch.testing.assert_close(got["weights"][k], w, atol=1e-5, rtol=0,
                                           msg=lambda m, k=k, z=zero, a=with_amp, r=rank:
                                           f"zero={z} amp={a} rank {r} #{k}: {m}")
            # each rank holds its share of the Adam moments: at most 1/dp + 10 % of a replica's
            held = got["state_bytes"]
            assert 0 < held <= (1 / world + 0.10) * replica_bytes, (zero, rank, held, replica_bytes)
        assert sum(res[zero, with_amp]["state_bytes"] for res in results) == replica_bytes
    assert all(res["states_reloaded"] for res in results)  # each rank's shard of the states
    # the whole model's file: load it into a fresh network
    net = zero_workers.tiny_net()
    net.load_parameters(path)
    for p, w in zip(net.collect_params().values(), ref_weights):
        torch.testing.assert_close(p.data().detach(), w, atol=1e-5, rtol=0)


def test_zero_2_reduces_gradient_buckets_during_backward() -> None:
    """2 ranks, buckets of one layer: each bucket is reduced onto its owner while backward fills the
    next one and the other rank drops it, so the most gradient bytes a rank holds during backward
    (measured in the hooks) is its half of the gradients plus about two buckets (with whole
    gradients until the step it would be all of them); 5 Adam steps equal one process, also
    accumulating (grad_req='add') over two backward passes per step."""
    layers = zero_workers.BUCKET_LAYERS
    ref_weights, _, _ = zero_workers.reference(layers=layers)
    replica = sum(w.numel() * w.element_size() for w in ref_weights)  # the whole gradients' bytes
    results = run_workers(zero_workers.zero_two_buckets, 2, timeout=120)
    for rank, res in enumerate(results):
        for passes in (1, 2):
            got = res[passes]
            for k, w in enumerate(ref_weights):
                torch.testing.assert_close(got["weights"][k], w, atol=1e-5, rtol=0, msg=lambda m, k=k,
                                           p=passes, r=rank: f"passes={p} rank {r} #{k}: {m}")
            assert 0 < got["peak"] <= replica / 2 + 2 * zero_workers.BUCKET_BYTES + 0.10 * replica, (
                passes, rank, got["peak"], replica)
            # a bucket per layer and backward pass; each but the last still reducing as the next fills
            rounds = zero_workers.STEPS * passes
            want = {"reduced": layers * rounds, "overlapped": (layers - 1) * rounds}
            assert got["stats"] == want, got["stats"]
            # after the step: 'write' gradients are used up; 'add' keeps this rank's own (zeroed) ones
            held = (0, 0) if passes == 1 else (replica / 2, replica / 2 + 0.10 * replica)
            assert held[0] <= got["after"] <= held[1], (passes, rank, got["after"])


def test_zero_1_and_2_gather_uneven_shares_of_two_dtypes() -> None:
    """3 ranks own unequal shares (whole parameters of 128, 48, 16+3 float32 elements) and the
    float64 scale: the updated parameters come back through one padded all-gather per dtype, and
    5 SGD-with-momentum steps equal one process on the global batch.  zero=1 reduces in the store's
    buckets (one per dtype here), every one started during backward, none left for the step."""
    ref = zero_workers.uneven_reference()
    results = run_workers(zero_workers.zero_uneven, 3, timeout=120)
    for zero in (1, 2):
        owners = results[0][zero]["owners"]
        assert len(set(owners)) == 3, owners  # every rank owns something, unequal amounts
        for rank, res in enumerate(results):
            assert res[zero]["owners"] == owners
            if zero == 1:
                both = 2 * zero_workers.STEPS
                assert res[zero]["stats"] == {"reduced": both, "overlapped": both}, res[zero]["stats"]
            for k, w in enumerate(ref):
                got = res[zero]["weights"][k]
                assert got.dtype == w.dtype
                torch.testing.assert_close(got, w, atol=1e-6, rtol=0, msg=lambda m, k=k, z=zero, r=rank:
                                           f"zero={z} rank {r} #{k}: {m}")


@pytest.mark.parametrize("world", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_zero_3_matches_one_process_and_holds_a_slice(world: int, tmp_path) -> None:
    """Parameters sliced over the ranks between steps, gathered per layer (the next layer's gather
    prefetched while one computes, in forward and in backward order): 5 Adam steps (also
    with AMP and a step one rank's overflow skips everywhere) equal one process on the global
    batch; each rank holds 1/dp of the parameters and of the Adam moments; the model's file
    saved from the gathered parameters loads into a new zero=3 network."""
    refs = {with_amp: zero_workers.reference(with_amp) for with_amp in (False, True)}
    _, replica_states, replica_params = refs[False]
    path = str(tmp_path / "zero3.params")
    results = run_workers(zero_workers.zero_three, world, path, timeout=240)
    for with_amp in (False, True):
        for rank, res in enumerate(results):
            got = res[with_amp]
            for k, w in enumerate(refs[with_amp][0]):
                torch.testing.assert_close(got["weights"][k], w, atol=1e-5, rtol=0, msg=lambda m, k=k,
                                           a=with_amp, r=rank: f"amp={a} rank {r} #{k}: {m}")
            for kind, replica in (("state_bytes", replica_states), ("param_bytes", replica_params)):
                assert 0 < got[kind] <= (1 / world + 0.10) * replica, (kind, rank, got[kind], replica)
            # the first step records the layers' order; in each later one every gather but the
            # first layer's (forward) and the last one's (backward) is prefetched, none in vain
            assert got["gathers"]["prefetched"] == (zero_workers.STEPS - 1) * 2 * 3, got["gathers"]
            assert got["gathers"]["unused"] == 0, got["gathers"]
    for res in results:  # refused before any work: a layer-wise optimizer, accumulated gradients
        assert "norm" in res["refused"][0] and "zero=2" in res["refused"][0], res["refused"]
        assert "grad_req='add'" in res["refused"][1], res["refused"]
        assert "full_parameters" in res["refused"][2], res["refused"]
        assert res["reloaded_bytes"] <= (1 / world + 0.10) * replica_params
        for got, w in [*zip(res["reloaded"], refs[True][0]), *zip(res["second"], refs[True][0])]:
            torch.testing.assert_close(got, w, atol=1e-5, rtol=0)
    net = zero_workers.tiny_net()
    net.load_parameters(path)
    for p, w in zip(net.collect_params().values(), refs[True][0]):
        torch.testing.assert_close(p.data().detach(), w, atol=1e-5, rtol=0)


@pytest.mark.parametrize("zero,with_amp,pp,tp,schedule", [
    (3, True, 2, 1, "1f1b"),
    pytest.param(1, False, 2, 1, "1f1b", marks=pytest.mark.slow),
    pytest.param(2, False, 2, 1, "1f1b", marks=pytest.mark.slow),
    pytest.param(3, False, 2, 1, "zero_bubble", marks=pytest.mark.slow),  # backward split in two
    pytest.param(3, False, 1, 2, "1f1b", marks=pytest.mark.slow)])
def test_zero_with_pipeline_and_tensor_parallelism(zero: int, with_amp: bool, pp: int, tp: int,
                                                   schedule: str, tmp_path) -> None:
    """dp=2 x pp=2 (or x tp=2) through parallelize: each stage's (tensor-parallel shard's) two
    data-parallel ranks shard it; 5 Adam steps equal one process on the global batch; zero=1 reduces
    each bucket once per step, started after the last micro-batch's backward; zero=3
    holds half of each rank's stage between steps; the model's file is whole and loads into
    another network's stages."""
    import pipeline_workers

    ref = zero_workers.pipeline_reference(with_amp)
    path = str(tmp_path / "pp.params")
    results = run_workers(zero_workers.zero_pipeline, 4, zero, with_amp, path, 2, pp, tp, schedule,
                          timeout=300)
    assert sorted(r["pp_rank"] for r in results) == ([0, 0, 1, 1] if pp == 2 else [0] * 4)
    for r in results:
        share = 1 / 2 + 0.10 if zero == 3 else 1.0
        assert 0 < r["held"] <= share * r["whole"], r
        if zero == 1:  # the store's buckets start after the last micro-batch's backward, once a step
            reduced, overlapped = r["stats"]["reduced"], r["stats"]["overlapped"]
            assert reduced == overlapped > 0 and reduced % zero_workers.STEPS == 0, r
    for saved in (path, path + ".again"):  # the trained file; it loaded into new stages, saved again
        net = pipeline_workers.build_mlp()
        net.load_parameters(saved)
        for k, p in net._collect_params_with_prefix().items():
            torch.testing.assert_close(p.data().detach(), ref[k], atol=1e-5, rtol=0,
                                       msg=lambda m, k=k: f"{k}: {m}")


def test_planner_picks_a_zero_stage_when_a_replica_does_not_fit() -> None:
    from mxtorch.gluon import nn
    from mxtorch.parallel.planner import LayerCost

    net = nn.HybridSequential()  # odd widths: no tensor-parallel split
    net.add(nn.Dense(7, in_units=8), nn.Dense(3, in_units=7))
    net.initialize()
    x = torch.randn(4, 8)
    mib = 2**20
    # 64 MiB of parameters, 60 in the first layer (costs given: nothing is measured).  With Adam a
    # replica holds parameters, gradients and two moments, 256 MiB; a pipeline's first stage 240;
    # zero on 2 ranks 128 + 64 = 192 MiB
    costs = [LayerCost("0", 1e-4, 2e-4, 1024.0, 1024.0, 60 * mib, 0.0),
             LayerCost("1", 1e-4, 2e-4, 1024.0, 1024.0, 4 * mib, 0.0)]
    kw = {"world_size": 2, "batch_size": 8, "bandwidth": "10Gbit", "optimizer_states": 2, "costs": costs,
          "overheads": False}
    roomy = parallel.plan(net, x, memory_per_device="300MiB", **kw)
    replicas = [p for p in roomy if p.config.dp == 2]
    assert replicas[0].config == parallel.ParallelConfig(dp=2)  # it fits: no broadcast to pay
    assert {p.config.zero for p in roomy} == {0, 1, 2, 3}
    tight = parallel.plan(net, x, memory_per_device="200MiB", **kw)
    # zero=3 saves nothing here: the two layers it may gather at once are the whole model
    assert {p.config.zero for p in tight} == {1, 2, 3}
    assert tight[0].config.zero >= 1 and tight[0].memory["optimizer state"] == 64 * mib
    assert "zero=" in tight[0].explain() and "zero=" in repr(tight[0])
    with pytest.raises(MXNetError, match="no layout"):
        parallel.plan(net, x, memory_per_device="200MiB", zero_stages=(0,), **kw)


def _eight_equal_layers(layer_mib: int) -> tuple[Any, torch.Tensor, dict[str, Any]]:
    """A net of eight Dense layers and plan() keywords giving each layer ``layer_mib`` MiB of
    parameters (costs given: nothing is measured), on 2 ranks with Adam's two states."""
    from mxtorch.gluon import nn
    from mxtorch.parallel.planner import LayerCost

    net = nn.HybridSequential()
    for _ in range(8):
        net.add(nn.Dense(7, in_units=7))
    net.initialize()
    costs = [LayerCost(str(i), 1e-4, 2e-4, 1024.0, 1024.0, layer_mib * 2**20, 0.0) for i in range(8)]
    kw = {"world_size": 2, "batch_size": 8, "bandwidth": "10Gbit", "optimizer_states": 2, "costs": costs,
          "overheads": False, "micro_batches": (1,)}
    return net, torch.randn(4, 7), kw


def test_planner_counts_zero_3_slices_and_picks_it_when_only_slices_fit() -> None:
    """Eight equal layers (8 MiB each, costs given): zero=3 on 2 ranks holds half the parameters
    plus two gathered layers; with memory only that fits, a zero=3 layout is planned and no plain
    or zero 1/2 data-parallel one is."""
    net, x, kw = _eight_equal_layers(8)
    mib = 2**20
    every = parallel.plan(net, x, memory_per_device="1GiB", **kw)
    dp2 = {p.config.zero: p for p in every if p.config.dp == 2 and not p.checkpointing}
    assert set(dp2) == {0, 1, 2, 3}
    # 64 MiB of parameters: a replica 64 + 64 + 128; zero 1/2: 64 + 64 + 64; zero 3: 32 + 16 + 64 + 64
    assert dp2[3].memory["parameters"] == 48 * mib and dp2[3].memory["optimizer state"] == 64 * mib
    assert dp2[3].predicted_memory_bytes < dp2[1].predicted_memory_bytes < dp2[0].predicted_memory_bytes
    # three all-gathers/reduce-scatters of half the parameters against an all-reduce and a broadcast
    assert dp2[3].breakdown["data-parallel all-reduce"] == pytest.approx(
        dp2[1].breakdown["data-parallel all-reduce"], rel=0.05)
    tight = parallel.plan(net, x, memory_per_device=dp2[1].predicted_memory_bytes - mib, **kw)
    assert {p.config.zero for p in tight if p.config.dp == 2} == {3}


def test_planner_counts_zero_2_gradients_as_a_share_plus_the_buckets_in_flight() -> None:
    """zero=2 reduces gradient buckets onto their owners during backward: a rank holds its share
    (1/dp), the bucket being reduced and the one being filled (each up to a layer past the bucket
    size), not the whole model's."""
    net, x, kw = _eight_equal_layers(64)
    mib = 2**20
    dp2 = {p.config.zero: p for p in parallel.plan(net, x, memory_per_device="8GiB", **kw)
           if p.config.dp == 2 and not p.checkpointing}
    assert dp2[1].memory["gradients"] == 512 * mib
    # 256 MiB owned + two buckets of 25 MiB and one 64 MiB layer each
    assert dp2[2].memory["gradients"] == 256 * mib + 2 * (parallel.zero.DEFAULT_BUCKET_BYTES + 64 * mib)
    assert dp2[2].predicted_memory_bytes < dp2[1].predicted_memory_bytes


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_mxtorch_train_plan_auto_runs_a_zero_stage_when_a_replica_does_not_fit(tmp_path):
    """The mlp on 2 workers, global batch 4096 (the plan's count, per device): a replica needs
    14.82 MiB, a zero stage 14.37 (half the optimizer state), tensor parallelism 14.48 (its
    activations are not split); pipelines fit but predict ~1.6x the step time: with 14766 KiB the
    plan takes dp=2 with a zero stage, and the job trains with it."""
    import json

    import mxtorch as mx
    from mxtorch.cli.main import main

    options = {"--plan": "auto", "--plan-memory": "14766KiB", "--workers": "2", "--model": "mlp",
               "--data-root": mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT, "--epochs": "3",
               "--batch-size": "4096", "--lr": "0.5", "--output": str(tmp_path / "run")}
    assert main(["train", *(w for kv in options.items() for w in kv), "--no-progress"]) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    layout = metrics["pipeline"]
    assert layout["planned"] and layout["dp"] == 2 and layout["zero"] >= 1, layout
    assert metrics["final_test_acc"] > 0.3, metrics["final_test_acc"]  # 6 steps: it learns
