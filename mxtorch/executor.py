"""``Executor``: a symbolic graph bound to arrays (``Symbol.bind`` / ``simple_bind``).

Binding builds a plan once: the graph's nodes in order, each with its operator function, its
parsed attributes and the slots its inputs and outputs occupy.  ``forward`` walks the plan on
PyTorch kernels with autograd recording when gradients are wanted; ``backward`` asks autograd
for the gradients of the arguments and writes (``'write'``) or adds (``'add'``) them into the
gradient arrays.  Nodes of a ``ctx_group`` run on the context ``group2ctx`` gives that group;
values are copied between contexts where a node's inputs live elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ._dtype import to_torch_dtype
from ._executor_memory import adopt, first_elements
from ._monitor_taps import MonitorTaps
from ._sparse_grads import dense_leaf, head_gradient, storage_types, write_gradient
from .base import MXNetError
from .context import Context, current_context
from .nd._ndarray_type import new_ndarray, plain
from .symbol._infer import infer_node_shapes, infer_shape, infer_type
from .symbol._loss import plain_options, softmax_output_head
from .symbol._ops import SOFTMAX_OPTIONS

if TYPE_CHECKING:
    from .symbol._graph import Graph  # a Symbol: the executor reads only its structure

__all__ = ["Executor", "simple_bind"]

_REQS = ("write", "add", "null", "inplace")


def _device(ctx: Any) -> torch.device:
    if ctx is None:
        return current_context().torch_device
    if isinstance(ctx, Context):
        return ctx.torch_device
    if isinstance(ctx, (list, tuple)):
        return _device(ctx[0])
    return torch.device(ctx)


def _as_tensor(v: Any, device: torch.device, what: str) -> torch.Tensor:
    if isinstance(v, torch.Tensor):
        return v if v.device == device else v.to(device)
    if isinstance(v, np.ndarray):
        return new_ndarray(torch.as_tensor(v, device=device))
    raise TypeError(f"{what} must be an NDArray (torch.Tensor) or numpy array, got {type(v).__name__}")


Shape = tuple[int, ...]


def _copy_into(dst: torch.Tensor, value: Any, what: str, mismatch: Callable[[Shape, Shape], str]) -> None:
    """Copy ``value`` (a tensor or numpy array) into ``dst``; MXNetError ``mismatch(got, want)``
    when the shapes differ."""
    src = _as_tensor(value, dst.device, what)
    if tuple(src.shape) != tuple(dst.shape):
        raise MXNetError(mismatch(tuple(src.shape), tuple(dst.shape)))
    with torch.no_grad():
        dst.copy_(src)


def _arrays(
    given: Any, names: list[str], what: str, device: torch.device, required: bool
) -> list[torch.Tensor | None]:
    if given is None:
        if required and names:
            raise MXNetError(f"bind: {what} is missing; the symbol needs {names}")
        return [None] * len(names)
    if isinstance(given, Mapping):  # names the symbol does not take are ignored, as by MXNet's bind
        missing = [n for n in names if given.get(n) is None]
        if required and missing:
            raise MXNetError(f"bind: {what} lacks {missing}; the symbol needs {names}")
        return [
            None if given.get(n) is None else _as_tensor(given[n], device, f"{what}[{n!r}]") for n in names
        ]
    if isinstance(given, (list, tuple)):
        if len(given) != len(names):
            raise MXNetError(f"bind: {what} has {len(given)} arrays for {len(names)} names {names}")
        return [None if v is None else _as_tensor(v, device, f"{what}[{i}]") for i, v in enumerate(given)]
    raise TypeError(f"bind: {what} must be a list or a dict of arrays, got {type(given).__name__}")


def _grad_reqs(grad_req: Any, names: list[str], grads: list[torch.Tensor | None]) -> list[str]:
    if isinstance(grad_req, str):
        reqs = [grad_req] * len(names)
    elif isinstance(grad_req, Mapping):
        reqs = [grad_req.get(n, "null") for n in names]
    elif isinstance(grad_req, (list, tuple)):
        if len(grad_req) != len(names):
            raise MXNetError(f"bind: grad_req has {len(grad_req)} entries for {len(names)} arguments")
        reqs = list(grad_req)
    else:
        raise TypeError(f"bind: grad_req must be a str, list or dict, got {type(grad_req).__name__}")
    out = []
    for n, r, g in zip(names, reqs, grads, strict=True):
        if r not in _REQS:
            raise MXNetError(f"bind: grad_req {r!r} for {n!r} is not one of {_REQS}")
        out.append("null" if g is None else ("write" if r == "inplace" else r))
    return out


def _check_shapes(
    symbol: Graph,
    arg_names: list[str],
    args: list[torch.Tensor],
    grads: list[torch.Tensor | None],
    aux_names: list[str],
    aux: list[torch.Tensor],
) -> None:
    """MXNetError unless the bound arrays have shapes the graph accepts (as MXNet's bind checks)."""
    for n, a, g in zip(arg_names, args, grads, strict=True):
        if g is not None and tuple(g.shape) != tuple(a.shape):
            raise MXNetError(
                f"bind: the gradient array of {n!r} has shape {tuple(g.shape)}, the argument {tuple(a.shape)}"
            )
    shapes = {n: tuple(a.shape) for n, a in zip(arg_names + aux_names, [*args, *aux], strict=True)}
    try:
        infer_node_shapes(symbol, shapes)
    except MXNetError as e:
        raise MXNetError(f"bind: the arrays do not fit the graph: {e}") from e


class UnknownParamError(MXNetError, ValueError):
    """Parameters given for names the graph does not have (MXNet raises a ValueError there)."""


class _Step:
    __slots__ = ("call", "ins", "outs", "attrs", "device", "name", "op", "head_loss")

    def __init__(
        self,
        call: Callable[..., Any],
        ins: tuple[int, ...],
        outs: tuple[int, ...],
        attrs: dict[str, Any],
        device: torch.device | None,
        name: str,
        op: str,
    ) -> None:
        self.call, self.ins, self.outs, self.attrs = call, ins, outs, attrs
        self.device, self.name, self.op = device, name, op
        # a SoftmaxOutput with MXNet's default options whose output is a graph output (see
        # _Plan.run's roots)
        self.head_loss = False


class _Plan:
    """The graph as a list of steps over numbered value slots (arguments, aux states, outputs)."""

    def __init__(
        self, symbol: Graph, arg_names: list[str], aux_names: list[str], group2ctx: Mapping[str, Any] | None
    ) -> None:
        nodes = symbol._nodes()
        slot: dict[tuple[int, int], int] = {}
        var_slot = {n: i for i, n in enumerate(arg_names)}
        var_slot.update({n: len(arg_names) + j for j, n in enumerate(aux_names)})
        nslots = len(arg_names) + len(aux_names)
        self.steps: list[_Step] = []
        groups = dict(group2ctx or {})
        for node in nodes:
            if node.is_variable:
                slot[(id(node), 0)] = var_slot[node.name]
                continue
            op = node.opdef()
            total = node.num_total()
            outs = tuple(range(nslots, nslots + total))
            nslots += total
            for i, s in enumerate(outs):
                slot[(id(node), i)] = s
            group = node.attrs.get("__ctx_group__")
            device = None
            if group is not None and group in groups:
                device = _device(groups[group])
            ins = tuple(slot[(id(src), i)] for src, i in node.inputs)
            attrs = node.params()
            self.steps.append(_Step(op.compiled(attrs), ins, outs, attrs, device, node.name, op.name))
        self.nslots = nslots
        self.heads = [slot[(id(n), i)] for n, i in symbol._outputs]
        for st in self.steps:
            if st.op == "SoftmaxOutput" and st.outs[0] in self.heads:
                st.head_loss = plain_options({k: v for k, v in st.attrs.items() if k in SOFTMAX_OPTIONS})

    def run(self, vals: list[Any], train: bool, roots: dict[int, tuple[Any, Any]] | None = None) -> None:
        """Run every step over ``vals``.  With ``roots`` (an executor that runs the backward
        itself), a SoftmaxOutput head in the plain case computes its prediction outside the
        autograd graph and ``roots[slot]`` gets (its data, the gradient for the data)."""
        for st in self.steps:
            ins = [vals[i] for i in st.ins]
            if st.device is not None:
                ins = [
                    x.to(st.device) if isinstance(x, torch.Tensor) and x.device != st.device else x
                    for x in ins
                ]
            if roots is not None and st.head_loss:
                head = softmax_output_head(ins[0], ins[1])
                if head is not None:
                    vals[st.outs[0]] = head[0]
                    roots[st.outs[0]] = (ins[0], head[1])
                    continue
            try:
                out = st.call(ins, train)
            except MXNetError:
                raise
            except Exception as e:
                shapes = [tuple(x.shape) if isinstance(x, torch.Tensor) else x for x in ins]
                raise MXNetError(
                    f"operator {st.name!r} ({st.op}) failed on inputs of shapes {shapes}: {e}"
                ) from e
            if len(st.outs) == 1:
                vals[st.outs[0]] = out[0] if isinstance(out, (list, tuple)) else out
            else:
                for s, o in zip(st.outs, out, strict=False):
                    vals[s] = o


def _check_differentiable(symbol: Graph, wanted: set[str]) -> None:
    """MXNetError when the gradient of an argument in ``wanted`` would pass through an operator
    MXNet defines no gradient for (``batch_take``); a stop_gradient (BlockGrad) above it makes the
    graph bindable, as in MXNet."""
    if not wanted:
        return
    from .symbol._memory import gradient_path

    path = gradient_path(symbol, wanted)
    for n in symbol._nodes():
        if id(n) in path and not n.opdef().differentiable:
            raise MXNetError(
                f"bind: operator {n.name!r} ({n.op}) has no gradient, but the gradient of "
                f"{sorted(wanted)[:5]} would pass through it; put its output behind mx.sym.stop_gradient "
                "or bind those arguments with grad_req='null'"
            )


class Executor:
    """A bound graph: ``forward``, ``backward``, ``outputs`` and the argument, gradient and
    auxiliary arrays (as lists in ``list_arguments`` order and as dicts)."""

    def __init__(
        self,
        symbol: Graph,
        ctx: Any,
        args: Any,
        args_grad: Any = None,
        grad_req: Any = "write",
        aux_states: Any = None,
        group2ctx: Mapping[str, Any] | None = None,
    ) -> None:
        self._symbol = symbol
        self._ctx = ctx if isinstance(ctx, Context) else current_context()
        device = _device(ctx)
        self._arg_names = symbol.list_arguments()
        self._arg_index = {n: i for i, n in enumerate(self._arg_names)}
        self._aux_names = symbol.list_auxiliary_states()
        self.arg_arrays: list[torch.Tensor] = _arrays(args, self._arg_names, "args", device, True)  # type: ignore
        self.grad_arrays: list[torch.Tensor | None] = _arrays(
            args_grad, self._arg_names, "args_grad", device, False
        )
        self.aux_arrays: list[torch.Tensor] = _arrays(aux_states, self._aux_names, "aux_states", device, True)  # type: ignore
        self._reqs = _grad_reqs(grad_req, self._arg_names, self.grad_arrays)
        _check_differentiable(symbol, {n for n, r in zip(self._arg_names, self._reqs, strict=True)
                                       if r != "null"})
        _check_shapes(
            symbol, self._arg_names, self.arg_arrays, self.grad_arrays, self._aux_names, self.aux_arrays
        )
        self._group2ctx = dict(group2ctx or {})
        from .symbol._optimize import cse_enabled

        # get_optimized_symbol's passes, as the environment set them at bind (built on first use)
        self._cse = cse_enabled()
        self._plan = _Plan(symbol, self._arg_names, self._aux_names, self._group2ctx)
        self._output_names = symbol.list_outputs()
        # heads whose operator is a loss (SoftmaxOutput, *RegressionOutput, SVMOutput, MakeLoss)
        # make their own gradient and ignore the head gradient; every other head needs one
        self._loss_heads = [not node.is_variable and node.opdef().is_loss for node, _ in symbol._outputs]
        self._heads: list[torch.Tensor] = []
        self._roots: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._leaves: list[tuple[int, torch.Tensor]] = []
        self._outputs: list[torch.Tensor] | None = None  # None: not run yet (zeros on first read)
        self._taps: MonitorTaps | None = None  # set_monitor_callback's
        self._default_head_grads: dict[int, torch.Tensor] = {}
        # the is_train of the last forward that did not record for backward (None: none since)
        self._unrecorded: bool | None = None
        self._recorded = False  # whether the last forward recorded for a backward not yet run
        # arrays the outputs are copied into (views of the outputs of the executor this one was
        # reshaped from, whose memory MXNet shares); None: fresh tensors each forward
        self._out_buffers: list[torch.Tensor] | None = None

    # ------------------------------------------------------------------ dicts
    def arg_array(self, name: str) -> torch.Tensor | None:
        """The bound argument array called ``name`` (None if the graph has no such argument):
        ``arg_dict.get(name)`` without building the dict."""
        i = self._arg_index.get(name)
        return None if i is None else self.arg_arrays[i]

    @property
    def arg_dict(self) -> dict[str, torch.Tensor]:
        return dict(zip(self._arg_names, self.arg_arrays, strict=True))

    @property
    def grad_dict(self) -> dict[str, torch.Tensor | None]:
        return dict(zip(self._arg_names, self.grad_arrays, strict=True))

    @property
    def aux_dict(self) -> dict[str, torch.Tensor]:
        return dict(zip(self._aux_names, self.aux_arrays, strict=True))

    @property
    def outputs(self) -> list[torch.Tensor]:
        """The outputs of the last forward (NDArrays); before the first, zeros of the inferred
        shapes and types, as MXNet allocates them at bind."""
        if self._outputs is None:
            self._outputs = self._zero_outputs()
        return self._outputs

    @outputs.setter
    def outputs(self, value: list[torch.Tensor]) -> None:
        self._outputs = value

    @property
    def output_dict(self) -> dict[str, torch.Tensor]:
        return dict(zip(self._output_names, self.outputs, strict=True))

    # ------------------------------------------------------------------ running
    def forward(self, is_train: bool = False, **kwargs: Any) -> list[torch.Tensor]:
        """Run the graph (``is_train``: training mode, recorded for ``backward``); keyword arrays
        are first copied into the arguments of those names.  As in MXNet, ``backward`` also
        works after ``forward(is_train=False)`` (operators then in inference mode): that forward
        records nothing and ``backward`` runs it again recording."""
        for k, v in kwargs.items():
            if k not in self._arg_names:
                raise MXNetError(f"forward: {k!r} is not an argument of the symbol ({self._arg_names})")
            _copy_into(
                self.arg_arrays[self._arg_names.index(k)],
                v,
                f"forward({k}=...)",
                lambda got, want, k=k: (  # type: ignore[misc]
                    f"forward: {k!r} has shape {got} but was bound with shape {want}; "
                    "use reshape() to bind other shapes"
                ),
            )
        return self._run(bool(is_train), bool(is_train))

    def _run(self, is_train: bool, record: bool) -> list[torch.Tensor]:
        plan = self._plan
        vals: list[Any] = [None] * plan.nslots
        nargs = len(self.arg_arrays)
        # the graph's operators run on plain tensors (torch's methods, no NDArray dispatch per op)
        vals[:nargs] = [plain(a) for a in self.arg_arrays]
        vals[nargs : nargs + len(self.aux_arrays)] = [plain(a) for a in self.aux_arrays]
        self._leaves = []
        self._unrecorded = None if record else is_train
        self._recorded = record
        if record:
            for i, req in enumerate(self._reqs):
                # integer arguments have no gradient in torch: their gradient arrays get zeros
                arg = vals[i]
                if req != "null" and (arg.is_floating_point() or arg.is_complex()):
                    sparse_arg = arg.layout != torch.strided
                    leaf = dense_leaf(arg) if sparse_arg else arg.detach().requires_grad_(True)
                    vals[i] = leaf
                    self._leaves.append((i, leaf))
        self._roots = {}
        with torch.set_grad_enabled(bool(self._leaves)):
            plan.run(vals, bool(is_train), self._roots if self._leaves else None)
        self._heads = [vals[s] for s in plan.heads]
        self.outputs = [new_ndarray(h.detach()) for h in self._heads]
        if self._out_buffers is not None:
            with torch.no_grad():
                for buf, out in zip(self._out_buffers, self.outputs, strict=True):
                    buf.copy_(out)
            self.outputs = list(self._out_buffers)
        return self.outputs

    def backward(self, out_grads: Any = None, is_train: bool = True) -> None:
        """Gradients of the arguments bound with a gradient array, from the head gradients
        ``out_grads``: loss outputs make their own gradient (and ignore a given one); every other
        output that the gradient depends on needs one, as in MXNet."""
        if not self._recorded and any(r != "null" for r in self._reqs):
            # nothing recorded (a forward without is_train, a second backward, or no forward yet, which
            # MXNet also differentiates at the bound arrays): run the forward again, recording
            self._run(True if self._unrecorded is None else self._unrecorded, True)
        if not self._recorded:
            return
        if out_grads is None:
            grads: list[Any] = [None] * len(self._heads)
        elif isinstance(out_grads, torch.Tensor):
            grads = [out_grads]
        else:
            grads = list(out_grads)
        if len(grads) != len(self._heads):
            raise MXNetError(f"backward: {len(grads)} head gradients for {len(self._heads)} outputs")
        heads, hgrads = [], []
        roots, started = self._roots, set()
        for k, (h, g) in enumerate(zip(self._heads, grads, strict=True)):
            slot = self._plan.heads[k]
            root = roots.get(slot)
            if root is not None:
                # a plain SoftmaxOutput head: the backward starts at its data with the loss
                # gradient (a head gradient is ignored, as by the operator); once per output
                if root[0].requires_grad and slot not in started:
                    started.add(slot)
                    heads.append(root[0])
                    hgrads.append(root[1])
                continue
            if h.requires_grad:
                if g is None and not self._loss_heads[k]:
                    raise MXNetError(
                        f"backward: output {self._output_names[k]!r} is not a loss output (SoftmaxOutput, "
                        "MakeLoss, ...), so it needs a head gradient: pass out_grads (one per output), or "
                        "make the objective a loss with mx.sym.MakeLoss"
                    )
                if g is None:
                    g = self._ones(k, h)
                else:
                    g = head_gradient(_as_tensor(g, h.device, "out_grads"), h).to(h.dtype)
                    if g.shape != h.shape:
                        raise MXNetError(
                            f"backward: out_grads[{k}] has shape {tuple(g.shape)} but output "
                            f"{self._output_names[k]!r} has shape {tuple(h.shape)}"
                        )
                heads.append(h)
                hgrads.append(g)
        leaves = [leaf for _, leaf in self._leaves]
        if not heads or not leaves:
            res: Sequence[torch.Tensor | None] = [None] * len(leaves)
        else:
            try:
                res = torch.autograd.grad(heads, leaves, hgrads, allow_unused=True)
            except RuntimeError as e:
                raise MXNetError(f"backward: {e}; call forward(is_train=True) before each backward") from e
        if self._taps is not None:
            self._taps.backward_done()
        taken = {hg.untyped_storage().data_ptr() for hg in hgrads}  # never adopt a head gradient
        reqs, garrays = self._reqs, self.grad_arrays
        with torch.no_grad():
            for (i, _), g in zip(self._leaves, res, strict=True):
                dst = garrays[i]
                assert dst is not None
                if dst.layout != torch.strided or (g is not None and g.layout != torch.strided):
                    write_gradient(dst, g, reqs[i])
                elif reqs[i] == "write":
                    if g is None:
                        dst.zero_()
                    elif not adopt(dst, g, taken):
                        dst.copy_(g)
                elif g is not None:
                    dst.add_(g)
            for i, req in enumerate(reqs):
                dst = garrays[i]
                if (req == "write" and dst is not None and dst.layout == torch.strided
                        and not (dst.is_floating_point() or dst.is_complex())):
                    dst.zero_()
        self._leaves = []
        self._roots = {}
        self._recorded = False

    def _ones(self, k: int, head: torch.Tensor) -> torch.Tensor:
        """The head gradient handed to loss head ``k`` (which ignores it): ones, made once per
        layout and reused; no gradient array adopts it."""
        ones = self._default_head_grads.get(k)
        if ones is None or ones.shape != head.shape or ones.dtype != head.dtype or ones.device != head.device:
            ones = self._default_head_grads[k] = torch.ones_like(head)
        return ones

    def set_monitor_callback(
        self, callback: Callable[[str, torch.Tensor], None], monitor_all: bool = False
    ) -> None:
        """``callback(name, array)`` sees each node's outputs and input gradients (_monitor_taps)."""
        self._taps = MonitorTaps(self._symbol, self._plan.steps, callback, monitor_all)

    # ------------------------------------------------------------------ parameters / shapes
    def copy_params_from(
        self,
        arg_params: Mapping[str, Any],
        aux_params: Mapping[str, Any] | None = None,
        allow_extra_params: bool = False,
    ) -> None:
        """Copy ``arg_params``/``aux_params`` into the bound arrays of those names."""
        for src, names, arrays, what in (
            (arg_params, self._arg_names, self.arg_arrays, "arg_params"),
            (aux_params or {}, self._aux_names, self.aux_arrays, "aux_params"),
        ):
            for k, v in src.items():
                if k not in names:
                    if allow_extra_params:
                        continue
                    raise UnknownParamError(
                        f"copy_params_from: {what} has {k!r}, which the executor does not have; "
                        "pass allow_extra_params=True to skip it"
                    )
                _copy_into(
                    arrays[names.index(k)],
                    v,
                    f"{what}[{k!r}]",
                    lambda got, want, k=k: (  # type: ignore[misc]
                        f"copy_params_from: {k!r} has shape {got}, the executor's array {want}"
                    ),
                )

    def reshape(
        self, partial_shaping: bool = False, allow_up_sizing: bool = False, **kwargs: Any
    ) -> Executor:
        """An executor of the same graph for new input shapes, sharing every array whose shape
        does not change; as in MXNet, an array that shrinks (and each output) is a view of the first
        elements of this executor's array, and one that grows (``allow_up_sizing``) gets new memory."""
        arg_shapes, _, aux_shapes = infer_shape(self._symbol, (), kwargs, partial=False)
        if arg_shapes is None:
            raise MXNetError(f"reshape: the shapes {kwargs} do not determine every shape of the graph")
        args, grads = [], []
        for name, shape, arr, g in zip(
            self._arg_names, arg_shapes, self.arg_arrays, self.grad_arrays, strict=True
        ):
            if tuple(shape) == tuple(arr.shape):
                args.append(arr)
                grads.append(g)
                continue
            if name not in kwargs and not partial_shaping:
                raise MXNetError(
                    f"reshape: the shape of {name!r} would change from {tuple(arr.shape)} to "
                    f"{tuple(shape)}; pass partial_shaping=True to allow it"
                )
            if arr.numel() < int(np.prod(shape)) and not allow_up_sizing:
                raise MXNetError(
                    f"reshape: {name!r} would grow from {tuple(arr.shape)} to {tuple(shape)}; "
                    "pass allow_up_sizing=True to allow new memory"
                )
            args.append(first_elements(arr, shape))
            grads.append(None if g is None else first_elements(g, shape))
        for shape, arr in zip(aux_shapes, self.aux_arrays, strict=True):
            if tuple(shape) != tuple(arr.shape):
                raise MXNetError(
                    f"reshape: an auxiliary state would change shape {tuple(arr.shape)} -> {shape}"
                )
        new = Executor(self._symbol, self._ctx, args, grads, self._reqs, self.aux_arrays, self._group2ctx)
        new._out_buffers = self._shared_outputs(new, [tuple(a.shape) for a in args])
        return new

    def _shared_outputs(self, new: Executor, arg_shapes: list[Shape]) -> list[torch.Tensor] | None:
        """Views of this executor's outputs (allocated now if it has not run yet) for ``new``'s
        outputs, where none grows; None (fresh outputs) otherwise."""
        _, out_shapes, _ = infer_shape(self._symbol, arg_shapes, {}, partial=False)
        if out_shapes is None:
            return None
        if not self.outputs:
            return None
        views = []
        for out, shape in zip(self.outputs, out_shapes, strict=True):
            if out.numel() < int(np.prod(shape)) or not out.is_contiguous():
                return None
            views.append(first_elements(out, tuple(shape)))
        return views

    def _zero_outputs(self) -> list[torch.Tensor]:
        """Zero NDArrays of the outputs' inferred shapes and types ([] where shapes are unknown)."""
        shapes = dict(zip(self._arg_names, (tuple(a.shape) for a in self.arg_arrays), strict=True))
        _, mine, _ = infer_shape(self._symbol, (), shapes, partial=False)
        if mine is None:
            return []
        types = infer_type(self._symbol, (), {n: a.dtype for n, a in zip(self._arg_names, self.arg_arrays,
                                                                     strict=True)})[1]
        device = self.arg_arrays[0].device if self.arg_arrays else _device(self._ctx)
        return [new_ndarray(torch.zeros(sh, dtype=to_torch_dtype(t), device=device))
                for sh, t in zip(mine, types, strict=True)]

    def get_optimized_symbol(self) -> Graph:
        """The bound graph after MXNet's graph passes (common-subexpression elimination unless
        ``MXNET_ELIMINATE_COMMON_EXPR=0`` at bind); it computes the same outputs."""
        from .symbol._optimize import eliminate_common_expr

        return eliminate_common_expr(self._symbol) if self._cse else self._symbol

    def debug_str(self) -> str:
        """The plan's steps, then ``Total N MB allocated``: the intermediate arrays' memory, which
        MXNet reports too (outputs kept for backward, the peak of the others; see symbol._memory)."""
        from .symbol._memory import intermediate_bytes

        lines = [f"Symbol outputs: {self._output_names}"]
        for st in self._plan.steps:
            lines.append(f"Op:{st.op}, Name={st.name}, inputs={list(st.ins)}, outputs={list(st.outs)}")
        given = {n: tuple(a.shape) for n, a in zip(self._arg_names, self.arg_arrays, strict=True)}
        given.update({n: tuple(a.shape) for n, a in zip(self._aux_names, self.aux_arrays, strict=True)})
        dtypes = {n: a.dtype for n, a in zip(self._arg_names, self.arg_arrays, strict=True)}
        _, shapes, types = infer_node_shapes(self._symbol, given, dtypes)
        wanted = {n for n, r in zip(self._arg_names, self._reqs, strict=True) if r != "null"}
        lines.append(f"Total {intermediate_bytes(self._symbol, shapes, types, wanted) >> 20} MB allocated")
        return "\n".join(lines)


def _group_contexts(symbol: Graph, group2ctx: Mapping[str, Any] | None) -> dict[str, Context]:
    """The context of each variable whose ``ctx_group`` attribute ``group2ctx`` maps."""
    if not group2ctx:
        return {}
    out = {}
    for name, attrs in symbol.attr_dict().items():
        ctx = group2ctx.get(attrs.get("__ctx_group__", ""))
        if isinstance(ctx, (list, tuple)) and ctx:
            ctx = ctx[0]
        if isinstance(ctx, Context):
            out[name] = ctx
    return out


def simple_bind(
    symbol: Graph,
    ctx: Any,
    grad_req: Any,
    type_dict: Mapping[str, Any] | None,
    group2ctx: Mapping[str, Any] | None,
    shared_exec: Executor | None,
    shapes: Mapping[str, Any],
    stype_dict: Mapping[str, str] | None = None,
) -> Executor:
    """Allocate zero arrays (and gradient arrays unless ``grad_req`` is 'null') of the inferred
    shapes and bind; arrays of ``shared_exec`` with the same name and shape are shared."""
    arg_names, aux_names = symbol.list_arguments(), symbol.list_auxiliary_states()
    unknown = [k for k in shapes if k not in symbol.list_inputs()]
    if unknown:
        raise MXNetError(f"simple_bind: {unknown} are not inputs of the symbol {symbol.list_inputs()}")
    var_shapes, _, _ = infer_node_shapes(symbol, {k: tuple(v) for k, v in shapes.items()})
    missing = [n for n in arg_names + aux_names if n not in var_shapes]
    if missing:
        raise MXNetError(
            f"simple_bind: cannot infer the shapes of {missing}; give their shapes as keywords "
            f"(e.g. {missing[0]}=(...))"
        )
    if type_dict is None:  # MXNet's simple_bind: float32 for every argument without a __dtype__
        attrs = symbol.attr_dict()
        type_dict = {n: np.float32 for n in arg_names if "__dtype__" not in attrs.get(n, {})}
    arg_types, _, aux_types = infer_type(symbol, (), type_dict, partial=True)
    arg_types = [t if t is not None else np.float32 for t in arg_types]
    aux_types = [t if t is not None else np.float32 for t in aux_types]
    types = dict(zip(arg_names, arg_types, strict=True))
    device = _device(ctx)
    shared = shared_exec.arg_dict if shared_exec is not None else {}
    shared_g = shared_exec.grad_dict if shared_exec is not None else {}
    args: list[torch.Tensor] = []
    grads: list[torch.Tensor | None] = []
    reqs = _grad_reqs(grad_req, arg_names, [torch.empty(0)] * len(arg_names))
    placed = _group_contexts(symbol, group2ctx)

    from .nd import sparse

    stypes, sparse_grads = storage_types(symbol, stype_dict)

    def new_array(n: str, shape: tuple[int, ...], dt: torch.dtype, stype: str | None = None) -> torch.Tensor:
        where = placed.get(n)  # an argument of a ctx_group lives on that group's context
        dev = device if where is None else where.torch_device
        # in the declared storage type (MXNet's simple_bind)
        t = new_ndarray(torch.zeros(shape, dtype=dt, device=dev)) if stype is None else \
            sparse.zeros(stype, shape, ctx=dev, dtype=dt)
        if where is not None:
            t._mx_ctx = where  # type: ignore[attr-defined]
        return t

    for n, r in zip(arg_names, reqs, strict=True):
        shape, dt = var_shapes[n], to_torch_dtype(types[n])
        s = shared.get(n)
        reuse = s is not None and tuple(s.shape) == shape
        args.append(s if reuse and s is not None else new_array(n, shape, dt, stypes.get(n)))
        g = shared_g.get(n)
        if r == "null":
            grads.append(None)
        else:
            gs = "row_sparse" if n in sparse_grads else None
            grads.append(g if g is not None and tuple(g.shape) == shape else new_array(n, shape, dt, gs))
    aux = [
        new_ndarray(torch.zeros(var_shapes[n], dtype=to_torch_dtype(t), device=device))
        for n, t in zip(aux_names, aux_types, strict=True)
    ]
    return Executor(symbol, ctx, args, grads, reqs, aux, group2ctx)
