"""Environment, retry, device and optimizer helpers of ``mx.test_utils``."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch

from ..base import MXNetError
from ..io.base import DataIter
from ._compare import assert_almost_equal
from ._inputs import rand_ndarray
from ._tolerance import default_context


def set_env_var(key: str, val: str | None, default_val: str = "") -> str:
    """Set (or, with None, unset) an environment variable; returns its previous value."""
    prev = os.environ.get(key, default_val)
    if val is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = str(val)
    return prev


@contextmanager
def environment(*args: Any) -> Iterator[None]:
    """Set environment variables inside a ``with`` block, restoring them afterwards.

    ``environment('KEY', 'value')`` or ``environment({'A': '1', 'B': None})`` (None unsets).
    """
    if len(args) == 2 and isinstance(args[0], str):
        changes: Mapping[str, Any] = {args[0]: args[1]}
    elif len(args) == 1 and isinstance(args[0], Mapping):
        changes = args[0]
    else:
        raise TypeError(f"environment() takes (key, value) or a dict, got {args!r}")
    saved = {k: os.environ.get(k) for k in changes}
    try:
        for k, v in changes.items():
            set_env_var(k, v)
        yield
    finally:
        for k, old in saved.items():
            set_env_var(k, old)


@contextmanager
def discard_stderr() -> Iterator[None]:
    """Send what the block writes to the process's stderr (file descriptor 2 too) to /dev/null."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a captured stderr has no descriptor
        yield
        return
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as sink:
            sys.stderr.flush()
            os.dup2(sink.fileno(), fd)
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, fd)
        os.close(saved)


def retry(n: int) -> Callable[[Callable[..., Any]], Callable[..., None]]:
    """Decorator: run a test up to ``n`` times until it passes without an AssertionError."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"retry needs a positive number of attempts, got {n!r}")

    def decorate(f: Callable[..., Any]) -> Callable[..., None]:
        def wrapper(*args: Any, **kwargs: Any) -> None:
            for attempt in range(n):
                try:
                    f(*args, **kwargs)
                    return
                except AssertionError:
                    if attempt == n - 1:
                        raise

        wrapper.__name__ = getattr(f, "__name__", "wrapper")
        wrapper.__doc__ = f.__doc__
        return wrapper

    return decorate


def list_gpus() -> range:
    """``range(number of CUDA devices)``."""
    return range(torch.cuda.device_count() if torch.cuda.is_available() else 0)


def is_cd_run() -> bool:
    """Whether this is a continuous-delivery run (``CD_JOB=1``)."""
    return os.environ.get("CD_JOB", "0") == "1"


def is_aarch64_run() -> bool:
    """Whether the machine is aarch64."""
    return platform.machine() == "aarch64"


def has_tvm_ops() -> bool:
    """False: mxtorch has no TVM-generated operators."""
    return False


def is_op_runnable() -> bool:
    """True: every operator runs on every device torch supports."""
    return True


def same_symbol_structure(sym1: Any, sym2: Any) -> bool:
    """Whether the two symbols' graphs have the same operator at every node position."""
    nodes1, nodes2 = json.loads(sym1.tojson())["nodes"], json.loads(sym2.tojson())["nodes"]
    return all(a["op"] == b["op"] for a, b in zip(nodes1, nodes2))


def compare_ndarray_tuple(t1: Any, t2: Any, rtol: float | None = None, atol: float | None = None) -> None:
    """Assert two optimizer states are equal: tensors, or (nested) tuples/lists of them.

    As MXNet's helper, a None on either side compares nothing there (a reference optimizer may
    keep no state, or no master copy, where the other does)."""
    if t1 is None or t2 is None:
        return
    if isinstance(t1, (tuple, list)) or isinstance(t2, (tuple, list)):
        if not (isinstance(t1, (tuple, list)) and isinstance(t2, (tuple, list))) or len(t1) != len(t2):
            raise AssertionError(
                f"states differ in structure: {type(t1).__name__} of "
                f"{len(t1) if isinstance(t1, (tuple, list)) else 1} against "
                f"{type(t2).__name__} of {len(t2) if isinstance(t2, (tuple, list)) else 1}"
            )
        for a, b in zip(t1, t2):
            compare_ndarray_tuple(a, b, rtol, atol)
        return
    assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


def _opt_pair(shape: Any, dtype: Any, stype: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(dense copy, value in storage type ``stype``) of one random array for compare_optimizer."""
    from ..nd import random as nd_random

    if stype == "default":
        second = nd_random.uniform(shape=shape, ctx=default_context(), dtype=dtype)
        return second.detach().clone(), second
    if stype not in ("row_sparse", "csr"):
        raise MXNetError(
            f"compare_optimizer: storage type must be 'default', 'row_sparse' or 'csr', got {stype!r}"
        )
    second = rand_ndarray(shape, stype, dtype=dtype)
    return second.detach().to_dense().clone(), second


def compare_optimizer(
    opt1: Any,
    opt2: Any,
    shape: Any,
    dtype: Any,
    w_stype: str = "default",
    g_stype: str = "default",
    rtol: float = 1e-4,
    atol: float = 1e-5,
    compare_states: bool = True,
    ntensors: int = 1,
) -> None:
    """Run one update of ``opt1`` and ``opt2`` on the same random weight and gradient and assert that
    their states and weights agree (``opt1`` sees dense copies; ``opt2`` the storage types asked for).

    With a list of shapes, ``opt2`` updates ``ntensors`` weights in one call and ``opt1`` one at a
    time (its reference).
    """
    from ..nd import random as nd_random

    if isinstance(shape, list):
        ctx = default_context()
        ws1 = [nd_random.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shape[:ntensors]]
        gs1 = [nd_random.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shape[:ntensors]]
        ws2 = [w.clone() for w in ws1]
        gs2 = [g.clone() for g in gs1]
        states2 = [opt2.create_state_multi_precision(i, ws2[i]) for i in range(ntensors)]
        opt2.update_multi_precision(list(range(ntensors)), ws2, gs2, states2)
        for i in range(ntensors):
            state = opt1.create_state_multi_precision(i, ws1[i])
            opt1.update_multi_precision(i, ws1[i], gs1[i], state)
            if compare_states:
                compare_ndarray_tuple(state, states2[i], rtol, atol)
            assert_almost_equal(ws1[i], ws2[i], rtol=rtol, atol=atol)
        return
    if ntensors != 1:
        raise MXNetError("compare_optimizer: ntensors > 1 needs a list of shapes")
    if w_stype == "default":
        w1, w2 = _opt_pair(shape, dtype, "default")
    else:  # the sparse weight has every row (density 1), the reference its dense form
        w2 = rand_ndarray(shape, w_stype, density=1, dtype=dtype)
        w1 = w2.detach().to_dense().clone()
    g1, g2 = _opt_pair(shape, dtype, g_stype)
    state1 = opt1.create_state_multi_precision(0, w1)
    state2 = opt2.create_state_multi_precision(0, w2)
    if compare_states:
        compare_ndarray_tuple(state1, state2)
    opt1.update_multi_precision(0, w1, g1, state1)
    opt2.update_multi_precision(0, w2, g2, state2)
    if compare_states:
        compare_ndarray_tuple(state1, state2, rtol=rtol, atol=atol)
    assert_almost_equal(w1, w2, rtol=rtol, atol=atol)


class DummyIter(DataIter):
    """A data iterator that returns ``real_iter``'s first batch forever (for speed tests)."""

    def __init__(self, real_iter: Any) -> None:
        super().__init__(getattr(real_iter, "batch_size", 0))
        self.real_iter = real_iter
        self.provide_data = real_iter.provide_data
        self.provide_label = real_iter.provide_label
        self.the_batch = next(real_iter)

    def __iter__(self) -> DummyIter:
        return self

    def next(self) -> Any:
        """The first batch of the real iterator, again (never StopIteration)."""
        return self.the_batch

    __next__ = next
