"""``mx.sym``: MXNet's symbolic graphs (``Symbol``), built from the operators of :mod:`._ops`.

A Symbol is a list of outputs of graph nodes.  A node is a variable (``op is None``) or an
operator with string attributes and inputs; the graph is immutable once built, so symbols
share nodes freely.  Graphs round-trip through MXNet's JSON format (``tojson``/``load_json``),
infer shapes and types, and run through :class:`mxtorch.executor.Executor` (``bind``).
"""

from __future__ import annotations

import json
import numbers
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..base import MXNetError, NotImplementedForSymbol
from ..checkpoint_io import atomic_write_text
from ..util import is_np_shape
from . import _graph_file, _infer, _ops, _torch_fn
from ._graph import Graph, with_hidden
from ._graph import Node as _Node
from ._scope import HIDDEN_KEYS, AttrScope, NameManager, attr_string, parse_attr

__all__ = ["Symbol", "Variable", "var", "Group", "create", "split_v2", "load", "load_json", "fromjson"]

MXNET_VERSION = 10901  # the MXNet release whose graph files we write (1.9.1)


def _operator(name: str, reverse: bool = False) -> Callable[[Symbol, Any], Symbol]:
    """The operator method ``self <op> other`` (``other <op> self`` with ``reverse``) as ``_name``."""

    def op(self: Symbol, other: Any) -> Symbol:
        return self._binary(other, name, reverse)

    return op


class Symbol(Graph):
    """A list of node outputs.  Build with :func:`Variable` and the operators of ``mx.sym``."""

    __slots__ = ()

    # -------------------------------------------------------------------- structure / names
    def get_internals(self) -> Symbol:
        """Every output of every node, in graph order (index it by name: ``fc1_output``)."""
        return Symbol([(n, i) for n in self._nodes() for i in range(n.num_visible())])

    def get_children(self) -> Symbol | None:
        """The inputs of this symbol's node(s), each node once (None for a variable)."""
        nodes = list({id(node): node for node, _ in self._outputs}.values())  # a split's outputs: one node
        ins = [inp for node in nodes for inp in node.inputs]
        return Symbol(ins) if ins else None

    def _gen_atomic_symbol(self) -> Symbol:
        """A symbol of this symbol's operator and attributes with no inputs (MXNet's atomic
        symbol, which composition fills)."""
        node = self._outputs[0][0]
        if node.is_variable:
            raise MXNetError(f"_gen_atomic_symbol: {node.name!r} is a variable, not an operator")
        atom = _Node(node.op, node.name, dict(node.attrs), [])
        return Symbol([(atom, i) for i in range(node.num_visible())])

    def __iter__(self) -> Iterator[Symbol]:
        return (Symbol([o]) for o in self._outputs)

    def __getitem__(self, index: int | str | slice) -> Symbol:
        if isinstance(index, str):
            names = self.list_outputs()
            hits = [i for i, n in enumerate(names) if n == index]
            if not hits:
                raise ValueError(
                    f"symbol has no output named {index!r}; its outputs are {names[:20]}"
                    f"{' ...' if len(names) > 20 else ''}"
                )
            if len(hits) > 1:
                raise ValueError(f"symbol has {len(hits)} outputs named {index!r}; index by position")
            return Symbol([self._outputs[hits[0]]])
        if isinstance(index, slice):
            return Symbol(self._outputs[index])
        if not -len(self._outputs) <= int(index) < len(self._outputs):
            raise IndexError(f"symbol output index {index} out of range: it has {len(self._outputs)} outputs")
        return Symbol([self._outputs[int(index)]])

    def __repr__(self) -> str:
        if len(self._outputs) == 1:
            return f"<Symbol {self.name}>"
        return f"<Symbol group [{', '.join(str(n.name) for n, _ in self._outputs)}]>"

    __str__ = __repr__

    def __copy__(self) -> Symbol:
        return Symbol(self._outputs)

    def __deepcopy__(self, memo: Any) -> Symbol:
        return load_json(self.tojson())

    def __reduce__(self) -> Any:
        return (load_json, (self.tojson(),))

    def __bool__(self) -> bool:
        # MXNet's error type; its message says the truth value exists only for NDArrays
        raise NotImplementedForSymbol(self.__bool__, "bool")

    # -------------------------------------------------------------------- attributes
    def attr(self, key: str) -> str | None:
        """Attribute ``key`` of this single-output symbol's node (``lr_mult`` finds ``__lr_mult__``)."""
        if len(self._outputs) != 1:
            return None
        attrs = self._outputs[0][0].attrs
        return attrs.get(key, attrs.get(f"__{key}__") if key in HIDDEN_KEYS else None)

    def list_attr(self, recursive: bool = False) -> dict[str, str]:
        if recursive:
            raise DeprecationWarning("list_attr(recursive=True) is attr_dict() in MXNet 1.x")
        return with_hidden(self._outputs[0][0].attrs) if len(self._outputs) == 1 else {}

    def _set_attr(self, **kwargs: Any) -> None:
        for node, _ in self._outputs:
            for k, v in kwargs.items():
                node.attrs[f"__{k}__" if k in HIDDEN_KEYS else k] = attr_string(v)

    # -------------------------------------------------------------------- composition
    def __call__(self, *args: Symbol, **kwargs: Symbol) -> Symbol:
        """A copy of this graph with variables replaced: positional in ``list_arguments`` order
        or by name (``net(data=other)``)."""
        new_name = kwargs.pop("name", None)  # MXNet's compose names the head node
        if new_name is not None and not isinstance(new_name, str):
            raise TypeError(f"compose: name must be a str, got {type(new_name).__name__}")
        subst: dict[str, Symbol] = {}
        names = self.list_arguments()
        if len(args) > len(names):
            raise ValueError(f"compose: {len(args)} positional symbols for {len(names)} arguments {names}")
        subst.update(zip(names, args, strict=False))
        subst.update(kwargs)
        for k, v in subst.items():
            if not isinstance(v, Symbol) or len(v) != 1:
                raise TypeError(f"compose: {k!r} must be a single-output Symbol, got {v!r}")
        unknown = set(subst) - set(self.list_inputs())
        if unknown:
            raise ValueError(f"compose: {sorted(unknown)} are not inputs of this symbol {self.list_inputs()}")
        memo: dict[int, _Node] = {}

        def copy(n: _Node) -> tuple[_Node, int] | _Node:
            if id(n) in memo:
                return memo[id(n)]
            if n.is_variable and n.name in subst:
                memo[id(n)] = subst[n.name]._outputs[0]  # type: ignore[assignment]
                return memo[id(n)]
            new = _Node(n.op, n.name, dict(n.attrs), [])
            memo[id(n)] = new
            return new

        for n in self._nodes():
            target = copy(n)
            if isinstance(target, _Node) and not n.is_variable:
                ins: list[tuple[_Node, int]] = []
                for src, i in n.inputs:
                    r = memo[id(src)]
                    ins.append(r if isinstance(r, tuple) else (r, i))
                target.inputs = ins
        outs: list[tuple[_Node, int]] = []
        for n, i in self._outputs:
            r = memo[id(n)]
            outs.append(r if isinstance(r, tuple) else (r, i))
        if new_name is not None and not outs[0][0].is_variable and outs[0][0] is not self._outputs[0][0]:
            outs[0][0].name = new_name
        return Symbol(outs)

    def __getattr__(self, name: str) -> Any:
        # MXNet's operator methods: x.reshape(...), x.sum(axis=1), x.exp() ...
        if name.startswith("__") or not _ops.has_op(name):
            raise AttributeError(f"'Symbol' object has no attribute {name!r}")

        def method(*args: Any, **kwargs: Any) -> Symbol:
            return create(name, self, *args, **kwargs)

        return method

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        # torch functions on symbols (F.relu(x) in Gluon code traced with symbols)
        return _torch_fn.lookup(func)(*args, **(kwargs or {}))

    def split_v2(self, *args: Any, **kwargs: Any) -> Symbol:
        return split_v2(self, *args, **kwargs)

    def astype(self, dtype: Any) -> Symbol:
        return create("Cast", self, dtype=dtype)

    # -------------------------------------------------------------------- arithmetic
    def _binary(self, other: Any, name: str, reverse: bool = False) -> Symbol:
        if isinstance(other, Symbol):
            a, b = (other, self) if reverse else (self, other)
            return create(f"_{name}", a, b, _hint=f"_{name}")
        if isinstance(other, numbers.Real):
            # MXNet keeps the scalar as Python prints it ('1' for 1, '1.0' for 1.0)
            scalar = str(other)
            if reverse and name in ("minus", "div", "mod", "power"):
                hint = "_rpower_scalar" if name == "power" else f"_r{name}scalar"
                return create(f"_r{name}_scalar", self, scalar=scalar, _hint=hint)
            hint = f"_{name}scalar" if name in _COMPACT else f"_{name}_scalar"
            return create(f"_{name}_scalar", self, scalar=scalar, _hint=hint)
        return NotImplemented

    __add__, __radd__ = _operator("plus"), _operator("plus", True)
    __sub__, __rsub__ = _operator("minus"), _operator("minus", True)
    __mul__, __rmul__ = _operator("mul"), _operator("mul", True)
    __truediv__, __rtruediv__ = _operator("div"), _operator("div", True)
    __mod__, __rmod__ = _operator("mod"), _operator("mod", True)
    __pow__, __rpow__ = _operator("power"), _operator("power", True)
    __eq__ = _operator("equal")  # type: ignore[assignment]
    __ne__ = _operator("not_equal")  # type: ignore[assignment]
    __gt__, __ge__ = _operator("greater"), _operator("greater_equal")
    __lt__, __le__ = _operator("lesser"), _operator("lesser_equal")

    def __abs__(self) -> Symbol:
        return create("abs", self)

    def __neg__(self) -> Symbol:
        return self._binary(-1.0, "mul")

    __hash__ = object.__hash__
    __div__ = __truediv__

    # -------------------------------------------------------------------- inference / files / binding
    def infer_shape(self, *args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
        """``(arg_shapes, out_shapes, aux_shapes)`` from the shapes of some arguments; all three
        are None (with a warning) when the given shapes do not determine every shape."""
        return _infer.infer_shape(self, args, kwargs, partial=False)

    def infer_shape_partial(self, *args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
        """Like :meth:`infer_shape`; unknown shapes are ``()``."""
        return _infer.infer_shape(self, args, kwargs, partial=True)

    def infer_type(self, *args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
        """``(arg_types, out_types, aux_types)`` (numpy types) from the types of some arguments."""
        return _infer.infer_type(self, args, kwargs)

    def infer_type_partial(self, *args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
        """Like :meth:`infer_type`; a type nothing determines is None."""
        return _infer.infer_type(self, args, kwargs, partial=True)

    def tojson(self) -> str:
        """The graph in MXNet's JSON format (what MXNet 1.x writes to ``prefix-symbol.json``)."""
        nodes = self._nodes()
        index = {id(n): i for i, n in enumerate(nodes)}
        out_nodes = []
        row_ptr = [0]
        for n in nodes:
            aux = n.aux_positions()
            entry: dict[str, Any] = {"op": n.op or "null", "name": n.name}
            if n.attrs:
                entry["attrs"] = dict(n.attrs)
            entry["inputs"] = [
                [index[id(src)], i, 1 if k in aux else 0] for k, (src, i) in enumerate(n.inputs)
            ]
            out_nodes.append(entry)
            row_ptr.append(row_ptr[-1] + n.num_total())
        graph_attrs: dict[str, list[Any]] = {"mxnet_version": ["int", MXNET_VERSION]}
        if is_np_shape():  # MXNet marks graphs made under NumPy shape semantics (0: a zero-size dim)
            graph_attrs["is_np_shape"] = ["int", 1]
        graph = {
            "nodes": out_nodes,
            "arg_nodes": [i for i, n in enumerate(nodes) if n.is_variable],
            "node_row_ptr": row_ptr,
            "heads": [[index[id(n)], i, 0] for n, i in self._outputs],
            "attrs": graph_attrs,
        }
        return json.dumps(graph, indent=2)

    def save(self, fname: str | os.PathLike[str], remove_amp_cast: bool = True) -> None:
        """Write :meth:`tojson` to ``fname`` (atomically)."""
        atomic_write_text(fname, self.tojson())

    def cached_op_plan(self) -> Any:
        """The plan ``mx.nd.CachedOp(self)`` runs: the graph's steps over numbered value slots, the
        arguments then the auxiliary states first (built here, so that nd/ imports no symbolic code)."""
        from ..executor import _Plan

        return _Plan(self, self.list_arguments(), self.list_auxiliary_states(), None)

    def bind(
        self,
        ctx: Any,
        args: Any,
        args_grad: Any = None,
        grad_req: Any = "write",
        aux_states: Any = None,
        group2ctx: Any = None,
        shared_exec: Any = None,
    ) -> Any:
        """An :class:`~mxtorch.executor.Executor` running this graph on the given arrays."""
        from ..executor import Executor

        return Executor(self, ctx, args, args_grad, grad_req, aux_states, group2ctx)

    def simple_bind(
        self,
        ctx: Any,
        grad_req: Any = "write",
        type_dict: Any = None,
        stype_dict: Any = None,
        group2ctx: Any = None,
        shared_arg_names: Any = None,
        shared_exec: Any = None,
        shared_buffer: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Bind with arrays allocated from the shapes in ``kwargs`` (zeros; gradients too).  As in
        MXNet, only tuple (or list) values are shapes; other keywords are ignored."""
        from ..executor import simple_bind

        shapes = {k: v for k, v in kwargs.items() if isinstance(v, (tuple, list))}
        return simple_bind(self, ctx, grad_req, type_dict, group2ctx, shared_exec, shapes, stype_dict)

    def eval(self, ctx: Any = None, **kwargs: Any) -> list[Any]:
        """Run the graph once on ``kwargs`` (name -> array) and return its outputs."""
        from ..context import current_context

        ex = self.bind(ctx or current_context(), kwargs)
        return ex.forward()  # type: ignore[no-any-return]


_COMPACT = {"plus", "minus", "mul", "div", "mod", "power"}


def _single(sym: Symbol, what: str) -> tuple[_Node, int]:
    if len(sym._outputs) != 1:
        raise ValueError(
            f"{what}: a symbol with {len(sym._outputs)} outputs cannot be one input; "
            "index it (sym[0]) or pass its outputs as separate inputs"
        )
    return sym._outputs[0]


def create(
    op_name: str,
    *args: Any,
    name: str | None = None,
    attr: Mapping[str, str] | None = None,
    _hint: str | None = None,
    **kwargs: Any,
) -> Symbol:
    """Apply operator ``op_name`` to the symbols in ``args``/``kwargs``; other keywords are its
    parameters.  Parameters it needs but was not given (``weight``, ``bias``, ``gamma`` ...) become
    new variables named ``<name>_<input>``, as in MXNet."""
    if _ops.canonical_name(op_name) == "Custom":  # op_type and keywords configure the operator
        op = _ops.get_op(op_name, {
            k: attr_string(v) for k, v in kwargs.items()
            if v is not None and not isinstance(v, Symbol) and k not in HIDDEN_KEYS
        })
    else:
        op = _ops.get_op(op_name)
    canon = op.name
    sig_names = _ops.signature_names(op_name)
    positional: list[tuple[_Node, int]] = []
    named: dict[str, tuple[_Node, int]] = {}
    params: dict[str, Any] = {}
    for k, a in enumerate(args):
        if isinstance(a, Symbol):
            if op.inputs is None and sig_names is None and len(a) > 1:
                positional.extend(a._outputs)
            else:
                positional.append(_single(a, f"{op_name} input {k}"))
        elif isinstance(a, (list, tuple)) and a and all(isinstance(s, Symbol) for s in a):
            positional.extend(_single(s, f"{op_name} input") for s in a)
        elif sig_names is not None and k < len(sig_names):
            params[sig_names[k]] = a
        else:
            raise TypeError(
                f"{op_name}: positional argument {k} is a {type(a).__name__}; operator "
                "parameters are keywords (e.g. num_hidden=10)"
            )
    for key, v in kwargs.items():
        if isinstance(v, Symbol):
            named[key] = _single(v, f"{op_name} input {key!r}")
        elif v is not None or key in _ops.defaults_not_none(op_name):
            params[key] = v  # an explicit None that is not the default (sort's axis=None) is kept
    attrs: dict[str, str] = {}
    for pk, pv in params.items():
        attrs[f"__{pk}__" if pk in HIDDEN_KEYS else pk] = attr_string(pv)
    if canon in ("Concat", "_rnn_param_concat", "Crop", "add_n", "stack") and "num_args" not in attrs:
        attrs["num_args"] = str(len(positional) + len(named))
    scope_attrs = AttrScope.current.get(dict(attr) if attr else None)
    for sk, sv in scope_attrs.items():  # as in MXNet, scope and attr= override keyword attributes
        attrs[f"__{sk}__" if sk in HIDDEN_KEYS else sk] = sv
    node_name = NameManager.current.get(name, (_hint or op_name).lower())
    parsed = {k: parse_attr(v) for k, v in attrs.items() if not k.startswith("__")}
    input_names = op.inputs(parsed) if op.inputs is not None else sig_names
    inputs: list[tuple[_Node, int]] = []
    if input_names is None:
        if named:
            raise TypeError(f"{op_name} takes its inputs positionally, got keyword inputs {sorted(named)}")
        inputs = positional
    else:
        unknown = set(named) - set(input_names)
        if unknown:
            raise TypeError(f"{op_name}: unknown input(s) {sorted(unknown)}; its inputs are {input_names}")
        pos = iter(positional)
        required = _ops.required_inputs(op_name) if op.inputs is None else frozenset()
        creates = op.inputs is not None and op.param_shapes is not None
        for i, nm in enumerate(input_names):
            if nm in named:
                inputs.append(named[nm])
                continue
            nxt = next(pos, None)
            if nxt is not None:
                inputs.append(nxt)
            elif creates:
                var_attrs = dict(attrs)
                if nm in op.aux_init:
                    var_attrs["__init__"] = op.aux_init[nm]
                inputs.append((_Node(None, f"{node_name}_{nm}", var_attrs, []), 0))
            elif nm in required and nm not in params:
                # an array input the operator cannot do without: a new variable, as in MXNet
                inputs.append((_Node(None, f"{node_name}_{nm}", {}, []), 0))
            else:
                later = [m for m in input_names[i + 1 :] if m in named]
                if later or op.inputs is not None:
                    raise TypeError(f"{op_name}: input {nm!r} is missing; its inputs are {input_names}")
                break
        for nm, (src, _) in zip(input_names, inputs, strict=False):
            # MXNet gives given variables the operator's default initializer too (moving_var: one)
            if nm in op.aux_init and src.is_variable and "__init__" not in src.attrs:
                src.attrs["__init__"] = op.aux_init[nm]
        rest = list(pos)
        if rest:
            raise TypeError(f"{op_name}: {len(rest)} more symbol input(s) than it takes ({input_names})")
    node = _Node(canon, node_name, attrs, inputs)
    return Symbol([(node, i) for i in range(len(op.outputs(parsed)))])


def split_v2(
    ary: Symbol,
    indices_or_sections: int | Sequence[int] = 1,
    axis: int = 0,
    squeeze_axis: bool = False,
    **kwargs: Any,
) -> Symbol:
    """Split ``ary`` along ``axis`` into ``sections`` equal parts or before the given indices;
    builds MXNet's ``_split_v2`` node (``indices`` with a leading 0, or ``sections``)."""
    if isinstance(indices_or_sections, int):
        indices, sections = [], indices_or_sections
    elif isinstance(indices_or_sections, (tuple, list)):
        indices, sections = [0, *(int(i) for i in indices_or_sections)], 0
    else:
        raise ValueError(
            f"split_v2: indices_or_sections must be an int or a tuple of ints, got {indices_or_sections!r}"
        )
    attrs: dict[str, Any] = {
        "indices": str(indices),
        "axis": axis,
        "squeeze_axis": squeeze_axis,
        "sections": sections,
    }
    return create("_split_v2", ary, **attrs, **kwargs)


def Variable(
    name: str,
    attr: Mapping[str, str] | None = None,
    shape: Sequence[int] | int | None = None,
    lr_mult: float | None = None,
    wd_mult: float | None = None,
    dtype: Any = None,
    init: Any = None,
    stype: str | None = None,
    profiler_scope: str | None = None,
    **kwargs: Any,
) -> Symbol:
    """A graph input named ``name``; shape, dtype, initializer and lr/wd multipliers are kept as
    its attributes (``__shape__``, ``__dtype__``, ``__init__``, ``__lr_mult__`` ...)."""
    if not isinstance(name, str):
        raise TypeError(f"Variable: name must be a str, got {type(name).__name__}")
    attrs = AttrScope.current.get(dict(attr) if attr else None)
    attrs = {f"__{k}__" if k in HIDDEN_KEYS else k: v for k, v in attrs.items()}
    if shape is not None:  # an int is a 1-d shape, as MXNet reads str(shape)
        dims = (int(shape),) if isinstance(shape, numbers.Integral) else tuple(shape)  # type: ignore[arg-type]
        attrs["__shape__"] = attr_string(dims)
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        attrs["__dtype__"] = str(_infer.dtype_code(dtype))
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else init.dumps()
    if stype is not None:
        attrs["__storage_type__"] = {"default": "0", "row_sparse": "1", "csr": "2"}.get(stype, stype)
    if profiler_scope is not None:
        attrs["__profiler_scope__"] = profiler_scope
    for k, v in kwargs.items():
        if not (k.startswith("__") and k.endswith("__")):
            raise ValueError(f"Variable: unknown keyword {k!r}; extra attributes must look like __name__")
        attrs[k] = attr_string(v)
    return Symbol([(_Node(None, name, attrs, []), 0)])


var = Variable


def Group(symbols: Sequence[Symbol]) -> Symbol:
    """One symbol whose outputs are the outputs of ``symbols`` in order."""
    if not symbols or not all(isinstance(s, Symbol) for s in symbols):
        raise TypeError("Group expects a non-empty list of Symbols")
    return Symbol([o for s in symbols for o in s._outputs])


def load_json(json_str: str) -> Symbol:
    """A Symbol from MXNet's JSON graph format (files of MXNet 1.x and older ``param``/``attr`` keys);
    :class:`MXNetError` for any text that is not such a graph (:mod:`._graph_file` checks it)."""
    return Symbol(_graph_file.read_json(json_str))


fromjson = load_json


def load(fname: str | os.PathLike[str]) -> Symbol:
    """A Symbol from an MXNet JSON graph file (``prefix-symbol.json``); :class:`MXNetError` naming
    the file for one that is missing, too large, binary, malformed or not an MXNet graph."""
    return Symbol(_graph_file.read_file(fname))


_torch_fn.use_create(create)  # F.relu(sym), torch.cat([a, b]): the rules build Symbols with it


def namespace_operators(prefix: str, module: Any, names: Sequence[str]) -> dict[str, Callable[..., Symbol]]:
    """``{name: operator}`` for the ``mx.sym.<namespace>`` of mx.nd's ``module``: each makes a graph
    node ``<prefix><name>`` (MXNet's graph name, e.g. ``_linalg_gemm``, ``_image_crop``)."""

    def node(name: str) -> Callable[..., Symbol]:
        def operator(*args: Any, **kwargs: Any) -> Symbol:
            return create(f"{prefix}{name}", *args, _hint=name, **kwargs)

        operator.__name__ = operator.__qualname__ = name
        where = module.__name__.replace("mxtorch", "mx")
        operator.__doc__ = f"Symbolic ``{where}.{name}``: {module.__dict__[name].__doc__}"
        return operator

    return {name: node(name) for name in names}
