"""autograd's recording primitives: the record/train state, its scopes, MXNet's backward rules.

The bottom of the arrays layer's autograd: ``mx.nd`` operators read the train mode here
(``training=None`` follows it), ``mx.operator`` and ``CachedOp`` too, and the NDArray methods
install MXNet's ``backward()`` rule and read :data:`grad_only`; :mod:`mxtorch.autograd` hands
all of it out as MXNet's ``mx.autograd`` and adds what builds on the arrays (``backward``,
``grad``, ``mark_variables``, ``Function``).  This module imports no other part of the arrays
layer, so the operators can record through it while autograd and the methods call operators.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from .base import MXNetError

__all__ = [
    "record", "pause", "train_mode", "predict_mode", "is_recording", "is_training", "set_recording",
    "set_training", "scope", "state", "mirror", "grad_only", "as_list", "ones_like", "default_head_grads",
    "check_not_freed", "mark_freed", "install_backward",
]


class _State(threading.local):
    recording: bool = False
    training: bool = False
    # set once this thread records with record()/set_recording(True): from then on MXNet's rule
    # that a backward frees its graph applies (:func:`check_not_freed`); a program that never
    # records this way keeps torch's behaviour and pays nothing
    ever_recorded: bool = False


state = _State()


class _Mirror:
    """Plain copy of the last state set: torch.compile guards plain attributes reliably but
    misreads ``threading.local``, so compiled code reads the mode from here."""

    training: bool = False


mirror = _Mirror()


def is_recording() -> bool:
    """True inside ``record()`` (and not inside a nested ``pause()``)."""
    return state.recording


def is_training() -> bool:
    """True in training mode: inside ``record()`` (train_mode=True) or ``train_mode()``."""
    if torch.compiler.is_compiling():
        return mirror.training
    return state.training


def set_recording(is_recording: bool) -> bool:  # noqa: A002 - MXNet's name
    """Set recording state; returns the previous one."""
    prev = state.recording
    state.recording = bool(is_recording)
    state.ever_recorded = state.ever_recorded or bool(is_recording)
    torch.set_grad_enabled(bool(is_recording))
    return prev


def set_training(train_mode: bool) -> bool:
    """Set training state; returns the previous one."""
    prev = state.training
    state.training = mirror.training = bool(train_mode)
    return prev


@contextmanager
def scope(recording: bool | None, training: bool | None) -> Iterator[None]:
    """Recording and/or training set for the block (None: left as it is), restored after it."""
    prev_rec, prev_train = state.recording, state.training
    prev_grad = torch.is_grad_enabled()
    if recording is not None:
        state.recording = recording
        state.ever_recorded = state.ever_recorded or recording
        torch.set_grad_enabled(recording)
    if training is not None:
        state.training = mirror.training = training
    try:
        yield
    finally:
        state.recording, state.training = prev_rec, prev_train
        mirror.training = prev_train
        torch.set_grad_enabled(prev_grad)


def record(train_mode: bool = True) -> Any:
    """Record operations for differentiation; ``train_mode`` sets training behaviour."""
    return scope(True, train_mode)


def pause(train_mode: bool = False) -> Any:
    """Stop recording inside a ``record()`` block (e.g. for metric updates)."""
    return scope(False, train_mode)


def train_mode() -> Any:
    """Training behaviour (Dropout active, BatchNorm batch statistics) without recording."""
    return scope(None, True)


def predict_mode() -> Any:
    """Inference behaviour, also inside ``record()``."""
    return scope(None, False)


class _GradOnly:
    # > 0 while autograd.grad() runs: attach_grad's 'write' rule must not touch .grad then.  Not
    # thread-local: torch may run a CUDA backward's hooks on its own device threads.
    depth = 0


grad_only = _GradOnly()


def as_list(x: torch.Tensor | Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """One tensor or a sequence of them as a list."""
    return [x] if isinstance(x, torch.Tensor) else list(x)


def ones_like(h: torch.Tensor) -> torch.Tensor:
    """A head gradient of ones in the head's storage (a sparse head gets every entry: torch's
    ones_like cannot fill sparse storage)."""
    if h.layout == torch.strided:
        return torch.ones_like(h)
    ones = torch.ones(h.shape, dtype=h.dtype, device=h.device)
    if h.layout == torch.sparse_coo:
        return ones.to_sparse(h.sparse_dim())
    return ones.to_sparse(layout=h.layout)


def default_head_grads(
    heads: list[torch.Tensor], head_grads: torch.Tensor | Sequence[torch.Tensor | None] | None
) -> list[torch.Tensor]:
    """The head gradients of a backward: ones where none is given (MXNet's rule)."""
    if head_grads is None:
        return [ones_like(h) for h in heads]
    hg = as_list(head_grads)  # type: ignore[arg-type]
    if len(hg) != len(heads):
        raise ValueError(f"got {len(hg)} head_grads for {len(heads)} heads: give one per head (or None)")
    return [ones_like(h) if g is None else g for h, g in zip(heads, hg)]


_FREED = "mxtorch.freed"  # grad_fn metadata key: a backward without retain_graph ran from here


def _metadata(node: Any) -> dict[str, Any]:
    """The dict torch keeps on a graph node for its users (typed as a method in torch's stubs)."""
    return node.metadata  # type: ignore[no-any-return]


def check_not_freed(heads: list[torch.Tensor]) -> bool:
    """MXNet frees a recorded graph when a backward runs without ``retain_graph``, so a second
    backward from the same head fails.  torch frees only the tensors its nodes saved (``x + 1``
    saves none and could run twice); this restores MXNet's rule for threads that record with
    :func:`record`.  Returns whether the rule applies."""
    if not state.ever_recorded:
        return False
    for h in heads:
        fn = h.grad_fn
        if fn is not None and _FREED in _metadata(fn):
            raise MXNetError(
                "backward: this graph was already differentiated and freed (a backward without "
                "retain_graph=True frees it, as in MXNet); record the computation again, or pass "
                "retain_graph=True to the earlier backward"
            )
    return True


def mark_freed(heads: list[torch.Tensor]) -> None:
    """Note on each head's graph node that a backward without ``retain_graph`` ran from it."""
    for h in heads:
        if h.grad_fn is not None:
            _metadata(h.grad_fn)[_FREED] = True


# ---- MXNet's rule for backward() on a non-scalar head -------------------------------------
_torch_backward = torch.Tensor.backward


def _backward(self: torch.Tensor, gradient: Any = None, retain_graph: Any = None,
              create_graph: bool = False, inputs: Any = None, *, out_grad: Any = None,
              train_mode: bool = True) -> None:
    # MXNet's NDArray.backward(out_grad=None, retain_graph=False, train_mode=True) shares its
    # first two positions with torch's (gradient, retain_graph); train_mode only chose the
    # forward behaviour MXNet re-ran, torch keeps the recorded one
    if out_grad is not None:
        if gradient is not None:
            raise TypeError("backward() got both gradient and out_grad: give one of them")
        gradient = out_grad
    if gradient is None and self.numel() != 1 and self.requires_grad:
        gradient = ones_like(self)
    rule = state.ever_recorded and check_not_freed([self])
    _torch_backward(self, gradient, retain_graph, create_graph, inputs)
    if rule and not (create_graph if retain_graph is None else retain_graph):
        mark_freed([self])


_backward.__doc__ = _torch_backward.__doc__


def install_backward(on: bool = True) -> None:
    """Give ``torch.Tensor.backward`` MXNet's rule for non-scalar heads (``on``) or torch's own."""
    torch.Tensor.backward = _backward if on else _torch_backward  # type: ignore[method-assign]
