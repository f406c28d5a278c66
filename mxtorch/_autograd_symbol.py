"""``mx.autograd.get_symbol(x)``: the recorded computation that produced ``x`` as a Symbol.

MXNet keeps its own graph of recorded operators; here the record is torch's autograd graph,
read back node by node:

* a variable (``attach_grad``, a Parameter) is a graph variable: the parameter's name inside a
  hybridized block, else ``var0``, ``var1``... in the order met;
* a torch operation becomes the MXNet operator it computes (``MulBackward0`` with a Python
  scalar kept by torch: ``_mul_scalar``; ``AddmmBackward0``: ``dot`` + ``broadcast_add``...);
  values that were constant during recording are folded into the node, never arguments; an
  operation with no MXNet operator here, or whose constant operand torch did not keep (``x - 1``
  keeps no ``1``), becomes a ``_torch_op`` node naming it: inspectable, not runnable;
* a hybridized block called under ``record()`` is one ``_CachedOp`` node over its inputs and
  parameters, as in MXNet, or its graph inlined when it has at most ``inline_limit`` operators
  (``hybridize(inline_limit=...)``, MXNet's default 2); its inputs that were constant arrays
  become variables ``null0``, ``null1``... (MXNet's names for them).

:func:`mark_cached_call` is what ``HybridBlock.__call__`` runs under ``record()``: it tags the
output's graph node (``grad_fn.metadata``) with the block and its inputs, nothing more.
"""

from __future__ import annotations

import importlib
import numbers
import weakref
from collections.abc import Callable
from typing import Any

import torch

from . import autograd
from .base import MXNetError

__all__ = ["get_symbol", "mark_cached_call"]

_CACHED = "mxtorch.cached_op"  # grad_fn metadata: (weakref to block, inputs, {output_nr: block output})
_DEFAULT_INLINE_LIMIT = 2  # MXNet's hybridize(inline_limit=2)


def _metadata(node: Any) -> dict[str, Any]:
    return node.metadata  # type: ignore[no-any-return]  # a dict; torch's stubs call it a method


def mark_cached_call(block: Any, args: tuple[Any, ...], out: Any) -> None:
    """Tag the graph nodes of a hybridized block's outputs with the call (see the module doc)."""
    outs = [out] if isinstance(out, torch.Tensor) else list(out) if isinstance(out, (list, tuple)) else []
    inputs = tuple(a for a in args if isinstance(a, torch.Tensor))
    ref = weakref.ref(block)
    for i, o in enumerate(outs):
        if isinstance(o, torch.Tensor) and o.grad_fn is not None:
            md = _metadata(o.grad_fn)
            tag = md.get(_CACHED)
            if tag is not None and tag[0]() is block and tag[1] is inputs:
                tag[2][o.output_nr] = i
            else:
                md[_CACHED] = (ref, inputs, {o.output_nr: i}, len(outs))


def get_symbol(x: torch.Tensor) -> Any:
    """The recorded computation history of ``x`` as a Symbol (MXNet's ``autograd.get_symbol``)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"get_symbol: expected an array, got {type(x).__name__}")
    if x.grad_fn is None and not x.requires_grad:
        raise MXNetError("get_symbol: the array is not part of a recorded computation graph; compute it "
                         "inside autograd.record() from arrays marked with attach_grad()")
    return _Builder().tensor(x)


def _scalar(t: Any) -> float | int | None:
    """The Python value of a constant torch kept for a node, when it was a scalar."""
    if isinstance(t, numbers.Number):
        return t  # type: ignore[return-value]
    if isinstance(t, torch.Tensor) and t.dim() == 0 and not t.requires_grad:
        return t.item()  # type: ignore[no-any-return]
    return None


class _Builder:
    def __init__(self) -> None:
        from . import symbol as sym

        self.sym = sym
        self.done: dict[int, list[Any]] = {}  # id(node) -> its output symbols
        self.keep: list[Any] = []  # the nodes and tensors whose ids key the dicts above and below
        self.vars: dict[int, Any] = {}  # id(tensor) -> variable
        self.count = {"var": 0, "null": 0}

    # ---- variables ------------------------------------------------------------------------------
    def variable(self, t: torch.Tensor, name: str | None = None) -> Any:
        v = self.vars.get(id(t))
        if v is None:
            kind = "var" if t.requires_grad else "null"
            if name is None:
                name = f"{kind}{self.count[kind]}"
                self.count[kind] += 1
            v = self.sym.var(name)
            self.vars[id(t)] = v
            self.keep.append(t)
        return v

    def tensor(self, t: torch.Tensor) -> Any:
        if t.grad_fn is None:
            return self.variable(t)
        return self.node(t.grad_fn)[t.output_nr]

    # ---- nodes ----------------------------------------------------------------------------------
    def node(self, node: Any) -> list[Any]:
        # an explicit stack: a long recorded chain must not exhaust Python's recursion limit
        stack = [node]
        while stack:
            top = stack[-1]
            if id(top) in self.done:
                stack.pop()
                continue
            pending = [n for n in self._children(top) if id(n) not in self.done]
            if pending:
                stack.extend(reversed(pending))  # the first input first: variables numbered as met
                continue
            stack.pop()
            self.done[id(top)] = self._translate(top)
            self.keep.append(top)
        return self.done[id(node)]

    def _cached(self, node: Any) -> tuple[Any, tuple[torch.Tensor, ...], dict[int, int], int] | None:
        tag = _metadata(node).get(_CACHED)
        if tag is None or tag[0]() is None:
            return None
        return tag[0](), tag[1], tag[2], tag[3]

    def _children(self, node: Any) -> list[Any]:
        cached = self._cached(node)
        if cached is not None:
            return [a.grad_fn for a in cached[1] if a.grad_fn is not None]
        if type(node).__name__ == "AccumulateGrad":
            return []
        return [n for n, _ in node.next_functions if n is not None]

    def _input(self, edge: tuple[Any, int]) -> Any:
        n, i = edge
        return None if n is None else self.done[id(n)][i]

    def _translate(self, node: Any) -> list[Any]:
        if type(node).__name__ == "AccumulateGrad":
            return [self.variable(node.variable)]
        cached = self._cached(node)
        if cached is not None:
            return self._block(node, *cached)
        ins = [self._input(e) for e in node.next_functions]
        rule = _RULES.get(node.name())
        out = rule(self.sym, node, ins) if rule is not None else None
        return [out] if out is not None else self._opaque(node, ins)

    def _opaque(self, node: Any, ins: list[Any]) -> list[Any]:
        n_out = max(len(node._input_metadata), 1)
        s = self.sym.create("_torch_op", *[i for i in ins if i is not None], torch_node=node.name(),
                            num_outputs=n_out, name=_node_name(node))
        return [s[i] for i in range(n_out)] if n_out > 1 else [s]

    def _block(self, node: Any, block: Any, args: tuple[torch.Tensor, ...], outs: dict[int, int],
               n_block_outs: int) -> list[Any]:
        # looked up at run time: gluon's block module imports this one
        names = importlib.import_module("mxtorch.gluon.symbolic").input_names(block)
        if len(names) != len(args):
            return self._opaque(node, [self._input(e) for e in node.next_functions])
        data = {n: self.tensor(a) for n, a in zip(names, args)}
        params = {}
        for p in block.collect_params().values():
            v = p.var()
            try:
                tensors = p.list_data()
            except MXNetError:  # not initialized / row_sparse: the graph still names the variable
                tensors = []
            for t in tensors:
                self.vars.setdefault(id(t), v)
                self.keep.append(t)
            params[p.name] = v
        graph = block(*[self.sym.var(n) for n in names])
        if isinstance(graph, (list, tuple)):
            graph = self.sym.Group(list(graph))
        n_ops = sum(1 for n in graph._nodes() if not n.is_variable)
        if n_ops <= getattr(block, "_inline_limit", _DEFAULT_INLINE_LIMIT):
            full = graph(**data)
        else:
            feed = [data.get(n, params.get(n)) for n in graph.list_inputs()]
            prefix = block.prefix.rstrip("_") or type(block).__name__.lower()
            full = self.sym.create("_CachedOp", *feed, subgraph=graph.tojson(), num_outputs=len(graph),
                                   name=f"{prefix}_cachedop")
        by_nr = [0] * max(len(node._input_metadata), 1)
        for nr, j in outs.items():
            if nr < len(by_nr) and j < len(full):
                by_nr[nr] = full[j] if len(full) > 1 else full
        return by_nr


def _node_name(node: Any) -> str:
    return node.name().lower().replace("backward", "_")


# ---- torch node -> MXNet operator ---------------------------------------------------------------
Rule = Callable[[Any, Any, list[Any]], Any]


def _unary(op: str) -> Rule:
    return lambda sym, node, ins: sym.create(op, ins[0]) if ins[0] is not None else None


def _binary(op: str, scalar_op: str, rscalar_op: str) -> Rule:
    def rule(sym: Any, node: Any, ins: list[Any]) -> Any:
        a, b = ins
        if a is not None and b is not None:
            return sym.create(op, a, b)
        saved = "_saved_other" if b is None else "_saved_self"
        value = _scalar(getattr(node, saved, None))
        if value is None:
            return None
        if b is None:
            return sym.create(scalar_op, a, scalar=value)
        return sym.create(rscalar_op, b, scalar=value)

    return rule


def _additive(op: str) -> Rule:
    def rule(sym: Any, node: Any, ins: list[Any]) -> Any:
        a, b = ins
        if a is None or b is None:
            return None  # torch keeps no constant operand of an addition
        alpha = node._saved_alpha
        return sym.create(op, a, b if alpha == 1 else sym.create("_mul_scalar", b, scalar=alpha))

    return rule


def _reduce(op: str) -> Rule:
    def rule(sym: Any, node: Any, ins: list[Any]) -> Any:
        if ins[0] is None:
            return None
        dim = getattr(node, "_saved_dim", None)
        if dim is None:
            return sym.create(op, ins[0])
        return sym.create(op, ins[0], axis=tuple(dim), keepdims=bool(node._saved_keepdim))

    return rule


def _pow(sym: Any, node: Any, ins: list[Any]) -> Any:
    e = _scalar(getattr(node, "_saved_exponent", None))
    return None if ins[0] is None or e is None else sym.create("_power_scalar", ins[0], scalar=e)


def _reshape(sym: Any, node: Any, ins: list[Any]) -> Any:
    shape = tuple(node._input_metadata[0].shape)
    return None if ins[0] is None else sym.create("Reshape", ins[0], shape=shape)


def _addmm(sym: Any, node: Any, ins: list[Any]) -> Any:
    bias, mat1, mat2 = ins
    if None in ins or node._saved_alpha != 1 or node._saved_beta != 1:
        return None
    return sym.create("broadcast_add", sym.create("dot", mat1, mat2), bias)


_RULES: dict[str, Rule] = {
    "AddBackward0": _additive("broadcast_add"),
    "SubBackward0": _additive("broadcast_sub"),
    "MulBackward0": _binary("broadcast_mul", "_mul_scalar", "_mul_scalar"),
    "DivBackward0": _binary("broadcast_div", "_div_scalar", "_rdiv_scalar"),
    "NegBackward0": _unary("negative"),
    "ExpBackward0": _unary("exp"),
    "LogBackward0": _unary("log"),
    "SqrtBackward0": _unary("sqrt"),
    "AbsBackward0": _unary("abs"),
    "TanhBackward0": _unary("tanh"),
    "SigmoidBackward0": _unary("sigmoid"),
    "ReluBackward0": _unary("relu"),
    "ReciprocalBackward0": _unary("reciprocal"),
    "CloneBackward0": _unary("identity"),
    "TBackward0": _unary("transpose"),
    "MmBackward0": lambda sym, node, ins: None if None in ins else sym.create("dot", *ins),
    "AddmmBackward0": _addmm,
    "PowBackward0": _pow,
    "SumBackward0": _reduce("sum"),
    "SumBackward1": _reduce("sum"),
    "MeanBackward0": _reduce("mean"),
    "MeanBackward1": _reduce("mean"),
    "ViewBackward0": _reshape,
    "ReshapeAliasBackward0": _reshape,
    "UnsafeViewBackward0": _reshape,
}


def _symbol_class() -> type:
    from .symbol import Symbol  # on first use: the symbol package is loaded lazily

    return Symbol


# mx.autograd.get_symbol and mx.autograd.Symbol are MXNet's names in the arrays layer's module; this
# layer provides them (mxtorch/__init__ imports this module, so they are there before any use)
autograd._register_symbolic(get_symbol, _symbol_class)
