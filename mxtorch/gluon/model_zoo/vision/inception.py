"""Inception v3 (Szegedy et al., "Rethinking the Inception Architecture for Computer Vision", 2016)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .... import context as _context
from ... import nn
from ...block import HybridBlock
from ._base import DEFAULT_ROOT, FeaturesOutput, load_pretrained
from ._concat import Concurrent

__all__ = ["Inception3", "inception_v3"]


_Conv = tuple[int, Any, Any, Any]  # (channels, kernel_size, strides, padding)


def _conv(channels: int, kernel_size: Any, strides: Any = 1, padding: Any = 0) -> nn.HybridSequential:
    """Convolution without bias, BatchNorm (epsilon 0.001), ReLU."""
    out = nn.HybridSequential(prefix="")
    out.add(nn.Conv2D(channels, kernel_size=kernel_size, strides=strides, padding=padding, use_bias=False),
            nn.BatchNorm(epsilon=0.001), nn.Activation("relu"))
    return out


def _branch(pool: str | None, *convs: _Conv) -> nn.HybridSequential:
    """An optional 3x3 pool ('avg': stride 1, 'max': stride 2) followed by convolutions."""
    out = nn.HybridSequential(prefix="")
    if pool == "avg":
        out.add(nn.AvgPool2D(pool_size=3, strides=1, padding=1))
    elif pool == "max":
        out.add(nn.MaxPool2D(pool_size=3, strides=2))
    for c in convs:
        out.add(_conv(*c))
    return out


_Branch = Callable[[], HybridBlock]


def _mixed(prefix: str, *branches: _Branch) -> Concurrent:
    """A block with ``prefix`` ('A1_', ...) concatenating the branches; each branch is made
    inside its name scope, in order, so the layers are numbered as in MXNet."""
    out = Concurrent(axis=1, prefix=prefix)
    with out.name_scope():
        for make in branches:
            out.add(make())
    return out


def _b(pool: str | None, *convs: _Conv) -> _Branch:
    return lambda: _branch(pool, *convs)


def _block_a(pool_features: int, prefix: str) -> Concurrent:
    return _mixed(prefix, _b(None, (64, 1, 1, 0)),
                  _b(None, (48, 1, 1, 0), (64, 5, 1, 2)),
                  _b(None, (64, 1, 1, 0), (96, 3, 1, 1), (96, 3, 1, 1)),
                  _b("avg", (pool_features, 1, 1, 0)))


def _block_b(prefix: str) -> Concurrent:
    return _mixed(prefix, _b(None, (384, 3, 2, 0)),
                  _b(None, (64, 1, 1, 0), (96, 3, 1, 1), (96, 3, 2, 0)),
                  _b("max"))


def _block_c(c7: int, prefix: str) -> Concurrent:
    return _mixed(prefix, _b(None, (192, 1, 1, 0)),
                  _b(None, (c7, 1, 1, 0), (c7, (1, 7), 1, (0, 3)), (192, (7, 1), 1, (3, 0))),
                  _b(None, (c7, 1, 1, 0), (c7, (7, 1), 1, (3, 0)), (c7, (1, 7), 1, (0, 3)),
                     (c7, (7, 1), 1, (3, 0)), (192, (1, 7), 1, (0, 3))),
                  _b("avg", (192, 1, 1, 0)))


def _block_d(prefix: str) -> Concurrent:
    return _mixed(prefix, _b(None, (192, 1, 1, 0), (320, 3, 2, 0)),
                  _b(None, (192, 1, 1, 0), (192, (1, 7), 1, (0, 3)), (192, (7, 1), 1, (3, 0)),
                     (192, 3, 2, 0)),
                  _b("max"))


def _split_1x3_3x1(*stem: _Conv) -> _Branch:
    """``stem`` convolutions, then parallel (1, 3) and (3, 1) convolutions of 384 concatenated."""

    def make() -> nn.HybridSequential:
        out = nn.HybridSequential(prefix="")
        out.add(_branch(None, *stem))
        split = Concurrent(axis=1, prefix="")
        split.add(_branch(None, (384, (1, 3), 1, (0, 1))), _branch(None, (384, (3, 1), 1, (1, 0))))
        out.add(split)
        return out

    return make


def _block_e(prefix: str) -> Concurrent:
    return _mixed(prefix, _b(None, (320, 1, 1, 0)),
                  _split_1x3_3x1((384, 1, 1, 0)),
                  _split_1x3_3x1((448, 1, 1, 0), (384, 3, 1, 1)),
                  _b("avg", (192, 1, 1, 0)))


class Inception3(FeaturesOutput):
    """Inception v3: ``features`` (stem convolutions, blocks A x3, B, C x4, D, E x2, 8x8 average
    pool, Dropout(0.5)) and ``output`` (Dense(classes)).  Input 299x299."""

    def __init__(self, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():  # names as MXNet's: 'inception30_A1_conv0_weight', ...
            f = nn.HybridSequential(prefix="")
            f.add(_conv(32, 3, 2), _conv(32, 3), _conv(64, 3, 1, 1), nn.MaxPool2D(pool_size=3, strides=2),
                  _conv(80, 1), _conv(192, 3), nn.MaxPool2D(pool_size=3, strides=2),
                  _block_a(32, "A1_"), _block_a(64, "A2_"), _block_a(64, "A3_"), _block_b("B_"),
                  _block_c(128, "C1_"), _block_c(160, "C2_"), _block_c(160, "C3_"), _block_c(192, "C4_"),
                  _block_d("D_"), _block_e("E1_"), _block_e("E2_"),
                  nn.AvgPool2D(pool_size=8), nn.Dropout(0.5))
            self.features = f
            self.output = nn.Dense(classes)


def inception_v3(pretrained: bool = False, ctx: _context.Context | None = None, root: str = DEFAULT_ROOT,
                 **kwargs: Any) -> HybridBlock:
    """Inception v3; ``pretrained=True`` loads ``inceptionv3.params`` from ``root``."""
    return load_pretrained(Inception3(**kwargs), pretrained, "inceptionv3", root, ctx)
