"""Activation layers: Activation(act_type), LeakyReLU, PReLU, ELU, SELU, GELU, Swish, SiLU."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F

from ...nd._nn import activation_fn
from ..block import HybridBlock
from ..symbolic import symbol_translation

__all__ = ["Activation", "LeakyReLU", "PReLU", "ELU", "SELU", "GELU", "Swish", "SiLU", "activation_fn"]

class Activation(HybridBlock):
    """Applies ``act_type`` ('relu', 'sigmoid', 'tanh', 'softrelu', 'softsign', ...)."""

    def __init__(self, activation: str, prefix: str | None = None, params: Any = None) -> None:
        self._act_type = activation  # read by _alias() while the prefix is made
        super().__init__(prefix, params)
        self._fn = activation_fn(activation)

    def _alias(self) -> str:
        """MXNet names the layer by its activation: 'relu0_', 'tanh1_'."""
        act = self.__dict__.get("_act_type")
        return act if isinstance(act, str) else "activation"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._fn(x)

    def __repr__(self) -> str:
        return f"Activation({self._act_type})"


class LeakyReLU(HybridBlock):
    """``x if x > 0 else alpha * x``."""

    def __init__(self, alpha: float, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)
        if alpha < 0:
            raise ValueError(f"LeakyReLU: alpha must be >= 0, got {alpha!r}")
        self._alpha = float(alpha)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, self._alpha)

    def __repr__(self) -> str:
        return f"LeakyReLU({self._alpha})"


class PReLU(HybridBlock):
    """Leaky ReLU with a learned slope (``alpha``), shared over all channels by default."""

    def __init__(self, alpha_initializer: Any = None, in_channels: int = 1, prefix: str | None = None,
                 params: Any = None) -> None:
        super().__init__(prefix, params)
        from ... import initializer

        self.alpha = self.params.get("alpha", shape=(in_channels,),
                                     init=alpha_initializer if alpha_initializer is not None
                                     else initializer.Constant(0.25))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a: torch.Tensor = self.alpha.data()
        if a.numel() > 1 and x.dim() > 1:
            a = a.reshape((1, -1) + (1,) * (x.dim() - 2))
        return torch.where(x >= 0, x, a * x)


class ELU(HybridBlock):
    """``x if x > 0 else alpha * (exp(x) - 1)``."""

    def __init__(self, alpha: float = 1.0, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)
        self._alpha = float(alpha)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x, self._alpha)


class SELU(HybridBlock):
    """Scaled ELU (Klambauer et al., 2017)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.selu(x)


class GELU(HybridBlock):
    """Gaussian error linear unit; ``approximation='tanh'`` uses the tanh formula."""

    def __init__(self, approximation: str = "erf", prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)
        if approximation not in ("erf", "tanh"):
            raise ValueError(f"GELU approximation must be 'erf' or 'tanh', got {approximation!r}")
        self._approx = "none" if approximation == "erf" else "tanh"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate=self._approx)


class Swish(HybridBlock):
    """``x * sigmoid(beta * x)`` (Ramachandran et al., 2017)."""

    def __init__(self, beta: float = 1.0, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)
        self._beta = float(beta)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x) if self._beta == 1.0 else x * torch.sigmoid(self._beta * x)


class SiLU(Swish):
    """``x * sigmoid(x)``."""

    def __init__(self, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(1.0, prefix, params)


# MXNet's graphs of these layers: the Activation operator, and the LeakyReLU operator's act_types
@symbol_translation(Activation)
def _activation_graph(F: ModuleType, b: Activation, x: Any) -> Any:
    return F.Activation(x, act_type=b._act_type, name="fwd")


@symbol_translation(LeakyReLU)
def _leaky_graph(F: ModuleType, b: LeakyReLU, x: Any) -> Any:
    return F.LeakyReLU(x, act_type="leaky", name="fwd", slope=b._alpha)


@symbol_translation(ELU)
def _elu_graph(F: ModuleType, b: ELU, x: Any) -> Any:
    return F.LeakyReLU(x, act_type="elu", name="fwd", slope=b._alpha)


@symbol_translation(SELU)
def _selu_graph(F: ModuleType, b: SELU, x: Any) -> Any:
    return F.LeakyReLU(x, act_type="selu", name="fwd")


@symbol_translation(GELU)
def _gelu_graph(F: ModuleType, b: GELU, x: Any) -> Any:
    return F.LeakyReLU(x, act_type="gelu", name="fwd")


@symbol_translation(PReLU)
def _prelu_graph(F: ModuleType, b: PReLU, x: Any) -> Any:
    return F.LeakyReLU(x, gamma=b.alpha.var(), act_type="prelu", name="fwd")


@symbol_translation(Swish)
def _swish_graph(F: ModuleType, b: Swish, x: Any) -> Any:
    return x * F.sigmoid(b._beta * x, name="fwd")
