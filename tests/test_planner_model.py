"""The planner's time model (mxtorch.parallel.planner): measured fixed costs, shared cores, the probe."""

from __future__ import annotations

import pytest
import torch
from test_pipeline import _pair_net  # tests/ is on sys.path

from mxtorch.parallel.planner import LayerCost, Overheads, plan


def _costs(n_pairs: int) -> list[LayerCost]:
    out = [LayerCost(str(i), 1e-5, 2e-5, 4096.0, 4096.0, 4096, 0.0) for i in range(2 * n_pairs)]
    return out + [LayerCost(str(2 * n_pairs), 1e-6, 2e-6, 40.0, 40.0, 1320, 0.0)]


LAYOUTS = [(4, 1, 1), (2, 2, 1), (1, 4, 1), (2, 1, 2), (1, 2, 2), (1, 1, 4)]
KW = {"world_size": 4, "batch_size": 64, "memory_per_device": "8GiB", "bandwidth": "10Gbit",
      "micro_batches": (1, 4), "costs": _costs(2)}


def test_measured_fixed_costs_are_added_per_step_per_slot_and_per_extra_pair():
    net, x = _pair_net(2), torch.randn(4, 32)
    base = {(p.config.dp, p.config.pp, p.config.tp, p.micro_batches, p.schedule, p.checkpointing): p
            for p in plan(net, x, overheads=False, latency_s=0.0, **KW)}
    over = Overheads(step_s={lay: 0.001 for lay in LAYOUTS}, slot_s={lay: 0.002 for lay in LAYOUTS},
                     pair_s={2: 0.0005, 4: 0.0007})
    got = plan(net, x, overheads=over, **KW)
    for p in got:
        c = p.config
        b = base[(c.dp, c.pp, c.tp, p.micro_batches, p.schedule, p.checkpointing)]
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


def test_shared_cores_slow_the_plans_whose_processes_compute_together():
    net, x = _pair_net(2), torch.randn(4, 32)
    kw = dict(KW, costs=[LayerCost(c.path, c.fwd_s * 100, c.bwd_s * 100, c.act_bytes, c.out_bytes,
                                   c.param_bytes, 0.0) for c in _costs(2)])
    alone = {(p.config.dp, p.config.pp, p.config.tp, p.micro_batches, p.schedule, p.checkpointing): p
             for p in plan(net, x, overheads=False, **kw)}
    shared = plan(net, x, overheads=False, cores=1, **kw)
    for p in shared:
        a = alone[(p.config.dp, p.config.pp, p.config.tp, p.micro_batches, p.schedule, p.checkpointing)]
        if p.config.pp == 1:  # every process computes all the time: 4 processes on 1 core
            assert p.breakdown["compute"] == pytest.approx(4 * a.breakdown["compute"], rel=1e-6)
        assert p.predicted_step_s >= a.predicted_step_s * (1 - 1e-9)
    one = [p for p in shared if (p.config.pp, p.micro_batches) == (4, 1)][0]
    a = alone[(1, 4, 1, 1, "gpipe", one.checkpointing)]
    # pp=4 with one micro-batch: one stage computes at a time, so nothing is slowed
    assert one.breakdown["compute"] == pytest.approx(a.breakdown["compute"], rel=0.3)


def test_the_probe_measures_each_layouts_fixed_costs():
    from mxtorch.parallel.planner import _probe_link

    bw, lat, over = _probe_link(2, [(1, 2, 1), (1, 1, 2), (2, 2, 2)])  # the last is not 2 processes
    assert bw > 0 and lat > 0 and over is not None
    assert set(over.slot_s) == {(1, 2, 1), (1, 1, 2)} and set(over.pair_s) == {2}
    assert all(v >= 0 for v in [*over.slot_s.values(), *over.step_s.values()]) and over.pair_s[2] > 0
    assert over.slot_s[(1, 2, 1)] > 0  # the schedule's Python and the stage transfer, per micro-batch
