"""MXNet's fused ``RNN`` operator (modes ``rnn_relu``, ``rnn_tanh``, ``lstm``, ``gru``) on torch's
fused kernels.

MXNet packs every weight of the stack into one flat ``parameters`` vector: first all weights,
layer by layer and direction by direction (``i2h``, ``h2h`` and, for an LSTM with
``projection_size``, ``h2r``), then all biases in the same order (``i2h``, ``h2h``).  Gate orders
agree with torch's (LSTM i, f, g, o; GRU r, z, n), and the data layout is MXNet's TNC, torch's
sequence-first.

LSTM extras, with MXNet 1.9's argument names: ``projection_size`` (``h = W_hr (o * tanh(c))``; the
hidden state and the outputs get that size), ``lstm_state_clip_min``/``lstm_state_clip_max``
(the cell state is clipped after every step; ``lstm_state_clip_nan`` also maps NaN to the bounds)
and, for every mode, ``use_sequence_length`` with a ``sequence_length`` input (one length per
sample: outputs past it are zero and the returned states are those of its last step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from ..base import MXNetError
from ..nd._nn import rnn_sequence_lengths

__all__ = ["GATES", "rnn_inputs", "rnn_outputs", "param_size", "rnn_shapes", "rnn_compile"]

Tensor = torch.Tensor
GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def _given(value: Any) -> bool:
    return value is not None and value != "None"


@dataclass(frozen=True)
class _Config:
    """The parsed attributes of one RNN node."""

    mode: str
    hidden: int
    layers: int
    dirs: int
    projection: int | None
    clip: tuple[float, float] | None
    clip_nan: bool
    use_sequence_length: bool
    p: float
    state_outputs: bool

    @property
    def gates(self) -> int:
        return GATES[self.mode]

    @property
    def out_size(self) -> int:
        """Features of ``h`` and of each direction's output."""
        return self.projection or self.hidden

    def width(self, layer: int, input_size: int) -> int:
        return input_size if layer == 0 else self.out_size * self.dirs


def _config(attrs: dict[str, Any]) -> _Config:
    mode = str(attrs.get("mode", ""))
    if mode not in GATES:
        raise MXNetError(f"RNN: mode must be one of {sorted(GATES)}, got {mode!r}")
    projection = int(attrs["projection_size"]) if _given(attrs.get("projection_size")) else None
    lo, hi = attrs.get("lstm_state_clip_min"), attrs.get("lstm_state_clip_max")
    clip = None
    if _given(lo) or _given(hi):
        if not (_given(lo) and _given(hi)):
            raise MXNetError(
                f"RNN: give lstm_state_clip_min and lstm_state_clip_max together, got {lo!r} and {hi!r}"
            )
        clip = (float(lo), float(hi))  # type: ignore[arg-type]
        if clip[0] > clip[1]:
            raise MXNetError(f"RNN: lstm_state_clip_min ({clip[0]}) > lstm_state_clip_max ({clip[1]})")
    if mode != "lstm" and (projection is not None or clip is not None):
        raise MXNetError(f"RNN: projection_size and lstm_state_clip_* need mode='lstm', got mode={mode!r}")
    if projection is not None and projection <= 0:
        raise MXNetError(f"RNN: projection_size must be a positive int, got {projection}")
    return _Config(
        mode=mode,
        hidden=int(attrs["state_size"]),
        layers=int(attrs.get("num_layers", 1)),
        dirs=2 if attrs.get("bidirectional", False) else 1,
        projection=projection,
        clip=clip,
        clip_nan=bool(attrs.get("lstm_state_clip_nan", False)),
        use_sequence_length=bool(attrs.get("use_sequence_length", False)),
        p=float(attrs.get("p", 0.0)),
        state_outputs=bool(attrs.get("state_outputs", False)),
    )


def rnn_inputs(attrs: dict[str, Any]) -> list[str]:
    cfg = _config(attrs)
    names = ["data", "parameters", "state"] + (["state_cell"] if cfg.mode == "lstm" else [])
    return names + (["sequence_length"] if cfg.use_sequence_length else [])


def rnn_outputs(attrs: dict[str, Any]) -> list[str]:
    if not attrs.get("state_outputs", False):
        return ["output"]
    lstm = _config(attrs).mode == "lstm"
    return ["output", "state_output", "statecell_output"] if lstm else ["output", "state_output"]


def _sizes(cfg: _Config, input_size: int) -> tuple[list[list[tuple[int, ...]]], list[tuple[int, ...]]]:
    """Shapes of the weights of each (layer, direction) in packing order, and of its two biases."""
    rows = cfg.gates * cfg.hidden
    weights: list[list[tuple[int, ...]]] = []
    for layer in range(cfg.layers):
        own: list[tuple[int, ...]] = [(rows, cfg.width(layer, input_size)), (rows, cfg.out_size)]
        if cfg.projection is not None:
            own.append((cfg.projection, cfg.hidden))
        weights += [own] * cfg.dirs
    return weights, [(rows,), (rows,)]


def param_size(attrs: dict[str, Any], input_size: int) -> int:
    weights, biases = _sizes(_config(attrs), input_size)
    per_bias = sum(math.prod(b) for b in biases)
    return sum(sum(math.prod(w) for w in own) + per_bias for own in weights)


def rnn_shapes(attrs: dict[str, Any], data: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    if len(data) != 3:
        raise MXNetError(f"RNN: data must be (seq_len, batch, input_size), got shape {data}")
    cfg = _config(attrs)
    n = cfg.layers * cfg.dirs
    return {
        "parameters": (param_size(attrs, data[2]),),
        "state": (n, data[1], cfg.out_size),
        "state_cell": (n, data[1], cfg.hidden),
        "sequence_length": (data[1],),
    }


def _unpack(flat: Tensor, cfg: _Config, input_size: int) -> list[list[Tensor]]:
    """Per (layer, direction): torch's ``[w_ih, w_hh, b_ih, b_hh(, w_hr)]`` as views of ``flat``."""
    weights, biases = _sizes(cfg, input_size)
    pos = 0

    def take(shape: tuple[int, ...]) -> Tensor:
        nonlocal pos
        n = math.prod(shape)
        view = flat[pos : pos + n].view(shape)
        pos += n
        return view

    own_weights = [[take(s) for s in own] for own in weights]
    out = []
    for ws in own_weights:
        b = [take(s) for s in biases]
        out.append([ws[0], ws[1], b[0], b[1], *ws[2:]])
    if pos != flat.numel():
        raise MXNetError(f"RNN: parameters has {flat.numel()} entries, the configuration needs {pos}")
    return out


def _lengths(seq: Tensor, steps: int, batch: int) -> Tensor:
    return rnn_sequence_lengths(seq, steps, batch, 0, "RNN", MXNetError)  # MXNet allows length 0


# ---- the fused kernels -----------------------------------------------------------------------
def _fused(
    cfg: _Config, data: Tensor, states: list[Tensor], weights: list[Tensor], lens: Tensor | None, train: bool
) -> list[Tensor]:
    fn = getattr(torch._VF, cfg.mode)
    lstm = cfg.mode == "lstm"
    common = (weights, True, cfg.layers, cfg.p, train, cfg.dirs == 2)
    if lens is None:
        hx = (states[0], states[1]) if lstm else states[0]
        return list(fn(data, hx, *common, False))
    steps, batch = data.shape[0], data.shape[1]
    # the kernel takes no empty sequence: a length-0 sample runs one step, then is masked back
    empty = lens == 0
    packed = pack_padded_sequence(data, lens.clamp(min=1), enforce_sorted=False)
    order, unorder = packed.sorted_indices, packed.unsorted_indices
    assert order is not None and unorder is not None  # enforce_sorted=False sorts
    hs = [s.index_select(1, order) for s in states]
    res = fn(packed.data, packed.batch_sizes, (hs[0], hs[1]) if lstm else hs[0], *common)
    out, _ = pad_packed_sequence(
        PackedSequence(res[0], packed.batch_sizes, order, unorder), total_length=steps
    )
    new = [s.index_select(1, unorder) for s in res[1:]]
    if bool(empty.any()):
        keep = (~empty).to(data.device)
        out = out * keep.view(1, batch, 1).to(out.dtype)
        new = [torch.where(keep.view(1, batch, 1), s, s0) for s, s0 in zip(new, states, strict=True)]
    return [out, *new]


# ---- LSTM step by step (state clipping; projections no fused kernel takes) ---------------------
def _lstm_step(cfg: _Config, gx: Tensor, h: Tensor, c: Tensor, w: list[Tensor]) -> tuple[Tensor, Tensor]:
    """One time step of one direction: ``gx`` is the input's share of the gates (with its bias)."""
    i, f, g, o = (gx + F.linear(h, w[1], w[3])).chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    if cfg.clip is not None:
        lo, hi = cfg.clip
        if cfg.clip_nan:
            c = torch.nan_to_num(c, nan=lo, posinf=hi, neginf=lo)
        c = c.clamp(lo, hi)
    h = torch.sigmoid(o) * torch.tanh(c)
    return (F.linear(h, w[4]) if cfg.projection is not None else h), c


def _lstm_direction(
    cfg: _Config, x: Tensor, h: Tensor, c: Tensor, w: list[Tensor], valid: Tensor | None, reverse: bool
) -> tuple[Tensor, Tensor, Tensor]:
    """Run one direction of one layer over ``x`` (T, N, C); ``valid`` (T, N, 1) masks padded steps."""
    gx = F.linear(x, w[0], w[2])  # the input's gate share of every step in one product
    outs: list[Tensor] = [x.new_empty(0)] * x.shape[0]
    for t in reversed(range(x.shape[0])) if reverse else range(x.shape[0]):
        h_new, c_new = _lstm_step(cfg, gx[t], h, c, w)
        if valid is None:
            h, c, outs[t] = h_new, c_new, h_new
        else:
            m = valid[t]
            h, c = torch.where(m, h_new, h), torch.where(m, c_new, c)
            outs[t] = h_new * m.to(h_new.dtype)
    return torch.stack(outs, 0), h, c


def _lstm_steps(
    cfg: _Config,
    data: Tensor,
    states: list[Tensor],
    weights: list[list[Tensor]],
    lens: Tensor | None,
    train: bool,
) -> list[Tensor]:
    valid = None
    if lens is not None:
        steps = torch.arange(data.shape[0], device=data.device)
        valid = (steps[:, None] < lens.to(data.device)[None, :]).unsqueeze(-1)
    x = data
    hs: list[Tensor] = []
    cs: list[Tensor] = []
    for layer in range(cfg.layers):
        outs = []
        for d in range(cfg.dirs):
            k = layer * cfg.dirs + d
            y, h, c = _lstm_direction(cfg, x, states[0][k], states[1][k], weights[k], valid, d == 1)
            outs.append(y)
            hs.append(h)
            cs.append(c)
        x = torch.cat(outs, dim=-1) if cfg.dirs == 2 else outs[0]
        if train and cfg.p > 0.0 and layer < cfg.layers - 1:
            x = F.dropout(x, cfg.p, training=True)
    return [x, torch.stack(hs, 0), torch.stack(cs, 0)]


def _batch_state(state: Tensor, data: Tensor) -> Tensor:
    """``state``, or zeros for MXNet's batch-0 begin state: graphs exported by MXNet's Gluon RNN layers
    start from ``zeros(shape=(layers * dirs, 0, size))``, 0 standing for the batch size MXNet infers."""
    if state.dim() == 3 and state.shape[1] == 0 and data.shape[1] != 0:
        return state.new_zeros(state.shape[0], data.shape[1], state.shape[2])
    return state


def rnn_compile(attrs: dict[str, Any]) -> Any:
    cfg = _config(attrs)
    # torch's kernels take projections smaller than the hidden size only
    stepwise = cfg.clip is not None or (cfg.projection is not None and cfg.projection >= cfg.hidden)
    num_states = 2 if cfg.mode == "lstm" else 1

    def run(ins: list[Any], train: bool) -> Any:
        data, flat = ins[0], ins[1]
        states = [_batch_state(s, data) for s in ins[2 : 2 + num_states]]
        lens = None
        if cfg.use_sequence_length:
            lens = _lengths(ins[2 + num_states], data.shape[0], data.shape[1])
        per_layer = _unpack(flat, cfg, data.shape[2])
        if stepwise:
            res = _lstm_steps(cfg, data, states, per_layer, lens, train)
        else:
            res = _fused(cfg, data, states, [w for own in per_layer for w in own], lens, train)
        return res if cfg.state_outputs else res[:1]

    return run
