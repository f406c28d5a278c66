"""mx.sym.RNN (MXNet's fused RNN operator) against outputs and gradients of real MXNet 1.9.1
(tests/data/symbol_rnn: seeded inputs, flat parameters and head gradients)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError

DATA = np.load(Path(__file__).parent / "data" / "symbol_rnn" / "rnn.npz")


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
def test_rnn_operator_matches_mxnet(mode: str) -> None:
    d = mx.sym.var("data")
    s = mx.sym.RNN(
        d, state_size=4, num_layers=2, mode=mode, bidirectional=True, state_outputs=True, name="rnn"
    )
    names = s.list_arguments()
    want_names = ["data", "rnn_parameters", "rnn_state"] + (["rnn_state_cell"] if mode == "lstm" else [])
    assert names == want_names
    assert s.list_outputs() == ["rnn_output", "rnn_state_output"] + (
        ["rnn_statecell_output"] if mode == "lstm" else []
    )
    arg_shapes, out_shapes, _ = s.infer_shape(data=(5, 3, 6))
    assert [tuple(DATA[f"{mode}/arg/{n}"].shape) for n in names] == arg_shapes
    args = {n: torch.as_tensor(DATA[f"{mode}/arg/{n}"]) for n in names}
    grads = {n: torch.zeros_like(v) for n, v in args.items()}
    ex = s.bind(mx.cpu(), args, args_grad=grads)
    outs = ex.forward(is_train=True)
    heads = [torch.as_tensor(DATA[f"{mode}/head/{i}"]) for i in range(len(out_shapes))]
    ex.backward(heads)
    for i, o in enumerate(outs):
        np.testing.assert_allclose(o.numpy(), DATA[f"{mode}/out/{i}"], rtol=1e-5, atol=1e-6)
    for n in names:
        np.testing.assert_allclose(grads[n].numpy(), DATA[f"{mode}/grad/{n}"], rtol=1e-4, atol=1e-5)


def test_rnn_operator_errors() -> None:
    d = mx.sym.var("data")
    with pytest.raises(MXNetError, match="mode must be one of"):
        mx.sym.RNN(d, state_size=4, mode="lstmx")
    s = mx.sym.RNN(d, state_size=4, num_layers=1, mode="gru")
    with pytest.raises(MXNetError, match="seq_len, batch, input_size"):
        s.infer_shape(data=(5, 6))


# ---- LSTM projection, state clipping, use_sequence_length (MXNet 1.9's arguments) -------------------
_ONEDNN_PROJ = "ignore:LSTM with projections is not supported with oneDNN:UserWarning"
RNG = np.random.default_rng(1)


def _mxnet_order(layers: int, dirs: int, projection: bool) -> list[str]:
    """The packing order of MXNet's flat RNN parameters (weights of every layer and direction, then
    the biases), written out independently of mxtorch's code."""
    names = []
    for kind in ("weight", "bias"):
        for layer in range(layers):
            for d in "lr"[:dirs]:
                names += [f"{d}{layer}_i2h_{kind}", f"{d}{layer}_h2h_{kind}"]
                if projection and kind == "weight":
                    names.append(f"{d}{layer}_h2r_weight")
    return names


def _sym_rnn(mode: str, hidden: int, layers: int, dirs: int, **kw: object) -> mx.sym.Symbol:
    return mx.sym.RNN(
        mx.sym.var("data"),
        state_size=hidden,
        num_layers=layers,
        bidirectional=dirs == 2,
        mode=mode,
        state_outputs=True,
        name="rnn",
        **kw,
    )


@pytest.mark.filterwarnings(_ONEDNN_PROJ)
def test_projection_layout_and_numbers_match_torch_lstm() -> None:
    T, N, C, H, P, L = 5, 3, 4, 6, 3, 2
    ref = torch.nn.LSTM(C, H, num_layers=L, bidirectional=True, proj_size=P)
    s = _sym_rnn("lstm", H, L, 2, projection_size=P)
    assert s.list_arguments() == ["data", "rnn_parameters", "rnn_state", "rnn_state_cell"]
    arg_shapes, out_shapes, _ = s.infer_shape(data=(T, N, C))
    # per direction: i2h (4H, in) + h2h (4H, P) + h2r (P, H) + two 4H biases; layer 1 reads 2P features
    n_params = 2 * (4 * H * C + 4 * H * P + P * H + 8 * H) + 2 * (4 * H * 2 * P + 4 * H * P + P * H + 8 * H)
    assert arg_shapes == [(T, N, C), (n_params,), (2 * L, N, P), (2 * L, N, H)]
    assert out_shapes == [(T, N, 2 * P), (2 * L, N, P), (2 * L, N, H)]

    def torch_name(name: str) -> str:
        d, layer, kind = name[0], name[1], name[3:]
        base = {"i2h_weight": "weight_ih", "h2h_weight": "weight_hh", "h2r_weight": "weight_hr",
                "i2h_bias": "bias_ih", "h2h_bias": "bias_hh"}[kind]  # fmt: skip
        return f"{base}_l{layer}" + ("_reverse" if d == "r" else "")

    order = [torch_name(n) for n in _mxnet_order(L, 2, True)]
    ref_params = dict(ref.named_parameters())
    flat = torch.cat([ref_params[n].detach().reshape(-1) for n in order])
    assert flat.numel() == n_params
    x = torch.randn(T, N, C)
    h0, c0 = torch.randn(2 * L, N, P), torch.randn(2 * L, N, H)
    args = {"data": x, "rnn_parameters": flat, "rnn_state": h0, "rnn_state_cell": c0}
    grads = {k: torch.zeros_like(v) for k, v in args.items()}
    ex = s.bind(mx.cpu(), args, args_grad=grads)
    outs = ex.forward(is_train=True)
    heads = [torch.randn(o.shape) for o in outs]
    ex.backward(heads)

    xr, h0r, c0r = (t.clone().requires_grad_() for t in (x, h0, c0))
    want_out, (want_h, want_c) = ref(xr, (h0r, c0r))
    torch.autograd.backward([want_out, want_h, want_c], heads)
    for got, want in zip(outs, (want_out, want_h, want_c), strict=True):
        torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grads["data"], xr.grad)
    torch.testing.assert_close(grads["rnn_state"], h0r.grad)
    torch.testing.assert_close(grads["rnn_state_cell"], c0r.grad)
    want_flat = torch.cat([ref_params[n].grad.reshape(-1) for n in order])  # type: ignore[union-attr]
    torch.testing.assert_close(grads["rnn_parameters"], want_flat, rtol=1e-5, atol=1e-6)


def _np_lstm(x, h, c, w, lengths=None, clip=None, clip_nan=False, reverse=False):
    """One direction of one LSTM layer in float64 numpy (w: i2h/h2h weights and biases, h2r or None)."""
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))  # noqa: E731
    wi, wh, bi, bh, wr = w
    ys = np.zeros((x.shape[0], x.shape[1], h.shape[-1]))
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    n = wh.shape[0] // 4
    for t in steps:
        g = x[t] @ wi.T + bi + h @ wh.T + bh
        c_new = sig(g[:, n : 2 * n]) * c + sig(g[:, :n]) * np.tanh(g[:, 2 * n : 3 * n])
        if clip is not None:
            # cuDNN's clipping without NaN propagation is fmin(fmax(c, lo), hi): NaN goes to lo
            c_new = np.fmin(np.fmax(c_new, clip[0]), clip[1]) if clip_nan else np.clip(c_new, *clip)
        h_new = sig(g[:, 3 * n :]) * np.tanh(c_new)
        if wr is not None:
            h_new = h_new @ wr.T
        valid = np.ones((x.shape[1], 1), bool) if lengths is None else (t < lengths)[:, None]
        h, c = np.where(valid, h_new, h), np.where(valid, c_new, c)
        ys[t] = np.where(valid, h_new, 0.0)
    return ys, h, c


def _np_weights(flat: np.ndarray, C: int, H: int, P: int | None, layers: int, dirs: int) -> list[list]:
    """Split MXNet's flat vector by hand: [[i2h_w, h2h_w, i2h_b, h2h_b, h2r_w or None] per layer/dir]."""
    out_size = P or H
    pos, ws, bs = 0, [], []
    for layer in range(layers):
        width = C if layer == 0 else out_size * dirs
        for _ in range(dirs):
            parts = []
            for shape in [(4 * H, width), (4 * H, out_size)] + ([(P, H)] if P else []):
                parts.append(flat[pos : pos + shape[0] * shape[1]].reshape(shape))
                pos += shape[0] * shape[1]
            ws.append(parts)
    for _ in range(layers * dirs):
        bs.append((flat[pos : pos + 4 * H], flat[pos + 4 * H : pos + 8 * H]))
        pos += 8 * H
    assert pos == flat.size
    return [[w[0], w[1], b[0], b[1], w[2] if P else None] for w, b in zip(ws, bs, strict=True)]


@pytest.mark.filterwarnings(_ONEDNN_PROJ)
@pytest.mark.parametrize(
    "projection,clip,lengths",
    [
        (3, None, [5, 2, 4]),
        (None, (-0.3, 0.2), None),
        (3, (-0.25, 0.25), [1, 5, 3]),
        (None, None, [4, 5, 1]),
        (5, None, [2, 5, 3]),  # projection as wide as the hidden state: no fused kernel takes it
    ],
)
def test_lstm_extras_match_numpy(projection, clip, lengths) -> None:
    T, N, C, H, L = 5, 3, 4, 5, 2
    kw: dict[str, object] = {"projection_size": projection}
    if clip is not None:
        kw.update(lstm_state_clip_min=clip[0], lstm_state_clip_max=clip[1])
    if lengths is not None:
        kw["use_sequence_length"] = True
    s = _sym_rnn("lstm", H, L, 2, **kw)
    names = s.list_arguments()
    assert names[-1] == ("rnn_sequence_length" if lengths is not None else "rnn_state_cell")
    arg_shapes, _, _ = s.infer_shape(data=(T, N, C))
    shapes = dict(zip(names, arg_shapes, strict=True))
    args = {n: RNG.uniform(-1.5, 1.5, shapes[n]).astype(np.float32) for n in names[:4]}
    if lengths is not None:
        assert shapes["rnn_sequence_length"] == (N,)
        args["rnn_sequence_length"] = np.array(lengths, np.float32)  # MXNet passes lengths as floats
    outs = s.bind(mx.cpu(), {k: torch.as_tensor(v) for k, v in args.items()}).forward()

    w = _np_weights(args["rnn_parameters"].astype(np.float64), C, H, projection, L, 2)
    x = args["data"].astype(np.float64)
    h0, c0 = args["rnn_state"].astype(np.float64), args["rnn_state_cell"].astype(np.float64)
    lens = None if lengths is None else np.array(lengths)
    hs, cs = [], []
    for layer in range(L):
        ys = []
        for d in range(2):
            k = 2 * layer + d
            y, h, c = _np_lstm(x, h0[k], c0[k], w[k], lens, clip, reverse=d == 1)
            ys.append(y)
            hs.append(h)
            cs.append(c)
        x = np.concatenate(ys, axis=-1)
    for got, want in zip(outs, (x, np.stack(hs), np.stack(cs)), strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)
    if clip is not None:
        assert float(outs[2].min()) >= clip[0] - 1e-7 and float(outs[2].max()) <= clip[1] + 1e-7


@pytest.mark.parametrize("clip_nan", [True, False])
def test_lstm_state_clip_nan(clip_nan: bool) -> None:
    T, N, C, H = 3, 2, 2, 3
    clip = {"lstm_state_clip_min": -0.5, "lstm_state_clip_max": 0.5, "lstm_state_clip_nan": clip_nan}
    s = _sym_rnn("lstm", H, 1, 1, **clip)
    flat = RNG.uniform(-1, 1, s.infer_shape(data=(T, N, C))[0][1]).astype(np.float32)
    x = RNG.standard_normal((T, N, C)).astype(np.float32)
    c0 = np.zeros((1, N, H), np.float32)
    c0[0, 0, 1] = np.nan
    h0 = np.zeros((1, N, H), np.float32)
    args = {"data": x, "rnn_parameters": flat, "rnn_state": h0, "rnn_state_cell": c0}
    outs = s.bind(mx.cpu(), {k: torch.as_tensor(v) for k, v in args.items()}).forward()
    w = _np_weights(flat.astype(np.float64), C, H, None, 1, 1)[0]
    with np.errstate(invalid="ignore"):
        y, h, c = _np_lstm(x.astype(np.float64), h0[0].astype(np.float64), c0[0].astype(np.float64), w,
                           clip=(-0.5, 0.5), clip_nan=clip_nan)  # fmt: skip
    np.testing.assert_allclose(outs[0].numpy(), y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs[2].numpy()[0], c, rtol=1e-4, atol=1e-5)
    # without lstm_state_clip_nan the NaN of sample 0 spreads through its state; sample 1 is untouched
    assert bool(np.isnan(outs[0].numpy()[:, 0]).any()) is not clip_nan
    assert not np.isnan(outs[0].numpy()[:, 1]).any()


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_sequence_length_zero_keeps_the_begin_state(mode: str) -> None:
    s = _sym_rnn(mode, 3, 1, 2, use_sequence_length=True)
    names = s.list_arguments()
    args = {n: torch.randn(shape) for n, shape in zip(names, s.infer_shape(data=(4, 2, 2))[0], strict=True)}
    args["rnn_sequence_length"] = torch.tensor([0.0, 3.0])
    outs = s.bind(mx.cpu(), args).forward()
    assert float(outs[0][:, 0].abs().sum()) == 0.0 and float(outs[0][3:, 1].abs().sum()) == 0.0
    assert float(outs[0][:3, 1].abs().sum()) > 0.0
    for got, name in zip(outs[1:], [n for n in names if "state" in n], strict=True):
        torch.testing.assert_close(got[:, 0], args[name][:, 0])


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh"])
def test_sequence_length_equals_each_sample_run_alone(mode: str) -> None:
    T, N, C, H, L = 6, 3, 4, 5, 2
    lengths = [6, 2, 4]
    s = _sym_rnn(mode, H, L, 2, use_sequence_length=True)
    names = s.list_arguments()
    assert names[-1] == "rnn_sequence_length" and names[:3] == ["data", "rnn_parameters", "rnn_state"]
    arg_shapes, out_shapes, _ = s.infer_shape(data=(T, N, C))
    args = {n: torch.randn(shape) for n, shape in zip(names, arg_shapes, strict=True)}
    args["rnn_sequence_length"] = torch.tensor(lengths, dtype=torch.float32)
    grads = {n: torch.zeros_like(v) for n, v in args.items() if n != "rnn_sequence_length"}
    reqs = {n: "write" if n in grads else "null" for n in names}
    ex = s.bind(mx.cpu(), args, args_grad=grads, grad_req=reqs)
    outs = ex.forward(is_train=True)
    heads = [torch.randn(shape) for shape in out_shapes]
    ex.backward(heads)

    plain = _sym_rnn(mode, H, L, 2)
    states = [n for n in names if "state" in n]
    want_grad = {n: torch.zeros_like(v) for n, v in grads.items()}
    for b, n_b in enumerate(lengths):
        one = {"data": args["data"][:n_b, b : b + 1].clone(), "rnn_parameters": args["rnn_parameters"]}
        one.update({n: args[n][:, b : b + 1].clone() for n in states})
        one_grads = {n: torch.zeros_like(v) for n, v in one.items()}
        ex1 = plain.bind(mx.cpu(), one, args_grad=one_grads)
        ref = ex1.forward(is_train=True)
        ex1.backward([heads[0][:n_b, b : b + 1]] + [h[:, b : b + 1] for h in heads[1:]])
        torch.testing.assert_close(outs[0][:n_b, b : b + 1], ref[0], rtol=1e-5, atol=1e-6)
        assert float(outs[0][n_b:, b].abs().sum()) == 0.0
        for got, want in zip(outs[1:], ref[1:], strict=True):
            torch.testing.assert_close(got[:, b : b + 1], want, rtol=1e-5, atol=1e-6)
        want_grad["data"][:n_b, b : b + 1] = one_grads["data"]
        want_grad["rnn_parameters"] += one_grads["rnn_parameters"]
        for n in states:
            want_grad[n][:, b : b + 1] = one_grads[n]
    for n, g in grads.items():
        torch.testing.assert_close(g, want_grad[n], rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings(_ONEDNN_PROJ)
@pytest.mark.parametrize(
    "kw",
    [
        {"projection_size": 3},
        {"projection_size": 3, "state_clip_min": -0.2, "state_clip_max": 0.3, "state_clip_nan": True},
        {"state_clip_min": -0.1, "state_clip_max": 0.1, "use_sequence_length": True},
        {"projection_size": 2, "use_sequence_length": True},
    ],
)
def test_rnn_operator_equals_gluon_lstm_forward_and_gradients(kw: dict) -> None:
    from mxtorch.gluon import rnn

    T, N, C, H, L = 5, 3, 4, 6, 2
    layer = rnn.LSTM(H, num_layers=L, bidirectional=True, input_size=C, **kw)
    layer.initialize(mx.init.Uniform(0.5))
    params = {k[len(layer.prefix) :]: p for k, p in layer.collect_params().items()}
    order = _mxnet_order(L, 2, "projection_size" in kw)
    assert sorted(order) == sorted(params)
    x = torch.randn(T, N, C)
    states = [torch.randn(i["shape"]) for i in layer.state_info(N)]
    lengths = torch.tensor([5.0, 2.0, 4.0])
    seq = {"sequence_length": lengths} if kw.get("use_sequence_length") else {}
    heads = [torch.randn(T, N, 2 * kw.get("projection_size", H))] + [torch.randn(s.shape) for s in states]

    xg = x.clone().requires_grad_()
    sg = [s.clone().requires_grad_() for s in states]
    with mx.autograd.record():
        out, new_states = layer(xg, sg, **seq)
    torch.autograd.backward([out, *new_states], heads)

    s = _sym_rnn(
        "lstm",
        H,
        L,
        2,
        projection_size=kw.get("projection_size"),
        lstm_state_clip_min=kw.get("state_clip_min"),
        lstm_state_clip_max=kw.get("state_clip_max"),
        lstm_state_clip_nan=kw.get("state_clip_nan", False),
        use_sequence_length=kw.get("use_sequence_length", False),
    )
    flat = torch.cat([params[n].data().detach().reshape(-1) for n in order])
    args = {"data": x, "rnn_parameters": flat, "rnn_state": states[0], "rnn_state_cell": states[1]}
    args.update({"rnn_" + k: v for k, v in seq.items()})
    grads = {k: torch.zeros_like(v) for k, v in args.items() if k != "rnn_sequence_length"}
    reqs = {k: "write" if k in grads else "null" for k in args}
    ex = s.bind(mx.cpu(), args, args_grad=grads, grad_req=reqs)
    outs = ex.forward(is_train=True)
    ex.backward(heads)

    for got, want in zip(outs, [out, *new_states], strict=True):
        torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grads["data"], xg.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grads["rnn_state"], sg[0].grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grads["rnn_state_cell"], sg[1].grad, rtol=1e-5, atol=1e-6)
    want_flat = torch.cat([params[n].grad().reshape(-1) for n in order])
    torch.testing.assert_close(grads["rnn_parameters"], want_flat, rtol=1e-5, atol=1e-5)


def test_extras_in_mxnet_json() -> None:
    s = _sym_rnn("lstm", 6, 1, 1, projection_size=3, lstm_state_clip_min=-1, lstm_state_clip_max=1,
                 use_sequence_length=True)  # fmt: skip
    node = [n for n in json.loads(s.tojson())["nodes"] if n["op"] == "RNN"][0]
    keys = ("projection_size", "lstm_state_clip_min", "use_sequence_length")
    assert [node["attrs"][k] for k in keys] == ["3", "-1", "True"]
    back = mx.sym.load_json(s.tojson())
    assert back.list_arguments() == s.list_arguments()
    assert back.infer_shape(data=(4, 2, 5)) == s.infer_shape(data=(4, 2, 5))
    # a node as MXNet 1.9 writes it: every optional argument spelled out, unset ones as "None"
    graph = json.loads(_sym_rnn("lstm", 6, 1, 1).tojson())
    node = [n for n in graph["nodes"] if n["op"] == "RNN"][0]
    node["attrs"].update({"projection_size": "None", "lstm_state_clip_min": "None",
                          "lstm_state_clip_max": "None", "lstm_state_clip_nan": "False",
                          "use_sequence_length": "False", "p": "0.0"})  # fmt: skip
    arg_shapes = mx.sym.load_json(json.dumps(graph)).infer_shape(data=(4, 2, 5))[0]
    assert arg_shapes[1:] == [(4 * 6 * 5 + 4 * 6 * 6 + 8 * 6,), (1, 2, 6), (1, 2, 6)]


def test_extras_errors() -> None:
    d = mx.sym.var("data")
    with pytest.raises(MXNetError, match="need mode='lstm'"):
        mx.sym.RNN(d, state_size=4, mode="gru", projection_size=2)
    with pytest.raises(MXNetError, match="together"):
        mx.sym.RNN(d, state_size=4, mode="lstm", lstm_state_clip_min=-1.0)
    with pytest.raises(MXNetError, match=r"clip_min \(1.0\) > lstm_state_clip_max"):
        mx.sym.RNN(d, state_size=4, mode="lstm", lstm_state_clip_min=1.0, lstm_state_clip_max=0.0)
    s = mx.sym.RNN(d, state_size=4, mode="gru", use_sequence_length=True, name="r")
    shapes = dict(zip(s.list_arguments(), s.infer_shape(data=(3, 2, 5))[0], strict=True))
    args = {n: torch.zeros(shape) for n, shape in shapes.items()}
    args["r_sequence_length"] = torch.tensor([1.0, 4.0])
    with pytest.raises(MXNetError, match=r"sequence_length values must be in \[0, 3\]"):
        s.bind(mx.cpu(), args).forward()


def _mxnet_exported_lstm(hidden: int, projection: int | None, shapes: dict[str, tuple[int, ...]]) -> str:
    """The graph MXNet 1.9's hybridized gluon.rnn.LSTM(hidden, projection_size=...) exports (written
    out by hand): weights reshaped to vectors, joined by _rnn_param_concat, batch-0 zero states."""
    names = _mxnet_order(1, 1, projection is not None)
    nodes: list[dict] = [{"op": "null", "name": "data", "inputs": []}]
    for n in names:
        attrs = {"__shape__": str(shapes[n]), "__dtype__": "0", "__lr_mult__": "1.0"}
        nodes.append({"op": "null", "name": f"lstm0_{n}", "attrs": attrs, "inputs": []})
        nodes.append({"op": "Reshape", "name": f"lstm0_reshape{len(nodes)}", "attrs": {"shape": "(-1,)"},
                      "inputs": [[len(nodes) - 1, 0, 0]]})  # fmt: skip
    reshaped = [[i, 0, 0] for i, n in enumerate(nodes) if n["op"] == "Reshape"]
    nodes.append({"op": "_rnn_param_concat", "name": "lstm0_rnn_param_concat0",
                  "attrs": {"dim": "0", "num_args": str(len(names))}, "inputs": reshaped})  # fmt: skip
    for i, size in enumerate((projection or hidden, hidden)):
        nodes.append({"op": "_zeros", "name": f"lstm0_h0_{i}",
                      "attrs": {"__layout__": "LNC", "dtype": "float32", "shape": f"(1, 0, {size})"},
                      "inputs": []})  # fmt: skip
    k = len(nodes)
    nodes.append({
        "op": "RNN", "name": "lstm0_rnn0",
        "attrs": {"bidirectional": "False", "lstm_state_clip_max": "None", "lstm_state_clip_min": "None",
                  "lstm_state_clip_nan": "False", "mode": "lstm", "num_layers": "1", "p": "0",
                  "projection_size": str(projection), "state_outputs": "True", "state_size": str(hidden),
                  "use_sequence_length": "False"},
        "inputs": [[0, 0, 0], [k - 3, 0, 0], [k - 2, 0, 0], [k - 1, 0, 0]],
    })  # fmt: skip
    graph = {
        "nodes": nodes,
        "arg_nodes": [i for i, n in enumerate(nodes) if n["op"] == "null"],
        "node_row_ptr": list(range(len(nodes) + 3)),
        "heads": [[k, 0, 0]],
        "attrs": {"mxnet_version": ["int", 10901]},
    }
    return json.dumps(graph)


@pytest.mark.filterwarnings(_ONEDNN_PROJ)
@pytest.mark.parametrize("projection", [None, 2])
def test_graph_exported_by_mxnet_gluon_lstm_runs(projection: int | None) -> None:
    from mxtorch.gluon import rnn

    T, N, C, H = 4, 3, 5, 6
    layer = rnn.LSTM(H, input_size=C, projection_size=projection)
    layer.initialize(mx.init.Uniform(0.5))
    x = torch.randn(T, N, C)
    want = layer(x)
    params = {k[len(layer.prefix) :]: p.data() for k, p in layer.collect_params().items()}
    var_shapes = {k: tuple(v.shape) for k, v in params.items()}
    sym = mx.sym.load_json(_mxnet_exported_lstm(H, projection, var_shapes))
    assert sym.list_outputs() == ["lstm0_rnn0_output"]
    shapes = dict(zip(sym.list_arguments(), sym.infer_shape(data=(T, N, C))[0], strict=True))
    assert sym.infer_shape(data=(T, N, C))[1] == [(T, N, projection or H)]
    args = {"data": x, **{f"lstm0_{k}": v for k, v in params.items()}}
    assert {k: tuple(v.shape) for k, v in args.items()} == shapes
    net = mx.gluon.SymbolBlock(sym, mx.sym.var("data"))
    for name, p in net.collect_params().items():
        p._load_init(args[name], mx.cpu())
    torch.testing.assert_close(net(x), want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sym.bind(mx.cpu(), args).forward()[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings(_ONEDNN_PROJ)
@pytest.mark.parametrize(
    "kw",
    [
        {"projection_size": 3},
        {"projection_size": 3, "state_clip_min": -0.2, "state_clip_max": 0.2, "state_clip_nan": True},
        {"projection_size": 2, "use_sequence_length": True, "layout": "NTC"},
    ],
)
def test_hybridized_lstm_extras_export_and_import(tmp_path: Path, kw: dict) -> None:
    from mxtorch import gluon
    from mxtorch.gluon import nn, rnn

    T, N, C, H = 5, 3, 4, 6
    seq_input = kw.get("use_sequence_length", False)
    ntc = kw.get("layout") == "NTC"

    class Net(gluon.HybridBlock):
        def __init__(self) -> None:
            super().__init__()
            with self.name_scope():
                self.lstm = rnn.LSTM(H, num_layers=2, bidirectional=True, input_size=C, **kw)
                self.dense = nn.Dense(2, flatten=False)

        def hybrid_forward(self, F, x):  # type: ignore[no-untyped-def]
            return self.dense(self.lstm(x))

    class NetWithLengths(Net):
        def hybrid_forward(self, F, x, lengths):  # type: ignore[no-untyped-def]
            return self.dense(self.lstm(x, sequence_length=lengths))

    net = NetWithLengths() if seq_input else Net()
    net.initialize(mx.init.Uniform(0.5))
    x = torch.randn(N, T, C) if ntc else torch.randn(T, N, C)
    inputs = [x] + ([torch.tensor([5.0, 2.0, 3.0])] if seq_input else [])
    want = net(*inputs)
    net.hybridize()
    torch.testing.assert_close(net(*inputs), want, rtol=1e-5, atol=1e-6)
    sym_file, params_file = net.export(str(tmp_path / "lstm"))
    graph = json.loads(Path(sym_file).read_text())
    node = [n for n in graph["nodes"] if n["op"] == "RNN"][0]
    assert node["attrs"]["projection_size"] == str(kw["projection_size"])
    clip_min = str(kw["state_clip_min"]) if "state_clip_min" in kw else None
    assert node["attrs"].get("lstm_state_clip_min") == clip_min
    assert node["attrs"]["use_sequence_length"] == str(seq_input)
    names = ["data0", "data1"] if seq_input else ["data"]
    back = gluon.SymbolBlock.imports(sym_file, names, params_file)
    torch.testing.assert_close(back(*inputs), want, rtol=1e-5, atol=1e-6)
    # gradients of the imported graph equal the layer's
    with mx.autograd.record():
        loss_a = (net(*inputs) ** 2).sum()
        loss_b = (back(*inputs) ** 2).sum()
    loss_a.backward()
    loss_b.backward()
    grads_a = {k.split("_", 1)[1]: p.grad() for k, p in net.collect_params().items()}
    grads_b = {k.split("_", 1)[1]: p.grad() for k, p in back.collect_params().items()}
    assert grads_a.keys() == grads_b.keys()
    for k in grads_a:
        torch.testing.assert_close(grads_b[k], grads_a[k], rtol=1e-5, atol=1e-5)
