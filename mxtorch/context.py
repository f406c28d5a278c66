"""Device contexts: ``mx.cpu(i)``, ``mx.gpu(i)`` and their mapping to torch devices.

A :class:`Context` names a replica slot the way MXNet does.  Two CPU contexts with different
ids are distinct (``cpu(0) != cpu(1)``) even though both map to the one torch CPU device;
this is what lets MXNet's multi-context idiom (``initialize(ctx=[cpu(0), cpu(1)])``) keep one
parameter copy per context on a machine without GPUs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import torch

from .base import ClassPropertyType, classproperty

__all__ = ["Context", "cpu", "gpu", "cpu_pinned", "num_gpus", "current_context", "context_of", "as_context"]


def _warn_default_ctx() -> None:
    import warnings

    warnings.warn("Context.default_ctx is deprecated: use mx.context.current_context()",
                  DeprecationWarning, stacklevel=3)


class Context(metaclass=ClassPropertyType):
    """A device slot: ``Context('cpu', 0)`` or ``Context('gpu', 1)``.

    Usable as a ``with`` block that sets :func:`current_context` for code in it.
    """

    # MXNet's device type codes; 'cpu_shared' (shared-memory CPU arrays, for worker processes)
    # and 'cpu_pinned' live on torch's CPU device like 'cpu'
    devtype2str = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}
    devstr2type = {"cpu": 1, "gpu": 2, "cpu_pinned": 3, "cpu_shared": 5}
    _devtype2str = devtype2str
    _str2devtype = devstr2type
    __slots__ = ("device_type", "device_id", "_old")

    def _get_default_ctx(cls) -> Context:  # noqa: N805 - called with the class
        _warn_default_ctx()
        return current_context()

    def _set_default_ctx(cls, ctx: Context) -> None:  # noqa: N805
        _warn_default_ctx()
        _state.ctx = as_context(ctx)

    # MXNet 1.x's deprecated class attribute for this thread's current context (settable)
    default_ctx = classproperty(_get_default_ctx, _set_default_ctx)

    def __init__(self, device_type: str | Context, device_id: int = 0) -> None:
        if isinstance(device_type, Context):
            device_id = device_type.device_id
            device_type = device_type.device_type
        if device_type not in self._str2devtype:
            raise ValueError(
                f"unknown device type {device_type!r}: expected one of {sorted(self._str2devtype)}"
            )
        if not isinstance(device_id, int) or isinstance(device_id, bool) or device_id < 0:
            raise ValueError(f"device_id must be a non-negative int, got {device_id!r}")
        self.device_type: str = device_type
        self.device_id: int = device_id
        self._old: Context | None = None

    @property
    def device_typeid(self) -> int:
        return self._str2devtype[self.device_type]

    @property
    def torch_device(self) -> torch.device:
        """The torch device that holds this context's tensors."""
        if self.device_type == "gpu":
            return torch.device("cuda", self.device_id)
        return torch.device("cpu")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Context)
            and self.device_type == other.device_type
            and self.device_id == other.device_id
        )

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __repr__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    __str__ = __repr__

    def __enter__(self) -> Context:
        self._old = current_context()
        _state.ctx = self
        return self

    def __exit__(self, *exc: Any) -> None:
        _state.ctx = self._old

    def empty_cache(self) -> None:
        if self.device_type == "gpu" and torch.cuda.is_available():
            with torch.cuda.device(self.device_id):
                torch.cuda.empty_cache()


class _State(threading.local):
    ctx: Context | None = None


_state = _State()


def cpu(device_id: int = 0) -> Context:
    """The CPU context ``device_id`` (distinct ids are distinct replica slots)."""
    return Context("cpu", device_id)


def cpu_pinned(device_id: int = 0) -> Context:
    return Context("cpu_pinned", device_id)


def gpu(device_id: int = 0) -> Context:
    """The GPU context ``device_id`` (torch device ``cuda:device_id``)."""
    return Context("gpu", device_id)


def num_gpus() -> int:
    """Number of visible CUDA devices (0 on a machine without GPUs)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def current_context() -> Context:
    """The context set by the innermost ``with ctx:`` block, else ``cpu(0)``."""
    return _state.ctx if _state.ctx is not None else Context("cpu", 0)


def context_of(tensor: torch.Tensor) -> Context:
    """The context a tensor belongs to.

    A tensor tagged by :func:`mxtorch.gluon.utils.split_and_load` (or ``as_in_context``)
    keeps its tag; otherwise the context follows its torch device (CPU tensors are ``cpu(0)``).
    """
    tag = getattr(tensor, "_mx_ctx", None)
    if tag is not None:
        return tag  # type: ignore[no-any-return]
    dev = tensor.device
    if dev.type == "cuda":
        return Context("gpu", dev.index or 0)
    return Context("cpu", 0)


def as_context(ctx: Context | str | torch.device | None) -> Context:
    """Coerce ``ctx`` (a Context, ``'cpu'``/``'gpu:1'`` or a torch device) to a Context."""
    if ctx is None:
        return current_context()
    if isinstance(ctx, Context):
        return ctx
    if isinstance(ctx, torch.device):
        return Context("gpu", ctx.index or 0) if ctx.type == "cuda" else Context("cpu", 0)
    if isinstance(ctx, str):
        if ctx.endswith(")") and "(" in ctx:  # a Context's own str(): 'cpu(0)', 'gpu(1)'
            ctx = ctx[:-1].replace("(", ":", 1)
        name, _, idx = ctx.partition(":")
        name = {"cuda": "gpu"}.get(name, name)
        try:
            return Context(name, int(idx) if idx else 0)
        except ValueError as e:
            raise ValueError(
                f"cannot read context {ctx!r}: write e.g. 'cpu', 'cpu:1', 'gpu:0' or 'gpu(0)'"
            ) from e
    raise TypeError(f"expected a Context, got {type(ctx).__name__}: {ctx!r}")


def iter_contexts(ctx: Context | list[Context] | tuple[Context, ...] | None) -> Iterator[Context]:
    if ctx is None:
        yield current_context()
    elif isinstance(ctx, (list, tuple)):
        yield from (as_context(c) for c in ctx)
    else:
        yield as_context(ctx)
