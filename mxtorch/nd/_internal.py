"""``mx.nd._internal``: MXNet's underscore operators that MXNet code calls directly."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ._common import as_shape, device_of
from .contrib import zipfian_classes

Tensor = torch.Tensor

__all__ = ["_sample_unique_zipfian"]


def _sample_unique_zipfian(range_max: int, shape: Any = None, ctx: Any = None, **kwargs: Any) -> list[Tensor]:
    """Per row of ``shape`` (batch, num_sampled): ``num_sampled`` distinct classes drawn from the
    Zipfian distribution over [0, range_max) by rejecting repeats, and how many draws that took.
    Returns ``[classes (batch, num_sampled) int64, num_tries (batch,) int64]``."""
    kwargs.pop("name", None)
    batch, num = as_shape(shape, "shape") if shape is not None else (1, 1)
    if num > range_max:
        raise ValueError(
            f"_sample_unique_zipfian: {num} distinct classes cannot come from range_max={range_max}"
        )
    device = device_of(ctx)
    classes = np.empty((batch, num), dtype=np.int64)
    tries = np.empty((batch,), dtype=np.int64)
    for row in range(batch):
        drawn = np.empty(0, dtype=np.int64)
        while True:
            more = zipfian_classes((max(2 * num, 1024),), range_max, torch.device("cpu")).numpy()
            drawn = np.concatenate([drawn, more])
            values, first = np.unique(drawn, return_index=True)
            if values.size >= num:
                order = np.sort(first)[:num]  # the first num distinct draws, in draw order
                classes[row] = drawn[order]
                tries[row] = order[-1] + 1
                break
    return [torch.from_numpy(classes).to(device), torch.from_numpy(tries).to(device)]
