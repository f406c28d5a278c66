"""The planner's time model (mxtorch.parallel.planner): measured fixed costs, shared cores (the job's
CPU work over the cores, collectives beside computing ranks), the probe."""

from __future__ import annotations

import pytest
import torch
from test_pipeline import _pair_net  # tests/ is on sys.path

from mxtorch.parallel import ParallelConfig
from mxtorch.parallel.planner import LayerCost, Overheads, plan


def _costs(n_pairs: int) -> list[LayerCost]:
    out = [LayerCost(str(i), 1e-5, 2e-5, 4096.0, 4096.0, 4096, 0.0) for i in range(2 * n_pairs)]
    return out + [LayerCost(str(2 * n_pairs), 1e-6, 2e-6, 40.0, 40.0, 1320, 0.0)]


LAYOUTS = [(4, 1, 1), (2, 2, 1), (1, 4, 1), (2, 1, 2), (1, 2, 2), (1, 1, 4)]
KW = {"world_size": 4, "batch_size": 64, "memory_per_device": "8GiB", "bandwidth": "10Gbit",
      "micro_batches": (1, 4), "costs": _costs(2)}


def test_measured_fixed_costs_are_added_per_step_per_slot_and_per_extra_pair():
    net, x = _pair_net(2), torch.randn(4, 32)
    base = {(p.config, p.micro_batches, p.schedule, p.checkpointing): p
            for p in plan(net, x, overheads=False, latency_s=0.0, **KW)}
    over = Overheads(step_s={lay: 0.001 for lay in LAYOUTS}, slot_s={lay: 0.002 for lay in LAYOUTS},
                     pair_s={2: 0.0005, 4: 0.0007})
    got = plan(net, x, overheads=over, **KW)
    for p in got:
        c = p.config
        b = base[(c, p.micro_batches, p.schedule, p.checkpointing)]
        slots = p.micro_batches + c.pp - 1
        pairs_per_stage = 2 // c.pp if c.tp > 1 else 1  # the slowest stage's pairs
        extra = (pairs_per_stage - 1) * over.pair_s.get(c.tp, 0.0) * slots
        assert p.predicted_step_s == pytest.approx(b.predicted_step_s + 0.001 + 0.002 * slots + extra,
                                                   rel=1e-6, abs=1e-9), p
        assert p.breakdown["fixed costs (measured)"] == pytest.approx(0.001 + 0.002 * slots)
    # large per-slot costs make long pipelines lose: the winner has no pipeline
    slow = Overheads(step_s={lay: 0.0 for lay in LAYOUTS},
                     slot_s={lay: 0.05 * lay[1] for lay in LAYOUTS}, pair_s={2: 0.0, 4: 0.0})
    best = plan(net, x, overheads=slow, **KW)[0]
    assert best.config.pp == 1 and best.micro_batches == 1
    assert "fixed costs (measured)" in best.explain()


def _key(p):
    return (p.config, p.micro_batches, p.schedule, p.checkpointing)


def test_shared_cores_charge_every_processs_cpu_work_over_the_cores():
    net, x = _pair_net(2), torch.randn(4, 32)
    costs = [LayerCost(c.path, c.fwd_s * 100, c.bwd_s * 100, c.act_bytes, c.out_bytes, c.param_bytes, 0.0)
             for c in _costs(2)]
    kw = dict(KW, costs=costs)
    over = Overheads(allreduce_cpu_per_byte=1e-9, gradient_cpu_per_byte=2e-8, update_cpu_per_byte=3e-9)
    alone = {_key(p): p for p in plan(net, x, overheads=over, **kw)}
    shared = plan(net, x, overheads=over, cores=1, **kw)
    for p in shared:
        a = alone[_key(p)]
        total = sum(p.cpu_work.values())
        # no fixed costs measured here: at least the critical path and the CPU work over one core
        assert p.predicted_step_s >= max(a.predicted_step_s, total) * (1 - 1e-9)
        assert p.breakdown["shared cores"] == pytest.approx(p.predicted_step_s - a.predicted_step_s,
                                                            abs=1e-12)
        assert (p.cpu_work["tensor-parallel collectives"] > 0) == (p.config.tp > 1)
        assert (p.cpu_work["data-parallel reduction"] > 0) == (p.config.dp > 1)
    dp4 = next(p for p in shared if p.config == ParallelConfig(dp=4) and not p.checkpointing)
    params = sum(c.param_bytes for c in costs)
    per_sample = sum(c.fwd_s + c.bwd_s for c in costs)
    assert dp4.cpu_work["compute"] == pytest.approx(4 * per_sample * 16, rel=1e-9)  # 4 ranks x 16 samples
    assert dp4.cpu_work["data-parallel reduction"] == pytest.approx(4 * params * 2e-8, rel=1e-9)
    assert dp4.cpu_work["optimizer update"] == pytest.approx(4 * params * 3e-9, rel=1e-9)  # 1 state: x 3/3
    # on the path: the ring's bytes at 10 Gbit/s, the store's copies (beyond a bare all-reduce), a latency
    ring = 2 * 3 / 4 / 1.25e9
    expect = (ring + 1.9e-8) * params + 5e-5
    assert dp4.breakdown["data-parallel all-reduce"] == pytest.approx(expect, rel=1e-9)
    assert dp4.breakdown["shared cores"] > 0  # 4 processes computing and reducing on 1 core
    # its one slot has 4 processes working on 1 core: 4x the compute, unless the CPU work is more
    a4 = alone[_key(dp4)]
    assert dp4.predicted_step_s == pytest.approx(
        max(a4.predicted_step_s + 3 * a4.breakdown["compute"], sum(dp4.cpu_work.values())), rel=1e-9)
    assert "CPU work of the 4 processes" in dp4.explain() and "the cores bound the step" in dp4.explain()
    # pp=4 with one micro-batch: one stage computes at a time, its critical path already holds the work
    one = next(p for p in shared if (p.config.pp, p.micro_batches, p.checkpointing) == (4, 1, False))
    assert one.breakdown["shared cores"] == 0.0


def test_pipeline_slots_with_more_working_processes_than_cores_take_longer():
    from mxtorch.parallel.planner import _slot_stretch

    # pp=4, m=4: 1, 2, 3, 4, 3, 2, 1 stages at work; on 2 cores the middle slots take 1.5x and 2x
    assert _slot_stretch(4, 4, 1, 2, False) == (9.0, 9.0)
    assert _slot_stretch(4, 4, 1, 4, False) == (7.0, 7.0)  # a core each: no stretch
    # dp=2 x pp=2, m=1: the last stage reduces its gradients while the first computes its backward
    assert _slot_stretch(1, 2, 2, 2, True) == (2.0, 3.0)
    assert _slot_stretch(1, 2, 2, 2, False) == (2.0, 2.0)


def test_oversubscribed_collectives_run_at_the_rate_measured_beside_computing_ranks():
    net, x = _pair_net(2), torch.randn(4, 32)
    slow = Overheads(shared_bandwidth=1e8)  # 12.5x slower than 10 Gbit/s (1.25e9 bytes/s)
    kw = dict(KW, latency_s=0.0)  # bytes only: the rates' ratio shows
    fast = {_key(p): p for p in plan(net, x, overheads=Overheads(), cores=2, **kw)}
    for p in plan(net, x, overheads=slow, cores=2, **kw):
        f = fast[_key(p)]
        c = p.config
        # a stage's gradient reduction while other stages compute; the others reduce all together
        for key, slowed in (("data-parallel all-reduce", c.dp > 1 and c.pp > 1),
                            ("tensor-parallel collectives", c.tp > 1 and c.dp * c.pp > 1)):
            before, after = f.breakdown[key], p.breakdown[key]
            assert after == pytest.approx(12.5 * before if slowed else before, rel=1e-9), (p, key)
            assert (before > 0) == (c.dp > 1 if key.startswith("data") else c.tp > 1)
    # as many cores as processes: nothing is shared
    roomy = {_key(p): p.predicted_step_s for p in plan(net, x, overheads=slow, cores=4, **KW)}
    assert roomy == {_key(p): p.predicted_step_s for p in plan(net, x, overheads=Overheads(), cores=4, **KW)}


def test_the_probe_measures_each_layouts_fixed_costs():
    from mxtorch.parallel.probe import probe_link

    bw, lat, over = probe_link(2, [(1, 2, 1), (1, 1, 2), (2, 2, 2)])  # the last is not 2 processes
    assert bw > 0 and lat > 0 and over is not None
    assert set(over.slot_s) == {(1, 2, 1), (1, 1, 2)} and set(over.pair_s) == {2}
    assert all(v >= 0 for v in [*over.slot_s.values(), *over.step_s.values()]) and over.pair_s[2] > 0
    assert over.slot_s[(1, 2, 1)] > 0  # the schedule's Python and the stage transfer, per micro-batch
    assert set(over.cpu_micro_s) == {(1, 2, 1), (1, 1, 2)} and over.cpu_micro_s[(1, 2, 1)] > 0
    assert over.pair_cpu_s[2] > 0
    # CPU per byte: gloo's reduction, the store's copies around it, the optimizer's update
    assert over.gradient_cpu_per_byte > 0 and over.allreduce_cpu_per_byte > 0 and over.update_cpu_per_byte > 0
    assert over.shared_bandwidth == 0.0  # needs 4 processes: two reduce while two compute
