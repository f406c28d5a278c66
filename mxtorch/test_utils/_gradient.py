"""Gradient and forward checks of ``mx.test_utils``: finite differences against autograd, for
Python functions of tensors and for symbols (MXNet's ``check_numeric_gradient`` /
``check_symbolic_forward`` / ``check_symbolic_backward`` / ``check_consistency``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..context import Context
from ._compare import _np, assert_almost_equal
from ._tolerance import default_context, default_numeric_eps, get_tolerance, get_tols

_FLOATS = (np.float16, np.float32, np.float64)


def _is_symbol(x: Any) -> bool:
    from ..symbol.symbol import Symbol

    return isinstance(x, Symbol)


def _check_dtype(dtype: Any, what: str, asnumpy: bool = True) -> None:
    if not ((asnumpy and isinstance(dtype, str) and dtype == "asnumpy") or dtype in _FLOATS):
        raise ValueError(
            f"{what}: dtype must be {'asnumpy, ' if asnumpy else ''}np.float16, np.float32 "
            f"or np.float64, got {dtype!r}"
        )


def _as_array(v: Any, ctx: Context | str, dtype: Any) -> Any:
    from ..nd._creation import array

    if isinstance(v, torch.Tensor):
        return v
    v = np.asarray(v)
    return array(v, ctx=ctx, dtype=v.dtype if isinstance(dtype, str) else dtype)


def _parse_location(sym: Any, location: Any, ctx: Context | str, dtype: Any = np.float32) -> dict[str, Any]:
    """{argument name: array} from a list (in ``sym.list_arguments()`` order) or a dict of all of them."""
    names = sym.list_arguments()
    if isinstance(location, Mapping):
        if set(location) != set(names):
            raise ValueError(
                f"Symbol arguments and keys of the given location do not match: symbol args "
                f"{sorted(names)}, location keys {sorted(location)}"
            )
    elif isinstance(location, (list, tuple)):
        if len(location) != len(names):
            raise ValueError(f"{len(location)} values for the {len(names)} arguments {names}")
        location = dict(zip(names, location))
    else:
        raise TypeError(f"location must be a list or a dict of arrays, got {type(location).__name__}")
    return {k: _as_array(location[k], ctx, dtype) for k in names}


def _parse_aux_states(sym: Any, aux_states: Any, ctx: Context | str, dtype: Any = np.float32) -> Any:
    if aux_states is None:
        return None
    names = sym.list_auxiliary_states()
    if isinstance(aux_states, Mapping):
        if set(aux_states) != set(names):
            raise ValueError(
                f"Symbol aux_states names and given aux_states do not match: {sorted(names)} "
                f"against {sorted(aux_states)}"
            )
    else:
        aux_states = dict(zip(names, aux_states))
    return {k: _as_array(v, ctx, dtype) for k, v in aux_states.items()}


def simple_forward(sym: Any, ctx: Context | str | None = None, is_train: bool = False, **inputs: Any) -> Any:
    """Run ``sym`` once on numpy inputs (by argument name); numpy output(s) back."""
    from ..nd._creation import array

    exe = sym.bind(ctx or default_context(), args={k: array(v) for k, v in inputs.items()})
    exe.forward(is_train=is_train)
    outs = [_np(x) for x in exe.outputs]
    return outs[0] if len(outs) == 1 else outs


def check_symbolic_forward(
    sym: Any,
    location: Any,
    expected: Any,
    rtol: Any = None,
    atol: Any = None,
    aux_states: Any = None,
    ctx: Context | str | None = None,
    equal_nan: bool = False,
    dtype: Any = np.float32,
) -> list[Any]:
    """Assert that ``sym``'s forward outputs at ``location`` equal ``expected`` (a list in output
    order, or a dict by output name); returns the outputs."""
    _check_dtype(dtype, "check_symbolic_forward")
    ctx = ctx or default_context()
    args = _parse_location(sym, location, ctx, dtype)
    aux = _parse_aux_states(sym, aux_states, ctx, dtype)
    names = sym.list_outputs()
    if isinstance(expected, Mapping):
        expected = [expected[k] for k in names]
    exe = sym.bind(ctx, args=args, grad_req="null", aux_states=aux)
    outs = exe.forward(is_train=False)
    for name, want, got in zip(names, expected, outs):
        assert_almost_equal(
            want, got, rtol, atol, (f"EXPECTED_{name}", f"FORWARD_{name}"), equal_nan=equal_nan
        )
    return list(outs)


def _grad_reqs(names: Sequence[str], grad_req: Any) -> dict[str, str]:
    if isinstance(grad_req, str):
        return {k: grad_req for k in names}
    if isinstance(grad_req, (list, tuple)):
        return dict(zip(names, grad_req))
    return dict(grad_req)


def check_symbolic_backward(
    sym: Any,
    location: Any,
    out_grads: Any,
    expected: Any,
    rtol: Any = None,
    atol: Any = None,
    aux_states: Any = None,
    grad_req: Any = "write",
    ctx: Context | str | None = None,
    grad_stypes: Any = None,
    equal_nan: bool = False,
    dtype: Any = np.float32,
) -> dict[str, Any]:
    """Assert that the gradients ``sym`` computes at ``location`` for head gradients ``out_grads``
    equal ``expected`` (a list in argument order, or a dict by name). Gradient buffers start random:
    'write' must overwrite them, 'add' add to them, 'null' leave them."""
    _check_dtype(dtype, "check_symbolic_backward")
    ctx = ctx or default_context()
    args = _parse_location(sym, location, ctx, dtype)
    aux = _parse_aux_states(sym, aux_states, ctx, dtype)
    if isinstance(expected, (list, tuple)):
        expected = dict(zip(sym.list_arguments(), expected))
    start = {k: np.random.normal(size=np.shape(v)) for k, v in sorted(expected.items())}
    grads = {
        k: _as_array(v.astype(np.asarray(expected[k]).dtype) if isinstance(dtype, str) else v, ctx, dtype)
        for k, v in start.items()
    }
    reqs = _grad_reqs(sym.list_arguments(), grad_req)
    exe = sym.bind(ctx, args=args, args_grad=grads, grad_req=reqs, aux_states=aux)
    exe.forward(is_train=True)
    if isinstance(out_grads, Mapping):
        out_grads = {k: _as_array(v, ctx, dtype) for k, v in out_grads.items()}
    elif out_grads is not None:
        out_grads = [_as_array(v, ctx, dtype) for v in out_grads]
    exe.backward(out_grads)
    got = exe.grad_dict
    for name, want in expected.items():
        req = reqs[name]
        labels = (f"EXPECTED_{name}", f"BACKWARD_{name}")
        if req == "write":
            assert_almost_equal(want, got[name], rtol, atol, labels, equal_nan=equal_nan)
        elif req == "add":
            assert_almost_equal(want, _np(got[name]) - start[name], rtol, atol, labels, equal_nan=equal_nan)
        elif req == "null":
            assert_almost_equal(
                start[name],
                got[name] if got.get(name) is not None else grads[name],
                rtol,
                atol,
                labels,
                equal_nan=equal_nan,
            )
        else:
            raise ValueError(f"Invalid grad_req {req!r} for argument {name}")
    return grads


def numeric_grad(
    executor: Any,
    location: dict[str, np.ndarray],
    aux_states: Any = None,
    eps: float = 1e-4,
    use_forward_train: bool = True,
    dtype: Any = np.float32,
    proj: Sequence[np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Central differences of sum(outputs * proj) (proj: ones when not given) with respect to each
    floating-point argument in ``location``, stepping each element by ±eps/2."""

    def objective() -> float:
        outs = executor.forward(is_train=use_forward_train)
        weights: list[Any] = list(proj) if proj is not None else [1.0] * len(outs)
        return sum(float((_np(o).astype(np.float64) * w).sum()) for o, w in zip(outs, weights))

    out: dict[str, np.ndarray] = {}
    for k, v in location.items():
        v = np.array(v, dtype=np.float64, order="C")
        grad = np.zeros(v.shape, dtype=np.float64)
        arr = executor.arg_dict[k]
        if not arr.is_floating_point():
            continue
        for i in range(v.size):
            old = v.flat[i]
            v.flat[i] = old + eps / 2.0
            arr.copy_(torch.as_tensor(v, dtype=arr.dtype))
            if aux_states is not None:
                for name, val in aux_states.items():
                    executor.aux_dict[name].copy_(torch.as_tensor(_np(val)))
            plus = objective()
            v.flat[i] = old - eps / 2.0
            arr.copy_(torch.as_tensor(v, dtype=arr.dtype))
            if aux_states is not None:
                for name, val in aux_states.items():
                    executor.aux_dict[name].copy_(torch.as_tensor(_np(val)))
            minus = objective()
            grad.flat[i] = (plus - minus) / eps
            v.flat[i] = old
        arr.copy_(torch.as_tensor(v, dtype=arr.dtype))
        out[k] = grad.astype(dtype)
    return out


def _check_symbol_gradient(
    sym: Any,
    location: Any,
    aux_states: Any,
    numeric_eps: Any,
    rtol: Any,
    atol: Any,
    grad_nodes: Any,
    use_forward_train: bool,
    ctx: Any,
    dtype: Any,
) -> None:
    _check_dtype(dtype, "check_numeric_gradient", asnumpy=False)
    ctx = ctx or default_context()
    args = _parse_location(sym, location, ctx, dtype)
    aux = _parse_aux_states(sym, aux_states, ctx, dtype)
    names = sym.list_arguments()
    if grad_nodes is None:
        reqs = {k: "write" for k in names}
    elif isinstance(grad_nodes, Mapping):
        reqs = dict(grad_nodes)
    elif isinstance(grad_nodes, (list, tuple)):
        reqs = {k: "write" for k in grad_nodes}
    else:
        raise ValueError(f"grad_nodes must be None, a list of argument names or a dict, got {grad_nodes!r}")
    unknown = sorted(set(reqs) - set(names))
    if unknown:
        raise ValueError(f"grad_nodes {unknown} are not arguments of the symbol ({names})")
    start = {k: np.random.normal(0, 0.01, size=tuple(args[k].shape)) for k in reqs}
    grads = {k: _as_array(v, ctx, dtype) for k, v in start.items()}
    exe = sym.bind(
        ctx, args=args, args_grad=grads, grad_req={k: reqs.get(k, "null") for k in names}, aux_states=aux
    )
    outs = exe.forward(is_train=True)
    if len(outs) != 1:
        raise ValueError(f"check_numeric_gradient: the symbol must have one output, it has {len(outs)}")
    eps = get_tolerance(outs[0], numeric_eps, default_numeric_eps())
    proj = [np.random.rand(*tuple(o.shape)) + 0.1 for o in outs]
    exe.backward([_as_array(p, ctx, dtype) for p in proj])
    symbolic = {k: _np(v) for k, v in exe.grad_dict.items() if v is not None}
    location_np = {k: _np(v) for k, v in args.items()}
    numeric = numeric_grad(
        exe,
        location_np,
        None if aux is None else {k: _np(v) for k, v in aux.items()},
        eps=eps,
        use_forward_train=use_forward_train,
        dtype=dtype,
        proj=proj,
    )
    for name, req in reqs.items():
        labels = (f"NUMERICAL_{name}", f"BACKWARD_{name}")
        if req == "write":
            assert_almost_equal(numeric[name], symbolic[name], rtol, atol, labels)
        elif req == "add":
            assert_almost_equal(numeric[name], symbolic[name] - start[name], rtol, atol, labels)
        elif req == "null":
            assert_almost_equal(start[name], _np(grads[name]), rtol, atol, labels)
        else:
            raise ValueError(f"Invalid grad_req {req!r} for argument {name}")


def _projected(out: Any, projs: list[torch.Tensor] | None) -> tuple[torch.Tensor, list[torch.Tensor]]:
    outs = [out] if isinstance(out, torch.Tensor) else list(out)
    if projs is None:
        g = torch.Generator().manual_seed(0)
        projs = [torch.rand(o.shape, generator=g, dtype=torch.float64).to(o.device) + 0.5 for o in outs]
    total = sum((o.to(torch.float64) * p).sum() for o, p in zip(outs, projs))
    return total, projs  # type: ignore[return-value]


def _check_function_gradient(
    f: Callable[..., Any],
    inputs: Any,
    eps: float,
    rtol: float,
    atol: float | None,
    grad_nodes: Sequence[int] | None,
) -> None:
    if isinstance(inputs, (torch.Tensor, np.ndarray)):
        inputs = [inputs]
    xs = [
        x.detach().clone(memory_format=torch.contiguous_format)
        if isinstance(x, torch.Tensor)
        else torch.as_tensor(np.array(x))
        for x in inputs
    ]
    nodes = (
        list(grad_nodes) if grad_nodes is not None else [i for i, x in enumerate(xs) if x.is_floating_point()]
    )
    for i in nodes:
        if not xs[i].is_floating_point():
            raise TypeError(
                f"check_numeric_gradient: input {i} has dtype {xs[i].dtype}; it must be floating point"
            )
    if atol is None:
        atol = 1e-4 if all(xs[i].dtype == torch.float64 for i in nodes) else 1e-3
    leaves = [x.clone().requires_grad_(True) if i in nodes else x for i, x in enumerate(xs)]
    with torch.enable_grad():
        loss, projs = _projected(f(*leaves), None)
        wrt = [leaves[i] for i in nodes]
        grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    analytic = [torch.zeros_like(w) if g is None else g.detach() for w, g in zip(wrt, grads)]
    with torch.no_grad():
        for k, i in enumerate(nodes):
            x = xs[i]
            flat = x.view(-1)
            numeric = torch.zeros(x.numel(), dtype=torch.float64)
            for j in range(x.numel()):
                old = flat[j].item()
                flat[j] = old + eps
                plus = _projected(f(*xs), projs)[0].item()
                flat[j] = old - eps
                minus = _projected(f(*xs), projs)[0].item()
                flat[j] = old
                numeric[j] = (plus - minus) / (2.0 * eps)
            assert_almost_equal(
                numeric.reshape(x.shape).numpy(),
                analytic[k].to(torch.float64).cpu().numpy(),
                rtol=rtol,
                atol=atol,
                names=(f"NUMERICAL_input{i}", f"BACKWARD_input{i}"),
            )


def check_numeric_gradient(
    sym: Any,
    location: Any,
    aux_states: Any = None,
    numeric_eps: Any = None,
    rtol: Any = None,
    atol: Any = None,
    grad_nodes: Any = None,
    use_forward_train: bool = True,
    ctx: Context | str | None = None,
    grad_stype_dict: Any = None,
    dtype: Any = np.float32,
    eps: float | None = None,
) -> None:
    """Check backward against central differences.

    MXNet's form: ``sym`` a Symbol, ``location`` its arguments (list in ``list_arguments()`` order,
    or a dict), ``grad_nodes`` names (or a dict name -> grad_req); the symbol's single output is
    projected onto a random array. The function form: ``sym`` a Python function of tensors,
    ``location`` its inputs, ``grad_nodes`` input positions (default every floating-point input);
    ``rtol`` defaults to 1e-2, ``atol`` to 1e-4 for float64 inputs, 1e-3 otherwise. Each input
    element costs two forward passes: keep the inputs small.
    """
    if _is_symbol(sym):
        _check_symbol_gradient(
            sym,
            location,
            aux_states,
            numeric_eps if eps is None else eps,
            rtol,
            atol,
            grad_nodes,
            use_forward_train,
            ctx,
            dtype,
        )
        return
    if not callable(sym):
        raise TypeError(f"check_numeric_gradient checks a Symbol or a function, got {type(sym).__name__}")
    step = eps if eps is not None else numeric_eps if numeric_eps is not None else 1e-3
    _check_function_gradient(
        sym, location, float(step), 1e-2 if rtol is None else float(rtol), atol, grad_nodes
    )


def _smaller_dtype(a: Any, b: Any) -> Any:
    return a if b is None or np.dtype(a).itemsize < np.dtype(b).itemsize else b


def check_consistency(
    sym: Any,
    ctx_list: Sequence[dict[str, Any]],
    scale: float = 1.0,
    grad_req: Any = "write",
    arg_params: Any = None,
    aux_params: Any = None,
    rtol: Any = None,
    atol: Any = None,
    raise_on_err: bool = True,
    ground_truth: Any = None,
    equal_nan: bool = False,
    use_uniform: bool = False,
    rand_type: Any = np.float64,
) -> dict[str, Any]:
    """Assert that ``sym`` (or one symbol per entry) gives the same outputs, and gradients unless
    ``grad_req`` is 'null', under each ``ctx_list`` entry (a ``simple_bind`` keyword dict: ``ctx``,
    input shapes, ``type_dict``). The entry with the widest output dtype is the reference."""
    from ..nd._creation import array

    if len(ctx_list) < 2:
        raise ValueError("check_consistency compares at least two contexts")
    syms = [sym] * len(ctx_list) if _is_symbol(sym) else list(sym)
    if len(syms) != len(ctx_list):
        raise ValueError(f"{len(syms)} symbols for {len(ctx_list)} contexts")
    out_names, arg_names = syms[0].list_outputs(), syms[0].list_arguments()
    exes = [s.simple_bind(grad_req=grad_req, **dict(c)) for s, c in zip(syms, ctx_list)]
    arg_params = {} if arg_params is None else dict(arg_params)
    aux_params = {} if aux_params is None else dict(aux_params)
    for n, arr in sorted(exes[0].arg_dict.items()):
        if n not in arg_params:
            shape = tuple(arr.shape)
            arg_params[n] = (
                np.random.uniform(-0.92 * scale, 0.92 * scale, size=shape)
                if use_uniform
                else np.random.normal(size=shape, scale=scale)
            ).astype(rand_type)
    for n in exes[0].aux_dict:
        aux_params.setdefault(n, 0)
    for exe in exes:
        for name, arr in exe.arg_dict.items():
            arr.copy_(torch.as_tensor(np.asarray(_np(arg_params[name]))).to(arr.dtype).expand_as(arr))
        for name, arr in exe.aux_dict.items():
            arr.copy_(torch.as_tensor(np.asarray(_np(aux_params[name]))).to(arr.dtype).expand_as(arr))
    outs = [exe.forward(is_train=False) for exe in exes]
    dtypes = [np.dtype(_np(o[0]).dtype) for o in outs]
    gt_idx = int(np.argmax([d.itemsize for d in dtypes]))
    gt = dict(ground_truth) if ground_truth is not None else dict(zip(out_names, outs[gt_idx]))

    def compare(got: Any, want: Any, rt: Any, at: Any, what: str) -> None:
        try:
            assert_almost_equal(got, want, rtol=rt, atol=at, equal_nan=equal_nan)
        except AssertionError as e:
            if raise_on_err:
                raise AssertionError(f"{what}: {e}") from e

    for i, o in enumerate(outs):
        if i != gt_idx:
            for name, arr in zip(out_names, o):
                compare(arr, gt[name], rtol, atol, f"forward of context {i} against {gt_idx} at {name}")
    if grad_req == "null":
        return gt
    train = [exe.forward(is_train=True) for exe in exes]
    least = [_np(t).dtype for t in train[0]]
    for t in train:
        least = [_smaller_dtype(_np(a).dtype, d) for a, d in zip(t, least)]
    golden = [_np(t).astype(d) for t, d in zip(train[0], least)]
    for exe, t in zip(exes, train):
        exe.backward([array(g, ctx=o.device, dtype=o.dtype) for g, o in zip(golden, t)])
    if ground_truth is None:
        gt = dict(zip(out_names, train[gt_idx]))
        gt.update(exes[gt_idx].grad_dict)
    for i, exe in enumerate(exes):
        if i == gt_idx:
            continue
        pairs = list(zip(out_names, train[i])) + [(n, exe.grad_dict.get(n)) for n in arg_names]
        for name, arr in pairs:
            want = gt.get(name)
            if want is None or arr is None:
                continue
            rt, at = rtol, atol
            a_dt, g_dt = (
                _smaller_dtype(_np(arr).dtype, dtypes[i]),
                _smaller_dtype(_np(want).dtype, dtypes[gt_idx]),
            )
            if a_dt != _np(arr).dtype or g_dt != _np(want).dtype:
                rt, at = get_tols(_np(arr).astype(a_dt), _np(want).astype(g_dt), rtol, atol)
            compare(arr, want, rt, at, f"training pass of context {i} against {gt_idx} at {name}")
    return gt
