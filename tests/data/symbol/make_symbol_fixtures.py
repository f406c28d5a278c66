"""Writes the symbolic-API fixtures in this folder.  NEEDS REAL MXNet 1.9.1 (not mxtorch):

    /tmp/conformance-venv-mxnet/bin/python tests/data/symbol/make_symbol_fixtures.py

The ``build_*`` functions take the ``mx`` module (MXNet here, mxtorch in tests/test_symbol.py
and tests/test_executor.py), so both sides build the very same graphs.  Written files:

* ``reference.json``: names, attributes, argument lists and inferred shapes/types MXNet gave;
* ``mlp-symbol.json``, ``convbn-symbol.json``, ``split-symbol.json``: graphs MXNet saved;
* ``<graph>-arrays.nd``: their inputs/parameters (``arg:``/``aux:``), inference outputs
  (``out:``), training outputs, head gradients and argument gradients (``train_out:``,
  ``out_grad:``, ``grad:``) and the input of the convbn graph's BatchNorm (``internal:``).
  MXNet 1.9.1 on CPU updates BatchNorm's moving statistics in the backward pass and with MKLDNN
  skips the update erratically, so its moving statistics are not stored: the tests derive them
  from the BatchNorm input with MXNet's documented rule;
* ``losses.nd``: data, labels and MXNet's input gradients of the loss operators (``LOSS_CASES``).

Every input value comes from :func:`values` (no random numbers), so the tests can recompute them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def values(shape: tuple[int, ...], seed: float) -> np.ndarray:
    """Deterministic float32 values in [-1, 1] of ``shape``."""
    n = int(np.prod(shape))
    return np.sin(np.arange(n, dtype=np.float64) * 0.37 + seed).reshape(shape).astype(np.float32)


# ---------------------------------------------------------------------------------------- naming


def build_naming(mx: Any) -> dict[str, Any]:
    """Auto-named and scoped constructions; returns the symbols whose names/attributes we compare."""
    S = mx.sym
    out: dict[str, Any] = {}
    with mx.name.NameManager():
        x = S.Variable(
            "x",
            shape=(2, 3),
            dtype="float16",
            lr_mult=2.0,
            wd_mult=0.5,
            attr={"foo": "bar"},
            init=mx.init.Xavier(),
        )
        out["var"] = x
        with mx.AttrScope(ctx_group="dev1", wd_mult="3"):
            with mx.AttrScope(ctx_group="dev2", lr_mult="0.5"):
                y = S.Variable("y")
                out["scoped"] = S.FullyConnected(y, num_hidden=4)
            out["outer"] = S.Variable("z")
        d = S.Variable("data")
        a = S.FullyConnected(d, num_hidden=3)
        b = a + 1
        c = b - 2
        e = 3 - c
        f = c * a
        g = f / 2
        h = 2 / g
        i = g**2
        j = 2**i
        k = j % 3
        m = 3 % k
        neg = -m
        cmps = [neg == 1, neg != a, neg > 1, neg >= a, neg < 1, neg <= a, 1 < neg, a + b, a - b, a / b]
        out["arith"] = S.Group([a, b, c, e, f, g, h, i, j, k, m, neg, *cmps])
        out["conv"] = S.Convolution(
            S.Activation(S.Variable("q"), act_type="relu"), kernel=(3, 3), num_filter=2
        )
        out["bn"] = S.BatchNorm(S.Variable("data"), name="bn")
        with mx.AttrScope(lr_mult="0.1"):
            out["fc_attr"] = S.FullyConnected(
                S.Variable("data"), num_hidden=5, name="fc2", attr={"__k__": "v"}, lr_mult=3
            )
        out["emb"] = S.Embedding(S.Variable("w"), input_dim=10, output_dim=4, name="emb")
        v = S.Variable("v")
        out["methods"] = S.Group([v.reshape((2, -1)), v.sum(axis=1), v.exp(), v.transpose()])
        out["split_v2"] = S.Group([*S.split_v2(v, (1, 3), axis=1), *v.split_v2(2, squeeze_axis=True)])
        out["prelu"] = S.LeakyReLU(S.Variable("data"), act_type="prelu", name="act")
        out["deconv"] = S.Deconvolution(S.Variable("data"), kernel=(2, 2), num_filter=3, name="dc")
        out["ln"] = S.LayerNorm(S.Variable("data"), name="ln")
        out["softmax"] = S.SoftmaxOutput(S.Variable("data"), name="sm")
        out["lro"] = S.LinearRegressionOutput(S.Variable("data"), name="lro")
    with mx.name.Prefix("pre_"):
        out["prefix"] = S.Group(
            [
                S.FullyConnected(S.Variable("q"), num_hidden=2),
                S.FullyConnected(S.Variable("q"), num_hidden=2, name="named"),
            ]
        )
    return out


# ---------------------------------------------------------------------------------------- graphs


def build_mlp(mx: Any) -> Any:
    with mx.name.NameManager():  # fresh automatic names
        return _build_mlp(mx)


def _build_mlp(mx: Any) -> Any:
    S = mx.sym
    data = S.Variable("data")
    h = S.Activation(S.FullyConnected(data, num_hidden=8, name="fc1"), act_type="relu", name="relu1")
    out = S.FullyConnected(h, num_hidden=3, name="fc2")
    return S.SoftmaxOutput(out, name="softmax")


def build_convbn(mx: Any) -> Any:
    with mx.name.NameManager():  # fresh automatic names
        return _build_convbn(mx)


def _build_convbn(mx: Any) -> Any:
    S = mx.sym
    data = S.Variable("data")
    c = S.Convolution(data, kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv")
    b = S.BatchNorm(c, fix_gamma=False, momentum=0.8, name="bn")
    r = S.Activation(b, act_type="relu", name="relu")
    p = S.Pooling(r, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool")
    return S.FullyConnected(S.Flatten(p, name="flat"), num_hidden=5, name="fc")


def build_split(mx: Any) -> Any:
    with mx.name.NameManager():  # fresh automatic names
        return _build_split(mx)


def _build_split(mx: Any) -> Any:
    S = mx.sym
    data = S.Variable("data")
    parts = S.SliceChannel(data, num_outputs=3, axis=1, name="split")
    a = parts[0] * 2 + 1
    b = 3 - parts[1]
    c = (parts[2] / 4) ** 2
    cat = S.Concat(a, b, c * parts[0], dim=1, name="cat")
    return S.Group([cat, S.sum(parts[0] + parts[2], axis=2, name="tot"), S.exp(b, name="ex")])


GRAPHS: dict[str, tuple[Callable[[Any], Any], dict[str, tuple[int, ...]]]] = {
    "mlp": (build_mlp, {"data": (4, 6)}),
    "convbn": (build_convbn, {"data": (2, 3, 6, 6)}),
    "split": (build_split, {"data": (2, 6, 3)}),
}


# ---------------------------------------------------------------------------------------- shapes


def build_shape_cases(mx: Any) -> dict[str, tuple[Any, dict[str, Any]]]:
    """name -> (symbol, infer_shape keywords)."""
    with mx.name.NameManager():  # fresh automatic names
        return _build_shape_cases(mx)


def _build_shape_cases(mx: Any) -> dict[str, tuple[Any, dict[str, Any]]]:
    S = mx.sym
    data = S.Variable("data")
    cases: dict[str, tuple[Any, dict[str, Any]]] = {
        "mlp": (build_mlp(mx), {"data": (4, 6)}),
        "convbn": (build_convbn(mx), {"data": (2, 3, 6, 6)}),
        "split": (build_split(mx), {"data": (2, 6, 3)}),
        "embedding": (S.Embedding(data, input_dim=10, output_dim=4, name="emb"), {"data": (3, 5)}),
        "split_squeeze": (
            S.Group(list(S.SliceChannel(data, num_outputs=2, axis=0, squeeze_axis=True, name="s"))),
            {"data": (2, 3, 4)},
        ),
        "split_v2": (S.Group(list(S.split_v2(data, (1, 3), axis=1))), {"data": (2, 5)}),
        "split_v2_sections": (S.split_v2(data, 2, axis=0, squeeze_axis=True), {"data": (2, 5)}),
        "concat0": (S.Concat(data, S.Variable("b"), dim=0, name="c0"), {"data": (2, 3), "b": (4, 3)}),
        "deconv": (
            S.Deconvolution(data, kernel=(3, 3), stride=(2, 2), num_filter=5, name="dc"),
            {"data": (1, 2, 4, 4)},
        ),
        "pool_global": (
            S.Pooling(data, kernel=(1, 1), global_pool=True, pool_type="avg", name="gp"),
            {"data": (2, 3, 5, 7)},
        ),
        "fc_noflatten": (S.FullyConnected(data, num_hidden=6, flatten=False, name="f"), {"data": (2, 3, 4)}),
        "conv_stride": (
            S.Convolution(data, kernel=(3, 2), stride=(2, 1), num_filter=2, no_bias=True, name="cv"),
            {"data": (1, 4, 9, 5)},
        ),
    }
    for i, (shape, kw) in enumerate(
        [
            ((0, -1), {}),
            ((-2,), {}),
            ((-3, -2), {}),
            ((-4, 1, 2, -2), {}),
            ((0, 0, -3), {}),
            ((2, -1, 0), {"reverse": True}),
            ((-1, 5), {}),
            ((0, 0, -4, 2, -1, 0), {}),
        ]
    ):
        cases[f"reshape{i}"] = (S.Reshape(data, shape=shape, name=f"r{i}", **kw), {"data": (2, 3, 4, 5)})
    return cases


def build_partial_cases(mx: Any) -> dict[str, tuple[Any, dict[str, Any]]]:
    S = mx.sym
    return {
        "mlp_nothing": (build_mlp(mx), {}),
        "two_inputs": (
            S.FullyConnected(S.Variable("a"), num_hidden=3, name="f") + S.Variable("b"),
            {"a": (2, 5)},
        ),
        "var_shape_attr": (S.FullyConnected(S.Variable("a", shape=(4, 2)), num_hidden=3, name="g"), {}),
    }


def build_type_cases(mx: Any) -> dict[str, tuple[Any, dict[str, Any]]]:
    S = mx.sym
    return {
        "mlp_f16": (build_mlp(mx), {"data": "float16"}),
        "mlp_f64": (build_mlp(mx), {"data": "float64"}),
        "var_dtype": (S.Variable("a", dtype="float64") * 2, {}),
        "bn_f16": (S.BatchNorm(S.Variable("d"), name="bn"), {"d": "float16"}),
        "bn_f64": (S.BatchNorm(S.Variable("d"), name="bn"), {"d": "float64"}),
        "cast": (S.Cast(S.Variable("a"), dtype="int32", name="c"), {"a": "float32"}),
        "embedding": (
            S.Embedding(S.Variable("i"), input_dim=5, output_dim=2, dtype="float16", name="e"),
            {"i": "int32"},
        ),
    }


# ---------------------------------------------------------------------------------------- losses

# name -> (operator, keywords, data shape, label kind)
LOSS_CASES: dict[str, tuple[str, dict[str, Any], tuple[int, ...], str]] = {
    "softmax_null": ("SoftmaxOutput", {}, (4, 5), "class"),
    "softmax_batch": ("SoftmaxOutput", {"normalization": "batch", "grad_scale": 2.0}, (4, 5), "class"),
    "softmax_valid_ignore": (
        "SoftmaxOutput",
        {"normalization": "valid", "use_ignore": True, "ignore_label": 1},
        (4, 5),
        "class",
    ),
    "softmax_ignore_null": ("SoftmaxOutput", {"use_ignore": True, "ignore_label": 1}, (4, 5), "class"),
    "softmax_multi": ("SoftmaxOutput", {"multi_output": True}, (2, 3, 4), "multi"),
    "softmax_multi_valid": (
        "SoftmaxOutput",
        {"multi_output": True, "normalization": "valid", "use_ignore": True, "ignore_label": 0},
        (2, 3, 4),
        "multi",
    ),
    "softmax_multi_batch": (
        "SoftmaxOutput",
        {"multi_output": True, "normalization": "batch"},
        (2, 3, 4),
        "multi",
    ),
    "softmax_valid_no_ignore": (
        "SoftmaxOutput",
        {"normalization": "valid", "ignore_label": 2},
        (4, 5),
        "class",
    ),
    "softmax_preserve_batch": (
        "SoftmaxOutput",
        {"preserve_shape": True, "normalization": "batch"},
        (2, 3, 4),
        "preserve",
    ),
    "softmax_out_grad": ("SoftmaxOutput", {"out_grad": True, "grad_scale": 0.5}, (4, 5), "class"),
    "softmax_smooth": ("SoftmaxOutput", {"smooth_alpha": 0.2}, (4, 5), "class"),
    "softmax_preserve": ("SoftmaxOutput", {"preserve_shape": True}, (2, 3, 4), "preserve"),
    "linear": ("LinearRegressionOutput", {}, (4, 3), "real"),
    "linear_scale": ("LinearRegressionOutput", {"grad_scale": 0.5}, (4, 3), "real"),
    "logistic": ("LogisticRegressionOutput", {}, (4, 3), "real"),
    "mae": ("MAERegressionOutput", {}, (4, 3), "real"),
    "mae_1d": ("MAERegressionOutput", {}, (5,), "real"),
    "makeloss": ("MakeLoss", {"grad_scale": 3.0}, (4, 3), "none"),
    "makeloss_batch": ("MakeLoss", {"normalization": "batch"}, (4, 3), "none"),
    "makeloss_valid": ("MakeLoss", {"normalization": "valid", "valid_thresh": 0.1}, (4, 3), "none"),
    "blockgrad": ("BlockGrad", {}, (4, 3), "none"),
}


def loss_inputs(case: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The data and label of a loss case (label None for MakeLoss/BlockGrad)."""
    _, _, shape, kind = LOSS_CASES[case]
    data = values(shape, 0.5) * 3
    if kind == "class":
        return data, (np.arange(shape[0]) * 2 % shape[1]).astype(np.float32)
    if kind == "multi":
        return data, (np.arange(shape[0] * shape[2]) % shape[1]).reshape(shape[0], shape[2]).astype(
            np.float32
        )
    if kind == "preserve":
        return data, (np.arange(shape[0] * shape[1]) % shape[2]).reshape(shape[:2]).astype(np.float32)
    if kind == "real":
        label = values(shape, 2.0)
        label.reshape(-1)[1] = data.reshape(-1)[1]  # one exact hit (MAE's sign at zero)
        return data, label
    return data, None


def build_loss(mx: Any, case: str) -> Any:
    """``op(data * w)``: the head of a loss case over a variable ``w`` (ones) so that a gradient
    reaches an argument through an ordinary operator as well."""
    op, kw, _, kind = LOSS_CASES[case]
    x = mx.sym.Variable("data") * mx.sym.Variable("w")
    if kind == "none":
        return getattr(mx.sym, op)(x, name="loss", **kw)
    return getattr(mx.sym, op)(x, mx.sym.Variable("label"), name="loss", **kw)


# ---------------------------------------------------------------------------------------- writing


def _shapes(x: Any) -> Any:
    return None if x is None else [list(s) for s in x]


def _types(x: Any) -> Any:
    return None if x is None else [np.dtype(t).name for t in x]


def _describe(sym: Any) -> dict[str, Any]:
    return {
        "arguments": sym.list_arguments(),
        "outputs": sym.list_outputs(),
        "auxiliary": sym.list_auxiliary_states(),
        "inputs": sym.list_inputs(),
        "attr_dict": sym.attr_dict(),
        "internals": sym.get_internals().list_outputs(),
    }


def _write_graph(mx: Any, name: str) -> None:
    build, shapes = GRAPHS[name]
    sym = build(mx)
    sym.save(os.path.join(HERE, f"{name}-symbol.json"))
    arg_shapes, out_shapes, aux_shapes = sym.infer_shape(**shapes)
    arrays: dict[str, Any] = {}
    args = {}
    for k, (n, s) in enumerate(zip(sym.list_arguments(), arg_shapes)):
        if n.endswith("label"):
            v = (np.arange(int(np.prod(s))) % 3).reshape(s).astype(np.float32)
        else:
            v = values(tuple(s), 0.1 * k)
        args[n] = mx.nd.array(v)
    aux = {
        n: mx.nd.array(np.abs(values(tuple(s), 1.0 + k)) + (0.5 if "var" in n else 0.0))
        for k, (n, s) in enumerate(zip(sym.list_auxiliary_states(), aux_shapes))
    }
    arrays.update({f"arg:{n}": v.copy() for n, v in args.items()})
    arrays.update({f"aux:{n}": v.copy() for n, v in aux.items()})
    # inference on an executor without gradient arrays: with them, MXNet's CPU BatchNorm
    # normalizes by the batch statistics even in forward(is_train=False)
    infer = sym.bind(mx.cpu(), args=args, aux_states={n: v.copy() for n, v in aux.items()})
    for i, o in enumerate(infer.forward(is_train=False)):
        arrays[f"out:{i}"] = o.copy()
    grads = {n: mx.nd.zeros(v.shape) for n, v in args.items()}
    ex = sym.bind(mx.cpu(), args=args, args_grad=grads, aux_states=aux)
    outs = ex.forward(is_train=True)
    out_grads = [mx.nd.array(values(o.shape, 3.0 + i)) for i, o in enumerate(outs)]
    ex.backward(out_grads)
    for i, (o, g) in enumerate(zip(outs, out_grads)):
        arrays[f"train_out:{i}"] = o.copy()
        arrays[f"out_grad:{i}"] = g
    arrays.update({f"grad:{n}": g.copy() for n, g in grads.items()})
    if aux:  # the BatchNorm input, from which the tests derive the moving statistics' update
        conv = sym.get_internals()["conv_output"]
        conv_args = {n: args[n] for n in conv.list_arguments()}
        arrays["internal:conv_output"] = conv.bind(mx.cpu(), conv_args).forward()[0].copy()
    mx.nd.save(os.path.join(HERE, f"{name}-arrays.nd"), arrays)


def main() -> None:
    os.environ["MXNET_SUBGRAPH_BACKEND"] = "NONE"  # run the operators as written, unfused
    import mxnet as mx

    assert mx.__version__ == "1.9.1", mx.__version__
    ref: dict[str, Any] = {"naming": {}, "infer_shape": {}, "infer_shape_partial": {}, "infer_type": {}}
    for key, sym in build_naming(mx).items():
        ref["naming"][key] = _describe(sym)
    for key, (sym, kw) in build_shape_cases(mx).items():
        a, o, x = sym.infer_shape(**kw)
        ref["infer_shape"][key] = {"arg": _shapes(a), "out": _shapes(o), "aux": _shapes(x), **_describe(sym)}
    for key, (sym, kw) in build_partial_cases(mx).items():
        a, o, x = sym.infer_shape_partial(**kw)
        ref["infer_shape_partial"][key] = {"arg": _shapes(a), "out": _shapes(o), "aux": _shapes(x)}
    for key, (sym, kw) in build_type_cases(mx).items():
        a, o, x = sym.infer_type(**kw)
        ref["infer_type"][key] = {"arg": _types(a), "out": _types(o), "aux": _types(x)}
    with open(os.path.join(HERE, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(ref, f, indent=1, sort_keys=True)
        f.write("\n")
    for name in GRAPHS:
        _write_graph(mx, name)
    losses: dict[str, Any] = {}
    for case in LOSS_CASES:
        data, label = loss_inputs(case)
        sym = build_loss(mx, case)
        args = {"data": mx.nd.array(data), "w": mx.nd.ones(data.shape)}
        if label is not None:
            args["label"] = mx.nd.array(label)
        grads = {"w": mx.nd.zeros(data.shape)}
        ex = sym.bind(mx.cpu(), args=args, args_grad=grads, grad_req={"w": "write"})
        out = ex.forward(is_train=True)[0]
        ex.backward([mx.nd.ones(out.shape) * 7])  # loss operators ignore the head gradient
        losses[f"{case}:out"] = out.copy()
        losses[f"{case}:grad"] = grads["w"].copy()
    mx.nd.save(os.path.join(HERE, "losses.nd"), losses)


if __name__ == "__main__":
    main()
