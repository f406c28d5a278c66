"""Does ``import mxtorch`` slow torch code down?  Common tensor ops with and without MXNet's methods.

``import mxtorch`` adds MXNet's NDArray methods to ``torch.Tensor`` (only names torch lacks;
``MXTORCH_TENSOR_METHODS=0`` opts out).  This times the same torch ops in fresh subprocesses,
one with ``MXTORCH_TENSOR_METHODS=0`` and one with ``=1`` (both import mxtorch), interleaved in
rounds so machine noise hits both alike, and prints per op the median time of each and the
ratio with/without (the goal is <= 1.01 overall).

A third variant, ``wrapped``, shows what MXNet's reshape codes on the *method* would cost: it
replaces ``Tensor.reshape`` by the thinnest Python wrapper that could fall back to MXNet's
codes.  That is why mxtorch leaves every name torch defines alone (see
docs/migrating.md).  ``--mxnet-mode`` adds a fourth, ``mxnet``: MXNet method mode on
(``MXTORCH_MXNET_METHODS=1``, mxtorch._mxnet_methods), what the same torch ops cost while it is on.

``--ndarray`` adds what MXNet code pays: the same ops with every operand an ``mx.nd.NDArray``
(the subclass ``mx.nd`` functions return, MXNet's rules as its own methods), ``ndarray``: its
``__torch_function__`` keeps results NDArrays; ``nd-disabled``: the design not taken, torch's
``_disabled_torch_function_impl`` (results come back as plain tensors, so chained MXNet code
would lose the rules).  Both against ``off``.

    python bench/tensor_methods.py [--rounds 7] [--number 20000] [--mxnet-mode] [--ndarray]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import timeit
from collections.abc import Callable

OPS = [
    "add", "mul", "add_", "matmul 64", "sum", "mean(dim)", "view", "reshape", "x[0]", "x[:, 1]",
    "x[0] = r", "x[1:3] = 2.", "size()", "shape", "dtype", "T", "flatten", "relu", "linear fwd", "fwd+bwd",
    "clone", "to(float64)", "x / y", "bool(s)",
]


def _ops(kind: Callable[[object], object] = lambda t: t) -> dict[str, Callable[[], object]]:
    """The timed ops; ``kind`` makes each operand the tensor type to time (plain by default)."""
    import torch
    import torch.nn.functional as F

    x, y, a = kind(torch.randn(8, 16)), kind(torch.randn(8, 16)), kind(torch.randn(64, 64))
    w, b = kind(torch.randn(32, 16)), kind(torch.randn(32))
    p = kind(torch.randn(8, 16)).requires_grad_()  # type: ignore[attr-defined]
    z, r, s = kind(torch.zeros(8, 16)), kind(torch.ones(16)), kind(torch.ones(1))

    def set_row() -> None:
        z[0] = r

    def set_slice() -> None:
        z[1:3] = 2.0

    return {
        "add": lambda: x + y,
        "mul": lambda: x * y,
        "add_": lambda: y.add_(x, alpha=0.0),
        "matmul 64": lambda: a @ a,
        "sum": lambda: x.sum(),
        "mean(dim)": lambda: x.mean(dim=1),
        "view": lambda: x.view(16, 8),
        "reshape": lambda: x.reshape(16, 8),
        "x[0]": lambda: x[0],
        "x[:, 1]": lambda: x[:, 1],
        "x[0] = r": set_row,  # torch's own __setitem__ after import mxtorch (MXNet's rule is opt-in)
        "x[1:3] = 2.": set_slice,
        "size()": lambda: x.size(),
        "shape": lambda: x.shape,
        "dtype": lambda: x.dtype,
        "T": lambda: x.T,
        "flatten": lambda: x.flatten(),
        "relu": lambda: F.relu(x),
        "linear fwd": lambda: F.linear(x, w, b),
        "fwd+bwd": lambda: (p * p).sum().backward(),
        "clone": lambda: x.clone(),
        "to(float64)": lambda: x.to(torch.float64),
        "x / y": lambda: x / y,
        "bool(s)": lambda: bool(s),
    }


def child(mode: str, number: int) -> None:
    import torch

    import mxtorch

    assert mxtorch.ndarray_methods.is_enabled() == (mode != "off"), "MXTORCH_TENSOR_METHODS not honoured"
    cls: type | None = None
    if mode in ("ndarray", "nd-disabled"):
        from mxtorch.nd._ndarray_type import NDArray

        class _DisabledNDArray(NDArray):  # MXNet's methods, torch's results (plain tensors)
            __torch_function__ = torch._C._disabled_torch_function_impl

        cls = NDArray if mode == "ndarray" else _DisabledNDArray

    def kind(t: object) -> object:
        return t if cls is None else t.as_subclass(cls)  # type: ignore[attr-defined]
    mxnet_mode = mxtorch.ndarray_methods.mxnet_methods_enabled()
    assert mxnet_mode == (mode == "mxnet"), "MXTORCH_MXNET_METHODS not honoured"
    if mode == "wrapped":
        orig = torch.Tensor.reshape

        def reshape(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            try:
                return orig(self, *args, **kwargs)
            except RuntimeError:
                raise

        torch.Tensor.reshape = reshape  # type: ignore[method-assign]
    torch.set_num_threads(1)
    ops = _ops(kind)
    result = {}
    for name in OPS:
        fn = ops[name]
        n = number // 10 if name in ("matmul 64", "fwd+bwd") else number
        fn()
        result[name] = min(timeit.repeat(fn, number=n, repeat=3)) / n
    print(json.dumps(result))


def run_child(mode: str, number: int) -> dict[str, float]:
    env = dict(os.environ, MXTORCH_TENSOR_METHODS="0" if mode == "off" else "1",
               MXTORCH_MXNET_METHODS="1" if mode == "mxnet" else "0")
    out = subprocess.run([sys.executable, __file__, "--child", mode, "--number", str(number)], env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (a fresh process per mode)")
    ap.add_argument("--number", type=int, default=20000, help="calls per timing")
    ap.add_argument("--no-wrapped", action="store_true", help="skip the wrapped-reshape variant")
    ap.add_argument("--mxnet-mode", action="store_true",
                    help="add MXNet method mode (MXTORCH_MXNET_METHODS=1)")
    ap.add_argument("--ndarray", action="store_true",
                    help="add the same ops on mx.nd.NDArray operands (what MXNet code pays)")
    ap.add_argument("--child", choices=("off", "on", "wrapped", "mxnet", "ndarray", "nd-disabled"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.number)
        return
    modes = ["off", "on"] + ([] if args.no_wrapped else ["wrapped"]) + (["mxnet"] if args.mxnet_mode else [])
    modes += ["ndarray", "nd-disabled"] if args.ndarray else []
    times: dict[str, dict[str, list[float]]] = {m: {op: [] for op in OPS} for m in modes}
    for r in range(args.rounds):
        order = modes if r % 2 == 0 else modes[::-1]
        for mode in order:
            for op, t in run_child(mode, args.number).items():
                times[mode][op].append(t)
    med = {m: {op: statistics.median(v) for op, v in ops.items()} for m, ops in times.items()}
    print(f"torch tensor ops, median of {args.rounds} interleaved rounds (ns per call), "
          "MXNet methods off (MXTORCH_TENSOR_METHODS=0) vs on (default)")
    head = f"{'op':<12} {'off':>9} {'on':>9} {'on/off':>7}"
    if "wrapped" in med:
        head += f" {'wrapped':>9} {'wrapped/off':>11}"
    if "mxnet" in med:
        head += f" {'mxnet':>9} {'mxnet/off':>9}"
    if "ndarray" in med:
        head += f" {'ndarray':>9} {'nd/off':>7} {'nd-dis':>9} {'dis/off':>7}"
    print(head)
    for op in OPS:
        off, on = med["off"][op], med["on"][op]
        line = f"{op:<12} {off * 1e9:9.1f} {on * 1e9:9.1f} {on / off:7.3f}"
        if "wrapped" in med:
            wr = med["wrapped"][op]
            line += f" {wr * 1e9:9.1f} {wr / off:11.3f}"
        if "mxnet" in med:
            mxm = med["mxnet"][op]
            line += f" {mxm * 1e9:9.1f} {mxm / off:9.3f}"
        if "ndarray" in med:
            nd, dis = med["ndarray"][op], med["nd-disabled"][op]
            line += f" {nd * 1e9:9.1f} {nd / off:7.2f} {dis * 1e9:9.1f} {dis / off:7.2f}"
        print(line)
    ratios = [med["on"][op] / med["off"][op] for op in OPS]
    geo = statistics.geometric_mean(ratios)
    print(f"overall (geometric mean of on/off): {geo:.3f}  (goal <= 1.01); "
          f"range {min(ratios):.3f} .. {max(ratios):.3f}")
    if "mxnet" in med:
        mx_ratios = [med["mxnet"][op] / med["off"][op] for op in OPS]
        print(f"MXNet method mode (opt-in) on the same torch ops: geometric mean "
              f"{statistics.geometric_mean(mx_ratios):.3f}, "
              f"range {min(mx_ratios):.3f} .. {max(mx_ratios):.3f}")
    for mode, what in (("ndarray", "results stay NDArrays"), ("nd-disabled", "results plain tensors")):
        if mode in med:
            nd_ratios = [med[mode][op] / med["off"][op] for op in OPS]
            print(f"the same ops on NDArray operands, {mode} ({what}): geometric mean "
                  f"{statistics.geometric_mean(nd_ratios):.2f}x plain tensors, "
                  f"range {min(nd_ratios):.2f} .. {max(nd_ratios):.2f}")
    if "wrapped" in med:
        print(f"a Python wrapper on Tensor.reshape would cost reshape "
              f"{med['wrapped']['reshape'] / med['off']['reshape']:.2f}x")
    backward_patch(args.rounds, max(args.number // 10, 1))
    setitem_patch(args.rounds, args.number)


def backward_patch(rounds: int, number: int) -> None:
    """The patched ``Tensor.backward`` against torch's own in one process, switched every round
    (a subprocess per variant cannot resolve a few hundred ns against machine noise)."""
    import torch

    from mxtorch import autograd

    torch.set_num_threads(1)
    p = torch.randn(8, 16, requires_grad=True)

    def step() -> None:
        (p * p).sum().backward()

    times: dict[bool, list[float]] = {False: [], True: []}
    before = torch.Tensor.backward
    try:
        for _ in range(rounds * 2):
            for on in (False, True):
                autograd.install_backward(on)
                times[on].append(min(timeit.repeat(step, number=number, repeat=3)) / number)
    finally:
        torch.Tensor.backward = before  # type: ignore[method-assign]
    off, on = statistics.median(times[False]), statistics.median(times[True])
    print(f"fwd+bwd in one process: torch's backward {off * 1e9:.0f} ns, MXNet's rule {on * 1e9:.0f} ns, "
          f"ratio {on / off:.3f}")


def setitem_patch(rounds: int, number: int) -> None:
    """``Tensor.__setitem__`` with MXNet's rule for numpy values (opt-in: MXTORCH_NUMPY_SETITEM=1)
    against torch's own, in one process, switched every round (as backward_patch): what MXNet code
    that turns the rule on pays per assignment."""
    import torch

    from mxtorch import _tensor_overrides

    torch.set_num_threads(1)
    z = torch.zeros(8, 16)
    r = torch.ones(16)

    def set_row() -> None:
        z[0] = r

    def set_slice() -> None:
        z[1:3] = 2.0

    before = torch.Tensor.__dict__.get("__setitem__")
    try:
        for name, fn in (("x[0] = r", set_row), ("x[1:3] = 2.", set_slice)):
            times: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(rounds * 2):
                for on in (False, True):
                    _tensor_overrides.install_setitem(on)
                    times[on].append(min(timeit.repeat(fn, number=number, repeat=3)) / number)
            off, on = statistics.median(times[False]), statistics.median(times[True])
            print(f"{name} in one process: torch's __setitem__ {off * 1e9:.0f} ns, "
                  f"MXNet's rule {on * 1e9:.0f} ns, ratio {on / off:.3f}")
    finally:
        _tensor_overrides.install_setitem(before is not None)


if __name__ == "__main__":
    main()
