"""MXNet's ``gluon.contrib.cnn``: deformable convolutions (v1, Dai et al. 2017, and the modulated
v2, Zhu et al. 2019)."""

from __future__ import annotations

from .deformable import DeformableConvolution, ModulatedDeformableConvolution, deformable_conv2d

__all__ = ["DeformableConvolution", "ModulatedDeformableConvolution", "deformable_conv2d"]
