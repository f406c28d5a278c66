"""Dynamic loss scaling for mixed-precision training.

A :class:`LossScaler` holds the factor the loss is multiplied by before backward, so that small
float16 gradients do not flush to zero.  Its policy (the defaults follow MXNet's AMP):

* start at ``init_scale`` (2**16);
* a step whose gradients hold an inf or a nan is an *overflow*: the update is skipped and the
  scale is divided by ``scale_factor`` (2), never below ``min_scale`` (1);
* after ``scale_window`` (2000) consecutive overflow-free steps the scale is multiplied by
  ``scale_factor``, never above ``max_scale`` (2**24).

Overflow detection is one fused pass per device (``torch._amp_foreach_non_finite_check_and_unscale_``)
and a single host synchronisation for the whole gradient list, not one per tensor.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from ..base import MXNetError

__all__ = ["LossScaler"]


def _positive(name: str, value: Any, minimum: float = 0.0, strict: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"LossScaler: {name} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or (v <= minimum if strict else v < minimum):
        bound = f"> {minimum}" if strict else f">= {minimum}"
        raise ValueError(f"LossScaler: {name} must be finite and {bound}, got {value!r}")
    return v


def _by_device(grads: Iterable[torch.Tensor]) -> dict[torch.device, list[torch.Tensor]]:
    groups: dict[torch.device, list[torch.Tensor]] = {}
    for g in grads:
        if not isinstance(g, torch.Tensor):
            raise TypeError(f"LossScaler: gradients must be tensors, got {type(g).__name__}")
        if g.is_sparse:
            # the values themselves, not coalesce()'s copy: an uncoalesced gradient (autograd's
            # embedding gradient with repeated rows) must be unscaled in place too; scaling each
            # entry scales their sums, and an inf or nan among them is one in the sums
            g = g._values()
        if not g.is_floating_point():
            continue
        groups.setdefault(g.device, []).append(g)
    return groups


def check_and_unscale_(grads: Iterable[torch.Tensor], inv_scale: float) -> bool:
    """Multiply ``grads`` in place by ``inv_scale`` (skipped when it is 1) and report whether any
    of them holds an inf or a nan.  One fused kernel per device, one host sync in total."""
    found: list[torch.Tensor] = []
    for dev, group in _by_device(grads).items():
        flag = torch.zeros((1,), dtype=torch.float32, device=dev)
        inv = torch.full((1,), float(inv_scale), dtype=torch.float32, device=dev)
        if hasattr(torch, "_amp_foreach_non_finite_check_and_unscale_"):
            # (with inv_scale == 1 the multiplication leaves the values as they are)
            torch._amp_foreach_non_finite_check_and_unscale_(group, flag, inv)
        else:  # pragma: no cover - very old torch
            flag = (~torch.stack([torch.isfinite(g).all() for g in group]).all()).float().reshape(1)
            if inv_scale != 1.0:
                torch._foreach_mul_(group, float(inv_scale))
        found.append(flag)
    if not found:
        return False
    if len(found) == 1:
        return bool(found[0].item())
    first = found[0].device
    return bool(torch.stack([f.to(first) for f in found]).sum().item())


class LossScaler:
    """Dynamic loss scale (see the module documentation for the policy).

    ``loss_scale`` is the current factor; :meth:`has_overflow` checks gradients and
    :meth:`update_scale` applies the policy after each step.  ``state_dict``/``load_state_dict``
    save and restore the scale and the count of clean steps (put them in checkpoints, or a resumed
    run restarts at ``init_scale`` and overflows a few times before it settles).
    """

    def __init__(
        self,
        init_scale: float = 2.0 ** 16,
        scale_factor: float = 2.0,
        scale_window: int = 2000,
        max_scale: float = 2.0 ** 24,
        min_scale: float = 1.0,
    ) -> None:
        self.min_scale = _positive("min_scale", min_scale)
        self.max_scale = _positive("max_scale", max_scale)
        if self.max_scale < self.min_scale:
            raise ValueError(f"LossScaler: max_scale ({max_scale}) is smaller than min_scale ({min_scale})")
        self.scale_factor = _positive("scale_factor", scale_factor, 1.0)
        if isinstance(scale_window, bool) or not isinstance(scale_window, int) or scale_window < 1:
            raise ValueError(f"LossScaler: scale_window must be an int >= 1, got {scale_window!r}")
        self.scale_window = scale_window
        init = _positive("init_scale", init_scale)
        if not self.min_scale <= init <= self.max_scale:
            raise ValueError(f"LossScaler: init_scale ({init_scale}) must lie in "
                             f"[min_scale, max_scale] = [{self.min_scale}, {self.max_scale}]")
        self._loss_scale = init
        self._unskipped = 0  # consecutive overflow-free steps since the last change of scale
        self.num_overflows = 0

    # ---- the scale ---------------------------------------------------------------------
    @property
    def loss_scale(self) -> float:
        return self._loss_scale

    @loss_scale.setter
    def loss_scale(self, value: float) -> None:
        v = _positive("loss_scale", value)
        self._loss_scale = min(max(v, self.min_scale), self.max_scale)
        self._unskipped = 0

    def has_overflow(self, grads: Sequence[torch.Tensor] | Iterable[torch.Tensor]) -> bool:
        """True when any gradient holds an inf or a nan (gradients are left unchanged)."""
        return check_and_unscale_(list(grads), 1.0)

    def unscale_(self, grads: Sequence[torch.Tensor] | Iterable[torch.Tensor]) -> bool:
        """Divide ``grads`` in place by the loss scale; returns whether any overflowed."""
        return check_and_unscale_(list(grads), 1.0 / self._loss_scale)

    def update_scale(self, overflow: bool) -> None:
        """Apply the policy after a step: halve on overflow, grow after ``scale_window`` clean steps."""
        if overflow:
            self._loss_scale = max(self._loss_scale / self.scale_factor, self.min_scale)
            self._unskipped = 0
            self.num_overflows += 1
            return
        self._unskipped += 1
        if self._unskipped >= self.scale_window:
            self._loss_scale = min(self._loss_scale * self.scale_factor, self.max_scale)
            self._unskipped = 0

    # ---- checkpoints -------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"loss_scale": self._loss_scale, "unskipped": self._unskipped,
                "num_overflows": self.num_overflows, "scale_factor": self.scale_factor,
                "scale_window": self.scale_window, "max_scale": self.max_scale, "min_scale": self.min_scale}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or "loss_scale" not in state:
            raise MXNetError("LossScaler.load_state_dict: expected a dict from state_dict() "
                             "holding 'loss_scale'")
        for key in ("scale_factor", "scale_window", "max_scale", "min_scale"):
            if key in state:
                setattr(self, key, type(getattr(self, key))(state[key]))
        self._loss_scale = _positive("loss_scale", state["loss_scale"])
        self._unskipped = int(state.get("unskipped", 0))
        self.num_overflows = int(state.get("num_overflows", 0))

    def __repr__(self) -> str:
        return (f"LossScaler(loss_scale={self._loss_scale}, scale_factor={self.scale_factor}, "
                f"scale_window={self.scale_window}, min_scale={self.min_scale}, max_scale={self.max_scale})")
