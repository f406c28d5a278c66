"""Pipeline parallelism (mxtorch.parallel) with real processes over gloo on 127.0.0.1.

Each pipelined run trains an MLP for 5 SGD-momentum steps on its share of a global batch and
is compared with single-process training of the same network on that global batch
(tests/pipeline_workers.py): parameters (through the saved whole-model file), inference output
and losses.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

from mxtorch.base import MXNetError
from mxtorch.gluon.serialization import load_tensors
from mxtorch.parallel import ParallelConfig
from mxtorch.parallel.split import Unit, chain_units, partition, split_at

sys.path.insert(0, os.path.dirname(__file__))
import pipeline_workers as w  # noqa: E402


@pytest.fixture(scope="module")
def ref():
    return w.reference()


def check_against(ref, path, result):
    got = load_tensors(path)
    assert set(got) == set(ref["params"])
    for k, v in ref["params"].items():
        torch.testing.assert_close(got[k], v, rtol=0, atol=1e-5, msg=lambda m, k=k: f"{k}: {m}")
    torch.testing.assert_close(result["out"], ref["out"], rtol=0, atol=1e-5)
    assert result["losses"] == pytest.approx(ref["losses"], abs=1e-5)


def test_every_schedule_on_two_stages_matches_one_process(run_ranks, tmp_path, ref):
    prefix = str(tmp_path / "pp2")
    r0, r1 = run_ranks(w.train_all_schedules, 2, prefix, timeout=240)
    for schedule in ("gpipe", "1f1b", "interleaved", "zero_bubble", "1f1b_ckpt"):
        for r in (r0, r1):
            check_against(ref, f"{prefix}-{schedule}.params", r[schedule])
    assert r0["1f1b"]["stages"] == [0] and r1["1f1b"]["stages"] == [1]
    assert r0["interleaved"]["stages"] == [0, 2] and r1["interleaved"]["stages"] == [1, 3]
    # each rank holds only its stages' parameters
    total = r0["gpipe"]["bytes"] + r1["gpipe"]["bytes"]
    assert total == sum(v.numel() * 4 for v in ref["params"].values())
    assert 0 < r0["gpipe"]["bytes"] < total


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_data_times_pipeline_and_four_stages(run_ranks, tmp_path, ref):
    """dp=2 x pp=2 (the dp group's store sums gradients), the file loads into pp=4, pp=4 trains alike."""
    path = str(tmp_path / "dp2pp2.params")
    res = run_ranks(w.train, 4, 2, 2, "1f1b", 2, 1, path, timeout=240)
    # rank = pp_rank * dp + dp_rank
    assert [(r["dp_rank"], r["pp_rank"]) for r in res] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    for r in res:
        torch.testing.assert_close(r["out"], ref["out"], rtol=0, atol=1e-5)
        # the stage's gradients are reduced once per step, after the last micro-batch's backward
        assert r["allreduces"] == 5 * r["buckets"], (r["allreduces"], r["buckets"])
    check_against(ref, path, {"out": res[0]["out"], "losses": ref["losses"]})
    outs = run_ranks(w.load_into_other_pp, 4, path, 4, timeout=240)
    for o in outs:
        torch.testing.assert_close(o, ref["out"], rtol=0, atol=1e-5)
    # four stages train to the same parameters too
    path4 = str(tmp_path / "pp4.params")
    res4 = run_ranks(w.train, 4, 1, 4, "1f1b", 4, 1, path4, timeout=240)
    assert [r["stages"] for r in res4] == [[0], [1], [2], [3]]
    for r in res4:
        check_against(ref, path4, r)


def test_clear_errors(run_ranks):
    e0, e1 = run_ranks(w.errors, 2, timeout=120)
    for e in (e0, e1):
        assert "dp*pp*tp = 3" in e["world"] and "has 2" in e["world"]
        assert "does not divide the local batch of 16" in e["micro"]
        assert "parameters differ from rank 0's" in e["seed"]


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_model_zoo_resnet_trains_one_step_pipelined(run_ranks):
    l0, l1 = run_ranks(w.resnet_one_step, 2, timeout=240)
    assert l0 == l1 and l0 > 0


# ---- splitting (no processes) ------------------------------------------------------------------


def test_partition_balances_the_slowest_stage():
    assert partition([1, 1, 1, 1], 2) == [0, 2]
    assert partition([5, 1, 1, 1, 1, 1], 2) == [0, 1]
    assert partition([2, 2, 2, 1, 1, 1, 1, 1, 1], 3) == [0, 2, 5]
    with pytest.raises(MXNetError, match="only 2 layers"):
        partition([1, 1], 3)


def test_chain_units_and_split_points():
    import mxtorch as mx
    from mxtorch.gluon import nn

    net = w.build_mlp()
    units = chain_units(net)
    assert [u.path for u in units] == ["0", "1", "2", "3", "4", "5", "6"]
    assert split_at(units, ["3"], 2) == [0, 3]
    with pytest.raises(MXNetError, match="not a layer of the chain"):
        split_at(units, ["9"], 2)
    with pytest.raises(MXNetError, match="2 stages need 1"):
        split_at(units, ["1", "2"], 2)
    zoo = mx.gluon.model_zoo.vision.get_model("resnet18_v1", classes=10, thumbnail=True)
    paths = [u.path for u in chain_units(zoo)]
    assert paths[0].startswith("features.") and paths[-1] == "output"

    class Residual(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Dense(4, in_units=4), nn.Dense(4, in_units=4)

        def forward(self, x):
            return self.b(self.a(x)) + x

    class Chain(Residual):
        def forward(self, x):
            return self.b(self.a(x))

    with pytest.raises(MXNetError, match="sample_input"):
        chain_units(Residual())
    r = Residual()
    r.initialize()
    with pytest.raises(MXNetError, match="computes more"):
        chain_units(r, torch.randn(2, 4))
    c = Chain()
    c.initialize()
    assert [u.path for u in chain_units(c, torch.randn(2, 4))] == ["a", "b"]
    assert isinstance(chain_units(c, torch.randn(2, 4))[0], Unit)


def test_parallel_config_layout():
    cfg = ParallelConfig(dp=2, pp=3)
    assert cfg.world_size == 6
    want = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0), (0, 2, 0), (1, 2, 0)]
    assert [cfg.coords(r) for r in range(6)] == want
    assert all(cfg.rank_of(*cfg.coords(r)) == r for r in range(6))
    with pytest.raises(ValueError, match="positive integer"):
        ParallelConfig(dp=0)


def test_a_dead_stage_ends_the_pipeline_and_is_named(run_ranks, tmp_path):
    from mxtorch.distributed.testing import WorkerFailed

    report = tmp_path / "rank0.txt"
    with pytest.raises(WorkerFailed):
        run_ranks(w.die_mid_pipeline, 2, str(report), timeout=120, env={"MXTORCH_DIST_TIMEOUT": "60"})
    seconds, text = report.read_text().split("\n", 1)
    assert float(seconds) < 30, text
    assert "MXNetError" in text and "rank 1" in text, text


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_mxtorch_train_pipelined_saves_the_whole_model(tmp_path):
    """`mxtorch train --pp 2` starts two workers, trains the MLP pipelined and saves one whole-model file."""
    import json

    import mxtorch as mx
    from mxtorch.cli.main import main

    out = tmp_path / "run"
    rc = main(["train", "--pp", "2", "--micro-batches", "4", "--schedule", "gpipe", "--model", "mlp",
               "--data-root", mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT, "--epochs", "1",
               "--batch-size", "128", "--lr", "0.1", "--output", str(out), "--no-progress"])
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["pipeline"]["pp"] == 2 and metrics["final_test_acc"] > 0.6
    net = mx.gluon.model_zoo.vision.get_model("mlp", classes=10)
    net.load_parameters(str(out / "model.params"))  # the plain network loads the pipelined run's file


def test_amp_overflow_on_one_stage_skips_everywhere_and_grad_add_accumulates(run_ranks):
    from mxtorch import autograd, gluon

    r0, r1 = run_ranks(w.amp_and_grad_add, 2, timeout=180)
    for r in (r0, r1):
        assert "trainer=trainer" in r["no_trainer"]
        assert r["unchanged"] and r["scale"] == 2.0 ** 7  # both stages skipped, both halved the scale
        assert r["losses"][-1] < r["losses"][0]
    assert r0["losses"] == r1["losses"]
    # grad_req='add' reference: one plain step on the whole batch
    net = w.build_mlp()
    x, y = w.data()
    tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    with autograd.record():
        loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
    loss.backward()
    tr.step(w.GLOBAL_BATCH)
    ref = {k: p.data().detach() for k, p in net._collect_params_with_prefix().items()}
    got = {**r0["add"], **r1["add"]}
    assert set(got) == set(ref)
    for k, v in ref.items():
        torch.testing.assert_close(got[k], v, rtol=0, atol=1e-5)


# ---- tensor parallelism -------------------------------------------------------------------------


def test_tensor_parallel_mlp_and_convnet_match_one_process(run_ranks, tmp_path, ref):
    path = str(tmp_path / "tp2.params")
    r0, r1 = run_ranks(w.train, 2, 1, 1, "gpipe", 2, 1, path, 5, 2, timeout=180)
    assert r0["plan"] == {"0": "colwise", "1": "rowwise", "2": "colwise", "3": "rowwise", "4": "colwise",
                          "6": "rowwise"}
    for r in (r0, r1):
        check_against(ref, path, r)
    full = sum(v.numel() * 4 for v in ref["params"].values())
    assert r0["bytes"] <= 0.55 * full and r1["bytes"] <= 0.55 * full
    cpath = str(tmp_path / "conv-tp2.params")
    c0, _ = run_ranks(w.train_convnet_tp, 2, cpath, timeout=180)
    assert c0["plan"] == {"3": "colwise", "4": "rowwise"}
    got = load_tensors(cpath)
    for k, v in w.convnet_reference().items():
        torch.testing.assert_close(got[k], v, rtol=0, atol=1e-5, msg=lambda m, k=k: f"{k}: {m}")


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_data_pipeline_tensor_3d_on_eight_processes(run_ranks, tmp_path, ref):
    """dp=2 x pp=2 x tp=2: eight processes train the MLP and the convnet to the single-process
    parameters."""
    path = str(tmp_path / "3d.params")
    res = run_ranks(w.train, 8, 2, 2, "1f1b", 2, 1, path, 5, 2, timeout=600)
    for r in res:
        torch.testing.assert_close(r["out"], ref["out"], rtol=0, atol=1e-5)
        # the stage's gradients are reduced once per step, after the last micro-batch's backward
        assert r["allreduces"] == 5 * r["buckets"], (r["allreduces"], r["buckets"])
    check_against(ref, path, {"out": res[0]["out"], "losses": ref["losses"]})
    cpath = str(tmp_path / "conv-3d.params")
    plans = run_ranks(w.train_convnet_tp, 8, cpath, 5, 2, 2, timeout=600)
    assert all(p["plan"] == {"3": "colwise", "4": "rowwise"} for p in plans)
    got = load_tensors(cpath)
    for k, v in w.convnet_reference().items():
        torch.testing.assert_close(got[k], v, rtol=0, atol=1e-5, msg=lambda m, k=k: f"{k}: {m}")


# ---- the planner --------------------------------------------------------------------------------


def _synthetic_costs(n_pairs: int, param_mb: float):
    from mxtorch.parallel.planner import LayerCost

    costs = []
    for i in range(2 * n_pairs):
        costs.append(LayerCost(str(i), fwd_s=1e-4, bwd_s=2e-4, act_bytes=4096.0, out_bytes=4096.0,
                               param_bytes=int(param_mb * 2**20), fixed_s=1e-4))
    costs.append(LayerCost(str(2 * n_pairs), 1e-5, 2e-5, 4096.0, 40.0, 41000, 1e-4))
    return costs


def _pair_net(n_pairs: int):
    from mxtorch.gluon import nn

    net = nn.HybridSequential()
    for _ in range(n_pairs):
        net.add(nn.Dense(32, activation="relu", in_units=32), nn.Dense(32, in_units=32))
    net.add(nn.Dense(10, in_units=32))
    net.initialize()
    return net


def test_planner_splits_the_model_when_data_parallel_does_not_fit():
    from mxtorch.parallel import plan

    net, x = _pair_net(4), torch.randn(4, 32)
    costs = _synthetic_costs(4, param_mb=100.0)  # 800 MiB of parameters: x3 with grads and momentum
    kw = {"world_size": 4, "batch_size": 64, "bandwidth": "10Gbit", "costs": costs}
    roomy = plan(net, x, memory_per_device="8GiB", **kw)
    assert all(p.predicted_memory_bytes <= 8 * 2**30 for p in roomy)
    assert any(p.config.dp == 4 for p in roomy)
    tight = plan(net, x, memory_per_device="1GiB", **kw)
    best = tight[0]
    assert best.config.pp * best.config.tp > 1 and best.predicted_memory_bytes <= 2**30
    assert all(p.config.dp < 4 for p in tight)  # pure data parallelism (2.4 GiB) is gone
    assert tight == sorted(tight, key=lambda p: (p.predicted_step_s, p.predicted_memory_bytes))
    text = best.explain()
    assert f"dp={best.config.dp} pp={best.config.pp} tp={best.config.tp}" in text and "beats the next" in text
    with pytest.raises(MXNetError, match=r"needs [0-9.]+ MiB"):
        plan(net, x, memory_per_device="100MiB", **kw)


def test_planner_memory_model_follows_the_schedules():
    from mxtorch.parallel import plan

    net, x = _pair_net(4), torch.randn(4, 32)
    costs = _synthetic_costs(4, param_mb=1.0)
    plans = plan(net, x, world_size=2, memory_per_device="8GiB", batch_size=64, bandwidth="10Gbit",
                 costs=costs)
    by = {(p.config.pp, p.config.tp, p.micro_batches, p.schedule, p.checkpointing): p for p in plans}
    gpipe, f1b = by[(2, 1, 16, "gpipe", False)], by[(2, 1, 16, "1f1b", False)]
    assert f1b.memory["activations"] < gpipe.memory["activations"]  # 1F1B holds at most pp micro-batches
    assert by[(2, 1, 16, "gpipe", True)].memory["activations"] < gpipe.memory["activations"]
    params = {k: by[k].memory["parameters"] for k in [(1, 2, 1, "none", False), (1, 1, 1, "none", False)]}
    assert params[(1, 2, 1, "none", False)] < params[(1, 1, 1, "none", False)]


def test_parse_sizes():
    from mxtorch.parallel.planner import parse_bandwidth, parse_bytes

    assert parse_bytes("2GiB") == 2 * 2**30 and parse_bytes("512MB") == 512 * 10**6 and parse_bytes(10) == 10
    assert parse_bandwidth("10Gbit") == 1.25e9 and parse_bandwidth("1GB") == 1e9
    with pytest.raises(MXNetError, match="cannot read the size"):
        parse_bytes("lots")


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_mxtorch_train_plan_auto_trains_with_the_planned_layout(tmp_path):
    import json

    import mxtorch as mx
    from mxtorch.cli.main import main

    out = tmp_path / "run"
    rc = main(["train", "--plan", "auto", "--workers", "2", "--model", "mlp", "--data-root",
               mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT, "--epochs", "1", "--batch-size", "128",
               "--lr", "0.1", "--output", str(out), "--no-progress"])
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    layout = metrics["pipeline"]
    assert layout["planned"] and layout["dp"] * layout["pp"] * layout["tp"] == 2
    assert metrics["final_test_acc"] > 0.6
    with pytest.raises(SystemExit, match="--workers N"):
        main(["train", "--plan", "auto", "--model", "mlp"])


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@pytest.mark.timeout(600)
def test_mxtorch_train_pipelined_runs_the_training_hooks(tmp_path, monkeypatch):
    """The pipelined job calls the same TrainHook points as the data-parallel loop on every rank
    (a plugin probe through MXTORCH_TRAIN_HOOKS), and --amp reaches its Trainer (AMP's update hook)."""
    import json

    import train_test_hooks  # tests/ is on sys.path: its env() puts this folder on the workers' path

    import mxtorch as mx
    from mxtorch.cli.main import main

    probe = tmp_path / "probe"
    probe.mkdir()
    for k, v in train_test_hooks.env(MXTORCH_TEST_PROBE_DIR=str(probe)).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("MXTORCH_TRAIN_HOOKS", "train_probe_hooks")
    out = tmp_path / "run"
    rc = main(["train", "--pp", "2", "--micro-batches", "2", "--schedule", "gpipe", "--model", "mlp",
               "--data-root", mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT, "--epochs", "2",
               "--batch-size", "512", "--lr", "0.1", "--amp", "bf16", "--output", str(out), "--no-progress",
               "--threads", "1"])
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    steps = len(metrics["epochs"]) * 19  # 9,984 training images / 512 a batch
    for rank in (0, 1):
        seen = json.loads((probe / f"rank{rank}.json").read_text())
        assert seen["calls"] == {"on_start": 1, "on_shapes": 1, "on_epoch_end": 2, "on_end": 1}, seen
        assert seen["steps"] == list(range(1, steps + 1))
        assert seen["update_hooks"] == ["amp"]
    assert [e["probe_epoch"] for e in metrics["epochs"]] == [1, 2] and metrics["probe"]["rank"] == 0
