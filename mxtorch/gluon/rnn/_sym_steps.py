"""One time step of the Elman, LSTM and GRU cells as MXNet graph nodes, with MXNet's node names.

Gluon's cells build these when called with symbols (``cell.unroll(3, [mx.sym.var(...)])``) and
the legacy ``mx.rnn`` cells always do.  ``F`` is ``mx.sym``; ``prefix`` is the step's name prefix
(``'t0_'`` under a Gluon cell's name scope, ``'rnn_t0_'`` for a legacy cell), so the step's output
is named ``<prefix>out`` as in MXNet.  Weights are ``(i2h_weight, i2h_bias, h2h_weight,
h2h_bias)`` symbols; gate order is MXNet's (LSTM: input, forget, cell, output; GRU: reset,
update, new).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

__all__ = ["activation", "rnn_step", "lstm_step", "gru_step", "batch_zeros", "is_symbol"]

Weights = tuple[Any, Any, Any, Any]
# ``project(F, x, h, weights, rows, prefix) -> (i2h, h2h)``: FullyConnected for the plain cells,
# Convolution for gluon.contrib's convolutional ones
Projection = Callable[[ModuleType, Any, Any, Weights, int, str], tuple[Any, Any]]


def is_symbol(x: Any) -> bool:
    """Whether ``x`` is a Symbol or a non-empty list whose first item is one."""
    from ..symbolic import has_symbol

    if isinstance(x, (list, tuple)):
        return bool(x) and has_symbol((x[0],))
    return has_symbol((x,))


def activation(F: ModuleType, x: Any, act: str | Callable[..., Any], name: str | None) -> Any:
    """``act`` applied to ``x``: a name is MXNet's ``Activation`` act_type, else a callable of F."""
    if isinstance(act, str):
        return F.Activation(x, act_type=act, name=name)
    return act(x, name=name) if name else act(x)


def _projections(F: ModuleType, x: Any, h: Any, w: Weights, rows: int, prefix: str) -> tuple[Any, Any]:
    i2h = F.FullyConnected(data=x, weight=w[0], bias=w[1], num_hidden=rows, name=prefix + "i2h")
    h2h = F.FullyConnected(data=h, weight=w[2], bias=w[3], num_hidden=rows, name=prefix + "h2h")
    return i2h, h2h


def rnn_step(F: ModuleType, x: Any, states: Sequence[Any], w: Weights, hidden: int,
             act: str | Callable[..., Any], prefix: str,
             project: Projection = _projections) -> tuple[Any, list[Any]]:
    """``out = act(W_i x + b_i + W_h h + b_h)``; states ``[out]``."""
    i2h, h2h = project(F, x, states[0], w, hidden, prefix)
    out = activation(F, i2h + h2h, act, prefix + "out")
    return out, [out]


def lstm_step(F: ModuleType, x: Any, states: Sequence[Any], w: Weights, hidden: int,
              act: str | Callable[..., Any], rec_act: str | Callable[..., Any],
              prefix: str, project: Projection = _projections,
              out_name: str = "out") -> tuple[Any, list[Any]]:
    """One LSTM step; states ``[h, c]``; ``h`` is named ``<prefix><out_name>``."""
    i2h, h2h = project(F, x, states[0], w, 4 * hidden, prefix)
    gates = F.SliceChannel(F.elemwise_add(i2h, h2h, name=prefix + "plus0"), num_outputs=4,
                           name=prefix + "slice")
    in_gate = activation(F, gates[0], rec_act, prefix + "i")
    forget_gate = activation(F, gates[1], rec_act, prefix + "f")
    in_transform = activation(F, gates[2], act, prefix + "c")
    out_gate = activation(F, gates[3], rec_act, prefix + "o")
    next_c = F.elemwise_add(F.elemwise_mul(forget_gate, states[1], name=prefix + "mul0"),
                            F.elemwise_mul(in_gate, in_transform, name=prefix + "mul1"),
                            name=prefix + "state")
    next_h = F.elemwise_mul(out_gate, activation(F, next_c, act, prefix + "activation0"),
                            name=prefix + out_name)
    return next_h, [next_h, next_c]


def gru_step(F: ModuleType, x: Any, states: Sequence[Any], w: Weights, hidden: int,
             act: str | Callable[..., Any], rec_act: str | Callable[..., Any],
             prefix: str, project: Projection = _projections) -> tuple[Any, list[Any]]:
    """One GRU step: ``n = act(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``."""
    h = states[0]
    i2h, h2h = project(F, x, h, w, 3 * hidden, prefix)
    i_r, i_z, i_n = F.SliceChannel(i2h, num_outputs=3, name=prefix + "i2h_slice")
    h_r, h_z, h_n = F.SliceChannel(h2h, num_outputs=3, name=prefix + "h2h_slice")
    reset = activation(F, F.elemwise_add(i_r, h_r, name=prefix + "plus0"), rec_act, prefix + "r_act")
    update = activation(F, F.elemwise_add(i_z, h_z, name=prefix + "plus1"), rec_act, prefix + "z_act")
    new = activation(F, F.elemwise_add(i_n, F.elemwise_mul(reset, h_n, name=prefix + "mul0"),
                                       name=prefix + "plus2"), act, prefix + "h_act")
    next_h = F.elemwise_add(F.elemwise_mul(1.0 - update, new, name=prefix + "mul1"),
                            F.elemwise_mul(update, h, name=prefix + "mul2"), name=prefix + "out")
    return next_h, [next_h]


def batch_zeros(F: ModuleType, shape: Sequence[int], like: Any, batch_axis: int, name: str | None,
                dtype: Any = None, state_axis: int = 0) -> Any:
    """Zeros of ``shape`` whose batch dimension (``state_axis``) is that of ``like`` along ``batch_axis``.

    MXNet's cells make their default begin states with ``zeros(shape=(0, hidden))`` and let
    shape inference fill the 0 backwards from the step's other operand; graphs here infer
    forwards, so the state takes its batch size from the input it meets.
    """
    kw: dict[str, Any] = {} if dtype is None else {"dtype": dtype}
    one = F.zeros(shape=tuple(1 if i == state_axis else int(s) for i, s in enumerate(shape)), **kw)
    return F.broadcast_like(one, like, lhs_axes=(state_axis,), rhs_axes=(batch_axis,), name=name)
