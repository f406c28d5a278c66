"""The operator table of symbolic graphs: how each MXNet operator runs, names its inputs and
outputs, and gets the shapes of the parameters it creates.

Operators are MXNet's (the names in MXNet's JSON graph files); they run on the functions of
``mxtorch.nd`` (so a graph computes exactly what ``F.FullyConnected(...)`` computes in Gluon
code) or, for the output (loss) operators, on :mod:`._loss`.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from .. import nd
from ..base import MXNetError
from ..nd._elemwise import remainder
from ..nd._nn import activation_fn
from ..nd._norm import BatchNorm as nd_batch_norm
from ..nd._norm import InstanceNorm as nd_instance_norm
from ..nd._norm import LayerNorm as nd_layer_norm
from ..nd._shape import concat as _nd_concat
from ..nd._shape import split_v2 as _nd_split_v2
from . import _custom, _loss, _rnn
from ._opdef import OpDef as OpDef
from ._opdef import one_output as _one

Tensor = torch.Tensor
Shape = tuple[int, ...]

__all__ = ["OpDef", "get_op", "has_op", "canonical_name", "op_names", "required_inputs", "defaults_not_none"]


def _always(names: Sequence[str]) -> Callable[[dict[str, Any]], list[str]]:
    return lambda attrs: list(names)


_TABLE: dict[str, OpDef] = {}
_ALIASES: dict[str, str] = {}


def _add(op: OpDef, *aliases: str) -> None:
    _TABLE[op.name] = op
    for a in aliases:
        _ALIASES[a] = op.name


def canonical_name(name: str) -> str:
    """The graph-file name of an operator called ``name`` (``reshape`` -> ``Reshape``)."""
    return _ALIASES.get(name, name)


def has_op(name: str) -> bool:
    return canonical_name(name) in _TABLE or _nd_function(name) is not None


def op_names() -> list[str]:
    return sorted(set(_TABLE) | set(_ALIASES))


# ----------------------------------------------------------------------------------------------
# operators with parameters (the ones that create weight/bias/gamma/... variables)
# ----------------------------------------------------------------------------------------------


Compiled = Callable[[list[Any], bool], Any]


def _nd_compile(fn: Callable[..., Any]) -> Callable[[dict[str, Any]], Compiled]:
    """``attrs -> call(inputs, train)`` for mx.nd function ``fn``: the keywords it takes are picked
    once (graph files carry hints like ``workspace`` that it does not take)."""
    raw = inspect.unwrap(fn)  # past mx.nd's out=/name= wrapper
    sig = inspect.signature(raw)
    var_kw = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    known = set(sig.parameters) - {"out", "name"}
    takes_training = "training" in known

    def compile_(attrs: dict[str, Any]) -> Compiled:
        kw = {k: v for k, v in attrs.items() if (var_kw or k in known) and k != "training"}
        if takes_training:
            return lambda ins, train: raw(*ins, training=train, **kw)
        return lambda ins, train: raw(*ins, **kw)

    return compile_


def _nd_run(fn: Callable[..., Any]) -> Callable[[list[Any], dict[str, Any], bool], Any]:
    compile_ = _nd_compile(fn)
    return lambda ins, attrs, train: compile_(attrs)(ins, train)


def _fc_compile(attrs: dict[str, Any]) -> Compiled:
    # the hot path of MLPs: shapes were checked when the graph was bound (infer_shape)
    flatten, no_bias = bool(attrs.get("flatten", True)), bool(attrs.get("no_bias", False))

    def run(ins: list[Any], train: bool) -> Any:
        x = ins[0]
        if flatten and x.dim() != 2:
            x = x.reshape(x.shape[0], -1)
        return F.linear(x, ins[1], None if no_bias else ins[2])

    return run


def _activation_compile(attrs: dict[str, Any]) -> Compiled:
    fn = activation_fn(str(attrs.get("act_type", "relu")))
    return lambda ins, train: fn(ins[0])


def _channels(attrs: dict[str, Any], shape: Shape) -> int:
    layout = attrs.get("layout")
    return shape[-1] if isinstance(layout, str) and layout.endswith("C") else shape[1]


def _tuple(v: Any) -> tuple[int, ...]:
    if v is None or v == ():
        return ()
    return tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v),)


def _fc_inputs(attrs: dict[str, Any]) -> list[str]:
    return ["data", "weight"] if attrs.get("no_bias", False) else ["data", "weight", "bias"]


def _fc_shapes(attrs: dict[str, Any], data: Shape) -> dict[str, Shape]:
    n = int(attrs["num_hidden"])
    k = math.prod(data[1:]) if attrs.get("flatten", True) else data[-1]
    return {"weight": (n, k), "bias": (n,)}


def _conv_inputs(default_no_bias: bool) -> Callable[[dict[str, Any]], list[str]]:
    return lambda attrs: (
        ["data", "weight"] if attrs.get("no_bias", default_no_bias) else ["data", "weight", "bias"]
    )


def _conv_shapes(attrs: dict[str, Any], data: Shape) -> dict[str, Shape]:
    f, g = int(attrs["num_filter"]), int(attrs.get("num_group", 1))
    return {"weight": (f, _channels(attrs, data) // g, *_tuple(attrs["kernel"])), "bias": (f,)}


def _deconv_shapes(attrs: dict[str, Any], data: Shape) -> dict[str, Shape]:
    f, g = int(attrs["num_filter"]), int(attrs.get("num_group", 1))
    return {"weight": (_channels(attrs, data), f // g, *_tuple(attrs["kernel"])), "bias": (f,)}


def _per_channel(
    names: Sequence[str], default_axis: int
) -> Callable[[dict[str, Any], Shape], dict[str, Shape]]:
    def shapes(attrs: dict[str, Any], data: Shape) -> dict[str, Shape]:
        c = data[int(attrs.get("axis", default_axis))]
        return {n: (c,) for n in names}

    return shapes


_BN_KEYS = {"eps", "momentum", "fix_gamma", "use_global_stats", "output_mean_var", "axis"}


def _bn_outputs(attrs: dict[str, Any]) -> list[str]:
    return ["output", "mean", "var"] if attrs.get("output_mean_var", False) else ["output"]


def _bn_run(ins: list[Any], attrs: dict[str, Any], train: bool) -> Any:
    kw = {k: v for k, v in attrs.items() if k in _BN_KEYS}
    stored = {id(x) for x in ins if isinstance(x, torch.Tensor) and x.layout != torch.strided}
    if stored:  # MXNet's storage fallback: dense values, the moving statistics written back
        if bool(attrs.get("fix_gamma", True)):
            raise MXNetError("BatchNorm: fix_gamma=True is not supported for sparse arrays (as in MXNet); "
                             "pass dense arrays or fix_gamma=False")
        from ..nd._sparse_ndarray import assign

        dense = [x.to_dense() if id(x) in stored else x for x in ins]
        res = _bn_run(dense, attrs, train)
        for x, d in zip(ins[3:], dense[3:], strict=False):
            if id(x) in stored:
                assign(x, d)
        return res
    out, mean, var = nd_batch_norm(*ins, **{**kw, "output_mean_var": True, "training": train})
    # MXNet's 'var' output is the inverse standard deviation 1 / sqrt(var + eps), and no gradient
    # flows back through the mean and var outputs
    inv_std = torch.rsqrt(var.detach() + float(attrs.get("eps", 1e-3)))
    return out, mean.detach(), inv_std


_add(OpDef("FullyConnected", _nd_run(nd.FullyConnected), _fc_inputs, param_shapes=_fc_shapes,
           compile=_fc_compile))
_add(OpDef("Activation", _nd_run(nd.Activation), _always(["data"]), compile=_activation_compile))
_add(OpDef("Convolution", _nd_run(nd.Convolution), _conv_inputs(False), param_shapes=_conv_shapes))
_add(OpDef("Deconvolution", _nd_run(nd.Deconvolution), _conv_inputs(True), param_shapes=_deconv_shapes))
_add(
    OpDef(
        "BatchNorm",
        _bn_run,
        _always(["data", "gamma", "beta", "moving_mean", "moving_var"]),
        aux=("moving_mean", "moving_var"),
        outputs=_bn_outputs,
        total_outputs=lambda a: 3,
        param_shapes=_per_channel(["gamma", "beta", "moving_mean", "moving_var"], 1),
        aux_init={"moving_mean": '["zero", {}]', "moving_var": '["one", {}]'},
    )
)
_add(
    OpDef(
        "LayerNorm",
        _nd_run(nd_layer_norm),
        _always(["data", "gamma", "beta"]),
        param_shapes=_per_channel(["gamma", "beta"], -1),
    )
)
_add(
    OpDef(
        "InstanceNorm",
        _nd_run(nd_instance_norm),
        _always(["data", "gamma", "beta"]),
        param_shapes=_per_channel(["gamma", "beta"], 1),
    )
)
_add(
    OpDef(
        "Embedding",
        _nd_run(nd.Embedding),
        _always(["data", "weight"]),
        param_shapes=lambda a, d: {"weight": (int(a["input_dim"]), int(a["output_dim"]))},
    )
)
# retain needs a row_sparse array, which shape inference's probes are not: the output has data's shape
_add(OpDef("_sparse_retain", _nd_run(nd.sparse.retain), _always(["data", "indices"]),
           infer=lambda shapes, dtypes: [(tuple(shapes[0]), dtypes[0])]))
_add(  # Embedding with a row_sparse weight gradient (MXNet's contrib operator)
    OpDef(
        "_contrib_SparseEmbedding",
        _nd_run(nd.contrib.SparseEmbedding),
        _always(["data", "weight"]),
        param_shapes=lambda a, d: {"weight": (int(a["input_dim"]), int(a["output_dim"]))},
    )
)


def _deformable_inputs(*middle: str) -> Callable[[dict[str, Any]], list[str]]:
    return lambda attrs: ["data", "offset", *middle, *_conv_inputs(False)(attrs)[1:]]


# the deformable convolutions: a convolution's weight and bias, after the offsets (and the mask)
_add(OpDef("_contrib_DeformableConvolution", _nd_run(nd.contrib.DeformableConvolution), _deformable_inputs(),
           param_shapes=_conv_shapes))
_add(OpDef("_contrib_ModulatedDeformableConvolution", _nd_run(nd.contrib.ModulatedDeformableConvolution),
           _deformable_inputs("mask"), param_shapes=_conv_shapes))
_add(
    OpDef(
        "LeakyReLU",
        _nd_run(nd.LeakyReLU),
        lambda a: ["data", "gamma"] if a.get("act_type", "leaky") == "prelu" else ["data"],
        param_shapes=lambda a, d: {"gamma": (d[1] if len(d) > 1 else 1,)},
        aux_init={"gamma": '["Constant", {"value": 0.25}]'},
    )
)


_add(OpDef("RNN", lambda ins, a, t: _rnn.rnn_compile(a)(ins, t), _rnn.rnn_inputs, outputs=_rnn.rnn_outputs,
           total_outputs=lambda a: len(_rnn.rnn_outputs(a)), param_shapes=_rnn.rnn_shapes,
           compile=_rnn.rnn_compile))
# what MXNet's Gluon RNN layers flatten their weights with in exported graphs: a Concat
_add(OpDef("_rnn_param_concat", _nd_run(_nd_concat), None, compile=_nd_compile(_nd_concat)))


# ----------------------------------------------------------------------------------------------
# output (loss) operators
# ----------------------------------------------------------------------------------------------

SOFTMAX_OPTIONS = (
    "grad_scale",
    "ignore_label",
    "multi_output",
    "use_ignore",
    "preserve_shape",
    "normalization",
    "smooth_alpha",
    "out_grad",
)


def _label_shape(attrs: dict[str, Any], data: Shape) -> dict[str, Shape]:
    if attrs.get("multi_output", False):
        return {"label": (data[0], *data[2:])}
    if attrs.get("preserve_shape", False):
        return {"label": data[:-1]}
    return {"label": (data[0],)}


_add(
    OpDef(
        "SoftmaxOutput",
        lambda ins, a, t: _loss.softmax_output(
            ins[0], ins[1], **{k: a[k] for k in SOFTMAX_OPTIONS if k in a}
        ),
        _always(["data", "label"]),
        param_shapes=_label_shape,
        is_loss=True,
    ),
    "Softmax",
)
for _kind, _name in (
    ("linear", "LinearRegressionOutput"),
    ("logistic", "LogisticRegressionOutput"),
    ("mae", "MAERegressionOutput"),
):
    _add(
        OpDef(
            _name,
            functools.partial(
                lambda k, ins, a, t: _loss.regression_output(
                    ins[0], ins[1], k, float(a.get("grad_scale", 1.0))
                ),
                _kind,
            ),
            _always(["data", "label"]),
            param_shapes=lambda a, d: {"label": d},
            is_loss=True,
        )
    )


_add(
    OpDef(
        "SVMOutput",
        lambda ins, a, t: _loss.svm_output(
            ins[0],
            ins[1],
            float(a.get("margin", 1.0)),
            float(a.get("regularization_coefficient", 1.0)),
            bool(a.get("use_linear", False)),
        ),
        _always(["data", "label"]),
        param_shapes=lambda a, d: {"label": d[:-1]},
        is_loss=True,
    )
)


def _make_loss_run(ins: list[Any], a: dict[str, Any], t: bool) -> Any:
    return _loss.make_loss(
        ins[0],
        float(a.get("grad_scale", 1.0)),
        float(a.get("valid_thresh", 0.0)),
        str(a.get("normalization", "null")),
    )


_add(OpDef("MakeLoss", _make_loss_run, _always(["data"]), is_loss=True))
_add(OpDef("make_loss", _make_loss_run, _always(["data"]), is_loss=True))
_add(OpDef("BlockGrad", lambda ins, a, t: _loss.block_grad(ins[0]), _always(["data"])), "stop_gradient")
# lhs's values with rhs's shape: a shape constraint for inference (both inputs share one shape)
_add(OpDef("_identity_with_attr_like_rhs", lambda ins, a, t: ins[0], _always(["lhs", "rhs"])))


def _batch_take_run(ins: list[Any], a: dict[str, Any], t: bool) -> Any:
    # MXNet's batch_take: out[i] = a[i, indices[i]] for a 2-D a; indices are clipped into range
    x, idx = ins
    if x.dim() != 2 or idx.dim() != 1 or idx.shape[0] != x.shape[0]:
        raise MXNetError(f"batch_take: needs a of shape (n, m) and indices of shape (n,), got "
                         f"{tuple(x.shape)} and {tuple(idx.shape)}")
    cols = idx.to(torch.int64).clamp(0, max(x.shape[1] - 1, 0))
    return x.gather(1, cols.reshape(-1, 1)).reshape(-1)


_add(OpDef("batch_take", _batch_take_run, _always(["a", "indices"]), differentiable=False))


# ----------------------------------------------------------------------------------------------
# arithmetic of symbols: x + y, x * 2, 2 - x, x == y ...
# ----------------------------------------------------------------------------------------------


def _cmp(fn: Callable[[Any, Any], Tensor]) -> Callable[[Any, Any], Tensor]:
    def run(a: Any, b: Any) -> Tensor:
        ref = a if isinstance(a, Tensor) else b
        return fn(a, b).to(ref.dtype)

    return run


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "plus": operator.add,
    "minus": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "mod": remainder,
    "power": torch.pow,
    "hypot": torch.hypot,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "equal": _cmp(torch.eq),
    "not_equal": _cmp(torch.ne),
    "greater": _cmp(torch.gt),
    "greater_equal": _cmp(torch.ge),
    "lesser": _cmp(torch.lt),
    "lesser_equal": _cmp(torch.le),
}
_ELEMWISE = {"plus": "elemwise_add", "minus": "elemwise_sub", "mul": "elemwise_mul", "div": "elemwise_div"}
_TENSOR_SCALAR: dict[str, Callable[[Any, Any], Any]] = {
    "maximum": torch.clamp_min,
    "minimum": torch.clamp_max,
    "hypot": lambda x, s: torch.hypot(x, torch.full_like(x, s)),
}


def _binary_run(fn: Callable[[Any, Any], Any]) -> Callable[[list[Any], dict[str, Any], bool], Any]:
    return lambda ins, a, t: fn(ins[0], ins[1])


def _scalar_run(
    fn: Callable[[Any, Any], Any], reverse: bool
) -> Callable[[list[Any], dict[str, Any], bool], Any]:
    def run(ins: list[Any], a: dict[str, Any], t: bool) -> Any:
        x, s = ins[0], float(a.get("scalar", 0.0))
        if reverse:
            if fn is torch.pow:
                return torch.pow(torch.as_tensor(s, dtype=x.dtype, device=x.device), x)
            if fn is remainder:
                return remainder(torch.full_like(x, s), x)
            return fn(s, x)
        return fn(x, s)

    return run


for _k, _fn in _BINARY.items():
    _add(OpDef(_ELEMWISE.get(_k, f"_{_k}"), _binary_run(_fn), _always(["lhs", "rhs"])))
    if _k in _ELEMWISE:
        _ALIASES[f"_{_k}"] = _ELEMWISE[_k]
    _add(OpDef(f"_{_k}_scalar", _scalar_run(_TENSOR_SCALAR.get(_k, _fn), False), _always(["data"])))
    if _k in ("minus", "div", "mod", "power"):
        _add(OpDef(f"_r{_k}_scalar", _scalar_run(_fn, True), _always(["data"])))
_ALIASES.update(
    {
        "_Plus": "elemwise_add",
        "_Minus": "elemwise_sub",
        "_Mul": "elemwise_mul",
        "_Div": "elemwise_div",
        "_Power": "_power",
        "_Maximum": "_maximum",
        "_Minimum": "_minimum",
        "_Equal": "_equal",
        "_Greater": "_greater",
        "_Lesser": "_lesser",
        "_Mod": "_mod",
        "_Hypot": "_hypot",
    }
)


# ----------------------------------------------------------------------------------------------
# everything else: the mx.nd operator of the same name
# ----------------------------------------------------------------------------------------------

# Python names -> the operator's name in graph files (MXNet's aliases)
_ALIASES.update(
    {
        "reshape": "Reshape",
        "flatten": "Flatten",
        "concat": "Concat",
        "split": "SliceChannel",
        "cast": "Cast",
        "ElementWiseSum": "add_n",
        "pad": "Pad",
        "swapaxes": "SwapAxis",
        "identity": "_copy",
        "crop": "slice",  # MXNet's crop is slice; Crop is the operator below
        "zeros": "_zeros",
        "ones": "_ones",
        "SoftmaxActivation": "SoftmaxActivation",
    }
)
_ND_NAMES = {
    "Reshape": "reshape",
    "Flatten": "flatten",
    "Concat": "concat",
    "SliceChannel": "split",
    "Cast": "cast",
    "add_n": "add_n",
    "Pad": "pad",
    "SwapAxis": "swapaxes",
    "_copy": "identity",
    "_zeros": "zeros",
    "_ones": "ones",
    "_full": "full",
    "_arange": "arange",
    # MXNet's graph files call the linear-algebra operators _linalg_<op>; mx.nd has linalg_<op>
    **{f"_{name}": name for name in nd.linalg.TOP_LEVEL},
}
_ALIASES.update({name: f"_{name}" for name in nd.linalg.TOP_LEVEL})
_NOT_OPS = {
    "save",
    "load",
    "load_frombuffer",
    "array",
    "empty",
    "NDArray",
    "waitall",
    "from_numpy",
    "from_dlpack",
    "to_dlpack_for_read",
    "to_dlpack_for_write",
    "moveaxis",
    "histogram",
}


@functools.cache
def _nd_function(name: str) -> Callable[..., Any] | None:
    nd_name = _ND_NAMES.get(canonical_name(name), name)
    if nd_name.startswith("__") or nd_name in _NOT_OPS:
        return None
    # MXNet's graph name of mx.nd.image.<op> (mx.sym.image.<op>) is _image_<op>
    image_op = nd_name[len("_image_"):] if nd_name.startswith("_image_") else None
    if image_op is not None:
        return getattr(nd.image, image_op, None) if image_op in nd.image.OPERATORS else None
    fn = getattr(nd, nd_name, None)
    for prefix, namespace in (("_sparse_", nd.sparse), ("_contrib_", nd.contrib), ("", nd._internal)):
        if fn is None and nd_name.startswith(prefix or "_"):  # MXNet's graph names of those namespaces' ops
            fn = getattr(namespace, nd_name[len(prefix):], None)
    if fn is None or not callable(fn) or isinstance(fn, type) or inspect.ismodule(fn):
        return None
    return fn  # type: ignore[no-any-return]


MAX_OUTPUTS = 1 << 16
"""Most outputs one split node may have.  A graph lists every output, so a count from a file is
bounded before that list is built (whether the input's axis divides into it is checked at shape
inference, as MXNet does)."""


def _output_count(op: str, name: str, value: Any) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        n = 0
    if not 1 <= n <= MAX_OUTPUTS:
        raise MXNetError(f"{op}: {name} must be an int from 1 to {MAX_OUTPUTS} (mxtorch's limit on one "
                         f"node's outputs), got {value!r}")
    return n


def _split_outputs(attrs: dict[str, Any]) -> list[str]:
    n = _output_count("SliceChannel", "num_outputs", attrs.get("num_outputs", 1))
    return [f"output{i}" for i in range(n)]


def _topk_outputs(attrs: dict[str, Any]) -> list[str]:
    return ["output0", "output1"] if attrs.get("ret_typ") == "both" else ["output"]


def _split_v2_outputs(attrs: dict[str, Any]) -> list[str]:
    indices = _tuple(attrs.get("indices", ()))
    n = len(indices) if indices else _output_count("_split_v2", "sections", attrs.get("sections", 1))
    return [f"output{i}" for i in range(n)]


def _split_v2_run(ins: list[Any], a: dict[str, Any], t: bool) -> Any:
    # MXNet's _split_v2: ``indices`` are the split points with a leading 0, else ``sections``
    indices = _tuple(a.get("indices", ()))
    ios: Any = list(indices[1:]) if indices else int(a.get("sections", 1))
    axis, squeeze = int(a.get("axis", 0)), bool(a.get("squeeze_axis", False))
    out = _nd_split_v2(ins[0], ios, axis=axis, squeeze_axis=squeeze)
    return out if isinstance(out, (list, tuple)) else [out]


_add(OpDef("_split_v2", _split_v2_run, _always(["data"]), outputs=_split_v2_outputs))


def _crop_run(ins: list[Any], a: dict[str, Any], t: bool) -> Any:
    # MXNet's Crop: a (y, x) window of NCHW data, of size h_w or of the second input's H and W (that
    # input is read for its shape only and gets a zero gradient), at offset or centred
    data = ins[0]
    if data.dim() != 4:
        raise MXNetError(f"Crop: data must be 4-d (batch, channel, y, x), got shape {tuple(data.shape)}")
    if len(ins) > 1:
        h, w = int(ins[1].shape[2]), int(ins[1].shape[3])
    else:
        h, w = _tuple(a.get("h_w", (0, 0)))
    height, width = int(data.shape[2]), int(data.shape[3])
    if not (1 <= h <= height and 1 <= w <= width):
        raise MXNetError(f"Crop: a ({h}, {w}) window does not fit data of shape {tuple(data.shape)}")
    if a.get("center_crop", False):
        y, x = (height - h) // 2, (width - w) // 2
    else:
        y, x = _tuple(a.get("offset", (0, 0)))
        if not (0 <= y <= height - h and 0 <= x <= width - w):
            raise MXNetError(
                f"Crop: offset ({y}, {x}) puts the ({h}, {w}) window outside data {tuple(data.shape)}"
            )
    return data[:, :, y : y + h, x : x + w]


_add(OpDef("Crop", _crop_run, None))


def _unconfigured_custom(ins: list[Any], a: dict[str, Any], t: bool) -> Any:
    raise MXNetError("Custom: a Custom node runs the operator its op_type names (mx.operator.register)")


# the name only: each node's op_type configures its own OpDef (get_op(name, attrs), _custom.py)
_add(OpDef("Custom", _unconfigured_custom, None))


_MULTI_OUTPUTS = {"SliceChannel": _split_outputs, "topk": _topk_outputs,
                  "moments": _always(["output0", "output1"]),
                  **{f"_linalg_{n}": _always(["output0", "output1"]) for n in ("gelqf", "syevd", "slogdet")}}


@functools.cache
def _generic(name: str) -> OpDef | None:
    fn = _nd_function(name)
    if fn is None:
        return None
    canon = canonical_name(name)
    # generic operators take their tensor inputs positionally, named by signature_names()
    return OpDef(canon, _nd_run(fn), None, outputs=_MULTI_OUTPUTS.get(canon, _one), compile=_nd_compile(fn))


def get_op(name: str, attrs: Mapping[str, str] | None = None) -> OpDef:
    """The operator called ``name`` (graph-file or Python name); MXNetError for an unknown one.
    ``attrs`` (a node's attribute strings) configure a ``Custom`` operator."""
    canon = canonical_name(name)
    if canon == "Custom" and attrs is not None:
        return _custom.custom_opdef(attrs)
    op = _TABLE.get(canon) or _generic(canon)
    if op is None:
        raise MXNetError(
            f"operator {name!r} is not implemented in mxtorch's symbolic graphs; "
            "known operators include FullyConnected, Convolution, BatchNorm, Activation, "
            "Pooling, SoftmaxOutput and every mx.nd operator"
        )
    return op


def signature_names(name: str) -> list[str] | None:
    """The input names of operator ``name`` in order (None: it takes any number of inputs)."""
    op = _TABLE.get(canonical_name(name))
    if op is not None and op.inputs is not None:
        return None
    fn = _nd_function(name)
    if fn is None:
        return None
    params = inspect.signature(fn).parameters.values()
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


@functools.cache
def required_inputs(name: str) -> frozenset[str]:
    """The parameters of the mx.nd function behind operator ``name`` that have no default (its
    array inputs; a symbol call that leaves one out gets a new variable for it)."""
    fn = _nd_function(name)
    if fn is None:
        return frozenset()
    params = inspect.signature(fn).parameters.values()
    return frozenset(p.name for p in params
                     if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


@functools.cache
def defaults_not_none(name: str) -> frozenset[str]:
    """The keyword parameters of the mx.nd function behind operator ``name`` whose default is not
    None (given as None, such a parameter means something: ``sort(axis=None)`` sorts the flat array)."""
    fn = _nd_function(name)
    if fn is None:
        return frozenset()
    params = inspect.signature(fn).parameters.values()
    return frozenset(p.name for p in params if p.default is not p.empty and p.default is not None
                     and p.name not in ("out", "name"))
