"""Containers and basic layers: Sequential, Dense, Dropout, Flatten, Lambda, Identity, ..."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F

from ... import autograd
from ...base import MXNetError
from ..block import Block, HybridBlock
from ..symbolic import symbol_translation
from .activations import Activation, activation_fn

__all__ = [
    "Sequential",
    "HybridSequential",
    "Dense",
    "Dropout",
    "Flatten",
    "Lambda",
    "HybridLambda",
    "Identity",
]


class Sequential(Block):
    """Stacks blocks: ``net.add(a, b)``; calling the net calls them in order."""

    def __init__(self, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)

    def add(self, *blocks: torch.nn.Module) -> Sequential:
        for b in blocks:
            if not isinstance(b, torch.nn.Module):
                raise TypeError(f"Sequential.add expects Blocks or torch modules, got {type(b).__name__}")
            self.add_module(str(len(self._modules)), b)
        return self

    def forward(self, x: Any, *args: Any) -> Any:
        block: Any
        for block in self._modules.values():
            x = block(x, *args)
            args = ()
            if isinstance(x, (tuple, list)) and not isinstance(x, torch.Tensor):
                x, *rest = x
                args = tuple(rest)
        return (x, *args) if args else x

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        """Hybridize the HybridBlock children; warns, as MXNet does, when all children are
        HybridBlocks (a HybridSequential would compile them as one graph)."""
        if not isinstance(self, HybridBlock) and self._modules and \
                all(isinstance(c, HybridBlock) for c in self._modules.values()):
            warnings.warn(f"All children of this Sequential layer '{self.prefix}' are HybridBlocks: "
                          "consider using HybridSequential for the best performance", stacklevel=2)
        super().hybridize(active, **kwargs)

    def __getitem__(self, key: int | slice) -> Any:
        mods: list[Any] = list(self._modules.values())
        if isinstance(key, slice):
            net = type(self)()
            net.add(*mods[key])
            return net
        return mods[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Any:
        return iter(self._modules.values())


class HybridSequential(HybridBlock, Sequential):
    """Sequential that can be hybridized (compiled as one graph)."""

    def __init__(self, prefix: str | None = None, params: Any = None) -> None:
        HybridBlock.__init__(self, prefix, params)

    forward = Sequential.forward


class Dense(HybridBlock):
    """Fully connected layer: ``out = activation(x · Wᵀ + b)``.

    ``in_units=0`` infers the input size at the first forward pass.  With ``flatten=True``
    (default) inputs of more than two dimensions are flattened to (batch, -1), as MXNet does.
    Weight shape is (units, in_units).
    """

    def __init__(
        self,
        units: int,
        activation: str | None = None,
        use_bias: bool = True,
        flatten: bool = True,
        dtype: Any = "float32",
        weight_initializer: Any = None,
        bias_initializer: Any = "zeros",
        in_units: int = 0,
        prefix: str | None = None,
        params: Any = None,
    ) -> None:
        super().__init__(prefix, params)
        if int(units) < 0:  # MXNet builds Dense(0) (an empty layer), so 0 is not refused here
            raise ValueError(f"Dense: units must be a non-negative int, got {units!r}")
        self._units = int(units)
        self._in_units = int(in_units)
        self._flatten = flatten
        self.weight = self.params.get("weight", shape=(self._units, self._in_units), dtype=dtype,
                                      init=weight_initializer, allow_deferred_init=True)
        self.bias = (self.params.get("bias", shape=(self._units,), dtype=dtype, init=bias_initializer,
                                     allow_deferred_init=True) if use_bias else None)
        self._act_name = activation
        with self.name_scope():  # MXNet's name: '<layer prefix><activation>_'
            self.act = Activation(activation, prefix=f"{activation}_") if activation is not None else None
        self._act_fn = activation_fn(activation) if activation is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._flatten and x.dim() > 2:
            x = x.reshape(x.shape[0], -1)
        w = self.weight
        if w._data is None:
            w.infer_shape((self._units, x.shape[-1]))
            self._in_units = x.shape[-1]
        out = F.linear(x, w.data(), self.bias.data() if self.bias is not None else None)
        return self._act_fn(out) if self._act_fn is not None else out

    def __repr__(self) -> str:
        shape = self.weight.shape or (self._units, 0)
        act = self._act_name or "linear"
        return f"Dense({shape[1] if shape[1] > 0 else None} -> {shape[0]}, {act})"


@symbol_translation(Dense)
def _dense_graph(F: ModuleType, b: Dense, x: Any) -> Any:
    out = F.FullyConnected(
        data=x,
        weight=b.weight.var(),
        bias=None if b.bias is None else b.bias.var(),
        no_bias=b.bias is None,
        num_hidden=b._units,
        flatten=b._flatten,
        name="fwd",
    )
    return b.act(out) if b.act is not None else out


class Dropout(HybridBlock):
    """Dropout active only in training mode (inside ``autograd.record()``), as in MXNet.

    ``axes`` lists axes that share one mask (variational dropout).
    """

    def __init__(self, rate: float, axes: tuple[int, ...] = (), prefix: str | None = None,
                 params: Any = None) -> None:
        super().__init__(prefix, params)
        if not 0.0 <= float(rate) <= 1.0:  # MXNet's range: 1 drops everything while training
            raise ValueError(f"Dropout rate must be in [0, 1], got {rate!r}")
        self._rate = float(rate)
        self._axes = tuple(axes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not autograd.is_training() or self._rate == 0.0:
            return x
        if self._rate == 1.0:
            return x * 0.0
        if not self._axes:
            return F.dropout(x, self._rate, training=True)
        shape = [1 if i in self._axes or i - x.dim() in self._axes else s for i, s in enumerate(x.shape)]
        keep = 1.0 - self._rate
        mask = torch.empty(shape, dtype=x.dtype, device=x.device).bernoulli_(keep) / keep
        return x * mask

    def __repr__(self) -> str:
        return f"Dropout(p = {self._rate}, axes={self._axes})"


@symbol_translation(Dropout)
def _dropout_graph(F: ModuleType, b: Dropout, x: Any) -> Any:
    if b._rate > 0:
        return F.Dropout(x, p=b._rate, axes=b._axes, name="fwd", cudnn_off=False)
    return F.identity(x)


class Flatten(HybridBlock):
    """Flattens (batch, d1, d2, ...) to (batch, d1*d2*...)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], -1)

    def __repr__(self) -> str:
        return "Flatten"


class Identity(HybridBlock):
    """Returns its input."""

    def forward(self, x: Any) -> Any:
        return x


@symbol_translation(Flatten)
def _flatten_graph(F: ModuleType, b: Flatten, x: Any) -> Any:
    return F.Flatten(x)


@symbol_translation(Identity)
def _identity_graph(F: ModuleType, b: Identity, x: Any) -> Any:
    return x


def _nd_function(name: str, layer: str) -> Callable[..., Any]:
    """The ``mxtorch.nd`` function called ``name`` (for Lambda/HybridLambda given a name)."""
    from ... import nd

    if not hasattr(nd, name):
        raise MXNetError(f"{layer}: mxtorch.nd has no function named {name!r}")
    return getattr(nd, name)  # type: ignore[no-any-return]


class Lambda(Block):
    """Wraps a function (or the name of an ``mxtorch.nd`` function) as a block."""

    def __init__(self, function: str | Callable[..., Any], prefix: str | None = None) -> None:
        super().__init__(prefix)
        if isinstance(function, str):
            function = _nd_function(function, "Lambda")
        if not callable(function):
            raise TypeError(f"Lambda expects a callable or a function name, got {function!r}")
        self._func = function

    def forward(self, *args: Any) -> Any:
        return self._func(*args)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({getattr(self._func, '__name__', self._func)})"


class HybridLambda(HybridBlock):
    """Hybridizable Lambda; a function given as ``lambda F, x: ...`` gets ``F = mxtorch.nd``."""

    def __init__(self, function: str | Callable[..., Any], prefix: str | None = None) -> None:
        super().__init__(prefix)
        from ... import nd

        if isinstance(function, str):
            self._func: Callable[..., Any] = _nd_function(function, "HybridLambda")
        elif callable(function):
            self._func = lambda *a: function(nd, *a)
            self._name = getattr(function, "__name__", "lambda")
        else:
            raise TypeError(f"HybridLambda expects a callable or a function name, got {function!r}")

    def forward(self, *args: Any) -> Any:
        return self._func(*args)


