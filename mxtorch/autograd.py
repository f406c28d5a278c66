"""MXNet's autograd scopes on top of torch autograd.

``record()`` turns graph recording on (torch grad mode) and sets *training* mode, which
Gluon layers such as Dropout and BatchNorm read through :func:`is_training`; ``pause()``
turns recording off.  Outside every scope torch's own grad mode applies, so a Gluon block
still works inside a plain PyTorch training loop.

MXNet's ``head.backward()`` on a non-scalar head (a vector of per-sample losses) uses a head
gradient of ones; importing mxtorch gives ``torch.Tensor.backward`` that rule, and changes
nothing else (torch raises an error in that case).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

__all__ = [
    "record",
    "pause",
    "train_mode",
    "predict_mode",
    "is_recording",
    "is_training",
    "set_recording",
    "set_training",
    "backward",
    "grad",
    "mark_variables",
    "Function",
]


class _State(threading.local):
    recording: bool = False
    training: bool = False


_state = _State()


class _Mirror:
    """Plain copy of the last state set: torch.compile guards plain attributes reliably but
    misreads ``threading.local``, so compiled code reads the mode from here."""

    training: bool = False


_mirror = _Mirror()


def is_recording() -> bool:
    """True inside ``record()`` (and not inside a nested ``pause()``)."""
    return _state.recording


def is_training() -> bool:
    """True in training mode: inside ``record()`` (train_mode=True) or ``train_mode()``."""
    if torch.compiler.is_compiling():
        return _mirror.training
    return _state.training


def set_recording(is_recording: bool) -> bool:  # noqa: A002 - MXNet's name
    """Set recording state; returns the previous one."""
    prev = _state.recording
    _state.recording = bool(is_recording)
    torch.set_grad_enabled(bool(is_recording))
    return prev


def set_training(train_mode: bool) -> bool:
    """Set training state; returns the previous one."""
    prev = _state.training
    _state.training = _mirror.training = bool(train_mode)
    return prev


@contextmanager
def _scope(recording: bool | None, training: bool | None) -> Iterator[None]:
    prev_rec, prev_train = _state.recording, _state.training
    prev_grad = torch.is_grad_enabled()
    if recording is not None:
        _state.recording = recording
        torch.set_grad_enabled(recording)
    if training is not None:
        _state.training = _mirror.training = training
    try:
        yield
    finally:
        _state.recording, _state.training = prev_rec, prev_train
        _mirror.training = prev_train
        torch.set_grad_enabled(prev_grad)


def record(train_mode: bool = True) -> Any:
    """Record operations for differentiation; ``train_mode`` sets training behaviour."""
    return _scope(True, train_mode)


def pause(train_mode: bool = False) -> Any:
    """Stop recording inside a ``record()`` block (e.g. for metric updates)."""
    return _scope(False, train_mode)


def train_mode() -> Any:
    """Training behaviour (Dropout active, BatchNorm batch statistics) without recording."""
    return _scope(None, True)


def predict_mode() -> Any:
    """Inference behaviour, also inside ``record()``."""
    return _scope(None, False)


def _as_list(x: torch.Tensor | Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return [x] if isinstance(x, torch.Tensor) else list(x)


def _default_head_grads(
    heads: list[torch.Tensor], head_grads: torch.Tensor | Sequence[torch.Tensor | None] | None
) -> list[torch.Tensor]:
    if head_grads is None:
        return [torch.ones_like(h) for h in heads]
    hg = _as_list(head_grads)  # type: ignore[arg-type]
    if len(hg) != len(heads):
        raise ValueError(f"got {len(hg)} head_grads for {len(heads)} heads: give one per head (or None)")
    return [torch.ones_like(h) if g is None else g for h, g in zip(heads, hg)]


def backward(
    heads: torch.Tensor | Sequence[torch.Tensor],
    head_grads: torch.Tensor | Sequence[torch.Tensor | None] | None = None,
    retain_graph: bool = False,
    train_mode: bool = True,
) -> None:
    """Compute gradients of ``heads`` w.r.t. the recorded variables (head grads default to ones)."""
    hs = _as_list(heads)
    torch.autograd.backward(hs, _default_head_grads(hs, head_grads), retain_graph=retain_graph)


class _GradOnly:
    # > 0 while grad() runs: attach_grad's 'write' rule must not touch .grad then.  Not
    # thread-local: torch may run a CUDA backward's hooks on its own device threads.
    depth = 0


_grad_only = _GradOnly()


def grad(
    heads: torch.Tensor | Sequence[torch.Tensor],
    variables: torch.Tensor | Sequence[torch.Tensor],
    head_grads: torch.Tensor | Sequence[torch.Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    train_mode: bool = True,
) -> list[torch.Tensor]:
    """Return the gradients of ``heads`` w.r.t. ``variables`` without touching ``.grad``."""
    hs = _as_list(heads)
    vs = _as_list(variables)
    _grad_only.depth += 1
    try:
        out = torch.autograd.grad(
            hs,
            vs,
            _default_head_grads(hs, head_grads),
            retain_graph=retain_graph,
            create_graph=create_graph,
            allow_unused=True,
        )
    finally:
        _grad_only.depth -= 1
    return [torch.zeros_like(v) if g is None else g for v, g in zip(vs, out)]


def mark_variables(
    variables: torch.Tensor | Sequence[torch.Tensor],
    gradients: torch.Tensor | Sequence[torch.Tensor] | None = None,
    grad_reqs: str | Sequence[str] = "write",
) -> None:
    """Mark tensors as variables to differentiate against (``requires_grad``)."""
    for v in _as_list(variables):
        v.requires_grad_(True)


Function = torch.autograd.Function

# ---- MXNet's rule for backward() on a non-scalar head -------------------------------------
_torch_backward = torch.Tensor.backward


def _backward(self: torch.Tensor, gradient: Any = None, retain_graph: Any = None,
              create_graph: bool = False, inputs: Any = None) -> None:
    if gradient is None and self.numel() != 1 and self.requires_grad:
        gradient = torch.ones_like(self)
    _torch_backward(self, gradient, retain_graph, create_graph, inputs)


_backward.__doc__ = _torch_backward.__doc__
if not getattr(torch.Tensor.backward, "_mxtorch", False):
    _backward._mxtorch = True  # type: ignore[attr-defined]
    torch.Tensor.backward = _backward  # type: ignore[method-assign]
