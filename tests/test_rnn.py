"""Tests of mxtorch.gluon.rnn: fused layers and cells against a numpy step-by-step reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch import autograd
from mxtorch.gluon import rnn

RNG = np.random.default_rng(0)


# ---- numpy reference ------------------------------------------------------------------------
def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def np_step(mode, x, h, c, wi, wh, bi, bh, wr=None, clip=None):
    """One time step, gates written out (MXNet order: LSTM i,f,g,o; GRU r,z,n)."""
    if mode == "lstm":
        g = x @ wi.T + bi + h @ wh.T + bh
        n = wi.shape[0] // 4
        i_gate = _sigmoid(g[:, :n])
        f_gate = _sigmoid(g[:, n : 2 * n])
        cell = np.tanh(g[:, 2 * n : 3 * n])
        o_gate = _sigmoid(g[:, 3 * n :])
        c_new = f_gate * c + i_gate * cell
        if clip is not None:
            c_new = np.clip(c_new, clip[0], clip[1])
        h_new = o_gate * np.tanh(c_new)
        if wr is not None:
            h_new = h_new @ wr.T
        return h_new, c_new
    if mode == "gru":
        n = wi.shape[0] // 3
        xi = x @ wi.T + bi
        hh = h @ wh.T + bh
        r = _sigmoid(xi[:, :n] + hh[:, :n])
        z = _sigmoid(xi[:, n : 2 * n] + hh[:, n : 2 * n])
        cand = np.tanh(xi[:, 2 * n :] + r * hh[:, 2 * n :])
        return (1.0 - z) * cand + z * h, None
    pre = x @ wi.T + bi + h @ wh.T + bh
    return (np.maximum(pre, 0.0) if mode == "rnn_relu" else np.tanh(pre)), None


def np_layer(mode, x, states, params, num_layers, dirs, lengths=None, clip=None):
    """Multi-layer (bi)directional recurrent layer on TNC numpy input."""
    steps, batch, _ = x.shape
    h0 = states[0]
    c0 = states[1] if mode == "lstm" else None
    layer_in = x
    hs, cs = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            pre = f"{'lr'[d]}{layer}_"
            k = layer * dirs + d
            h = h0[k]
            c = c0[k] if c0 is not None else None
            ys = np.zeros((steps, batch, h.shape[-1]))
            order = range(steps) if d == 0 else range(steps - 1, -1, -1)
            for t in order:
                hn, cn = np_step(
                    mode,
                    layer_in[t],
                    h,
                    c,
                    params[pre + "i2h_weight"],
                    params[pre + "h2h_weight"],
                    params[pre + "i2h_bias"],
                    params[pre + "h2h_bias"],
                    params.get(pre + "h2r_weight"),
                    clip,
                )
                if lengths is not None:
                    valid = (t < lengths)[:, None]
                    h = np.where(valid, hn, h)
                    c = np.where(valid, cn, c) if c is not None else None
                    ys[t] = np.where(valid, hn, 0.0)
                else:
                    h, c = hn, cn
                    ys[t] = hn
            outs.append(ys)
            hs.append(h)
            cs.append(c)
        layer_in = np.concatenate(outs, axis=-1)
    new_states = [np.stack(hs)] + ([np.stack(cs)] if mode == "lstm" else [])
    return layer_in, new_states


# ---- helpers --------------------------------------------------------------------------------
def randomize(block, scale: float = 0.5) -> dict[str, np.ndarray]:
    """Give every parameter random values; returns them by name."""
    out = {}
    for name, p in block._collect_params_with_prefix().items():
        v = RNG.uniform(-scale, scale, size=p.shape).astype(np.float32)
        p.set_data(torch.from_numpy(v))
        out[name] = v.astype(np.float64)
    return out


def make_layer(cls, *args, input_size=0, **kwargs):
    layer = cls(*args, input_size=input_size, **kwargs)
    layer.initialize()
    return layer


def _mode(layer) -> str:
    return layer._mode


LAYERS = [
    (rnn.LSTM, {}),
    (rnn.GRU, {}),
    (rnn.RNN, {"activation": "relu"}),
    (rnn.RNN, {"activation": "tanh"}),
]


# ---- fused layers vs numpy -------------------------------------------------------------------
@pytest.mark.parametrize("cls,kw", LAYERS)
@pytest.mark.parametrize("num_layers,bidirectional", [(1, False), (2, True)])
def test_layer_matches_numpy(cls, kw, num_layers, bidirectional):
    T, N, C, H = 5, 3, 4, 6
    layer = make_layer(cls, H, num_layers=num_layers, bidirectional=bidirectional, input_size=C, **kw)
    params = randomize(layer)
    x = RNG.standard_normal((T, N, C)).astype(np.float32)
    dirs = 2 if bidirectional else 1
    states = [RNG.standard_normal(i["shape"]).astype(np.float32) for i in layer.state_info(N)]
    out, new_states = layer(torch.from_numpy(x), [torch.from_numpy(s) for s in states])
    ref_out, ref_states = np_layer(
        _mode(layer), x.astype(np.float64), [s.astype(np.float64) for s in states], params, num_layers, dirs
    )
    assert out.shape == (T, N, H * dirs)
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-4, atol=1e-5)
    assert len(new_states) == len(ref_states)
    for s, r in zip(new_states, ref_states):
        np.testing.assert_allclose(s.detach().numpy(), r, rtol=1e-4, atol=1e-5)


_ONEDNN_PROJ = "ignore:LSTM with projections is not supported with oneDNN:UserWarning"


@pytest.mark.filterwarnings(_ONEDNN_PROJ)
def test_lstm_projection_matches_numpy():
    T, N, C, H, P = 4, 2, 3, 5, 2
    layer = make_layer(rnn.LSTM, H, num_layers=2, bidirectional=True, projection_size=P, input_size=C)
    names = list(layer._collect_params_with_prefix().keys())
    assert "l0_h2r_weight" in names and "r1_h2r_weight" in names
    assert layer.l0_h2h_weight.shape == (4 * H, P)
    assert layer.l1_i2h_weight.shape == (4 * H, 2 * P)
    params = randomize(layer)
    x = RNG.standard_normal((T, N, C)).astype(np.float32)
    states = layer.begin_state(N)
    assert [tuple(s.shape) for s in states] == [(4, N, P), (4, N, H)]
    out, new_states = layer(torch.from_numpy(x), states)
    ref_out, ref_states = np_layer(
        "lstm", x.astype(np.float64), [s.numpy().astype(np.float64) for s in states], params, 2, 2
    )
    assert out.shape == (T, N, 2 * P)
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-4, atol=1e-5)
    for s, r in zip(new_states, ref_states):
        np.testing.assert_allclose(s.detach().numpy(), r, rtol=1e-4, atol=1e-5)


def test_lstm_state_clip_matches_numpy():
    T, N, C, H = 6, 3, 4, 5
    layer = make_layer(
        rnn.LSTM, H, num_layers=2, bidirectional=True, input_size=C, state_clip_min=-0.3, state_clip_max=0.2
    )
    params = randomize(layer, scale=1.5)
    x = RNG.standard_normal((T, N, C)).astype(np.float32)
    out, states = layer(torch.from_numpy(x), layer.begin_state(N))
    zeros = [np.zeros(i["shape"]) for i in layer.state_info(N)]
    ref_out, ref_states = np_layer("lstm", x.astype(np.float64), zeros, params, 2, 2, clip=(-0.3, 0.2))
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(states[1].detach().numpy(), ref_states[1], rtol=1e-4, atol=1e-5)
    c_final = states[1].detach()
    assert float(c_final.max()) <= 0.2 + 1e-6 and float(c_final.min()) >= -0.3 - 1e-6
    # with valid lengths too
    lengths = np.array([6, 2, 4])
    out, states = layer(torch.from_numpy(x), layer.begin_state(N), torch.from_numpy(lengths))
    ref_out, ref_states = np_layer(
        "lstm", x.astype(np.float64), zeros, params, 2, 2, lengths=lengths, clip=(-0.3, 0.2)
    )
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-4, atol=1e-5)
    for s, r in zip(states, ref_states):
        np.testing.assert_allclose(s.detach().numpy(), r, rtol=1e-4, atol=1e-5)


def test_clipped_lstm_in_ntc_layout_returns_a_contiguous_output_equal_to_tnc():
    # the step-by-step path (state clipping) must give what the fused path gives: a contiguous
    # (N, T, C) array (a pipeline stage sends its output as is)
    T, N, C, H = 5, 3, 4, 6
    tnc = make_layer(rnn.LSTM, H, input_size=C, state_clip_min=-0.3, state_clip_max=0.2)
    ntc = make_layer(rnn.LSTM, H, input_size=C, layout="NTC", state_clip_min=-0.3, state_clip_max=0.2)
    params = randomize(tnc)
    for name, p in ntc._collect_params_with_prefix().items():
        p.set_data(torch.from_numpy(params[name]))
    x = torch.from_numpy(RNG.standard_normal((T, N, C)).astype(np.float32))
    out = ntc(x.transpose(0, 1).contiguous())
    assert out.shape == (N, T, H) and out.is_contiguous()
    torch.testing.assert_close(out, tnc(x).transpose(0, 1))


def test_layer_param_names_and_shapes():
    layer = rnn.GRU(7, num_layers=2, bidirectional=True, input_size=3)
    shapes = {k: p.shape for k, p in layer._collect_params_with_prefix().items()}
    assert shapes == {
        "l0_i2h_weight": (21, 3),
        "l0_h2h_weight": (21, 7),
        "l0_i2h_bias": (21,),
        "l0_h2h_bias": (21,),
        "r0_i2h_weight": (21, 3),
        "r0_h2h_weight": (21, 7),
        "r0_i2h_bias": (21,),
        "r0_h2h_bias": (21,),
        "l1_i2h_weight": (21, 14),
        "l1_h2h_weight": (21, 7),
        "l1_i2h_bias": (21,),
        "l1_h2h_bias": (21,),
        "r1_i2h_weight": (21, 14),
        "r1_h2h_weight": (21, 7),
        "r1_i2h_bias": (21,),
        "r1_h2h_bias": (21,),
    }
    layer.initialize()
    assert float(layer.l0_i2h_bias.data().detach().abs().sum()) == 0.0  # default bias initializer: zeros
    assert "l0_i2h_weight" in dict(layer.named_parameters())


# ---- layouts, states, deferred shapes ---------------------------------------------------------
@pytest.mark.parametrize("cls", [rnn.LSTM, rnn.GRU, rnn.RNN])
def test_layout_ntc_equals_tnc(cls):
    tnc = make_layer(cls, 4, num_layers=2, bidirectional=True, layout="TNC", input_size=3)
    ntc = make_layer(cls, 4, num_layers=2, bidirectional=True, layout="NTC", input_size=3)
    params = randomize(tnc)
    for k, p in ntc._collect_params_with_prefix().items():
        p.set_data(torch.from_numpy(params[k].astype(np.float32)))
    x = torch.randn(5, 2, 3)
    out_t, st_t = tnc(x, tnc.begin_state(2))
    out_n, st_n = ntc(x.transpose(0, 1).contiguous(), ntc.begin_state(2))
    assert out_n.shape == (2, 5, 8)
    torch.testing.assert_close(out_n.transpose(0, 1), out_t)
    for a, b in zip(st_t, st_n):
        torch.testing.assert_close(a, b)
    lengths = torch.tensor([5, 3])
    torch.testing.assert_close(
        ntc(x.transpose(0, 1), sequence_length=lengths).transpose(0, 1), tnc(x, sequence_length=lengths)
    )


def test_states_and_return_convention():
    lstm = make_layer(rnn.LSTM, 6, num_layers=3, bidirectional=True, layout="NTC")
    x = torch.randn(2, 7, 5)
    out = lstm(x)
    assert isinstance(out, torch.Tensor) and out.shape == (2, 7, 12)
    states = lstm.begin_state(batch_size=2)
    assert [tuple(s.shape) for s in states] == [(6, 2, 6), (6, 2, 6)]
    out2, new = lstm(x, states)
    torch.testing.assert_close(out2, out)
    assert isinstance(new, list) and [tuple(s.shape) for s in new] == [(6, 2, 6), (6, 2, 6)]
    info = lstm.state_info(4)
    assert info[0]["shape"] == (6, 4, 6) and info[0]["__layout__"] == "LNC"

    gru = make_layer(rnn.GRU, 3)
    h = gru.begin_state(4, func=torch.ones, dtype="float64")
    assert len(h) == 1 and h[0].shape == (1, 4, 3) and h[0].dtype == torch.float64 and float(h[0].sum()) == 12
    out, new = gru(torch.randn(2, 4, 5), torch.zeros(1, 4, 3))  # a single tensor state is accepted
    assert out.shape == (2, 4, 3) and len(new) == 1 and new[0].shape == (1, 4, 3)

    def custom(shape, fill=0.0, **kw):
        return torch.full(shape, fill)

    assert float(gru.begin_state(2, func=custom, fill=2.0)[0].sum()) == 12.0
    with pytest.raises(ValueError, match="state shape"):
        gru(torch.randn(2, 4, 5), [torch.zeros(1, 3, 3)])
    with pytest.raises(ValueError, match="expects 2 state"):
        lstm(x, [states[0]])


def test_deferred_input_size():
    layer = rnn.LSTM(4, num_layers=2, bidirectional=True)
    assert layer.l0_i2h_weight.shape == (16, 0)
    assert layer.l1_i2h_weight.shape == (16, 8)
    layer.initialize()
    assert not layer.l0_i2h_weight.is_initialized
    out = layer(torch.randn(3, 2, 9))
    assert out.shape == (3, 2, 8)
    assert layer.l0_i2h_weight.shape == (16, 9) and layer.r0_i2h_weight.shape == (16, 9)
    assert "9 -> 4" in repr(layer)
    with pytest.raises(ValueError, match="input_size=9"):
        layer(torch.randn(3, 2, 5))


def test_constructor_errors():
    with pytest.raises(ValueError, match="layout"):
        rnn.LSTM(4, layout="NCT")
    with pytest.raises(ValueError, match="activation"):
        rnn.RNN(4, activation="sigmoid")
    with pytest.raises(ValueError, match="dropout"):
        rnn.GRU(4, dropout=1.5)
    with pytest.raises(ValueError, match="state_clip"):
        rnn.LSTM(4, state_clip_min=-1)
    with pytest.raises(ValueError, match="hidden_size"):
        rnn.GRU(0)
    layer = make_layer(rnn.GRU, 4)
    with pytest.raises(ValueError, match="3-d"):
        layer(torch.randn(3, 4))
    with pytest.raises(ValueError, match="sequence_length"):
        layer(torch.randn(3, 2, 4), sequence_length=torch.tensor([3, 0]))


def test_dropout_only_in_training():
    layer = make_layer(rnn.LSTM, 8, num_layers=3, dropout=0.5, input_size=4)
    x = torch.randn(6, 5, 4)
    torch.testing.assert_close(layer(x), layer(x))  # inference: deterministic, no dropout
    with autograd.predict_mode():
        base = layer(x)
    with autograd.record():
        torch.manual_seed(1)
        a = layer(x)
        torch.manual_seed(2)
        b = layer(x)
    assert not torch.allclose(a, b)
    torch.testing.assert_close(base, layer(x))
    single = make_layer(rnn.GRU, 8, num_layers=1, dropout=0.5, input_size=4)
    with autograd.record():
        a = single(x)
    torch.testing.assert_close(a.detach(), single(x))  # dropout acts only between layers


def test_gradients_reach_parameters():
    layer = make_layer(rnn.GRU, 4, num_layers=2, bidirectional=True, input_size=3)
    x = torch.randn(5, 2, 3, requires_grad=True)
    with autograd.record():
        out = layer(x)
    out.sum().backward()
    for name, p in layer.collect_params().items():
        assert p.grad() is not None and float(p.grad().abs().sum()) > 0, name
    assert x.grad is not None and x.grad.shape == x.shape


# ---- sequence_length / valid_length ----------------------------------------------------------
@pytest.mark.parametrize("cls", [rnn.LSTM, rnn.GRU, rnn.RNN])
def test_layer_sequence_length_matches_numpy(cls):
    T, N, C, H = 6, 4, 3, 5
    layer = make_layer(cls, H, num_layers=2, bidirectional=True, input_size=C, use_sequence_length=True)
    params = randomize(layer)
    x = RNG.standard_normal((T, N, C)).astype(np.float32)
    lengths = np.array([6, 1, 3, 5])
    states = [RNG.standard_normal(i["shape"]).astype(np.float32) for i in layer.state_info(N)]
    out, new = layer(torch.from_numpy(x), [torch.from_numpy(s) for s in states], torch.from_numpy(lengths))
    ref_out, ref_states = np_layer(
        layer._mode,
        x.astype(np.float64),
        [s.astype(np.float64) for s in states],
        params,
        2,
        2,
        lengths=lengths,
    )
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-4, atol=1e-5)
    for s, r in zip(new, ref_states):
        np.testing.assert_allclose(s.detach().numpy(), r, rtol=1e-4, atol=1e-5)
    with pytest.raises(mx.MXNetError, match="use_sequence_length"):
        layer(torch.from_numpy(x))


# ---- cells ---------------------------------------------------------------------------------
def test_cells_single_step_match_numpy():
    N, C, H = 3, 4, 5
    x = RNG.standard_normal((N, C)).astype(np.float32)
    for cell, mode in [
        (rnn.LSTMCell(H, input_size=C), "lstm"),
        (rnn.GRUCell(H, input_size=C), "gru"),
        (rnn.RNNCell(H, input_size=C), "rnn_tanh"),
        (rnn.RNNCell(H, activation="relu", input_size=C), "rnn_relu"),
    ]:
        cell.initialize()
        p = randomize(cell)
        assert set(p) == {"i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias"}
        states = [torch.randn(*i["shape"]) for i in cell.state_info(N)]
        out, new = cell(torch.from_numpy(x), states)
        c = states[1].numpy().astype(np.float64) if mode == "lstm" else None
        h, c = np_step(
            mode,
            x.astype(np.float64),
            states[0].numpy().astype(np.float64),
            c,
            p["i2h_weight"],
            p["h2h_weight"],
            p["i2h_bias"],
            p["h2h_bias"],
        )
        np.testing.assert_allclose(out.detach().numpy(), h, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(new[0].detach().numpy(), h, rtol=1e-4, atol=1e-5)
        if mode == "lstm":
            np.testing.assert_allclose(new[1].detach().numpy(), c, rtol=1e-4, atol=1e-5)


def test_cell_custom_activations_equal_fused_path():
    x, h, c = torch.randn(2, 3), torch.randn(2, 4), torch.randn(2, 4)
    fast, slow = (
        rnn.LSTMCell(4, input_size=3),
        rnn.LSTMCell(4, input_size=3, activation=torch.tanh, recurrent_activation=torch.sigmoid),
    )
    gfast, gslow = (
        rnn.GRUCell(4, input_size=3),
        rnn.GRUCell(4, input_size=3, activation=torch.tanh, recurrent_activation=torch.sigmoid),
    )
    for a, b in [(fast, slow), (gfast, gslow)]:
        a.initialize()
        b.initialize()
        for k, v in randomize(a).items():
            b._collect_params_with_prefix()[k].set_data(torch.from_numpy(v.astype(np.float32)))
        states = [h, c][: len(a.state_info())]
        oa, sa = a(x, states)
        ob, sb = b(x, states)
        torch.testing.assert_close(oa, ob)
        for s1, s2 in zip(sa, sb):
            torch.testing.assert_close(s1, s2)
    soft = rnn.RNNCell(4, activation="softsign", input_size=3)
    soft.initialize()
    out, _ = soft(x, [h])
    assert float(out.detach().abs().max()) < 1.0


def _copy_layer_to_cells(layer, stack, num_layers, bidirectional):
    for i in range(num_layers):
        cells = [(stack[i].l_cell, "l"), (stack[i].r_cell, "r")] if bidirectional else [(stack[i], "l")]
        for cell, d in cells:
            for name in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias", "h2r_weight"):
                if hasattr(cell, name):
                    getattr(cell, name).set_data(getattr(layer, f"{d}{i}_{name}").data().detach())


@pytest.mark.parametrize(
    "layer_cls,cell_fn",
    [
        (rnn.LSTM, lambda h: rnn.LSTMCell(h)),
        (rnn.GRU, lambda h: rnn.GRUCell(h)),
        (lambda h, **kw: rnn.RNN(h, activation="tanh", **kw), lambda h: rnn.RNNCell(h, activation="tanh")),
    ],
)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_unroll_equals_fused_layer(layer_cls, cell_fn, bidirectional):
    T, N, C, H, L = 5, 3, 4, 6, 2
    layer = layer_cls(H, num_layers=L, bidirectional=bidirectional, layout="NTC")
    layer.initialize()
    x = torch.randn(N, T, C)
    layer(x)  # finish deferred init
    randomize(layer)
    stack = rnn.HybridSequentialRNNCell() if bidirectional else rnn.SequentialRNNCell()
    for _ in range(L):
        stack.add(rnn.BidirectionalCell(cell_fn(H), cell_fn(H)) if bidirectional else cell_fn(H))
    stack.initialize()
    stack.unroll(T, x, layout="NTC")  # finish deferred init
    _copy_layer_to_cells(layer, stack, L, bidirectional)
    begin = stack.begin_state(N)
    assert len(begin) == len(stack.state_info(N))
    out, states = stack.unroll(T, x, begin_state=begin, layout="NTC", merge_outputs=True)
    ref, ref_states = layer(x, layer.begin_state(N))
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    # the layer's states are (L*D, N, H) per kind; the cells' are one (N, H) per cell and kind
    kinds = len(ref_states)
    for k in range(kinds):
        cell_states = torch.stack(states[k::kinds])
        torch.testing.assert_close(cell_states, ref_states[k], rtol=1e-5, atol=1e-5)
    # list outputs, TNC layout
    outs, _ = stack.unroll(T, list(x.transpose(0, 1)), layout="TNC", merge_outputs=False)
    assert isinstance(outs, list) and len(outs) == T
    torch.testing.assert_close(torch.stack(outs, 1), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.filterwarnings(_ONEDNN_PROJ)
def test_lstmp_cell_unroll_equals_projected_layer():
    T, N, C, H, P = 4, 2, 3, 5, 2
    layer = make_layer(rnn.LSTM, H, projection_size=P, input_size=C, layout="NTC")
    randomize(layer)
    cell = rnn.LSTMPCell(H, P, input_size=C)
    cell.initialize()
    _copy_layer_to_cells(layer, [cell], 1, False)
    x = torch.randn(N, T, C)
    out, states = cell.unroll(T, x, merge_outputs=True)
    ref, ref_states = layer(x, layer.begin_state(N))
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(states[0], ref_states[0][0])
    torch.testing.assert_close(states[1], ref_states[1][0])
    assert [i["shape"] for i in cell.state_info(N)] == [(N, P), (N, H)]


@pytest.mark.parametrize("bidirectional", [False, True])
def test_unroll_valid_length_equals_layer_sequence_length(bidirectional):
    T, N, C, H = 6, 4, 3, 5
    layer = make_layer(rnn.LSTM, H, bidirectional=bidirectional, input_size=C)
    randomize(layer)
    cell = (
        rnn.BidirectionalCell(rnn.LSTMCell(H, input_size=C), rnn.LSTMCell(H, input_size=C))
        if bidirectional
        else rnn.LSTMCell(H, input_size=C)
    )
    cell.initialize()
    _copy_layer_to_cells(layer, [cell], 1, bidirectional)
    x = torch.randn(T, N, C)
    lengths = torch.tensor([6, 2, 4, 1])
    out, states = cell.unroll(T, x, layout="TNC", merge_outputs=True, valid_length=lengths)
    ref, ref_states = layer(x, layer.begin_state(N), lengths)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert float(out[2:, 1].detach().abs().sum()) == 0.0
    for k in range(2):
        torch.testing.assert_close(torch.stack(states[k::2]), ref_states[k], rtol=1e-5, atol=1e-5)


def test_sequential_cell_stepping_and_begin_state():
    seq = rnn.SequentialRNNCell()
    seq.add(rnn.LSTMCell(4, input_size=3))
    seq.add(rnn.GRUCell(5))
    seq.add(rnn.DropoutCell(0.5))
    seq.add(rnn.RNNCell(2))
    seq.initialize()
    assert len(seq) == 4 and isinstance(seq[1], rnn.GRUCell)
    states = seq.begin_state(batch_size=3)
    assert [tuple(s.shape) for s in states] == [(3, 4), (3, 4), (3, 5), (3, 2)]
    x = torch.randn(7, 3, 3)
    outs = []
    for t in range(7):
        out, states = seq(x[t], states)
        outs.append(out)
    merged, final = seq.unroll(7, x, layout="TNC", merge_outputs=True)
    torch.testing.assert_close(merged, torch.stack(outs))
    for a, b in zip(final, states):
        torch.testing.assert_close(a, b)
    names = set(seq._collect_params_with_prefix().keys())
    assert {"0.i2h_weight", "1.h2h_bias", "3.i2h_weight"} <= names
    with pytest.raises(ValueError, match="expects 4 state"):
        seq(x[0], states[:2])


def test_modifier_cells():
    x = torch.randn(2, 6, 4)
    base = rnn.GRUCell(4, input_size=4)
    res = rnn.ResidualCell(base)
    res.initialize()
    plain_out, _ = rnn.RecurrentCell.unroll(res, 6, x, merge_outputs=True)
    out, _ = res.unroll(6, x, merge_outputs=True)
    torch.testing.assert_close(out, plain_out)
    with pytest.raises(mx.MXNetError, match="modifier"):
        base.begin_state(2)
    assert len(res.begin_state(2)) == 1
    vl = torch.tensor([6, 3])
    out_vl, _ = res.unroll(6, x, merge_outputs=True, valid_length=vl)
    assert float(out_vl[1, 3:].detach().abs().sum()) == 0.0

    zone = rnn.ZoneoutCell(rnn.LSTMCell(4, input_size=4), zoneout_outputs=0.5, zoneout_states=0.5)
    zone.initialize()
    zout, _ = zone.unroll(6, x, merge_outputs=True)
    ref_cell = zone.base_cell
    ref_cell._modified = False
    rout, _ = ref_cell.unroll(6, x, merge_outputs=True)
    torch.testing.assert_close(zout, rout)  # inference: no zoneout
    ref_cell._modified = True
    with autograd.train_mode():
        torch.manual_seed(0)
        tout, _ = zone.unroll(6, x, merge_outputs=True)
    assert not torch.allclose(tout, rout)
    with pytest.raises(mx.MXNetError, match="BidirectionalCell"):
        rnn.ZoneoutCell(rnn.BidirectionalCell(rnn.RNNCell(2), rnn.RNNCell(2)))

    drop = rnn.DropoutCell(0.5).to("cpu")  # torch module methods still work on cells
    y, st = drop.unroll(6, x, merge_outputs=True)
    assert y is x and st == []
    with autograd.train_mode():
        y, _ = drop(x[:, 0], [])
    assert float((y == 0).float().mean()) > 0.1


def test_bidirectional_cell_shapes_and_errors():
    bi = rnn.BidirectionalCell(rnn.LSTMCell(3), rnn.GRUCell(2))
    bi.initialize()
    x = torch.randn(4, 5, 6)
    out, states = bi.unroll(5, x, layout="NTC", merge_outputs=True)
    assert out.shape == (4, 5, 5)
    assert [tuple(s.shape) for s in states] == [(4, 3), (4, 3), (4, 2)]
    outs, _ = bi.unroll(5, x, layout="NTC", merge_outputs=False)
    assert len(outs) == 5 and outs[0].shape == (4, 5)
    with pytest.raises(mx.MXNetError, match="unroll"):
        bi(x[:, 0], states)
    with pytest.raises(ValueError, match="length"):
        bi.unroll(4, x, layout="NTC")
    assert {"l_cell.i2h_weight", "r_cell.h2h_bias"} <= set(bi._collect_params_with_prefix().keys())


def test_cell_deferred_init_and_errors():
    cell = rnn.LSTMCell(3)
    cell.initialize()
    assert cell.i2h_weight.shape == (12, 0)
    out, st = cell(torch.randn(2, 7), cell.begin_state(2))
    assert cell.i2h_weight.shape == (12, 7) and out.shape == (2, 3)
    assert repr(cell) == "LSTMCell(7 -> 3)"
    with pytest.raises(ValueError, match="input_size=7"):
        cell(torch.randn(2, 5), st)
    with pytest.raises(ValueError, match="state shape"):
        cell(torch.randn(2, 7), [torch.zeros(2, 4), torch.zeros(2, 3)])
    with pytest.raises(ValueError, match="layout"):
        cell.unroll(3, torch.randn(2, 3, 7), layout="CTN")
    begin = cell.begin_state(2, func=torch.ones, ctx=mx.cpu())
    assert float(begin[0].sum()) == 6.0


def test_custom_cell_with_hybrid_forward():
    class Doubler(rnn.HybridRecurrentCell):
        def __init__(self, units):
            super().__init__()
            self._units = units
            self.weight = mx.gluon.Parameter("weight", shape=(units, units), init="ones")

        def state_info(self, batch_size=0):
            return [{"shape": (batch_size, self._units), "__layout__": "NC"}]

        def hybrid_forward(self, F, inputs, states, weight):
            out = inputs + torch.nn.functional.linear(states[0], weight)
            return out, [out]

    cell = Doubler(2)
    cell.initialize()
    out, states = cell.unroll(3, torch.ones(1, 3, 2), merge_outputs=True)
    torch.testing.assert_close(out[0], torch.tensor([[1.0, 1.0], [3.0, 3.0], [7.0, 7.0]]))
    assert cell._counter == 2
