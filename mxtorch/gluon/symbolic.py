"""Gluon blocks called with symbols: ``net(mx.sym.var('data'))`` builds the block's MXNet graph.

Each block runs under MXNet's naming (a ``Prefix`` name manager with the block's prefix, none
for a block with prefix ``''``), so nodes get the names MXNet gives them (``dense0_fwd``,
``resnetv10_stage1_activation0``).  Built-in layers translate to MXNet's operators with MXNet's
attributes (:data:`TRANSLATORS`), blocks with ``hybrid_forward`` get ``F = mx.sym`` and their
parameters as variables, and other blocks run their ``forward`` with symbols flowing through
(torch functions on symbols are mapped by ``Symbol.__torch_function__``).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

from .. import symbol as sym
from ..base import MXNetError
from ..symbol import Symbol
from ..symbol._scope import NameManager, Prefix

__all__ = ["has_symbol", "call_symbolic", "TRANSLATORS", "input_names"]


def has_symbol(args: tuple[Any, ...]) -> bool:
    """Whether any argument is a Symbol (cheap when no symbol was ever made)."""
    mod = sys.modules.get("mxtorch.symbol.symbol")
    if mod is None:
        return False
    cls = mod.Symbol
    return any(isinstance(a, cls) for a in args)


def _var(p: Any) -> Symbol | None:
    return None if p is None else p.var()


def _dense(b: Any, x: Symbol) -> Symbol:
    out = sym.FullyConnected(
        data=x,
        weight=b.weight.var(),
        bias=_var(b.bias),
        no_bias=b.bias is None,
        num_hidden=b._units,
        flatten=b._flatten,
        name="fwd",
    )
    return b.act(out) if b.act is not None else out


def _window(b: Any, kernel: Any) -> dict[str, Any]:
    """The sliding-window attributes that convolution and pooling layers store alike."""
    return {"kernel": kernel, "stride": b._strides, "pad": b._padding, "layout": b._layout}


def _convolution(b: Any, x: Symbol) -> Symbol:
    kw = _window(b, b._kernel)
    kw.update(dilate=b._dilation, num_filter=b._channels, num_group=b._groups, no_bias=b.bias is None)
    op = sym.Convolution
    if b._transpose:
        op = sym.Deconvolution
        kw["adj"] = b._out_pad
    out = op(data=x, weight=b.weight.var(), bias=_var(b.bias), name="fwd", **kw)
    return b.act(out) if b.act is not None else out


def _pool(b: Any, x: Symbol) -> Symbol:
    kw = _window(b, b._pool)
    kw.update(pool_type=b._type, global_pool=False, pooling_convention="full" if b._ceil_mode else "valid")
    if b._type == "avg":
        kw["count_include_pad"] = b._count_include_pad
    return sym.Pooling(x, name="fwd", **kw)  # type: ignore[no-any-return]


def _global_pool(b: Any, x: Symbol) -> Symbol:
    return sym.Pooling(
        x,
        name="fwd",
        kernel=(1,) * b._ndim,
        pool_type=b._type,  # type: ignore[no-any-return]
        global_pool=True,
        layout=b._layout,
    )


def _batchnorm(b: Any, x: Symbol) -> Symbol:
    return sym.BatchNorm(
        data=x,
        gamma=b.gamma.var(),
        beta=b.beta.var(),  # type: ignore[no-any-return]
        moving_mean=b.running_mean.var(),
        moving_var=b.running_var.var(),
        name="fwd",
        eps=b._epsilon,
        momentum=b._momentum,
        fix_gamma=not b._scale,
        use_global_stats=b._use_global_stats,
        axis=b._axis,
    )


def _layernorm(b: Any, x: Symbol) -> Symbol:
    return sym.LayerNorm(
        data=x,
        gamma=b.gamma.var(),
        beta=b.beta.var(),
        axis=b._axis,  # type: ignore
        eps=b._epsilon,
    )


def _instancenorm(b: Any, x: Symbol) -> Symbol:
    return sym.InstanceNorm(data=x, gamma=b.gamma.var(), beta=b.beta.var(), eps=b._epsilon)  # type: ignore


def _dropout(b: Any, x: Symbol) -> Symbol:
    if b._rate > 0:
        return sym.Dropout(x, p=b._rate, axes=b._axes, name="fwd", cudnn_off=False)  # type: ignore
    return sym.identity(x)  # type: ignore[no-any-return]


def _leaky(act_type: str, slope: Callable[[Any], Any] | None = None) -> Callable[[Any, Symbol], Symbol]:
    def run(b: Any, x: Symbol) -> Symbol:
        kw = {"slope": slope(b)} if slope is not None else {}
        return sym.LeakyReLU(x, act_type=act_type, name="fwd", **kw)  # type: ignore[no-any-return]

    return run


def _prelu(b: Any, x: Symbol) -> Symbol:
    return sym.LeakyReLU(x, gamma=b.alpha.var(), act_type="prelu", name="fwd")  # type: ignore


def _swish(b: Any, x: Symbol) -> Symbol:
    return x * sym.sigmoid(b._beta * x, name="fwd")  # type: ignore[no-any-return]


def _embedding(b: Any, x: Symbol) -> Symbol:
    return sym.Embedding(
        x,
        weight=b.weight.var(),
        name="fwd",
        input_dim=b._input_dim,  # type: ignore
        output_dim=b._output_dim,
        dtype=str(b._dtype).replace("torch.", ""),
        sparse_grad=b._sparse_grad,
    )


def _weighted(b: Any, loss: Symbol, sample_weight: Any, extra: float | None = None) -> Symbol:
    if sample_weight is not None:
        loss = sym.broadcast_mul(loss, sample_weight)
    weight = b._weight if extra is None else (b._weight or 1.0) * extra
    if weight is not None:
        loss = loss * weight
    return sym.mean(loss, axis=b._batch_axis, exclude=True)  # type: ignore[no-any-return]


def _l1(b: Any, pred: Symbol, label: Symbol, sample_weight: Any = None) -> Symbol:
    label = sym.reshape_like(label, pred)
    return _weighted(b, sym.abs(label - pred), sample_weight)


def _l2(b: Any, pred: Symbol, label: Symbol, sample_weight: Any = None) -> Symbol:
    label = sym.reshape_like(label, pred)
    return _weighted(b, sym.square(label - pred), sample_weight, 0.5)


def _softmax_ce(b: Any, pred: Symbol, label: Symbol, sample_weight: Any = None) -> Symbol:
    if not b._from_logits:
        pred = sym.log_softmax(pred, axis=b._axis)
    if b._sparse_label:
        loss = -sym.pick(pred, label, axis=b._axis, keepdims=True)
    else:
        label = sym.reshape_like(label, pred)
        loss = -sym.sum(pred * label, axis=b._axis, keepdims=True)
    return _weighted(b, loss, sample_weight)


def _rnn_layer(b: Any, x: Symbol, states: Any = None, sequence_length: Any = None) -> Any:
    # MXNet's _RNNLayer graph: parameters flattened in MXNet's order into one vector (an LSTM's
    # projection h2r weights after each h2h, no bias), the fused RNN operator with MXNet 1.9's
    # arguments, zero initial states shaped like the batch when none are given
    if b._use_sequence_length and sequence_length is None:
        raise MXNetError(f"{type(b).__name__} was built with use_sequence_length=True: pass sequence_length")
    if b._layout == "NTC":
        x = sym.swapaxes(x, dim1=0, dim2=1)
    gates = ("i2h", "h2h", "h2r") if b._projection_size is not None else ("i2h", "h2h")
    order = [
        f"{d}{i}_{g}_{t}"
        for t in ("weight", "bias")
        for i in range(b._num_layers)
        for d in ("l", "r")[: b._dir]
        for g in gates
        if not (g == "h2r" and t == "bias")
    ]
    params = b.__dict__["_gluon_params"]
    flat = sym.Concat(*[sym.reshape(params[n].var(), shape=(-1,)) for n in order], dim=0)
    skip = states is None
    if skip:
        n = b._num_layers * b._dir
        sizes = [b._projection_size or b._hidden_size] + ([b._hidden_size] if b._mode == "lstm" else [])
        states = [
            sym.broadcast_like(sym.zeros(shape=(n, 1, size)), x, lhs_axes=(1,), rhs_axes=(1,))
            for size in sizes
        ]
    elif isinstance(states, Symbol):
        states = [states]
    extra = [sequence_length] if b._use_sequence_length else []
    lo, hi = b._clip if b._clip is not None else (None, None)
    rnn = sym.RNN(
        x,
        flat,
        *states,
        *extra,
        state_size=b._hidden_size,
        num_layers=b._num_layers,
        bidirectional=b._dir == 2,
        p=b._dropout,
        state_outputs=True,
        mode=b._mode,
        projection_size=b._projection_size,
        lstm_state_clip_min=lo,
        lstm_state_clip_max=hi,
        lstm_state_clip_nan=b._clip_nan,
        use_sequence_length=b._use_sequence_length,
    )
    out = rnn[0]
    if b._layout == "NTC":
        out = sym.swapaxes(out, dim1=0, dim2=1)
    new_states = [rnn[1], rnn[2]] if b._mode == "lstm" else [rnn[1]]
    return out if skip else (out, new_states)


_NN = "mxtorch.gluon.nn."
# layer classes by qualified name (importing them here would make the layers and this module import
# each other); a subclass is translated like its nearest listed base unless it overrides forward
TRANSLATORS: dict[str, Callable[..., Any]] = {
    _NN + "basic_layers.Dense": _dense,
    _NN + "basic_layers.Dropout": _dropout,
    _NN + "basic_layers.Flatten": lambda b, x: sym.Flatten(x),
    _NN + "basic_layers.Identity": lambda b, x: x,
    _NN + "activations.Activation": lambda b, x: sym.Activation(x, act_type=b._act_type, name="fwd"),
    _NN + "activations.LeakyReLU": _leaky("leaky", lambda b: b._alpha),
    _NN + "activations.PReLU": _prelu,
    _NN + "activations.ELU": _leaky("elu", lambda b: b._alpha),
    _NN + "activations.SELU": _leaky("selu"),
    _NN + "activations.GELU": _leaky("gelu"),
    _NN + "activations.Swish": _swish,
    _NN + "conv_layers._Conv": _convolution,
    _NN + "conv_layers._Pool": _pool,
    _NN + "conv_layers._GlobalPool": _global_pool,
    _NN + "norm_layers.BatchNorm": _batchnorm,
    _NN + "norm_layers.LayerNorm": _layernorm,
    _NN + "norm_layers.InstanceNorm": _instancenorm,
    _NN + "embedding.Embedding": _embedding,
    "mxtorch.gluon.rnn.rnn_layer._RNNLayer": _rnn_layer,
    "mxtorch.gluon.loss.L1Loss": _l1,
    "mxtorch.gluon.loss.L2Loss": _l2,
    "mxtorch.gluon.loss.SoftmaxCrossEntropyLoss": _softmax_ce,
}


def _translator(block: Any) -> Callable[..., Any] | None:
    for cls in type(block).__mro__:
        fn = TRANSLATORS.get(f"{cls.__module__}.{cls.__qualname__}")
        if fn is not None:
            # a subclass that overrides forward computes something else: trace its forward instead
            own = [
                c for c in type(block).__mro__[: type(block).__mro__.index(cls)] if "forward" in c.__dict__
            ]
            return None if own else fn
    return None


def call_symbolic(block: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The graph of ``block`` applied to symbolic ``args`` (under the block's name scope)."""
    scope: NameManager | None = None if block._empty_prefix else Prefix(block.prefix)
    if scope is not None:
        scope.__enter__()
    try:
        fn = _translator(block)
        if fn is not None:
            return fn(block, *args, **kwargs)
        hf = getattr(block, "hybrid_forward", None)
        if hf is not None:
            params = {name: p.var() for name, p in block._gluon_params.items()}
            return hf(sym, *args, **kwargs, **params)
        return block.forward(*args, **kwargs)
    finally:
        if scope is not None:
            scope.__exit__(None, None, None)


def input_names(block: Any) -> list[str]:
    """MXNet's names of a block's graph inputs: ``data`` for one, ``data0``, ``data1``... for more."""
    fn = getattr(block, "hybrid_forward", None)
    skip = 1 if fn is not None else 0
    fn = fn or block.forward
    params = list(inspect.signature(fn).parameters.values())[skip:]
    n = sum(
        1
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        and p.default is p.empty
        and p.name not in block._gluon_params
    )
    if n == 0:
        raise MXNetError(f"{type(block).__name__}: cannot tell how many inputs forward() takes")
    return ["data"] if n == 1 else [f"data{i}" for i in range(n)]
