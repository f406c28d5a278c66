"""``mx.random``: seeding, plus the samplers of :mod:`mxtorch.nd.random`.

:func:`seed` seeds torch's generators (CPU and CUDA), numpy's global generator and Python's
``random`` module, so data pipelines written with any of them become reproducible.
"""

from __future__ import annotations

import numbers
import random as _pyrandom

import numpy as np
import torch

from .context import Context, as_context
from .nd import random as _nd_random
from .nd.random import *  # noqa: F403

__all__ = ["seed", *_nd_random.__all__]


def seed(seed_state: int, ctx: Context | str = "all") -> None:
    """Seed the random number generators.

    ``ctx='all'`` seeds torch's CPU generator and every CUDA device, numpy's global generator
    and Python's ``random``.  A CPU context seeds torch's CPU generator, numpy and ``random``;
    a GPU context seeds only that CUDA device's generator (a no-op when that device is absent,
    so scripts written for a GPU still run on a CPU-only machine).
    """
    if not isinstance(seed_state, numbers.Integral) or isinstance(seed_state, bool):
        raise TypeError(f"seed_state must be an int, got {type(seed_state).__name__} {seed_state!r}")
    s = int(seed_state)
    torch_seed = s % (1 << 64)
    host_seed = s % (1 << 32)
    if isinstance(ctx, str) and ctx == "all":
        torch.manual_seed(torch_seed)  # also seeds every CUDA device
        np.random.seed(host_seed)
        _pyrandom.seed(s)
        return
    c = as_context(ctx)
    if c.device_type == "gpu":
        if torch.cuda.is_available() and c.device_id < torch.cuda.device_count():
            with torch.cuda.device(c.device_id):
                torch.cuda.manual_seed(torch_seed)
        return
    torch.default_generator.manual_seed(torch_seed)
    np.random.seed(host_seed)
    _pyrandom.seed(s)
