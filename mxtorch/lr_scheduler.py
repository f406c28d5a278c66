"""Learning-rate schedules as in ``mxnet.lr_scheduler``: callables ``scheduler(num_update) -> lr``.

``num_update`` is the optimizer's update count (the largest per-parameter count).  Every
scheduler can warm up for ``warmup_steps`` updates, rising linearly from ``warmup_begin_lr`` to
``base_lr`` (``warmup_mode='linear'``) or holding ``warmup_begin_lr`` (``'constant'``).

Unlike MXNet, whose schedulers mutate ``base_lr`` as they are called, these are pure functions of
``num_update`` and the current ``base_lr``: calling them out of order (after resuming from a
checkpoint, say) gives the same value, and the ``base_lr`` an optimizer assigns always takes effect.
For increasing ``num_update`` the values are MXNet's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .optimizer.checks import check_int as _check_int
from .optimizer.checks import check_real as _check_real

__all__ = [
    "LRScheduler",
    "FactorScheduler",
    "MultiFactorScheduler",
    "PolyScheduler",
    "CosineScheduler",
]

_WARMUP_MODES = ("linear", "constant")


def _factor(value: Any) -> float:
    f = _check_real("factor", value)
    if not 0.0 < f <= 1.0:
        raise ValueError(f"factor must be in (0, 1] so that the learning rate decreases, got {value!r}")
    return f


class LRScheduler:
    """Base class: holds ``base_lr`` and the warmup settings; subclasses implement ``__call__``.

    Args:
        base_lr: the learning rate after warmup (an optimizer overwrites it with its learning_rate).
        warmup_steps: number of warmup updates (>= 0).
        warmup_begin_lr: learning rate at update 0 of the warmup (<= base_lr).
        warmup_mode: 'linear' (``begin + (base_lr - begin) * num_update / warmup_steps``) or 'constant'.
    """

    def __init__(
        self,
        base_lr: float = 0.01,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0.0,
        warmup_mode: str = "linear",
    ) -> None:
        self.base_lr = _check_real("base_lr", base_lr, lo=0.0)
        self.warmup_steps = _check_int("warmup_steps", warmup_steps, 0)
        self.warmup_begin_lr = _check_real("warmup_begin_lr", warmup_begin_lr, lo=0.0)
        if self.warmup_begin_lr > self.base_lr:
            raise ValueError(
                f"warmup_begin_lr ({warmup_begin_lr!r}) must not exceed base_lr ({base_lr!r}): "
                "warmup raises the learning rate towards base_lr"
            )
        if warmup_mode not in _WARMUP_MODES:
            raise ValueError(f"warmup_mode must be one of {list(_WARMUP_MODES)}, got {warmup_mode!r}")
        self.warmup_mode = warmup_mode

    @property
    def warmup_final_lr(self) -> float:
        """The learning rate warmup ends at: ``base_lr``."""
        return self.base_lr

    def get_warmup_lr(self, num_update: int) -> float:
        """Learning rate during warmup (``num_update < warmup_steps``)."""
        if not 0 <= num_update < self.warmup_steps:
            raise ValueError(f"num_update {num_update!r} is outside the warmup [0, {self.warmup_steps})")
        if self.warmup_mode == "constant":
            return self.warmup_begin_lr
        span = self.base_lr - self.warmup_begin_lr
        return self.warmup_begin_lr + span * float(num_update) / float(self.warmup_steps)

    def _check_num_update(self, num_update: Any) -> int:
        return _check_int("num_update", num_update, 0)

    def __call__(self, num_update: int) -> float:
        """The learning rate after ``num_update`` updates: the warmup's, then :meth:`_after_warmup`'s."""
        n = self._check_num_update(num_update)
        if n < self.warmup_steps:
            return self.get_warmup_lr(n)
        return self._after_warmup(n)

    def _after_warmup(self, n: int) -> float:
        raise NotImplementedError(f"{type(self).__name__} must implement __call__(num_update)")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_lr={self.base_lr!r}, warmup_steps={self.warmup_steps!r})"


class FactorScheduler(LRScheduler):
    """Multiply the learning rate by ``factor`` every ``step`` updates, never going below
    ``stop_factor_lr``::

        lr = max(base_lr * factor ** floor((num_update - 1) / step), stop_factor_lr)

    computed as MXNet computes it, one multiplication per decay (bit-equal learning rates).

    (so the first change happens at update ``step + 1``; no clamping before the first change).

    Args:
        step: updates between changes (>= 1).
        factor: multiplier in (0, 1].
        stop_factor_lr: lower limit of the decayed learning rate.
    """

    def __init__(
        self,
        step: int,
        factor: float = 1.0,
        stop_factor_lr: float = 1e-8,
        base_lr: float = 0.01,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0.0,
        warmup_mode: str = "linear",
    ) -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.step = _check_int("step", step, 1)
        self.factor = _factor(factor)
        self.stop_factor_lr = _check_real("stop_factor_lr", stop_factor_lr, lo=0.0)

    def _after_warmup(self, n: int) -> float:
        decays = max(0, (n - 1) // self.step)
        if decays == 0:
            return self.base_lr
        return self._decayed(decays)

    def _decayed(self, decays: int) -> float:
        # MXNet multiplies by the factor once per decay (and clamps at stop_factor_lr); the same
        # product, not base_lr * factor**k, keeps the learning rates bit-equal to MXNet's.  The
        # last product is kept so that consecutive calls multiply once, whatever order they come in.
        key = (self.base_lr, self.factor, self.stop_factor_lr)
        memo = getattr(self, "_memo", None)
        if memo is not None and tuple(memo[:3]) == key and memo[3] <= decays:
            k, lr = int(memo[3]), float(memo[4])
        else:
            k, lr = 0, self.base_lr
        while k < decays and lr > self.stop_factor_lr:
            lr *= self.factor
            k += 1
            if lr < self.stop_factor_lr:
                lr = self.stop_factor_lr
        self._memo = [*key, decays, lr]
        return lr


class MultiFactorScheduler(LRScheduler):
    """Multiply the learning rate by ``factor`` once past each update count in ``step``::

        lr = base_lr * factor ** (number of s in step with num_update > s)

    Args:
        step: strictly increasing list of update counts (each >= 1).
        factor: multiplier in (0, 1].
    """

    def __init__(
        self,
        step: Sequence[int],
        factor: float = 1.0,
        base_lr: float = 0.01,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0.0,
        warmup_mode: str = "linear",
    ) -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(step, (list, tuple)) or len(step) == 0:
            raise TypeError(f"step must be a non-empty list of update counts, got {step!r}")
        steps = [_check_int(f"step[{i}]", s, 1) for i, s in enumerate(step)]
        for i in range(1, len(steps)):
            if steps[i] <= steps[i - 1]:
                raise ValueError(
                    f"step must be strictly increasing, got {list(step)!r} "
                    f"(step[{i}] = {steps[i]} <= step[{i - 1}] = {steps[i - 1]})"
                )
        self.step = steps
        self.factor = _factor(factor)

    def _after_warmup(self, n: int) -> float:
        passed = sum(1 for s in self.step if n > s)
        return self.base_lr * self.factor**passed


class _DecayToFinal(LRScheduler):
    def __init__(
        self,
        max_update: int,
        base_lr: float = 0.01,
        final_lr: float = 0.0,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0.0,
        warmup_mode: str = "linear",
    ) -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.max_update = _check_int("max_update", max_update, 1)
        if self.max_update <= self.warmup_steps:
            raise ValueError(
                f"max_update ({max_update!r}) must be greater than warmup_steps ({warmup_steps!r})"
            )
        self.final_lr = _check_real("final_lr", final_lr, lo=0.0)

    @property
    def max_steps(self) -> int:
        """Number of decay updates after warmup: ``max_update - warmup_steps``."""
        return self.max_update - self.warmup_steps

    def _shape(self, progress: float) -> float:
        raise NotImplementedError

    def _after_warmup(self, n: int) -> float:
        if n >= self.max_update:
            return self.final_lr
        progress = float(n - self.warmup_steps) / float(self.max_steps)
        return self.final_lr + (self.base_lr - self.final_lr) * self._shape(progress)


class PolyScheduler(_DecayToFinal):
    """Polynomial decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates::

        progress = (num_update - warmup_steps) / (max_update - warmup_steps)
        lr = final_lr + (base_lr - final_lr) * (1 - progress) ** pwr

    and ``final_lr`` from ``max_update`` on.

    Args:
        max_update: update count at which ``final_lr`` is reached (> warmup_steps).
        pwr: power of the decay, default 2.
        final_lr: default 0.
    """

    def __init__(
        self,
        max_update: int,
        base_lr: float = 0.01,
        pwr: float = 2,
        final_lr: float = 0.0,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0.0,
        warmup_mode: str = "linear",
    ) -> None:
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.power = _check_real("pwr", pwr, lo=0.0)

    def _shape(self, progress: float) -> float:
        return (1.0 - progress) ** self.power


class CosineScheduler(_DecayToFinal):
    """Cosine decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates::

        progress = (num_update - warmup_steps) / (max_update - warmup_steps)
        lr = final_lr + (base_lr - final_lr) * (1 + cos(pi * progress)) / 2

    and ``final_lr`` from ``max_update`` on.

    Args:
        max_update: update count at which ``final_lr`` is reached (> warmup_steps).
        final_lr: default 0.
    """

    # __init__: _DecayToFinal's (max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)

    def _shape(self, progress: float) -> float:
        return (1.0 + math.cos(math.pi * progress)) / 2.0
