"""``SymbolBlock``: a symbolic graph (``mx.sym``, or MXNet's ``-symbol.json``) as a Gluon block.

The graph's arguments other than its inputs become the block's parameters (named as in the
graph; shared with ``params`` where given), its auxiliary states parameters without gradient.
The block runs the graph with the executor's plan on the parameters' tensors, so autograd,
Trainer and every KVStore work with it as with any other block.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch

from .. import autograd
from ..base import MXNetError
from ..executor import _Plan
from ..symbol import Group, Symbol
from ..symbol import load as load_symbol
from ..symbol import var as sym_var
from .block import HybridBlock
from .parameter_core import GluonUsageError, Parameter
from .parameter_dict import ParameterDict
from .symbolic import has_symbol

__all__ = ["SymbolBlock"]

_AUX_INIT = {'["zero", {}]': "zeros", '["one", {}]': "ones"}


def _common_prefix(names: Sequence[str]) -> str:
    if not names:
        return ""
    prefix = os.path.commonprefix(list(names))
    return prefix if all(len(n) > len(prefix) for n in names) else ""


class SymbolBlock(HybridBlock):
    """Run ``outputs`` (a Symbol or list of Symbols) as a block taking ``inputs`` (variables)."""

    _graph: Symbol
    _plan: _Plan | None
    _arg_names: list[str]
    _aux_names: list[str]
    _input_names: list[str]
    _by_name: dict[str, Parameter]

    def __init__(
        self,
        outputs: Symbol | Sequence[Symbol],
        inputs: Symbol | Sequence[Symbol],
        params: ParameterDict | None = None,
    ) -> None:
        super().__init__(prefix="", params=None)
        if isinstance(outputs, (list, tuple)):
            outputs = Group(list(outputs))
        if not isinstance(outputs, Symbol):
            raise TypeError(
                f"SymbolBlock: outputs must be a Symbol or a list of Symbols, got {type(outputs).__name__}"
            )
        ins = list(inputs) if isinstance(inputs, (list, tuple)) else list(inputs)  # a Symbol iterates outputs
        for s in ins:
            if not isinstance(s, Symbol) or len(s) != 1 or not s._outputs[0][0].is_variable:
                raise TypeError(f"SymbolBlock: inputs must be variables (mx.sym.var), got {s!r}")
        self._input_names = [str(s.name) for s in ins]
        arg_names = outputs.list_arguments()
        aux_names = outputs.list_auxiliary_states()
        missing = [n for n in self._input_names if n not in arg_names + aux_names]
        if missing:
            raise MXNetError(
                f"SymbolBlock: inputs {missing} are not arguments of the graph; its arguments "
                f"are {arg_names[:20]}"
            )
        object.__setattr__(self, "_graph", outputs)
        object.__setattr__(self, "_arg_names", arg_names)
        object.__setattr__(self, "_aux_names", aux_names)
        object.__setattr__(self, "_plan", None)
        given = dict(params.items()) if params is not None else {}
        attrs = outputs.attr_dict()
        names = [n for n in arg_names + aux_names if n not in self._input_names]
        strip = len(_common_prefix(names))
        self._by_name: dict[str, Parameter] = {}
        for n in names:
            stype = attrs.get(n, {}).get("__storage_type__", "0")
            if stype not in ("0", "-1"):  # MXNet's rule (asserted): a graph runs on dense parameters
                raise GluonUsageError(f"SymbolBlock: parameter {n!r} has a sparse storage type "
                                      f"(__storage_type__={stype}); SymbolBlock supports dense parameters "
                                      "only: declare it without stype, or use a Block with row_sparse_data")
            p = given.get(n)
            if p is None:
                aux = n in aux_names
                init = attrs.get(n, {}).get("__init__")
                p = Parameter(
                    n,
                    grad_req="null" if aux else "write",
                    allow_deferred_init=True,
                    init=_AUX_INIT.get(init, init) if init else None,
                )
                p._named = True
            setattr(self, n[strip:] or n, p)
            self._by_name[n] = p

    def forward(self, *args: Any) -> Any:
        if len(args) != len(self._input_names):
            raise MXNetError(
                f"SymbolBlock takes {len(self._input_names)} inputs {self._input_names}, got {len(args)}"
            )
        if has_symbol(args):
            return self._graph(**dict(zip(self._input_names, args, strict=True)))
        self._finish_shapes(args)
        plan = self._plan
        if plan is None:
            plan = _Plan(self._graph, self._arg_names, self._aux_names, None)
            object.__setattr__(self, "_plan", plan)
        vals: list[Any] = [None] * plan.nslots
        inputs = dict(zip(self._input_names, args, strict=True))
        for i, n in enumerate(self._arg_names + self._aux_names):
            vals[i] = inputs[n] if n in inputs else self._by_name[n].data()
        plan.run(vals, autograd.is_training())
        outs = [vals[s] for s in plan.heads]
        return outs[0] if len(outs) == 1 else outs

    def _finish_shapes(self, args: tuple[Any, ...]) -> None:
        pending = [p for p in self._by_name.values() if p._data is None]
        if not pending:
            return
        from ..symbol._infer import infer_node_shapes

        given = {
            n: tuple(a.shape)
            for n, a in zip(self._input_names, args, strict=True)
            if isinstance(a, torch.Tensor)
        }
        shapes, _, _ = infer_node_shapes(self._graph, given)
        for name, p in self._by_name.items():
            if p._data is None and name in shapes:
                p.infer_shape(shapes[name])

    @staticmethod
    def imports(
        symbol_file: str,
        input_names: str | Sequence[str],
        param_file: str | None = None,
        ctx: Any = None,
        allow_missing: bool = False,
        ignore_extra: bool = False,
    ) -> SymbolBlock:
        """A SymbolBlock of ``symbol_file`` (MXNet's ``-symbol.json``) with parameters from
        ``param_file`` (MXNet's ``.params``, ``arg:``/``aux:`` names, or safetensors)."""
        sym = load_symbol(symbol_file)
        names = [input_names] if isinstance(input_names, str) else list(input_names)
        block = SymbolBlock(sym, [sym_var(n) for n in names])
        if param_file is not None:
            block.collect_params().load(
                param_file, ctx=ctx, allow_missing=allow_missing, ignore_extra=ignore_extra
            )
        return block
