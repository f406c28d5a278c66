"""MXNet's fused ``RNN`` operator (modes ``rnn_relu``, ``rnn_tanh``, ``lstm``, ``gru``) on torch's
fused kernels.

MXNet packs every weight of the stack into one flat ``parameters`` vector: first all weights,
layer by layer and direction by direction (``i2h`` then ``h2h``), then all biases in the same
order.  Gate orders agree with torch's (LSTM i, f, g, o; GRU r, z, n), and the data layout is
MXNet's TNC, torch's sequence-first.
"""

from __future__ import annotations

from typing import Any

import torch

from ..base import MXNetError

__all__ = ["GATES", "rnn_inputs", "rnn_outputs", "param_size", "rnn_shapes", "rnn_compile"]

GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}
_VF_MODE = {"rnn_relu": "rnn_relu", "rnn_tanh": "rnn_tanh", "lstm": "lstm", "gru": "gru"}


def _mode(attrs: dict[str, Any]) -> str:
    mode = str(attrs.get("mode", ""))
    if mode not in GATES:
        raise MXNetError(f"RNN: mode must be one of {sorted(GATES)}, got {mode!r}")
    return mode


def rnn_inputs(attrs: dict[str, Any]) -> list[str]:
    names = ["data", "parameters", "state"]
    return names + ["state_cell"] if _mode(attrs) == "lstm" else names


def rnn_outputs(attrs: dict[str, Any]) -> list[str]:
    if not attrs.get("state_outputs", False):
        return ["output"]
    return (
        ["output", "state_output", "statecell_output"]
        if _mode(attrs) == "lstm"
        else ["output", "state_output"]
    )


def _dims(attrs: dict[str, Any]) -> tuple[int, int, int, int]:
    if attrs.get("projection_size") not in (None, "None"):
        raise MXNetError("RNN: projection_size is not supported")
    return (
        GATES[_mode(attrs)],
        int(attrs["state_size"]),
        int(attrs.get("num_layers", 1)),
        (2 if attrs.get("bidirectional", False) else 1),
    )


def param_size(attrs: dict[str, Any], input_size: int) -> int:
    g, h, layers, dirs = _dims(attrs)
    total = 0
    for layer in range(layers):
        width = input_size if layer == 0 else h * dirs
        total += dirs * (g * h * (width + h) + 2 * g * h)
    return total


def rnn_shapes(attrs: dict[str, Any], data: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    if len(data) != 3:
        raise MXNetError(f"RNN: data must be (seq_len, batch, input_size), got shape {data}")
    _, h, layers, dirs = _dims(attrs)
    state = (layers * dirs, data[1], h)
    return {"parameters": (param_size(attrs, data[2]),), "state": state, "state_cell": state}


def _unpack(flat: torch.Tensor, attrs: dict[str, Any], input_size: int) -> list[torch.Tensor]:
    """torch's weight list (w_ih, w_hh, b_ih, b_hh per layer and direction) as views of ``flat``."""
    g, h, layers, dirs = _dims(attrs)
    weights: list[tuple[torch.Tensor, torch.Tensor]] = []
    pos = 0
    for layer in range(layers):
        width = input_size if layer == 0 else h * dirs
        for _ in range(dirs):
            wx = flat[pos : pos + g * h * width].view(g * h, width)
            pos += g * h * width
            wh = flat[pos : pos + g * h * h].view(g * h, h)
            pos += g * h * h
            weights.append((wx, wh))
    out: list[torch.Tensor] = []
    for wx, wh in weights:
        bx = flat[pos : pos + g * h]
        bh = flat[pos + g * h : pos + 2 * g * h]
        pos += 2 * g * h
        out += [wx, wh, bx, bh]
    if pos != flat.numel():
        raise MXNetError(f"RNN: parameters has {flat.numel()} entries, the configuration needs {pos}")
    return out


def rnn_compile(attrs: dict[str, Any]) -> Any:
    mode = _mode(attrs)
    _, _, layers, dirs = _dims(attrs)
    p = float(attrs.get("p", 0.0))
    fn = getattr(torch._VF, _VF_MODE[mode])
    state_outputs = bool(attrs.get("state_outputs", False))
    if attrs.get("use_sequence_length", False):
        raise MXNetError("RNN: use_sequence_length is not supported; mask the outputs with SequenceMask")

    def run(ins: list[Any], train: bool) -> Any:
        data, flat, state = ins[0], ins[1], ins[2]
        weights = _unpack(flat, attrs, data.shape[2])
        if mode == "lstm":
            out, hy, cy = fn(data, (state, ins[3]), weights, True, layers, p, train, dirs == 2, False)
            return [out, hy, cy] if state_outputs else [out]
        out, hy = fn(data, state, weights, True, layers, p, train, dirs == 2, False)
        return [out, hy] if state_outputs else [out]

    return run
