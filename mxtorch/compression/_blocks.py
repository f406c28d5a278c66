"""Cache-sized blocks and per-thread scratch buffers for the compressors' eager kernels.

An element-wise rule written as several torch ops makes one pass over memory per op.  Cut
into blocks that fit a core's L2 cache, every op after the first reads what the previous one
left in cache, so a chain of ops costs about one pass over memory, as a fused kernel would,
without a compiler.  The temporaries of a block live in scratch buffers kept per thread (a
compressor may be called from several threads) and per device, so they are allocated once
and stay cache-hot; on an accelerator, blocks are large, only to bound the scratch memory.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import torch

__all__ = ["BLOCK_ALIGN", "accumulate", "blocks", "numpy_pair", "numpy_shareable", "scratch"]

BLOCK_ALIGN = 64
"""Every block but the last starts and ends at a multiple of this many elements (whole words
of 1-bit and 2-bit codes, whole 8-byte integers of the packing arithmetic)."""

_CPU_BLOCK = 1 << 17
"""Elements per block on the CPU: 512 KiB of float32 with its temporaries fit a 1-2 MiB L2;
on the bench's 100 MiB gradient 2^14 blocks were ~2x slower (the ~5 us of Python and dispatch
per op), 2^17 and 2^18 about even (a loaded 2-core machine: +-20 %)."""

_DEVICE_BLOCK = 1 << 22
"""Elements per block elsewhere (an accelerator's kernels need no cache blocking): this only
bounds the scratch, ~8 MiB per slot and thread, while a block still amortizes kernel launches
(not measured: no accelerator on the machine this was written on)."""

_local = threading.local()


def blocks(numel: int, device: torch.device) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of consecutive blocks covering ``range(numel)``."""
    size = _CPU_BLOCK if device.type == "cpu" else _DEVICE_BLOCK
    for start in range(0, numel, size):
        yield start, min(numel, start + size)


def scratch(slot: int, numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A tensor of ``numel`` elements of ``dtype`` whose contents are undefined, 64-byte aligned,
    reused by this thread's later calls with the same ``slot`` (so a caller uses one slot for
    one temporary at a time, and never keeps the tensor beyond its own call)."""
    nbytes = numel * dtype.itemsize
    buffers: dict[tuple[int, torch.device], torch.Tensor] | None = getattr(_local, "buffers", None)
    if buffers is None:
        buffers = _local.buffers = {}
    buf = buffers.get((slot, device))
    if buf is None or buf.numel() < nbytes:
        buf = torch.empty(max(nbytes, BLOCK_ALIGN), dtype=torch.uint8, device=device)
        buffers[(slot, device)] = buf
    return buf[:nbytes].view(dtype)


def numpy_shareable(t: torch.Tensor) -> bool:
    """Whether NumPy can work on ``t``'s memory in place: a plain, contiguous float32/float64 CPU
    tensor outside autograd.  NumPy's SIMD kernels add, compare and find positions about twice as
    fast as torch's single-threaded ones on this kind of machine (a 100 MiB ``add``: 9-11 ms
    against 20 ms), so the compressors' eager passes take that route on the CPU."""
    return (t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64) and t.is_contiguous()
            and not t.requires_grad and type(t) is torch.Tensor)


def numpy_pair(buf: torch.Tensor, grad: torch.Tensor) -> bool:
    """Whether a residual buffer and a gradient both go through NumPy (one dtype, both shareable)."""
    return buf.dtype == grad.dtype and numpy_shareable(buf) and numpy_shareable(grad)


def accumulate(buf: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """``buf += grad`` (flat tensors of one length), through NumPy where both allow it; ``buf``."""
    if numpy_pair(buf, grad):
        b = buf.numpy()
        with np.errstate(all="ignore"):  # inf - inf is NaN silently, as in torch
            np.add(b, grad.numpy(), out=b)
        return buf
    return buf.add_(grad)
