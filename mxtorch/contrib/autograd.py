"""``mx.contrib.autograd``: MXNet's first autograd API (before ``mx.autograd``), on the same engine.

One switch, ``set_is_training``, turned both recording and training behaviour on or off;
``train_section()`` / ``test_section()`` are its scopes, ``compute_gradient`` the old name of
``backward``. ``grad_and_loss`` / ``grad`` wrap a function so a call returns its gradients.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import torch

from .. import autograd as _autograd

__all__ = [
    "set_is_training",
    "TrainingStateScope",
    "train_section",
    "test_section",
    "mark_variables",
    "backward",
    "compute_gradient",
    "grad_and_loss",
    "grad",
]


def set_is_training(is_train: bool) -> bool:
    """Turn recording and training behaviour both on or off; returns the previous state."""
    _autograd.set_training(bool(is_train))
    return _autograd.set_recording(bool(is_train))


class TrainingStateScope:
    """``with`` scope that sets :func:`set_is_training` and restores the previous state on exit."""

    def __init__(self, enter_state: bool) -> None:
        self._enter_state = bool(enter_state)
        self._scope: Any = None

    def __enter__(self) -> None:
        # mx.autograd's scope: restores recording, training and torch's grad mode on exit
        self._scope = _autograd._scope(self._enter_state, self._enter_state)
        self._scope.__enter__()

    def __exit__(
        self, ptype: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._scope is not None:
            self._scope.__exit__(ptype, value, trace)
            self._scope = None


def train_section() -> TrainingStateScope:
    """Scope that records for differentiation with training behaviour."""
    return TrainingStateScope(True)


def test_section() -> TrainingStateScope:
    """Scope that neither records nor trains (e.g. evaluation inside a ``train_section``)."""
    return TrainingStateScope(False)


def mark_variables(
    variables: Sequence[torch.Tensor],
    gradients: Sequence[torch.Tensor],
    grad_reqs: str | Sequence[str] = "write",
) -> None:
    """Differentiate against ``variables``; their gradients go into the ``gradients`` arrays."""
    _autograd.mark_variables(variables, gradients, grad_reqs)


def backward(
    outputs: Sequence[torch.Tensor],
    out_grads: Sequence[torch.Tensor | None] | None = None,
    retain_graph: bool = False,
) -> None:
    """Gradients of ``outputs`` (a list) into the marked variables' gradient arrays."""
    if not isinstance(outputs, (list, tuple)):
        raise TypeError(f"outputs must be a list or tuple of arrays, got {type(outputs).__name__}")
    _autograd.backward(list(outputs), out_grads, retain_graph=retain_graph)


def compute_gradient(outputs: Sequence[torch.Tensor]) -> None:
    """Deprecated name of :func:`backward`."""
    backward(outputs)


def grad_and_loss(func: Callable[..., Any], argnum: int | list[int] | None = None) -> Callable[..., Any]:
    """Wrap ``func`` so a call returns ``(gradients of its arguments, its output)``; ``argnum``
    picks the arguments (an index or a list; default all)."""

    @functools.wraps(func)
    def wrapped(*args: Any) -> tuple[list[torch.Tensor], Any]:
        variables = list(args)
        if argnum is not None:
            variables = [args[i] for i in (argnum if isinstance(argnum, list) else [argnum])]
        for i, x in enumerate(variables):
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"argument {i} to differentiate must be an array, got {type(x).__name__}")
        grads = [torch.zeros_like(x) for x in variables]
        mark_variables(variables, grads)
        with train_section():
            outputs = func(*args)
        compute_gradient([outputs] if isinstance(outputs, torch.Tensor) else outputs)
        return grads, outputs

    return wrapped


def grad(func: Callable[..., Any], argnum: int | list[int] | None = None) -> Callable[..., Any]:
    """Wrap ``func`` so a call returns the gradients of its arguments (see :func:`grad_and_loss`)."""
    with_loss = grad_and_loss(func, argnum)

    @functools.wraps(with_loss)
    def wrapped(*args: Any) -> list[torch.Tensor]:
        return with_loss(*args)[0]

    return wrapped
