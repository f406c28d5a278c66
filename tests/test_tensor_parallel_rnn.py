"""Tensor-parallel recurrent layers (mxtorch.parallel.tp_rnn, tp_plan style 'gates'): RNN/LSTM/GRU
split by hidden units over tp=2 real processes (gloo on 127.0.0.1) equal the unsplit layers, forward
and backward; the rank functions are in tests/tp_workers.py."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from mxtorch.base import MXNetError
from mxtorch.gluon import nn, rnn
from mxtorch.gluon.serialization import load_tensors
from mxtorch.parallel.split import chain_units
from mxtorch.parallel.tensor import ShardInfo, auto_plan, check_plan
from mxtorch.parallel.tp_rnn import collectives_per_step, step_collectives

sys.path.insert(0, os.path.dirname(__file__))
import tp_workers as w  # noqa: E402


def _check_training(kind: str, results: list[dict], path: str, pp: int = 1) -> None:
    ref = w.rnn_reference(kind)
    got = load_tensors(path)
    assert set(got) == set(ref["params"])
    for k, v in ref["params"].items():
        torch.testing.assert_close(got[k], v, rtol=0, atol=1e-5, msg=lambda m, k=k: f"{k}: {m}")
    plain = w.build_rnn_net(kind, seed=2)  # the unpartitioned file loads into the plain network
    plain.load_parameters(path)
    x, _ = w.rnn_data()
    torch.testing.assert_close(plain(x).detach(), ref["out"], rtol=0, atol=1e-5)
    rec_full = sum(v.numel() * 4 for k, v in ref["params"].items() if w.is_recurrent_param(k))
    # each rank: half of every recurrent weight and bias of its stage
    assert sum(r["rnn_bytes"] for r in results) * 2 * pp == rec_full * len(results)
    for r in results:
        assert r["losses"] == pytest.approx(ref["losses"], abs=1e-5)
        torch.testing.assert_close(r["out"], ref["out"], rtol=0, atol=1e-5)
        torch.testing.assert_close(r["loaded_out"], ref["out"], rtol=0, atol=1e-5)
        if pp == 1:
            assert r["rnn_bytes"] * 2 == rec_full


def test_lstm_split_by_gates_trains_like_one_process(run_ranks, tmp_path):
    """A 2-layer bidirectional LSTM -> Dense, tp=2, activation checkpointing (the recomputed forward
    repeats the collectives): 5 SGD-momentum steps equal one process."""
    path = str(tmp_path / "lstm.params")
    res = run_ranks(w.train_rnn, 2, "lstm", path, 5, 1, 1, True, timeout=90)
    assert all(r["plan"] == {"0": "gates"} for r in res)
    _check_training("lstm", res, path)


def test_lstm_with_projection_split_by_gates_trains_like_one_process(run_ranks, tmp_path):
    """LSTMP (projection_size 5, 2 layers, bidirectional) -> Dense, tp=2: the gate rows and the h2r_weight
    columns of each rank's hidden units, one all-reduce of the partial projections per layer and step;
    5 SGD-momentum steps equal one process, the file (MXNet's h2r_weight layout) loads into the plain
    net, and each rank holds half of the recurrent bytes.  With activation checkpointing: the recomputed
    forward repeats the all-reduces."""
    path = str(tmp_path / "lstmp.params")
    res = run_ranks(w.train_rnn, 2, "lstmp", path, 5, 1, 1, True, timeout=90)
    assert all(r["plan"] == {"0": "gates"} for r in res)
    assert load_tensors(path)["0.l1_h2r_weight"].shape == (w.PROJ, w.RHID)
    _check_training("lstmp", res, path)


def test_gru_and_rnn_split_by_gates_train_like_one_process(run_ranks, tmp_path):
    """A 2-layer GRU -> a bidirectional tanh RNN -> Dense, tp=2: 5 steps equal one process."""
    path = str(tmp_path / "gru.params")
    res = run_ranks(w.train_rnn, 2, "gru", path, timeout=90)
    assert all(r["plan"] == {"0": "gates", "1": "gates"} for r in res)
    _check_training("gru", res, path)


def test_lstm_split_by_gates_with_data_parallel_replicas(run_ranks, tmp_path):
    """dp=2 x tp=2: two tensor-parallel groups, each on half the batch, the dp store summing gradients."""
    path = str(tmp_path / "dp2tp2.params")
    res = run_ranks(w.train_rnn, 4, "lstm", path, 5, 2, timeout=240)
    _check_training("lstm", res, path)


def test_gru_and_rnn_split_by_gates_in_two_pipeline_stages(run_ranks, tmp_path):
    """pp=2 x tp=2, 1F1B: the GRU's (batch-major) output crosses the stage boundary to the RNN."""
    path = str(tmp_path / "pp2tp2.params")
    res = run_ranks(w.train_rnn, 4, "gru", path, 5, 1, 2, timeout=240)
    assert all(r["stage_paths"] == [["0"], ["1", "2"]] for r in res)
    _check_training("gru", res, path, pp=2)


def test_split_layers_with_states_equal_the_plain_layer_forward_and_backward(run_ranks):
    """LSTM (2 layers, bidirectional, cell clipping), GRU (2 layers, bidirectional), ReLU RNN (2 layers),
    LSTMP (projection, 2 layers, bidirectional, cell clipping with NaN mapping), called with initial
    states: outputs, final states, and the gradients of the input, the states and each rank's rows (the
    h2r_weight's columns) of the parameters equal the unsplit layer's."""
    results = run_ranks(w.rnn_states_cases, 2, timeout=90)
    half = w.RHID // 2
    for i, mode in enumerate(w.RNN_MODES):
        layer = w.rnn_states_layer(mode)
        x, states, out, new = w.rnn_states_backward(layer, mode)
        for res in results:
            r = res[i]
            torch.testing.assert_close(r["out"], out.detach(), rtol=0, atol=1e-5)
            for a, b in zip(r["states"], new):
                torch.testing.assert_close(a, b.detach(), rtol=0, atol=1e-5)
            torch.testing.assert_close(r["x_grad"], x.grad, rtol=0, atol=1e-5)
            for a, s in zip(r["state_grads"], states):
                torch.testing.assert_close(a, s.grad, rtol=0, atol=1e-5)
            k = r["tp_rank"]
            for name in layer._flat_names:
                full = layer._param(name).data().grad
                if name.endswith("h2r_weight"):  # (P, H): this rank's hidden units are columns
                    assert r["groups"][name] == 1
                    rows = full[:, k * half:(k + 1) * half]
                else:
                    assert r["groups"][name] == layer._gates
                    rows = full.unflatten(0, (layer._gates, -1))[:, k * half:(k + 1) * half].flatten(0, 1)
                torch.testing.assert_close(r["param_grads"][name], rows, rtol=0, atol=1e-5,
                                           msg=lambda m, n=f"{mode} {name}": f"{n}: {m}")


def test_gate_shards_keep_each_gates_rows_of_this_ranks_hidden_units():
    full = torch.arange(4 * 6 * 3, dtype=torch.float32).reshape(24, 3)  # LSTM: 4 gates, hidden 6
    parts = [ShardInfo((24, 3), 0, 3, r, groups=4).local(full) for r in range(3)]
    assert parts[1].shape == (8, 3)
    assert parts[1][:, 0].tolist() == [v * 3.0 for g in range(4) for v in range(g * 6 + 2, g * 6 + 4)]
    whole = torch.cat([p.unflatten(0, (4, -1)) for p in parts], dim=1).flatten(0, 1)  # gather_full's order
    assert torch.equal(whole, full)
    assert torch.equal(ShardInfo((24, 3), 0, 2, 1).local(full), full[12:])  # groups=1: a contiguous split


def _net(*layers):
    net = nn.HybridSequential()
    net.add(*layers)
    net.initialize()
    return net


def test_auto_plan_splits_recurrent_layers_by_gates_and_plans_are_checked():
    lstm = rnn.LSTM(8, num_layers=2, layout="NTC", input_size=4)
    net = _net(lstm, nn.Dense(16, activation="relu", in_units=24), nn.Dense(4, in_units=16))
    units = chain_units(net)
    assert auto_plan(units, 2) == {"0": "gates", "1": "colwise", "2": "rowwise"}
    assert auto_plan(units, 3) == {}  # hidden 8 does not split three ways, nor do the Dense layers
    assert collectives_per_step(lstm) == (2, 2)
    assert step_collectives(lstm) == ("all-gather", "reduce-scatter")
    lstmp = rnn.LSTM(8, num_layers=3, layout="NTC", input_size=4, projection_size=3)
    assert auto_plan(chain_units(_net(lstmp, nn.Dense(4, in_units=3))), 2) == {"0": "gates"}
    assert collectives_per_step(lstmp) == (3, 3)
    assert step_collectives(lstmp) == ("all-reduce", "all-reduce")
    for bad, why in [(rnn.GRU(8, num_layers=2, dropout=0.5, layout="NTC", input_size=4), "dropout"),
                     (rnn.RNN(8, layout="NTC", input_size=4, use_sequence_length=True), "sequence_length")]:
        units = chain_units(_net(bad, nn.Dense(4)))
        assert auto_plan(units, 2) == {}
        with pytest.raises(MXNetError, match=f"cannot be split by 'gates': it .*{why}"):
            check_plan(units, {"0": "gates"})
    units = chain_units(_net(rnn.GRU(8, layout="NTC", input_size=4), nn.Dense(4)))
    with pytest.raises(MXNetError, match="'gates' splits the recurrent layers"):
        check_plan(units, {"1": "gates"})
    with pytest.raises(MXNetError, match="RNN/LSTM/GRU 'gates'"):
        check_plan(units, {"0": "colwise"})
