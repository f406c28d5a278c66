"""Pipelines with data parallelism over the parameter servers, and with compressed gradients.

Real processes on 127.0.0.1: a scheduler, a server and 4 workers (ZeroMQ for the store) that
are also the 4 ranks of a dp=2 x pp=2 pipeline (gloo for the stages); each stage's keys are
pushed by its own data-parallel ranks only, so the servers count sync rounds per key over the
workers that initialized it.
"""

from __future__ import annotations

import math
import os
import sys

import pytest
import torch

from mxtorch.distributed.testing import free_port
from mxtorch.gluon.serialization import load_tensors
from mxtorch.kvstore.ps.testing import run_ps_job

sys.path.insert(0, os.path.dirname(__file__))
import pipeline_ps_workers as pw  # noqa: E402
import pipeline_workers as w  # noqa: E402


@pytest.fixture(scope="module")
def ref():
    return w.reference()


def assert_params(path, ref, atol):
    got = load_tensors(path)
    assert set(got) == set(ref["params"])
    for k, v in ref["params"].items():
        torch.testing.assert_close(got[k], v, rtol=0, atol=atol, msg=lambda m, k=k: f"{k}: {m}")


# slow tier: the servers-update case ([False], the workers updating, stays in the default run)
@pytest.mark.parametrize("update_on_kvstore", [pytest.param(None, marks=pytest.mark.slow), False])
def test_dp2_pp2_over_parameter_servers_matches_one_process(tmp_path, ref, update_on_kvstore):
    """Trainer defaults (the optimizer on the servers, one per stage), and the workers updating."""
    path = str(tmp_path / "ps.params")
    res = run_ps_job(pw.train_over_servers, 4, 1, free_port(), path, 5, None, 2, 2, update_on_kvstore,
                     timeout=120)
    assert [(r["dp_rank"], r["pp_rank"]) for r in res] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert [r["members"] for r in res] == [[0, 1], [0, 1], [2, 3], [2, 3]]
    assert [r["prefix"] for r in res] == ["pp0/", "pp0/", "pp1/", "pp1/"]
    # MXNet's default for dist_sync: the servers update
    assert all(r["update_on_kvstore"] is (update_on_kvstore is None) for r in res)
    assert_params(path, ref, 1e-5)
    for r in res:
        torch.testing.assert_close(r["out"], ref["out"], rtol=0, atol=1e-5)
    for a, b in ((res[0], res[1]), (res[2], res[3])):  # each dp rank's loss is its half's mean
        mean = [(u + v) / 2 for u, v in zip(a["losses"], b["losses"])]
        assert mean == pytest.approx(ref["losses"], abs=1e-5)


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_dist_async_stages_update_on_the_servers_and_train(tmp_path):
    """dist_async: each push is applied on arrival by its stage's optimizer on the servers (no
    rounds), so replicas are not bit-equal to one process; the job trains and the file loads."""
    path = str(tmp_path / "async.params")
    res = run_ps_job(pw.train_over_servers, 4, 1, free_port(), path, 5, None, 2, 2, None, "dist_async",
                     timeout=120)
    assert all(r["update_on_kvstore"] is True for r in res)
    assert [r["prefix"] for r in res] == ["pp0/", "pp0/", "pp1/", "pp1/"]
    for r in res:  # (async with momentum: a replica's own loss need not fall in 5 steps)
        assert all(math.isfinite(v) for v in r["losses"]), r["losses"]
    initial = {k: p.data().detach().clone() for k, p in w.build_mlp()._collect_params_with_prefix().items()}
    got = load_tensors(path)
    assert got.keys() == initial.keys()
    for k, v in got.items():  # every stage's parameters were updated by its optimizer on the servers
        assert torch.isfinite(v).all() and not torch.equal(v, initial[k]), k


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_each_stage_runs_its_own_optimizer_on_the_servers(tmp_path):
    """dp=2 x pp=2, 2 servers, Trainer defaults: SGD momentum + wd, lr_mult on a key of each stage (stage
    0's index 0 is another parameter than stage 1's index 0), set_learning_rate after step 2,
    save_states after step 3 through the servers, load_states before step 6: parameters after steps 5
    and 6 equal one process doing the same."""
    ref = pw.server_optimizer_reference(str(tmp_path))
    res = run_ps_job(pw.train_with_server_optimizer, 4, 2, free_port(), str(tmp_path), timeout=120)
    for r in res:  # the optimizer ran on the servers: no updater on the workers
        assert r["update_on_kvstore"] is True and r["updaters"] == 0
    for step in ("step5", "step6"):
        got = load_tensors(res[0][step])
        assert set(got) == set(ref[step])
        for k, v in ref[step].items():
            torch.testing.assert_close(got[k], v, rtol=0, atol=1e-5,
                                       msg=lambda m, k=k, s=step: f"{s} {k}: {m}")
    # the check can fail: step 6 on the momentum of step 5 (states not loaded) ends elsewhere
    unloaded = pw.server_optimizer_reference(str(tmp_path), load=False)["step6"]
    assert max(float((unloaded[k] - v).abs().max()) for k, v in ref["step6"].items()) > 1e-3


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_amp_overflow_on_one_rank_skips_the_servers_update_everywhere():
    res = run_ps_job(pw.amp_over_servers, 4, 1, free_port(), timeout=120)
    for r in res:
        assert r["update_on_kvstore"] is True
        assert r["unchanged"] and r["moved"] and r["scale"] == 2.0 ** 7
        assert all(math.isfinite(v) for v in r["losses"])


def test_group_optimizers_apply_to_their_own_keys_only():
    res = run_ps_job(pw.group_optimizers, 3, 2, timeout=60)
    for r in res[:2]:  # 'a/': lr 0.1, key 0 lr_mult 0.5, summed gradient 2, two steps
        torch.testing.assert_close(r["key0"], torch.full((2,), -0.2))
        torch.testing.assert_close(r["key1"], torch.full((3,), -0.4))
        rows = torch.zeros(4, 2)
        rows[1] = -0.1
        torch.testing.assert_close(r["rows"], rows)
        assert r["refused"] == ""
    torch.testing.assert_close(res[2]["key0"], torch.full((2,), -2.0))  # 'b/': lr 1.0, gradient 1
    torch.testing.assert_close(res[2]["key1"], torch.full((3,), -2.0))
    assert "prefix 'c/', which declared no optimizer" in res[2]["refused"]
    assert "'a/', 'b/'" in res[2]["refused"]


def test_group_keys_complete_rounds_with_their_own_workers():
    res = run_ps_job(pw.group_rounds, 3, 1, timeout=60)
    assert [(r["rank"], r["num_workers"]) for r in res] == [(0, 2), (1, 2), (0, 1)]
    for rank, r in enumerate(res):
        torch.testing.assert_close(r["init"], torch.full((3,), 10.0 if rank < 2 else 12.0))
        for step in range(3):  # sums of the group's pushes only: 1 + 2, and 3 alone
            torch.testing.assert_close(r[f"sum{step}"], torch.full((3,), 3.0 if rank < 2 else 3.0))
        torch.testing.assert_close(r["all"], torch.full((2,), 6.0))  # every worker's key: 1 + 2 + 3
        assert "which alone push it" in r["foreign"] and f"worker {rank} is not one of them" in r["foreign"]


def assert_replicas_agree_and_near(res, path, ref, atol):
    by_stage: dict[int, list[dict]] = {}
    for r in res:
        by_stage.setdefault(r["pp_rank"], []).append(r["own"])
    for owns in by_stage.values():
        a, b = owns
        assert set(a) == set(b)
        for k in a:  # the dp replicas of a stage apply the same decompressed sum: identical
            assert torch.equal(a[k], b[k]), k
    got = load_tensors(path)  # the whole model, under the one-process network's names
    assert set(got) == set(ref["params"])
    init = dict(w.build_mlp()._collect_params_with_prefix().items())
    # the update the compressed run made against the uncompressed one-process update (relative
    # error of the whole update vector): near, not equal
    done = torch.cat([(got[k] - init[k].data()).flatten() for k in ref["params"]])
    want = torch.cat([(v - init[k].data()).flatten() for k, v in ref["params"].items()])
    rel = float((done - want).norm() / want.norm())
    assert 0 < rel < atol, rel
    return rel


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_compressed_gradients_through_the_pipelines_dp_store(run_ranks, tmp_path, ref):
    """dp=2 x pp=2, the stage's allreduce store compressing to fp16 (Trainer(compression_params=))."""
    path = str(tmp_path / "fp16.params")
    res = run_ranks(pw.train_compressed, 4, path, {"type": "fp16"}, timeout=240)
    print("fp16: relative error of the update:", assert_replicas_agree_and_near(res, path, ref, 0.01))


@pytest.mark.slow  # a second 6-process job (30 s on the shared machine): `bash scripts/test.sh -m slow`
def test_2bit_compression_through_the_parameter_servers(tmp_path, ref):
    """dp=2 x pp=2 over the servers, each worker's pushes 2-bit compressed (error feedback; 5 steps
    of 2-bit leave the update about half off the uncompressed one: seen 0.50)."""
    path = str(tmp_path / "2bit.params")
    res = run_ps_job(pw.train_over_servers, 4, 1, free_port(), path, 5, {"type": "2bit", "threshold": 0.5},
                     timeout=120)
    print("2bit: relative error of the update:", assert_replicas_agree_and_near(res, path, ref, 0.75))
    assert all(r["wire_bytes"] > 0 for r in res)


@pytest.mark.slow  # mxtorch launch with a scheduler, a server and 4 workers: 40 s here
@pytest.mark.parametrize("started_by", ["launch", "train"])
def test_mxtorch_train_pipelined_over_parameter_servers(tmp_path, started_by):
    """`mxtorch launch -n 4 -s 1 mxtorch train --pp 2 --dp 2 --kvstore dist_sync`, and the same job
    started by `mxtorch train ... --servers 1` itself, trains and saves."""
    import json

    import mxtorch as mx
    from mxtorch.cli.main import main

    out = tmp_path / "run"
    train = ["train", "--pp", "2", "--dp", "2", "--micro-batches", "4", "--kvstore", "dist_sync",
             "--model", "mlp", "--data-root", mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT,
             "--epochs", "1", "--batch-size", "128", "--lr", "0.1", "--output", str(out), "--no-progress"]
    if started_by == "launch":
        rc = main(["launch", "-n", "4", "-s", "1", sys.executable, "-m", "mxtorch.cli.main", *train])
    else:
        rc = main([*train, "--servers", "1"])
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["pipeline"]["kvstore"] == "dist_sync" and metrics["final_test_acc"] > 0.6
    net = mx.gluon.model_zoo.vision.get_model("mlp", classes=10)
    net.load_parameters(str(out / "model.params"))
