"""``mx.nd.CachedOp``: a symbol graph prepared once and called like an operator on arrays."""

from __future__ import annotations

from typing import Any

import torch

from .._recording import is_training  # autograd's train mode, kept below the operators
from ..base import MXNetError
from ._common import write_out

__all__ = ["CachedOp"]


class CachedOp:
    """``CachedOp(sym)(*inputs, out=None)``: run ``sym`` on ``inputs`` given in the order of
    ``sym.list_inputs()`` (arguments and auxiliary states as they appear in the graph).

    The call joins autograd when recording, so gradients reach the inputs; outputs are one
    array, or a list for a graph with several. ``flags`` (MXNet's static_alloc ...) are
    accepted and change nothing: the plan is built once either way.
    """

    def __init__(self, sym: Any, flags: Any = ()) -> None:
        # the Symbol builds its plan (Symbol.cached_op_plan): arrays do not import the symbolic layer
        if not callable(getattr(sym, "cached_op_plan", None)):
            raise TypeError(f"CachedOp needs a Symbol, got {type(sym).__name__}")
        self._sym = sym
        self._inputs = sym.list_inputs()
        self._args = sym.list_arguments()
        self._aux = sym.list_auxiliary_states()
        self._plan: Any = None
        self.flags = dict(flags) if flags else {}

    def __call__(self, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        kwargs.pop("name", None)
        if kwargs:
            raise TypeError(f"CachedOp got unexpected keyword arguments {sorted(kwargs)}")
        if len(args) != len(self._inputs):
            raise MXNetError(f"CachedOp takes {len(self._inputs)} inputs {self._inputs}, got {len(args)}")
        for name, a in zip(self._inputs, args):
            if not isinstance(a, torch.Tensor):
                raise TypeError(f"CachedOp input {name!r} must be an array, got {type(a).__name__}")
        if self._plan is None:
            self._plan = self._sym.cached_op_plan()
        given = dict(zip(self._inputs, args))
        vals: list[Any] = [None] * self._plan.nslots
        for i, n in enumerate(self._args + self._aux):
            vals[i] = given[n]
        self._plan.run(vals, is_training())
        outs = [vals[s] for s in self._plan.heads]
        result = outs[0] if len(outs) == 1 else outs
        return result if out is None else write_out(result, out, "CachedOp")
