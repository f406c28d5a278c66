"""Tensor parallelism for the fused recurrent layers (Gluon ``RNN``/``LSTM``/``GRU``): style ``"gates"``.

Each rank keeps, for every layer and direction, the rows of ``i2h_weight``, ``h2h_weight`` and both
biases that compute its ``hidden_size / tp`` hidden units, in every gate (LSTM 4, GRU 3, RNN 1):
rows ``g*H + [r*H/tp, (r+1)*H/tp)`` for each gate ``g``.  ``h2h_weight`` keeps all its columns,
since every hidden unit's gates read the whole previous recurrent state; so each time step computes
this rank's gates and its slice of ``h`` (and of the LSTM cell ``c``, which never leaves the rank).

Without projection, **one all-gather per layer and time step** (both directions in one message)
rebuilds the whole ``h`` for the next step and for the layer's output; backward, each all-gather
becomes one reduce-scatter (the partial gradients of ``h`` from every rank's gates, summed onto
its owner).  An LSTM with ``projection_size`` P (LSTMP: ``r = W_hr (o * tanh(c))``, and ``r`` is the
recurrent state and the output) also keeps the *columns* of ``h2r_weight`` (P, H) of its hidden
units: each step's partial projection ``W_hr[:, own] h[own]`` is summed by **one all-reduce per
layer and time step** of ``N * directions * P`` elements, whose backward is an all-reduce of the
partial gradients of ``r``.  The layer's input gradient takes one all-reduce per forward
(Megatron's column-layer input).  So per micro-batch: ``num_layers * T`` collectives forward, as
many backward (:func:`step_collectives` names them), and one all-reduce of the input gradient.

Gradient bookkeeping: inside the layer, the gradient of a gathered or all-reduced (replicated)
tensor is *partial* on each rank (only its own gates read it), which the collective's backward
sums.  The layer's output and final states are read by replicated layers, whose gradient is the
same on every rank; they pass through :class:`_OwnSliceGrad`, which keeps one share of the
features of that gradient on each rank (the shares partition the features), so the backward's sum
counts it exactly once.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..base import MXNetError

__all__ = ["is_recurrent", "gates_problem", "gate_shards", "gates_forward", "collectives_per_step",
           "step_collectives"]


def is_recurrent(block: Any) -> bool:
    from ..gluon.rnn.rnn_layer import _RNNLayer

    return isinstance(block, _RNNLayer)


def gates_problem(block: Any, tp: int) -> str | None:
    """Why ``block`` (a recurrent layer) cannot be split by hidden units over ``tp`` ranks, or None."""
    if block._dropout > 0:
        return ("has dropout between its layers: the mask would have to agree on every tensor-parallel "
                "rank; use dropout=0 (or a Dropout layer after it)")
    if block._use_sequence_length:
        return "uses sequence_length, which a chain of layers cannot pass"
    if block._hidden_size % tp:
        return f"has hidden_size={block._hidden_size}, not divisible by tp={tp}"
    return None


def gate_shards(block: Any) -> list[tuple[Any, int, int]]:
    """``(Parameter, dim, groups)`` of every parameter ``"gates"`` splits by hidden units (every layer and
    direction): the gate rows (dim 0, one block per gate) and the LSTMP's ``h2r_weight`` columns (dim 1)."""
    return [(block._param(n), 1, 1) if n.endswith("h2r_weight") else (block._param(n), 0, block._gates)
            for n in block._flat_names]


def collectives_per_step(block: Any) -> tuple[int, int]:
    """(forward, backward) collectives per time step of one micro-batch: one of each per layer, each
    carrying ``N * directions * out`` elements (``out`` = projection_size, else hidden_size / tp from
    each rank); :func:`step_collectives` says which."""
    return block._num_layers, block._num_layers


def step_collectives(block: Any) -> tuple[str, str]:
    """The kinds of the per-step collectives: ('all-gather', 'reduce-scatter') of ``h``, or with a
    projection ('all-reduce', 'all-reduce') of the partial projections ``r``."""
    if block._projection_size is not None:
        return "all-reduce", "all-reduce"
    return "all-gather", "reduce-scatter"


class _OwnSliceGrad(torch.autograd.Function):
    """Identity forward; backward keeps only this rank's share of the features of a replicated gradient
    (every rank holds the same one), so that the collective's backward sums it once."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(mask)
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        (mask,) = ctx.saved_tensors
        return grad * mask, None


def _gather(local: torch.Tensor, mesh: Any) -> torch.Tensor:
    """``local`` (D, N, H/tp) of every rank -> (D, N, H): autograd's all-gather (reduce-scatter back)."""
    import torch.distributed._functional_collectives as fc

    tp = mesh.size()
    gather = getattr(fc, "all_gather_single_autograd", None) or fc.all_gather_tensor_autograd
    every = gather(local.contiguous(), 0, mesh)  # (tp * D, N, H/tp), rank-major
    d, n, h = local.shape
    return every.view(tp, d, n, h).permute(1, 2, 0, 3).reshape(d, n, tp * h)


class _AllReduceSum(torch.autograd.Function):
    """Sum over the group forward; backward, the sum of every rank's partial gradient.  (Our own: torch's
    functional ``all_reduce`` has autograd only in recent releases, and the project supports torch 2.4.)"""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:  # type: ignore[override]
        import torch.distributed as dist

        ctx.group = group
        out = x.contiguous().clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        import torch.distributed as dist

        total = grad.contiguous().clone()
        dist.all_reduce(total, group=ctx.group)
        return total, None


def _own_mask(full: int, dirs: int, tp: int, rank: int, like: torch.Tensor) -> torch.Tensor:
    """1 on this rank's share (its hidden units when ``full`` is hidden_size) of each direction's block of
    ``full`` features, else 0; the shares of the ranks partition the features even when tp does not divide."""
    base, extra = divmod(full, tp)  # as torch.tensor_split: the first ``extra`` shares one longer
    lo, n = rank * base + min(rank, extra), base + (rank < extra)
    m = torch.zeros(dirs, full, dtype=like.dtype, device=like.device)
    m[:, lo:lo + n] = 1
    return m.reshape(dirs * full)


def _cell(mode: str, gx: torch.Tensor, h_full: torch.Tensor, h_loc: torch.Tensor, c_loc: torch.Tensor | None,
          w: list[torch.Tensor], clip: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One step of this rank's hidden units: ``gx`` its input gates, ``h_full`` the whole previous h."""
    gh = F.linear(h_full, w[1], w[3])
    if mode == "lstm":
        assert c_loc is not None
        i, f, g, o = (gx + gh).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c_loc + torch.sigmoid(i) * torch.tanh(g)
        if clip is not None:
            lo, hi, nan = clip
            if nan:
                c = torch.nan_to_num(c, nan=lo, posinf=hi, neginf=lo)
            c = c.clamp(lo, hi)
        return torch.sigmoid(o) * torch.tanh(c), c
    if mode == "gru":
        xr, xz, xn = gx.chunk(3, dim=-1)
        hr, hz, hn = gh.chunk(3, dim=-1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return (1 - z) * n + z * h_loc, None
    pre = gx + gh
    return (torch.relu(pre) if mode == "rnn_relu" else torch.tanh(pre)), None


def gates_forward(self: Any, inputs: torch.Tensor, states: Any = None,
                  sequence_length: Any = None) -> Any:
    """The layer's forward on this rank's hidden units (bound as the sharded layer's ``forward``)."""
    from ..gluon.rnn.base_cell import _check_states
    from .tp_collectives import copy_in

    name = type(self).__name__
    if sequence_length is not None:
        raise MXNetError(f"{name} split by tensor parallelism ('gates') does not take sequence_length")
    if not isinstance(inputs, torch.Tensor) or inputs.dim() != 3:
        got = tuple(inputs.shape) if isinstance(inputs, torch.Tensor) else type(inputs).__name__
        raise ValueError(f"{name} expects a 3-d input in layout {self._layout}, got {got}")
    mesh, tp, rank = self._tp_mesh, self._tp_size, self._tp_rank
    x = inputs if self._layout == "TNC" else inputs.transpose(0, 1)  # (T, N, C)
    steps, batch = x.shape[0], x.shape[1]
    hid, loc, dirs, lstm = self._hidden_size, self._hidden_size // tp, self._dir, self._mode == "lstm"
    proj = self._projection_size  # LSTMP: the recurrent state and output r = W_hr h, all-reduced each step
    out_size, per = (proj, 5) if proj is not None else (hid, 4)
    skip_states = states is None
    if skip_states:
        states = self.begin_state(batch, device=x.device, dtype=x.dtype)
    else:
        states = [copy_in(s, mesh) for s in _check_states(self, states, batch)]
    mine = slice(rank * loc, (rank + 1) * loc)
    clip = None if self._clip is None else (*self._clip, self._clip_nan)
    group = mesh.get_group() if proj is not None else None
    layer_in = copy_in(x, mesh)  # identity forward; the partial input gradients all-reduced backward
    h_last: list[torch.Tensor] = []
    c_last: list[torch.Tensor] = []
    for layer in range(self._num_layers):
        ks = [layer * dirs + d for d in range(dirs)]
        ws = [[self._param(n).data() for n in self._flat_names[k * per:(k + 1) * per]] for k in ks]
        gxs = [F.linear(layer_in, w[0], w[2]) for w in ws]  # (T, N, gates * H/tp): all steps at once
        h_full = states[0][ks[0]:ks[-1] + 1]  # (D, N, out_size)
        h_loc: list[Any] = [h_full[d, :, mine] if proj is None else None for d in range(dirs)]  # GRU reads it
        c_loc: list[Any] = [states[1][k][:, mine] for k in ks] if lstm else [None] * dirs
        outs: list[list[torch.Tensor]] = [[torch.empty(0)] * steps for _ in range(dirs)]
        for t in range(steps):
            for d in range(dirs):
                td = t if d == 0 else steps - 1 - t
                h_loc[d], c_loc[d] = _cell(self._mode, gxs[d][td], h_full[d], h_loc[d], c_loc[d], ws[d], clip)
            if proj is None:  # the step's one collective
                h_full = _gather(torch.stack(h_loc, 0), mesh)
            else:  # this rank's units' part of every projection, summed
                h_full = _AllReduceSum.apply(torch.stack([F.linear(h, w[4]) for h, w in zip(h_loc, ws)], 0),
                                             group)
            for d in range(dirs):
                outs[d][t if d == 0 else steps - 1 - t] = h_full[d]
        layer_in = torch.cat([torch.stack(o, 0) for o in outs], dim=-1)  # (T, N, D*out_size)
        h_last.extend(h_full[d] for d in range(dirs))
        if lstm:
            c_last.extend(c_loc)
    mask = _own_mask(out_size, dirs, tp, rank, layer_in)
    out = _OwnSliceGrad.apply(layer_in, mask)
    out = out if self._layout == "TNC" else out.transpose(0, 1).contiguous()  # as the fused kernel's
    if skip_states:
        return out
    new_states = [_OwnSliceGrad.apply(torch.stack(h_last, 0), _own_mask(out_size, 1, tp, rank, layer_in))]
    if lstm:  # the cell state never left its rank: one all-gather, at the end
        one = _own_mask(hid, 1, tp, rank, layer_in)
        new_states.append(_OwnSliceGrad.apply(_gather(torch.stack(c_last, 0), mesh), one))
    return out, new_states
