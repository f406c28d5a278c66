"""bench/scaling.py, the time-dilated scaling benchmark: its alpha-beta arithmetic against hand
computations, its option checks, and a 2-worker replay on 127.0.0.1 without a cluster (``--local``:
real gloo all-reduces, mxtorch's compressed allreduce store and a dist_sync job).  No timings are
checked: the smoke only asks that every schedule ran and reported."""

from __future__ import annotations

import importlib.util
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


def test_parameter_server_by_hand():
    r = _two_layers()
    # 2 workers share one server's link: each byte takes 2/beta; pushes of 2 s and 4 s from 3.0 -> 5.0,
    # then 9.0; the last layer's pull 4 s more, and a round trip (0.1 s) for its push and its pull
    assert M.predict_ps(r, 2, 1, 0.1, 1000.0) == pytest.approx(13.2)
    # 4 servers for 2 workers: no sharing; 1 s and 2 s pushes, 3.0 -> 4.0 -> 6.0, pull 2 s, 0.2 s
    assert M.predict_ps(r, 2, 4, 0.1, 1000.0) == pytest.approx(8.2)
    # an unbalanced placement: the busiest server holds 3/4 of the bytes: 2 * 3/4 = 1.5 x slower
    assert M.predict_ps(r, 2, 2, 0.0, 1000.0, busiest_share=0.75) == pytest.approx(3.0 + 1.5 + 3.0 + 3.0)


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


@pytest.mark.parametrize("argv, message", [
    (["--models", "vgg"], "--models 'vgg'"),
    (["--workers", "1,2"], "each count must be >= 2"),
    (["--buckets", "25,x"], "--buckets '25,x'"),
    (["--compression", "topk"], "--compression"),
    (["--ps-modes", "dist_device_sync"], "--ps-modes"),
    (["--rate", "10gbps"], "bytes per second"),
    (["--steps", "0"], "--steps must be > 0"),
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
    points = scaling.main(SMOKE + ["--compression", "fp16", "--ps-servers", "", "--json", saved])
    _check(points, ["allreduce overlap 25 MiB", "allreduce no overlap 25 MiB", "fp16 (mxtorch store)"],
           capsys.readouterr().out)
    again = scaling.main(["--replot", saved])  # the table again, from the file
    assert [p.__dict__ for p in again] == [p.__dict__ for p in points]


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_two_workers_replay_a_parameter_server_job_on_loopback(capsys):
    points = scaling.main(SMOKE + ["--compression", "", "--ps-servers", "1", "--ps-modes", "dist_sync",
                                   "--transformer-schedules", "ps"])
    _check(points, ["dist_sync 1 server"], capsys.readouterr().out)
