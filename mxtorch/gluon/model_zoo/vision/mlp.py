"""A multilayer perceptron for small images (flattened), e.g. MNIST / Fashion-MNIST."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .... import context as _context
from ... import nn
from ...block import HybridBlock
from ._base import DEFAULT_ROOT, FeaturesOutput, load_pretrained

__all__ = ["MLP", "get_mlp", "mlp"]


class MLP(FeaturesOutput):
    """``features`` = flatten → Dense(h, activation) [→ Dropout] for each h in ``hidden_units``;
    ``output`` = Dense(classes).  The input size is inferred at the first forward pass."""

    def __init__(self, classes: int = 10, hidden_units: Sequence[int] = (256, 128), activation: str = "relu",
                 dropout: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(hidden_units, int):
            hidden_units = (hidden_units,)
        if any(int(h) <= 0 for h in hidden_units):
            raise ValueError(f"MLP: hidden_units must be positive ints, got {tuple(hidden_units)}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"MLP: dropout must be in [0, 1), got {dropout!r}")
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(nn.Flatten())
            for h in hidden_units:
                self.features.add(nn.Dense(int(h), activation=activation))
                if dropout > 0:
                    self.features.add(nn.Dropout(dropout))
            self.output = nn.Dense(classes)


def get_mlp(pretrained: bool = False, ctx: _context.Context | None = None, root: str = DEFAULT_ROOT,
            **kwargs: Any) -> HybridBlock:
    """An :class:`MLP`; ``pretrained=True`` loads ``<root>/mlp.params`` onto ``ctx``."""
    return load_pretrained(MLP(**kwargs), pretrained, "mlp", root, ctx)


def mlp(**kwargs: Any) -> HybridBlock:
    """MLP with hidden layers (256, 128), ReLU, classes=10."""
    return get_mlp(**kwargs)
