"""mxtorch.horovod beyond the basics: process sets, join, grouped gathers/scatters, Adasum.

One 3-process gloo job (real processes, a free port, a timeout) runs every check in
tests/horovod_sets_workers.py; each rank checks its results against hand computations.
Single-process tests cover the pure parts (ProcessSet before init, the Adasum formula).
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

import mxtorch.horovod as hvd
from mxtorch.horovod._adasum import adasum_pair, adasum_tree

sys.path.insert(0, os.path.dirname(__file__))
import horovod_sets_workers as workers  # noqa: E402


def test_process_set_before_init():
    ps = hvd.ProcessSet([3, 1])
    assert ps.ranks == [1, 3] and ps.process_set_id is None
    assert ps.size() is None and ps.rank() is None
    assert "ranks=[1, 3]" in str(ps)
    with pytest.raises(ValueError, match="list of"):
        hvd.ProcessSet("01")
    with pytest.raises(ValueError, match="integer ranks"):
        hvd.ProcessSet([0, 1.5])
    with pytest.raises(hvd.NotInitializedError):
        hvd.add_process_set([0])
    with pytest.raises(TypeError, match="hvd.ProcessSet"):
        hvd.allgather(torch.ones(1), process_set=[0, 1])


def test_adasum_formula_by_hand():
    a, b = torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)
    assert torch.equal(adasum_pair(a, b), torch.tensor([1.0, 1.0], dtype=torch.float64))  # orthogonal: sum
    assert torch.equal(adasum_pair(a * 2, a * 2), a * 2)  # identical: their mean
    assert torch.equal(adasum_pair(a, torch.zeros(2, dtype=torch.float64)), a)  # a zero gradient
    f64 = torch.float64
    got = adasum_pair(torch.tensor([3.0, 4.0], dtype=f64), torch.tensor([3.0, 0.0], dtype=f64))
    torch.testing.assert_close(got, torch.tensor([3.96, 3.28], dtype=torch.float64))
    assert torch.equal(adasum_tree([a]), a)


@pytest.mark.timeout(600)
def test_process_sets_join_grouped_adasum_three_ranks():
    from mxtorch.distributed.testing import run_workers

    results = run_workers(workers.process_sets, 3, timeout=180)
    assert all(r == results[0] for r in results), results
    assert results[0] == ["sets", "collectives on sets", "remove", "grouped gathers", "adasum", "join",
                          "join with trainer", "trainer on a set"]


def test_sets_are_forgotten_when_an_elastic_job_reforms():
    from mxtorch.elastic import inprocess
    from mxtorch.horovod import _process_sets

    hvd.init()  # not launched: a one-process job
    try:
        ps = hvd.ProcessSet([0])
        _process_sets._create(ps)  # (add_process_set refuses a copy of the global set)
        assert ps.process_set_id is not None and ps.size() == 1
        assert _process_sets._forget_sets_after_reform in inprocess._reform_hooks
        _process_sets._forget_sets_after_reform()  # what the elastic job runs after re-forming
        assert ps.process_set_id is None and ps.size() is None
        assert hvd.global_process_set.ranks == [0]
    finally:
        hvd.shutdown()


def test_a_trainer_on_a_set_dropped_by_an_elastic_reform_says_so_at_its_next_step():
    import mxtorch as mx
    from mxtorch import autograd
    from mxtorch.gluon import nn
    from mxtorch.horovod import _process_sets

    hvd.init()  # not launched: a one-process job
    try:
        net = nn.Dense(1, in_units=1, use_bias=False)
        net.initialize(mx.init.One())
        ps = hvd.ProcessSet([0])
        _process_sets._create(ps)
        trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.5}, process_set=ps)
        on_global = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
        on_global.gradient_scale = 3.0  # a scale set by the user survives following the group
        _process_sets._forget_sets_after_reform()  # what the elastic job runs after re-forming, then
        for t in (trainer, on_global):  # the trainers' own hook
            t._follow_group()
        assert on_global.gradient_scale == 3.0
        with autograd.record():
            loss = net(mx.nd.array([[2.0]])).sum()
        loss.backward()
        with pytest.raises(ValueError, match=r"process set .*ranks=\[0\].* was dropped when the elastic job"):
            trainer.step(1)
        assert float(net.weight.data().detach().reshape(-1)[0]) == 1.0  # nothing was updated
    finally:
        hvd.shutdown()
