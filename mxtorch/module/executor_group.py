"""Data parallelism of a Module: one executor per context, each on a slice of the batch.

As MXNet's ``DataParallelExecutorGroup``: the batch is split along axis 0 in proportion to
``work_load_list``; every context holds its own copy of the parameters; outputs are
concatenated back; ``get_params`` averages the copies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..base import MXNetError
from ..executor import Executor
from ..io.base import DataDesc
from ..nd import cast_storage

if TYPE_CHECKING:
    from ..symbol.symbol import Symbol

__all__ = ["DataParallelExecutorGroup", "split_input_slice", "as_descs"]


def split_input_slice(batch_size: int, work_load_list: Sequence[float]) -> list[slice]:
    """Slices of a batch of ``batch_size`` in proportion to ``work_load_list`` (MXNet's rounding)."""
    total = float(sum(work_load_list))
    if total <= 0:
        raise MXNetError(f"work_load_list {list(work_load_list)} must have a positive sum")
    sizes = [int(round(w * batch_size / total)) for w in work_load_list]
    sizes[-1] += batch_size - sum(sizes)
    slices, start = [], 0
    for s in sizes:
        if s <= 0:
            raise MXNetError(
                f"batch of {batch_size} cannot be split over {len(work_load_list)} contexts with "
                f"work loads {list(work_load_list)}: a context would get {s} samples"
            )
        slices.append(slice(start, start + s))
        start += s
    return slices


def _shape(value: Any, what: str, name: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or not all(isinstance(s, (int, np.integer)) for s in value):
        raise TypeError(f"{what}: the shape of {name!r} must be a tuple of ints, got {value!r}")
    return tuple(int(s) for s in value)


def as_descs(shapes: Any, what: str) -> list[DataDesc]:
    """DataDescs (``(name, shape)`` tuples carrying ``dtype`` and ``layout``) from DataDesc
    objects, (name, shape) pairs or a dict; anything else, or a shape that is not a tuple of ints,
    is a TypeError (MXNet's)."""
    if shapes is None:
        return []
    if isinstance(shapes, Mapping):
        shapes = list(shapes.items())
    out = []
    for d in shapes:
        if isinstance(d, DataDesc):
            out.append(DataDesc(d.name, _shape(d.shape, what, d.name), d.dtype, d.layout))
        elif hasattr(d, "name") and hasattr(d, "shape"):
            out.append(DataDesc(str(d.name), _shape(d.shape, what, str(d.name))))
        elif isinstance(d, (tuple, list)) and len(d) >= 2 and isinstance(d[0], str):
            out.append(DataDesc(d[0], _shape(d[1], what, d[0])))
        else:
            raise TypeError(f"{what}: expected (name, shape) pairs or DataDesc, got {d!r}")
    return out


def _take(arr: Any, axis: int, sl: slice) -> Any:
    """The slice ``sl`` of ``arr`` along its batch ``axis`` (-1: not split, the whole array)."""
    return arr if axis < 0 else arr.narrow(axis, sl.start, sl.stop - sl.start)


def _merge(parts: list[Any], axis: int) -> Any:
    if len(parts) == 1 or axis < 0:
        return parts[0]
    return torch.cat([t.to(parts[0].device) for t in parts], dim=axis)


def _arrays_of(batch_part: Any) -> list[Any]:
    if batch_part is None:
        return []
    if isinstance(batch_part, (torch.Tensor, np.ndarray)):
        return [batch_part]
    return list(batch_part)


class DataParallelExecutorGroup:
    """Executors of ``symbol`` on ``contexts`` sharing the work of each batch."""

    def __init__(
        self,
        symbol: Symbol,
        contexts: list[Any],
        workload: Sequence[float],
        data_shapes: list[DataDesc],
        label_shapes: list[DataDesc],
        param_names: list[str],
        for_training: bool,
        inputs_need_grad: bool,
        shared_group: DataParallelExecutorGroup | None = None,
        logger: Any = None,
        fixed_param_names: Sequence[str] | None = (),
        grad_req: Any = "write",
        state_names: Sequence[str] | None = (),
        group2ctxs: Sequence[Any] | None = None,
    ) -> None:
        self.symbol = symbol
        # per context, the input (non-parameter) arrays by name, one dict shared by every group
        # made with shared_group=this one: their executors use the same input memory (MXNet's)
        self.shared_group = shared_group
        self.shared_data_arrays: list[dict[str, Any]] = (
            shared_group.shared_data_arrays if shared_group is not None else [{} for _ in contexts]
        )
        self.contexts = contexts
        self.workload = list(workload)
        self.param_names = param_names
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.fixed_param_names = set(fixed_param_names or ())
        self.state_names = list(state_names or ())
        self.arg_names = symbol.list_arguments()
        self.aux_names = symbol.list_auxiliary_states()
        self.group2ctxs = list(group2ctxs) if group2ctxs is not None else [None] * len(contexts)
        self.grad_req = self._grad_req(grad_req)
        # the batch axis of each output, from its __layout__ attribute (MXNet's rule; 0 without one)
        self.output_axes = [DataDesc.get_batch_axis(symbol[i].attr("__layout__"))
                            for i in range(len(symbol.list_outputs()))]
        self.execs: list[Executor] = []
        self.bind_exec(data_shapes, label_shapes)

    def _grad_req(self, grad_req: Any) -> dict[str, str]:
        reqs: dict[str, str] = {}
        for name in self.arg_names:
            base = grad_req.get(name, "write") if isinstance(grad_req, Mapping) else grad_req
            if name in self.param_names:
                reqs[name] = "null" if (not self.for_training or name in self.fixed_param_names) else base
            else:  # MXNet: an input's gradient follows grad_req too ('null': get_input_grads gives None)
                reqs[name] = base if self.inputs_need_grad and self.for_training else "null"
        return reqs

    def bind_exec(
        self,
        data_shapes: list[DataDesc],
        label_shapes: list[DataDesc],
        shared_group: Any = None,
    ) -> None:
        """(Re)create the executors for these input shapes, keeping parameter arrays that exist.
        Each input is split across the contexts along its layout's batch axis (``N``)."""
        if not data_shapes:
            raise MXNetError("bind: data_shapes is empty; give the shape of every data input")
        data_shapes, label_shapes = as_descs(data_shapes, "bind"), as_descs(label_shapes, "bind")
        batch_axes = {d.name: DataDesc.get_batch_axis(d.layout) for d in data_shapes + label_shapes}
        first = data_shapes[0]
        batch_size = first.shape[max(batch_axes[first.name], 0)]
        type_dict = {d.name: d.dtype for d in data_shapes + label_shapes}
        slices = split_input_slice(batch_size, self.workload)
        known = set(self.arg_names) | set(self.aux_names)
        execs: list[Executor] = []  # the group changes only once all of them are bound
        for i, ctx in enumerate(self.contexts):
            n = slices[i].stop - slices[i].start
            shapes = {}
            for name, shape in data_shapes + label_shapes:
                if name in known:
                    axis = batch_axes[name]
                    shapes[name] = shape if axis < 0 else (*shape[:axis], n, *shape[axis + 1:])
            shared = self.execs[i] if i < len(self.execs) else None
            if shared is None and self.shared_group is not None:
                shared = self.shared_group.execs[i]
            ex = self.symbol.simple_bind(
                ctx, grad_req=self.grad_req, type_dict={k: v for k, v in type_dict.items() if k in shapes},
                group2ctx=self.group2ctxs[i], shared_exec=shared, **shapes
            )
            if shared is not None:  # the parameters keep their shapes; aux states are shared too
                for k in self.param_names:
                    before, now = shared.arg_dict.get(k), ex.arg_dict.get(k)
                    if before is not None and now is not None and tuple(before.shape) != tuple(now.shape):
                        raise MXNetError(
                            f"inputs of shapes {dict(shapes)} need parameter {k!r} of shape "
                            f"{tuple(now.shape)}, but the module's has {tuple(before.shape)}"
                        )
                for k, arr in shared.aux_dict.items():
                    if k in ex.aux_dict:
                        ex.aux_arrays[self.aux_names.index(k)] = arr
            self._share_inputs(ex, self.shared_data_arrays[i])
            execs.append(ex)
        self.data_shapes, self.label_shapes, self.batch_axes = data_shapes, label_shapes, batch_axes
        self.batch_size, self.slices, self.execs = batch_size, slices, execs
        self.data_names = [n for n, _ in data_shapes]
        self.label_names = [n for n, _ in label_shapes if n in known]
        self.param_arrays = [[ex.arg_dict[n] for ex in self.execs] for n in self.param_names]
        self.grad_arrays: list[list[Any]] = [[ex.grad_dict[n] for ex in self.execs] for n in self.param_names]
        self.aux_arrays = [[ex.aux_dict[n] for ex in self.execs] for n in self.aux_names]
        self.input_grad_arrays: list[list[Any]] = [
            [ex.grad_dict[n] for ex in self.execs] for n in self.data_names
        ]
        self.state_arrays = [[ex.arg_dict[n] for ex in self.execs] for n in self.state_names]

    # ------------------------------------------------------------------ states
    def set_states(self, states: Any = None, value: Any = None) -> None:
        """Fill the state inputs: ``states`` one entry per state, each an array (split across the
        contexts like a batch) or a list with one array per context; or every element = ``value``."""
        if (states is None) == (value is None):
            raise ValueError("set_states: give exactly one of states (arrays) and value (a number)")
        with torch.no_grad():
            if value is not None:
                for block in self.state_arrays:
                    for dst in block:
                        dst.fill_(value)
                return
            states = list(states)
            if len(states) != len(self.state_names):
                raise MXNetError(
                    f"set_states: {len(states)} states given, the module has {len(self.state_names)} "
                    f"({self.state_names})"
                )
            for name, src, block in zip(self.state_names, states, self.state_arrays, strict=True):
                parts = (list(src) if isinstance(src, (list, tuple))
                         else [_take(src, 0, sl) if len(block) > 1 else src for sl in self.slices])
                if len(parts) != len(block):
                    raise MXNetError(
                        f"set_states: state {name!r} has {len(parts)} arrays for {len(block)} contexts"
                    )
                for part, dst in zip(parts, block, strict=True):
                    part = torch.as_tensor(np.asarray(part)) if not isinstance(part, torch.Tensor) else part
                    if tuple(part.shape) != tuple(dst.shape):
                        raise MXNetError(
                            f"set_states: state {name!r} has shape {tuple(part.shape)} on a context "
                            f"whose state array has {tuple(dst.shape)}"
                        )
                    dst.copy_(part.to(dst.device, dst.dtype))

    def get_states(self, merge_multi_context: bool = True) -> list[Any]:
        """The state inputs, one list per state (one array per context) or merged on axis 0."""
        if not merge_multi_context:
            return self.state_arrays
        return [_merge(block, 0) for block in self.state_arrays]

    def _share_inputs(self, ex: Executor, arrays: dict[str, Any]) -> None:
        """Give ``ex`` the shared input array of each non-parameter argument whose name and
        shape match one in ``arrays``; put its own there otherwise."""
        params = set(self.param_names)
        for j, name in enumerate(self.arg_names):
            if name in params:
                continue
            held, own = arrays.get(name), ex.arg_arrays[j]
            if held is not None and held.shape == own.shape and held.dtype == own.dtype:
                ex.arg_arrays[j] = held
            else:
                arrays[name] = own

    # ------------------------------------------------------------------ parameters
    def set_params(
        self, arg_params: Mapping[str, Any], aux_params: Mapping[str, Any] | None, allow_extra: bool = False
    ) -> None:
        for ex in self.execs:
            ex.copy_params_from(arg_params, aux_params, allow_extra_params=allow_extra)

    def get_params(self, arg_params: dict[str, Any], aux_params: dict[str, Any]) -> None:
        """Average the copies of each parameter across contexts into ``arg_params``/``aux_params``."""
        for names, arrays, dst in (
            (self.param_names, self.param_arrays, arg_params),
            (self.aux_names, self.aux_arrays, aux_params),
        ):
            for name, block in zip(names, arrays, strict=True):
                with torch.no_grad():
                    if len(block) == 1:
                        val = block[0].detach().to("cpu")
                    else:
                        val = torch.stack([w.detach().to("cpu") for w in block]).mean(0)
                    held = dst.get(name)
                    if held is not None and held.layout != torch.strided:  # a sparse arg_params entry
                        dst[name] = cast_storage(val.to(held.dtype), getattr(held, "stype", "row_sparse"))
                    elif held is not None:
                        held.copy_(val.to(held.dtype))
                    else:
                        dst[name] = val.clone()

    # ------------------------------------------------------------------ running
    def _load(self, names: list[str], arrays: list[Any], is_label: bool) -> None:
        for name, arr in zip(names, arrays, strict=False):
            if not isinstance(arr, torch.Tensor):
                arr = torch.as_tensor(np.asarray(arr))
            for ex, sl in zip(self.execs, self.slices, strict=True):
                dst = ex.arg_array(name)
                if dst is None:
                    continue
                part = _take(arr, self.batch_axes.get(name, 0), sl) if len(self.execs) > 1 else arr
                if tuple(part.shape) != tuple(dst.shape):
                    raise MXNetError(
                        f"{'label' if is_label else 'data'} {name!r}: batch slice has shape "
                        f"{tuple(part.shape)}, the module was bound with {tuple(dst.shape)}"
                    )
                with torch.no_grad():
                    dst.copy_(
                        part.to(dst.device, dst.dtype)
                        if part.device != dst.device or part.dtype != dst.dtype
                        else part
                    )

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        if is_train is None:
            is_train = self.for_training
        data = _arrays_of(data_batch.data)
        if len(data) != len(self.data_names):
            raise MXNetError(
                f"forward: the batch has {len(data)} data arrays, the module takes "
                f"{len(self.data_names)} ({self.data_names})"
            )
        self._load(self.data_names, data, False)
        label = _arrays_of(getattr(data_batch, "label", None))
        if is_train and label:
            self._load(self.label_names, label, True)
        elif label and self.label_names:
            self._load(self.label_names, label, True)
        for ex in self.execs:
            ex.forward(is_train=is_train)

    def backward(self, out_grads: Any = None) -> None:
        if not self.for_training:
            raise MXNetError("backward: the module was bound with for_training=False")
        for i, ex in enumerate(self.execs):
            if out_grads is None:
                ex.backward()
            else:
                grads = [_take(g, axis, self.slices[i]) if len(self.execs) > 1 else g
                         for g, axis in zip(_arrays_of(out_grads), self.output_axes)]
                ex.backward(grads)

    def get_outputs(self, merge_multi_context: bool = True) -> list[Any]:
        outs = [[ex.outputs[k] for ex in self.execs] for k in range(len(self.execs[0].outputs))]
        if not merge_multi_context:
            return outs
        return [_merge(o, axis) for o, axis in zip(outs, self.output_axes)]

    def get_input_grads(self, merge_multi_context: bool = True) -> list[Any]:
        if not self.inputs_need_grad:
            raise MXNetError("get_input_grads: bind the module with inputs_need_grad=True")
        if not merge_multi_context:
            return self.input_grad_arrays
        return [_merge(g, self.batch_axes.get(n, 0)) for g, n in zip(self.input_grad_arrays, self.data_names)]

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        labels = _arrays_of(labels)
        for i, ex in enumerate(self.execs):
            if pre_sliced:
                lab = _arrays_of(labels[i])
            elif len(self.execs) > 1:
                lab = [
                    torch.as_tensor(np.asarray(x)) if not isinstance(x, torch.Tensor) else x for x in labels
                ]
                axes = [self.batch_axes.get(d.name, 0) for d in self.label_shapes]
                lab = [_take(x, axes[j] if j < len(axes) else 0, self.slices[i]) for j, x in enumerate(lab)]
            else:
                lab = labels
            eval_metric.update(lab, ex.outputs)
