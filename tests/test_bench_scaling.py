"""bench/scaling.py, the time-dilated scaling benchmark: its alpha-beta arithmetic against hand
computations, its option checks, and a 2-worker replay on 127.0.0.1 without a cluster (``--local``:
real gloo all-reduces, mxtorch's compressed allreduce store (fp16, PowerSGD), ZeRO 1/2/3's
collectives, a 1F1B pipeline, and a dist_sync job).  No timings are checked: the smoke only asks
that every schedule ran and reported."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from types import ModuleType

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_DIR = os.path.join(ROOT, "bench")


def _load(name: str) -> ModuleType:
    if BENCH_DIR not in sys.path:
        sys.path.insert(0, BENCH_DIR)  # the bench imports its siblings by name, so do its worker processes
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH_DIR, f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


M = _load("_scaling_models")
scaling = _load("scaling")


def _two_layers():
    # forward 1 s; backward: layer b (2 s, 1000 bytes of fp32 gradient), then layer a (1 s, 2000 bytes)
    return M.Replay("toy", 1.0, (M.Layer("b", 2.0, (250,)), M.Layer("a", 1.0, (500,))), "1")


def test_ring_allreduce_and_allgather_costs_by_hand():
    # 4 workers, 8 MB, 1 GB/s, 10 us: 2*3/4 * 8e-3 s + 6 * 1e-5 s
    assert M.ring_allreduce_s(8e6, 4, 1e-5, 1e9) == pytest.approx(0.012 + 6e-5)
    assert M.allgather_s(1e6, 4, 1e-5, 1e9) == pytest.approx(3e-3 + 3e-5)
    assert M.ring_allreduce_s(8e6, 1, 1e-5, 1e9) == 0.0
    # a 1 gbit link moves 1448 payload bytes per 1514-byte frame
    assert M.link_beta(1e9) == pytest.approx(125e6 * 1448 / 1514)


def test_buckets_close_at_the_size_in_backward_order():
    bs = M.buckets(_two_layers(), 1000)
    assert [(b.members, b.nbytes, b.last_layer) for b in bs] == [([(0, 0)], 1000, 0), ([(1, 0)], 2000, 1)]
    one = M.buckets(_two_layers(), 10_000)
    assert [(b.members, b.nbytes) for b in one] == [([(0, 0), (1, 0)], 3000)]
    assert M.ready_times(_two_layers()) == [3.0, 4.0]


def test_allreduce_overlap_and_no_overlap_by_hand():
    r = _two_layers()
    # bucket costs with n=2, alpha 0.1, beta 1000 B/s: 1000 B -> 1.0 + 0.2, 2000 B -> 2.0 + 0.2
    # overlap: the first starts at 3.0 (ends 4.2), the second waits for it: 4.2 + 2.2
    assert M.predict_allreduce(r, 2, 0.1, 1000.0, 1000, overlap=True) == pytest.approx(6.4)
    # no overlap: both after the backward (4.0): 4.0 + 1.2 + 2.2
    assert M.predict_allreduce(r, 2, 0.1, 1000.0, 1000, overlap=False) == pytest.approx(7.4)
    # fp16 halves the bytes: 3.0 + 0.7 = 3.7; max(4.0, 3.7) + 1.2 = 5.2
    assert M.predict_allreduce(r, 2, 0.1, 1000.0, 1000, True, wire_ratio=0.5) == pytest.approx(5.2)
    # 2bit all-gathered (1/16 of the bytes, (n-1) payloads) on 3 workers, one bucket after the backward:
    # 2 * 3000/16 / 1000 + 2 * 0.1
    assert M.predict_allreduce(r, 3, 0.1, 1000.0, 10_000, False, 1 / 16, gather=True) == \
        pytest.approx(4.0 + 0.375 + 0.2)
    # a fast link: the step is the compute
    assert M.predict_allreduce(r, 2, 0.0, 1e12, 1000, True) == pytest.approx(r.compute_s)


def test_parameter_server_calls_by_hand():
    r = _two_layers()  # b's 1000 B ready at 3.0, a's 2000 B at 4.0
    one = M.ps_layer_server_bytes(r, 1, 1)
    assert one == [[1000], [2000]]
    # 2 workers share the server's link: b's call 3.0 + 2.0 (pushes) + 2.0 (its reply) + 0.1 = 7.1;
    # a's call from 7.1: 4.0 + 4.0 + 0.1
    assert M.predict_ps_calls(r, 2, 0.1, 1000.0, M.ps_layer_messages(r, 1, 1)) == pytest.approx(15.2)
    # 4 servers: each small key on the least loaded one, so each call still uses one server's link
    four = M.ps_layer_server_bytes(r, 4, 1)
    assert four == [[1000, 0, 0, 0], [0, 2000, 0, 0]]
    assert M.predict_ps_calls(r, 2, 0.1, 1000.0, M.ps_layer_messages(r, 4, 1)) == pytest.approx(15.2)
    # a key above the big-array bound: 4 MiB slices (3 of them), rounded up to 4, one per server
    big = M.Replay("big", 1.0, (M.Layer("w", 1.0, (3_000_000,)),), "1")
    assert M.ps_layer_server_bytes(big, 4, 1) == [[3_000_000] * 4]
    # what is ready when the thread comes round goes in one call: x alone (2.0 -> 6.1), then y and
    # z together (4.0 of pushes, z's reply 2.0)
    r3 = M.Replay("three", 1.0, (M.Layer("x", 1.0, (250,)), M.Layer("y", 0.5, (250,)),
                                 M.Layer("z", 0.5, (250,))), "1")
    assert M.predict_ps_calls(r3, 2, 0.1, 1000.0, M.ps_layer_messages(r3, 1, 1)) == pytest.approx(12.2)


def test_a_parameter_server_call_ends_with_each_servers_last_reply():
    # x (1000 B) ready at 2.0 on server 0; w (2000 B) at 2.5 on server 1; b (40 B) at 3.0 on server 2
    r = M.Replay("fc", 1.0, (M.Layer("x", 1.0, (250,)), M.Layer("w", 0.5, (500,)), M.Layer("b", 0.5, (10,))),
                 "1")
    msgs = M.ps_layer_messages(r, 4, 1)
    assert msgs == [[(0, 1000)], [(1, 2000)], [(2, 40)]]
    # x alone: 2.0 + 2.0 (2 workers' pushes on server 0's link) + 2.0 (the 2 replies) + 0.1 = 6.1;
    # then w and b in one call: w is in after 4.0 (2 x 2000 B on server 1's link), its 2 replies
    # take 4.0 more; b (in at 2.04, replied by 2.12) is long done: 6.1 + 8.0 + 0.1 = 14.2 (ending
    # with the last layer's reply, as the model did before, gave 6.1 + 4.0 + 0.08 + 0.1 = 10.28)
    assert M.predict_ps_calls(r, 2, 0.1, 1000.0, msgs) == pytest.approx(14.2)


def test_transformer_sizes_and_flops_by_hand():
    d, layers, vocab, seq = 1024, 24, 50257, 1024
    t = M.transformer(8, 1e15)
    assert t.params == layers * (12 * d * d + 13 * d) + vocab * d + seq * d + 2 * d
    assert 350e6 < t.params < 360e6
    # backward twice the forward; the forward: per token 24 d^2 per layer + 4 seq d attention,
    # 2 d vocab for the tied output layer, 10 d per layer and 5 d at the end for the norms
    tokens = 8 * seq
    fwd = tokens * (layers * (24 * d * d + 4 * seq * d + 10 * d) + 2 * d * vocab + 5 * d)
    assert t.forward_s == pytest.approx(fwd / 1e15)
    assert t.backward_s == pytest.approx(2 * fwd / 1e15)
    # the backward starts at the tied output layer (no gradient yet) and ends with the embeddings
    assert t.layers[0].grads == () and t.layers[-1].grads == (vocab * d, seq * d)


def test_gloo_broadcast_and_reduce_by_hand():
    # binomial tree: the root sends the whole buffer ceil(log2 n) times
    assert M.broadcast_s(1000, 4, 0.1, 1000.0) == pytest.approx(2 * 1.1)
    assert M.broadcast_s(1000, 5, 0.1, 1000.0) == pytest.approx(3 * 1.1)
    assert M.broadcast_s(1000, 1, 0.1, 1000.0) == 0.0
    # 8000 B on 2 ranks: segments of 8000/4 = 2000 B, 4 of them, the last two not sent: 4000 B in the
    # ring, then the root gets the other chunk (4000 B); 2(n-1) alphas
    assert M.reduce_s(8000, 2, 0.1, 1000.0) == pytest.approx(8.0 + 0.2)
    # 8 MiB: 1 MiB segments (the cap), 8 of them, 6 sent; the chunk 4 MiB
    assert M.reduce_s(8 << 20, 2, 0.0, 1.0) == pytest.approx((6 << 20) + (4 << 20))
    # scaled 4x: gloo sees 2000 B (segments of 500 B: 1000 B sent), times 4
    assert M.reduce_s(8000, 2, 0.0, 1000.0, scale=4) == pytest.approx((4000 + 4000) / 1000)


def test_zero_stages_by_hand():
    r = _two_layers()  # compute 4 s; gradients of 250 and 500 floats
    # ZeroTrainer's owners: the 500-float gradient to rank 0, the 250 one to rank 1
    assert M.zero_owner_bytes(r, 2, 1) == [2000, 1000]
    assert M.zero_gather_width(r, 2, 1) == 2000
    # zero 1: the store's one 25 MiB bucket all-reduced when a is done (4.0; 3000 B: 3.0 + 0.2), then
    # the all-gather of the updated parameters, each rank's share padded to 2000 B (2.0 + 0.1)
    assert M.predict_zero(r, 2, 1, 0.1, 1000.0) == pytest.approx(4.0 + 3.2 + 2.1)
    assert M.predict_zero(r, 2, 1, 0.1, 1000.0, skew=0.5) == pytest.approx(9.3 + 2 * 0.5)
    # a bucket per gradient: b's 1000 B all-reduced from 3.0 (1.2), a's 2000 B from 4.2 (2.2): 6.4
    assert M.predict_zero(r, 2, 1, 0.1, 1000.0, bucket_bytes=1000) == pytest.approx(6.4 + 2.1)
    # zero 2, a bucket per gradient: b's 1000 B reduced onto rank 1 when b is done (t = 3; 500 B in
    # the ring + 500 to the root: 1.2, until 4.2), a's 2000 B onto rank 0 (2.2) after it, from 4.2:
    # 6.4, then the all-gather (2.1)
    assert M.zero_buckets(r, 1, 1000) == [[(0, 0)], [(1, 0)]]
    assert M.predict_zero(r, 2, 2, 0.1, 1000.0, bucket_bytes=1000) == pytest.approx(6.4 + 2.1)
    # one bucket of both: filled when a is done (t = 4): rank 0's reduce (2.2), then rank 1's (1.2)
    assert M.zero_buckets(r, 1, 1 << 20) == [[(0, 0), (1, 0)]]
    assert M.predict_zero(r, 2, 2, 0.1, 1000.0, bucket_bytes=1 << 20) == pytest.approx(4.0 + 3.4 + 2.1)
    # zero 3: the layers' halves are 500 B (b: 0.6 to gather) and 1000 B (a: 1.1).  Forward (a, then
    # b; forward = half the backward): a's gather 0-1.1, b's prefetched 1.1-1.7 while a computes
    # (1.1-1.6), b computes 1.7-2.7.  Backward: b's gather 2.7-3.3 (the first block waits), a's
    # prefetched 3.3-4.4 while b computes (3.3-5.3), a 5.3-6.3.  Then the tiny all-reduce (0.2) and
    # the reduce-scatter of 3000 B, which gloo runs as an all-reduce (3.2)
    assert M.zero_layer_bytes(r, 2, 1) == [1000, 2000]
    assert M.predict_zero(r, 2, 3, 0.1, 1000.0) == pytest.approx(6.3 + 0.2 + 3.2)
    # each gather ends 0.5 later (skew): forward 1.6, 2.7 (b computes 2.7-3.7); backward 4.8, b until
    # 6.8, a's (4.8-6.4) is there: 7.8; the tiny all-reduce and the reduce-scatter + 0.5 each
    assert M.predict_zero(r, 2, 3, 0.1, 1000.0, skew=0.5) == pytest.approx(7.8 + 0.2 + 3.2 + 1.0)


def test_zero_2_waits_for_all_but_the_latest_bucket_at_a_new_bucket():
    # four layers of 250 floats (1000 B each, a bucket each, owners 0, 1, 0, 1; each reduce 1.2 s):
    # c, b, a compute 0.1 s each, z 5 s, forward 1 s
    r = M.Replay("four", 1.0, (M.Layer("c", 0.1, (250,)), M.Layer("b", 0.1, (250,)),
                               M.Layer("a", 0.1, (250,)), M.Layer("z", 5.0, (250,))), "1")
    # c done at 1.1: its reduce 1.1-2.3; b at 1.2: 2.3-3.5; a at 1.3 must wait for c's (2.3): its
    # reduce 3.5-4.7; z computes 2.3-7.3, waits for b's (done), reduces 7.3-8.5; all-gather of
    # rank 0's 2000 B (2.1).  Without the wait z would end at 6.3 and the step at 7.5 + 2.1.
    assert len(M.zero_buckets(r, 1, 1000)) == 4
    assert M.predict_zero(r, 2, 2, 0.1, 1000.0, bucket_bytes=1000) == pytest.approx(8.5 + 2.1)


def _pipeline_toy():
    # forward: a (0.5 s, its output 100 elements), then b (1.0 s); backward twice that
    return M.Replay("p", 1.5, (M.Layer("b", 2.0, (250,)), M.Layer("a", 1.0, (500,), act=100)), "1")


def test_pipeline_stages_and_orders():
    stages = M.pipeline_stages(_pipeline_toy(), 2)
    assert stages == [M.Stage((1,), 0.5, 1.0, 100), M.Stage((0,), 1.0, 2.0, 0)]
    assert M.pipeline_ops("gpipe", 0, 2, 2) == [("F", 0), ("F", 1), ("B", 0), ("B", 1)]
    assert M.pipeline_ops("1f1b", 0, 4, 6) == [("F", 0), ("F", 1), ("F", 2), ("F", 3), ("B", 0), ("F", 4),
                                              ("B", 1), ("F", 5), ("B", 2), ("B", 3), ("B", 4), ("B", 5)]
    assert M.pipeline_ops("1f1b", 1, 2, 2) == [("F", 0), ("B", 0), ("F", 1), ("B", 1)]


def test_pipeline_schedules_by_hand():
    r = _pipeline_toy()
    # 2 stages, 2 microbatches of 2 workers' batches each (per = 1): a microbatch's activation is
    # 100 bf16 = 200 B, 2 s on a 100 B/s link, + 0.1 s. GPipe: stage 0 sends at 0.5 (arrives 2.6)
    # and at 1.0 (the link is busy until 2.5: arrives 4.6); stage 1 runs F0 2.6-3.6, F1 4.6-5.6,
    # B0 5.6-7.6 (its gradient arrives 9.7), B1 7.6-9.6 (the link: 9.6-11.6, arrives 11.7);
    # stage 0: B0 9.7-10.7, B1 11.7-12.7
    assert M.predict_pipeline(r, 2, 1, 2, "gpipe", 0.1, 100.0, 1 << 20) == pytest.approx(12.7)
    # 1F1B: stage 1 runs F0 2.6-3.6, B0 3.6-5.6 (arrives 7.7), F1 5.6-6.6, B1 6.6-8.6 (arrives 10.7);
    # stage 0: B0 7.7-8.7, B1 10.7-11.7
    assert M.predict_pipeline(r, 2, 1, 2, "1f1b", 0.1, 100.0, 1 << 20) == pytest.approx(11.7)
    # 2 replicas: stage 0 then all-reduces its 2000 B (20 + 0.2), stage 1 its 1000 B after its last
    # send (10.6 + 10.2)
    assert M.predict_pipeline(r, 2, 2, 2, "1f1b", 0.1, 100.0, 1 << 20) == pytest.approx(11.7 + 20.2)


def test_powersgd_payloads_by_hand():
    r = M.Replay("m", 1.0, (M.Layer("fc", 2.0, (600, 20), rows=(20, 0)),), "1")
    # full size: the 20 x 30 weight at rank 1 sends P (20) then Q (30); the bias (20) goes as it is
    assert M.powersgd_exchanges(r, 1, 1) == ((20 + 20) * 4, 30 * 4)
    # 4x smaller: the weight is 10 x 15 (each side / 2), the bias 5
    assert M.powersgd_shape(r.layers[0], 0, 4) == (10, 15)
    assert M.powersgd_exchanges(r, 1, 4) == ((10 + 5) * 4, 15 * 4)
    # each exchange in 50-byte buckets (of the scaled bytes): 60 -> 50 + 10, times 4 on the wire
    def bucket(nbytes: int) -> float:
        return M.ring_allreduce_s(nbytes * 4, 2, 0.1, 1000.0)

    assert M.predict_powersgd(r, 2, 1, 0.1, 1000.0, 4, 50) == pytest.approx(
        3.0 + 2 * (bucket(50) + bucket(10)))


def test_the_models_cpu_term_by_hand():
    def rank(two: float, stretch: float) -> dict:
        return {"schedules": {"none": {"cpu_s": 1.0},
                              "2bit": {"cpu_s": two, "server_cpu_s": 0.0, "stretch": stretch},
                              "ps": {"cpu_s": 1.0, "server_cpu_s": 8.0, "stretch": stretch}}}

    ranks = [rank(5.0, 3.0), rank(3.0, 5.0)]
    # 2 steps: 2 s and 1 s of extra CPU per step (median 1.5 s), stretched 4x (the median), dilated 10x
    two = scaling.Schedule("2bit", "compressed", compression="2bit")
    assert scaling.cpu_work_s(two, ranks, 2, 2, 10.0, None) == pytest.approx(1.5 * 4 / 10)
    # no stretch measured: the ranks spread over the cores (2 ranks on 1 core: 2x)
    for r in ranks:
        del r["schedules"]["2bit"]["stretch"]
    assert scaling.cpu_work_s(two, ranks, 2, 1, 10.0, None) == pytest.approx(1.5 * 2 / 10)
    assert scaling.cpu_work_s(two, ranks, 2, 2, 10.0, None) == pytest.approx(1.5 / 10)
    # 4 servers, the busiest with half the bytes: half of the servers' 4 s per step (not stretched)
    ps = scaling.Schedule("ps", "ps", servers=4, mode="dist_sync")
    assert scaling.cpu_work_s(ps, ranks, 2, 2, 10.0, 0.5) == pytest.approx(4 * 0.5 / 10)
    # the model adds it to the servers' wire time
    r = _two_layers()
    wire = M.predict_ps_calls(r, 2, 0.1, 1000.0, M.ps_layer_messages(r, 4, 1))
    assert ps.predict(r, 2, 0.1, 1000.0, 1, None, cpu_s=0.5) == pytest.approx(wire + 0.5)
    assert scaling.cpu_work_s(scaling.Schedule("a", "allreduce"), ranks, 2, 2, 10.0, None) == 0.0


@pytest.mark.parametrize("argv, message", [
    (["--models", "vgg"], "--models 'vgg'"),
    (["--workers", "1,2"], "each count must be >= 2"),
    (["--buckets", "25,x"], "--buckets '25,x'"),
    (["--compression", "topk"], "--compression"),
    (["--ps-modes", "dist_device_sync"], "--ps-modes"),
    (["--rate", "10gbps"], "bytes per second"),
    (["--steps", "0"], "--steps must be > 0"),
    (["--zero", "4"], "the stages are 1, 2 and 3"),
    (["--pipelines", "zb:2"], "--pipelines 'zb:2'"),
    (["--pipelines", "1f1b:1"], "STAGES >= 2"),
])
def test_misuse_exits_2_naming_the_bench(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        scaling.parse_args(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "bench/scaling.py: error: " in err and message in err, err


SMOKE = ["--local", "--models", "transformer", "--workers", "2", "--dilation", "1", "--scale", "4096",
         "--steps", "1", "--warmup", "0", "--alpha-rounds", "2", "--buckets", "25", "--job-timeout", "240"]


def _check(points, names, out):
    assert [p.schedule for p in points] == names
    for p in points:
        assert p.n == 2 and p.step_s > 0 and math.isfinite(p.efficiency) and p.cpu >= 0
        assert 0 < p.model_efficiency <= 1
    assert names[-1] in out and "meas/model" in out


def test_two_workers_replay_the_collective_schedules_on_loopback(capsys, tmp_path):
    saved = str(tmp_path / "points.json")
    points = scaling.main(SMOKE + ["--compression", "fp16,powersgd", "--ps-servers", "", "--zero", "1,2,3",
                                   "--pipelines", "1f1b:2", "--microbatches", "2", "--json", saved])
    _check(points, ["allreduce overlap 25 MiB", "allreduce no overlap 25 MiB", "fp16 (mxtorch store)",
                    "powersgd (mxtorch store)", "zero 1", "zero 2", "zero 3", "1f1b pp=2 x dp"],
           capsys.readouterr().out)
    again = scaling.main(["--replot", saved])  # the table again, from the file
    assert [p.__dict__ for p in again] == [p.__dict__ for p in points]


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_two_workers_replay_a_parameter_server_job_on_loopback(capsys, tmp_path):
    saved = str(tmp_path / "points.json")
    points = scaling.main(SMOKE + ["--compression", "", "--ps-servers", "2", "--ps-modes", "dist_sync",
                                   "--zero", "", "--pipelines", "", "--transformer-schedules", "ps",
                                   "--json", saved])
    _check(points, ["dist_sync 2 servers"], capsys.readouterr().out)
    # each rank reports the last timed step's pushpull calls: together they cover every layer once,
    # in backward order, one after another, with every server's bytes and replies
    with open(saved + ".ranks") as f:
        ranks = json.load(f)[0]["per_rank"]
    replay = M.transformer(8, M.DEFAULT_MFU * M.H100_BF16_FLOPS)
    layers = len(replay.layers)
    sizes = [sum(max(1, g // 4096) * 4 for g in la.grads) for la in replay.layers]
    for rank in ranks:
        calls = rank["schedules"]["dist_sync 2 servers"]["calls"]
        assert calls and calls[0]["layers"][0] == 0 and calls[-1]["layers"][1] == layers - 1
        for a, b in zip(calls, calls[1:]):
            assert b["layers"][0] == a["layers"][1] + 1 and b["t0"] >= a["t1"]
        for c in calls:
            first, last = c["layers"]
            assert 0 <= c["t0"] <= c["t1"]
            assert sum(c["bytes"].values()) == sum(sizes[first:last + 1])
            assert set(c["replies"]) <= {"0", "1"} and sum(c["replies"].values()) >= last - first + 1
            assert all(c["t0"] <= t <= c["t1"] for t in c["last_reply"].values())
