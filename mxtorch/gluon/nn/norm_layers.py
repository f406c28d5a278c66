"""Normalization layers: BatchNorm, BatchNormReLU, SyncBatchNorm, LayerNorm, GroupNorm, InstanceNorm.

All scale/shift vectors (``gamma``/``beta``) and BatchNorm's running statistics are gluon
Parameters with MXNet's names and shapes, so checkpoints map one to one.  Training behaviour
follows :func:`mxtorch.autograd.is_training` (``autograd.record()`` / ``train_mode()``), not
``Module.training``.
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F

from ... import autograd
from ..._dtype import to_torch_dtype
from ...base import MXNetError
from ..block import HybridBlock
from ..parameter_core import Parameter
from ..symbolic import symbol_translation
from .conv_layers import _is_int

__all__ = ["BatchNorm", "BatchNormReLU", "SyncBatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm"]


def _check_channels(in_channels: Any, layer: str) -> int:
    if not _is_int(in_channels) or in_channels < 0:
        raise ValueError(f"{layer}: in_channels must be an int >= 0 (0 = infer), got {in_channels!r}")
    return int(in_channels)


def _check_epsilon(epsilon: Any, layer: str) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or epsilon < 0:
        raise ValueError(f"{layer}: epsilon must be a float >= 0, got {epsilon!r}")
    return float(epsilon)


def _norm_axis(axis: int, x: torch.Tensor, layer: str) -> int:
    nd = x.dim()
    if not -nd <= axis < nd:
        raise MXNetError(f"{layer}: axis={axis} is out of range for an input of shape {tuple(x.shape)}")
    return axis % nd


def _check_tensor(x: Any, layer: str, min_dim: int) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{layer}: expected a tensor input, got {type(x).__name__}")
    if x.dim() < min_dim:
        raise MXNetError(f"{layer}: expected an input with at least {min_dim} dimensions, "
                         f"got shape {tuple(x.shape)}")


class _Affine(HybridBlock):
    """Owns ``gamma``/``beta`` of shape (in_channels,), 0 meaning inferred at the first forward."""

    def __init__(self, center: bool, scale: bool, beta_initializer: Any, gamma_initializer: Any,
                 in_channels: int, differentiable_flags: bool, prefix: str | None, params: Any) -> None:
        super().__init__(prefix, params)
        name = type(self).__name__
        self._in_channels = _check_channels(in_channels, name)
        self._center, self._scale = bool(center), bool(scale)
        # MXNet: a disabled gamma/beta still exists (checkpoints keep it) but is not trained.
        self.gamma = self.params.get("gamma", grad_req="write" if scale else "null", shape=(in_channels,),
                                     init=gamma_initializer, allow_deferred_init=True,
                                     differentiable=bool(scale) or not differentiable_flags)
        self.beta = self.params.get("beta", grad_req="write" if center else "null", shape=(in_channels,),
                                    init=beta_initializer, allow_deferred_init=True,
                                    differentiable=bool(center) or not differentiable_flags)

    def _vectors(self) -> list[Parameter]:
        """Every (in_channels,)-shaped parameter of this layer."""
        return [self.gamma, self.beta]

    def _infer(self, channels: int) -> None:
        for p in self._vectors():
            if p._data is None:
                p.infer_shape((channels,))
        self._in_channels = channels

    def _check_size(self, channels: int, x: torch.Tensor, what: str) -> None:
        shape = self.gamma.shape
        if shape is not None and shape[0] > 0 and shape[0] != channels:
            raise MXNetError(f"{type(self).__name__}: input shape {tuple(x.shape)} has {channels} entries on "
                             f"the {what} axis, but the layer was built for in_channels={shape[0]}")

    def _prepare(self, channels: int, x: torch.Tensor, what: str) -> None:
        """Check the input's size on the normalized axis; infer deferred shapes from it."""
        self._check_size(channels, x, what)
        if any(p._data is None for p in self._vectors()):
            self._infer(channels)

    def _set_axis(self, axis: Any, epsilon: Any) -> None:
        name = type(self).__name__
        if not _is_int(axis):
            raise TypeError(f"{name}: axis must be an int, got {axis!r}")
        self._axis = int(axis)
        self._epsilon = _check_epsilon(epsilon, name)

    def _in_repr(self) -> int | None:
        shape = self.gamma.shape
        return shape[0] if shape and shape[0] > 0 else None

    def _repr(self, what: str) -> str:
        """``Name(eps=..., <what>, center=..., scale=..., in_channels=...)``."""
        return (f"{type(self).__name__}(eps={self._epsilon}, {what}, center={self._center}, "
                f"scale={self._scale}, in_channels={self._in_repr()})")


class BatchNorm(_Affine):
    """Batch normalization (Ioffe & Szegedy, 2015) over axis ``axis`` (the channel axis).

    In training mode (``autograd.record()`` or ``autograd.train_mode()``) the batch statistics
    normalize the input and update the running ones as MXNet does:
    ``running = momentum * running + (1 - momentum) * batch`` with the *biased* batch variance
    (MXNet's CPU kernel; note torch's own BatchNorm uses the unbiased one and ``1 - momentum``).
    Otherwise, or with ``use_global_stats=True``, the running statistics are used.
    ``scale=False`` fixes gamma to 1 (MXNet's ``fix_gamma``); ``center=False`` freezes beta at its
    initial value (zeros by default).  Parameters stay float32 when the block is cast to float16.
    """

    def __init__(
        self,
        axis: int = 1,
        momentum: float = 0.9,
        epsilon: float = 1e-5,
        center: bool = True,
        scale: bool = True,
        use_global_stats: bool = False,
        beta_initializer: Any = "zeros",
        gamma_initializer: Any = "ones",
        running_mean_initializer: Any = "zeros",
        running_variance_initializer: Any = "ones",
        in_channels: int = 0,
        prefix: str | None = None,
        params: Any = None,
    ) -> None:
        super().__init__(center, scale, beta_initializer, gamma_initializer, in_channels, True,
                         prefix, params)
        name = type(self).__name__
        if not _is_int(axis):
            raise TypeError(f"{name}: axis must be an int, got {axis!r}")
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or not 0.0 <= momentum <= 1.0:
            raise ValueError(f"{name}: momentum must be a float in [0, 1], got {momentum!r}")
        self._axis = int(axis)
        self._momentum = float(momentum)
        self._epsilon = _check_epsilon(epsilon, name)
        self._use_global_stats = bool(use_global_stats)
        self.running_mean = self.params.get("running_mean", grad_req="null", shape=(in_channels,),
                                            init=running_mean_initializer, allow_deferred_init=True,
                                            differentiable=False)
        self.running_var = self.params.get("running_var", grad_req="null", shape=(in_channels,),
                                           init=running_variance_initializer, allow_deferred_init=True,
                                           differentiable=False)

    def cast(self, dtype: Any) -> BatchNorm:
        """Cast the parameters; float16 is kept as float32 (as MXNet does for BatchNorm)."""
        if to_torch_dtype(dtype) == torch.float16:
            dtype = "float32"
        for p in self._vectors():
            p.cast(dtype)
        return self

    def _vectors(self) -> list[Parameter]:
        return [self.gamma, self.beta, self.running_mean, self.running_var]

    def _normalize(self, x: torch.Tensor) -> torch.Tensor:
        name = type(self).__name__
        _check_tensor(x, name, 2)
        axis = _norm_axis(self._axis, x, name)
        c = int(x.shape[axis])
        self._prepare(c, x, f"channel (axis={self._axis})")
        if axis != 1:
            x = x.movedim(axis, 1)
        gamma = self.gamma.data() if self._scale else None
        beta = self.beta.data()
        mean, var = self.running_mean.data(), self.running_var.data()
        if autograd.is_training() and not self._use_global_stats:
            count = x.numel() // max(c, 1)
            m = self._momentum
            if count < 2:
                # One value per channel (torch refuses): as in MXNet the batch variance is 0, every
                # value equals its mean, so the output is beta; an empty batch leaves the stats alone.
                shape = (1, c) + (1,) * (x.dim() - 2)
                g = gamma.reshape(shape) if gamma is not None else 1.0
                out = (x - x) * g + beta.reshape(shape)
                if count == 1:
                    with torch.no_grad():
                        mean.mul_(m).add_(x.reshape(c).to(mean.dtype), alpha=1.0 - m)
                        var.mul_(m)
                return out.movedim(1, axis) if axis != 1 else out
            # Scratch buffers take the batch statistics (momentum 1 replaces them); torch reports the
            # unbiased variance, rescaled below to MXNet's biased one.
            batch_mean = torch.zeros_like(mean)
            batch_var = torch.zeros_like(var)
            out = F.batch_norm(x, batch_mean, batch_var, gamma, beta, training=True, momentum=1.0,
                               eps=self._epsilon)
            with torch.no_grad():
                mean.mul_(m).add_(batch_mean, alpha=1.0 - m)
                var.mul_(m).add_(batch_var, alpha=(1.0 - m) * (count - 1) / count)
        else:
            out = F.batch_norm(x, mean, var, gamma, beta, training=False, eps=self._epsilon)
        return out.movedim(1, axis) if axis != 1 else out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._normalize(x)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(axis={self._axis}, eps={self._epsilon}, momentum={self._momentum}, "
                f"fix_gamma={not self._scale}, use_global_stats={self._use_global_stats}, "
                f"in_channels={self._in_repr()})")


class BatchNormReLU(BatchNorm):
    """BatchNorm followed by ReLU (MXNet's fused ``BatchNormReLU``; same parameters as BatchNorm)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self._normalize(x))


class SyncBatchNorm(BatchNorm):
    """Cross-device synchronized BatchNorm (channel axis 1).

    mxtorch runs each device's slice of a batch through the same block one after the other, so
    this layer normalizes every slice with that slice's own statistics: it behaves exactly like
    :class:`BatchNorm` (statistics are *not* synchronized across devices or processes).  A
    warning says so when ``num_devices`` > 1.
    """

    def __init__(
        self,
        in_channels: int = 0,
        num_devices: int | None = None,
        momentum: float = 0.9,
        epsilon: float = 1e-5,
        center: bool = True,
        scale: bool = True,
        use_global_stats: bool = False,
        beta_initializer: Any = "zeros",
        gamma_initializer: Any = "ones",
        running_mean_initializer: Any = "zeros",
        running_variance_initializer: Any = "ones",
        prefix: str | None = None,
        params: Any = None,
    ) -> None:
        super().__init__(1, momentum, epsilon, center, scale, use_global_stats, beta_initializer,
                         gamma_initializer, running_mean_initializer, running_variance_initializer,
                         in_channels, prefix, params)
        if num_devices is not None and (not _is_int(num_devices) or num_devices < 1):
            raise ValueError(f"SyncBatchNorm: num_devices must be a positive int or None, "
                             f"got {num_devices!r}")
        self._num_devices = num_devices
        if num_devices is not None and num_devices > 1:
            warnings.warn(f"SyncBatchNorm(num_devices={num_devices}): mxtorch does not synchronize batch "
                          "statistics across devices; each device's slice is normalized on its own, as "
                          "BatchNorm does", UserWarning, stacklevel=2)


class LayerNorm(_Affine):
    """Layer normalization (Ba et al., 2016) over the single axis ``axis`` (default: last).

    ``out = (x - mean) / sqrt(var + epsilon) * gamma + beta`` with biased variance; gamma/beta
    have shape (in_channels,) = the size of ``axis``.  ``scale``/``center`` = False keep gamma/beta
    untrained at their initial values (ones/zeros), as MXNet does.
    """

    def __init__(self, axis: int = -1, epsilon: float = 1e-5, center: bool = True, scale: bool = True,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones", in_channels: int = 0,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(center, scale, beta_initializer, gamma_initializer, in_channels, False,
                         prefix, params)
        self._set_axis(axis, epsilon)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_tensor(x, "LayerNorm", 1)
        axis = _norm_axis(self._axis, x, "LayerNorm")
        c = int(x.shape[axis])
        self._prepare(c, x, f"normalized (axis={self._axis})")
        last = axis == x.dim() - 1
        if not last:
            x = x.movedim(axis, -1)
        out = F.layer_norm(x, (c,), self.gamma.data(), self.beta.data(), self._epsilon)
        return out if last else out.movedim(-1, axis)

    def __repr__(self) -> str:
        return self._repr(f"axis={self._axis}")


class GroupNorm(_Affine):
    """Group normalization (Wu & He, 2018) of (N, C, ...) input, channels split into ``num_groups``.

    Statistics are taken per sample and group; gamma/beta have shape (in_channels,) = (C,),
    one per channel, as in MXNet 2.x (MXNet 1.x used one per group).
    """

    def __init__(self, num_groups: int = 1, epsilon: float = 1e-5, center: bool = True, scale: bool = True,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones", in_channels: int = 0,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(center, scale, beta_initializer, gamma_initializer, in_channels, False,
                         prefix, params)
        if not _is_int(num_groups) or num_groups <= 0:
            raise ValueError(f"GroupNorm: num_groups must be a positive int, got {num_groups!r}")
        if in_channels % num_groups:
            raise ValueError(f"GroupNorm: in_channels ({in_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self._num_groups = int(num_groups)
        self._epsilon = _check_epsilon(epsilon, "GroupNorm")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_tensor(x, "GroupNorm", 2)
        c = int(x.shape[1])
        if c % self._num_groups:
            raise MXNetError(f"GroupNorm: the channel axis (size {c}) of input shape {tuple(x.shape)} "
                             f"must be divisible by num_groups={self._num_groups}")
        self._prepare(c, x, "channel (axis=1)")
        return F.group_norm(x, self._num_groups, self.gamma.data(), self.beta.data(), self._epsilon)

    def __repr__(self) -> str:
        return self._repr(f"num_groups={self._num_groups}")


class InstanceNorm(_Affine):
    """Instance normalization (Ulyanov et al., 2016): each sample and channel is normalized over
    the remaining axes; ``axis`` is the channel axis.  Input needs at least 3 dimensions.

    Note MXNet's default ``scale=False``: gamma exists but stays untrained at its initial ones.
    """

    def __init__(self, axis: int = 1, epsilon: float = 1e-5, center: bool = True, scale: bool = False,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones", in_channels: int = 0,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(center, scale, beta_initializer, gamma_initializer, in_channels, False,
                         prefix, params)
        self._set_axis(axis, epsilon)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_tensor(x, "InstanceNorm", 3)
        axis = _norm_axis(self._axis, x, "InstanceNorm")
        if axis == 0:
            raise MXNetError("InstanceNorm: axis must not be the batch axis 0, got axis=0")
        c = int(x.shape[axis])
        self._prepare(c, x, f"channel (axis={self._axis})")
        if axis != 1:
            x = x.movedim(axis, 1)
        out = F.instance_norm(x, weight=self.gamma.data(), bias=self.beta.data(), eps=self._epsilon)
        return out.movedim(1, axis) if axis != 1 else out

    def __repr__(self) -> str:
        return self._repr(f"axis={self._axis}")


@symbol_translation(BatchNorm)
def _batchnorm_graph(F: ModuleType, b: BatchNorm, x: Any) -> Any:
    return F.BatchNorm(
        data=x,
        gamma=b.gamma.var(),
        beta=b.beta.var(),
        moving_mean=b.running_mean.var(),
        moving_var=b.running_var.var(),
        name="fwd",
        eps=b._epsilon,
        momentum=b._momentum,
        fix_gamma=not b._scale,
        use_global_stats=b._use_global_stats,
        axis=b._axis,
    )


@symbol_translation(LayerNorm)
def _layernorm_graph(F: ModuleType, b: LayerNorm, x: Any) -> Any:
    return F.LayerNorm(data=x, gamma=b.gamma.var(), beta=b.beta.var(), axis=b._axis, eps=b._epsilon)


@symbol_translation(InstanceNorm)
def _instancenorm_graph(F: ModuleType, b: InstanceNorm, x: Any) -> Any:
    return F.InstanceNorm(data=x, gamma=b.gamma.var(), beta=b.beta.var(), eps=b._epsilon)
