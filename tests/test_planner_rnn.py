"""The planner with recurrent layers split by 'gates' (mxtorch.parallel.planner, .tp_rnn): a
collective per layer and time step forward and backward, counted in the step time and in explain()."""

from __future__ import annotations

import pytest
import torch

from mxtorch.gluon import nn, rnn
from mxtorch.parallel.planner import LayerCost, Overheads, plan, profile_layers
from mxtorch.parallel.split import chain_units

T, FEAT, HID = 10, 8, 16


def _lstm_net():
    net = nn.HybridSequential()
    net.add(rnn.LSTM(HID, num_layers=2, layout="NTC", bidirectional=True, input_size=FEAT),
            nn.Dense(4, in_units=T * 2 * HID))
    net.initialize()
    return net


def _costs() -> list[LayerCost]:
    return [LayerCost("0", 1e-6, 2e-6, 4096.0, T * 2 * HID * 4.0, 40000, 0.0, seq_steps=T),
            LayerCost("1", 1e-7, 2e-7, 40.0, 16.0, 5136, 0.0)]


KW = {"world_size": 2, "batch_size": 8, "memory_per_device": "1GiB", "micro_batches": (1, 2),
      "bandwidth": 1e15, "costs": _costs()}  # (bytes cost nothing: only the messages' latencies)


def _tp2(plans):
    return [p for p in plans if p.config.tp == 2]


def test_profile_layers_records_a_recurrent_layers_time_steps():
    net, x = _lstm_net(), torch.randn(2, T, FEAT)
    costs = profile_layers(chain_units(net), x, repeats=1)
    assert [c.seq_steps for c in costs] == [T, 0]


def test_gates_cost_two_collectives_per_layer_and_time_step_and_explain_says_so():
    net, x = _lstm_net(), torch.randn(2, T, FEAT)
    plans = plan(net, x, overheads=False, latency_s=1e-3, **KW)
    tp = _tp2(plans)
    assert tp, plans
    for p in tp:  # 2 layers x 10 steps x (all-gather + reduce-scatter); the network's input needs none
        assert p.breakdown["tensor-parallel collectives"] == pytest.approx(40e-3 * p.micro_batches, rel=1e-6)
    text = tp[0].explain()
    assert ("0 (LSTM, split by gates): 2 all-gather(s) of the hidden state per time step forward (one per "
            "layer, both directions together) and 2 reduce-scatter(s) backward: 40 collectives per "
            "micro-batch over 10 steps") in text
    assert all(not p.notes for p in plans if p.config.tp == 1)
    # measured fixed costs: each of those messages costs half a measured pair
    over = Overheads(step_s={(2, 1, 1): 0.0, (1, 1, 2): 0.0}, slot_s={(2, 1, 1): 0.0, (1, 1, 2): 0.0},
                     pair_s={2: 4e-3})
    for p in _tp2(plan(net, x, overheads=over, **KW)):
        assert p.breakdown["tensor-parallel collectives"] == pytest.approx(40 * 2e-3 * p.micro_batches,
                                                                            rel=1e-6)


def test_a_projected_lstm_sends_twice_the_bytes_and_explain_names_its_all_reduces():
    # LSTMP: the partial projections are all-reduced forward and their gradients backward (two
    # all-reduces' worth) where the plain LSTM all-gathers h and reduce-scatters its gradient (one)
    proj = nn.HybridSequential()
    proj.add(rnn.LSTM(HID, num_layers=2, layout="NTC", bidirectional=True, input_size=FEAT,
                      projection_size=8), nn.Dense(4, in_units=T * 2 * 8))
    proj.initialize()
    x = torch.randn(2, T, FEAT)
    kw = dict(KW, bandwidth=1e6)
    plain_tp = _tp2(plan(_lstm_net(), x, overheads=False, latency_s=0.0, **kw))
    proj_tp = _tp2(plan(proj, x, overheads=False, latency_s=0.0, **kw))
    assert plain_tp and proj_tp
    by_m = {p.micro_batches: p.breakdown["tensor-parallel collectives"] for p in plain_tp}
    for p in proj_tp:
        got = p.breakdown["tensor-parallel collectives"]
        assert got == pytest.approx(2 * by_m[p.micro_batches], rel=1e-6)
    assert "2 all-reduce(s) of the partial projections per time step forward" in proj_tp[0].explain()
