"""``MNISTIter``: batches from MNIST-format idx files, with the semantics of MXNet 1.x's native
``MNISTIter``.

* pixels are float32 ``value / 256`` (MXNet's scaling: 255 gives 0.99609375), labels float32;
* data batches are ``(batch_size, 1, rows, cols)``, or ``(batch_size, rows * cols)`` with
  ``flat=True``; label batches ``(batch_size,)``;
* only whole batches are returned (an incomplete last batch is dropped), ``pad`` is 0;
* ``shuffle=True`` (the default, as in MXNet) permutes the examples once, when the iterator is
  made, exactly as MXNet does: ``std::shuffle`` with ``std::mt19937(seed)`` as built into
  MXNet 1.9.1 (libstdc++'s algorithm, reproduced here), so a seed gives MXNet's order;
* ``num_parts`` / ``part_index`` read the ``part_index``-th of ``num_parts`` contiguous slices.

Unlike MXNet, files may be gzip-compressed (``.gz``; a missing ``name`` is also looked for as
``name.gz``) and ``index`` holds each example's position in the file (MXNet leaves it unset).
The Fashion-MNIST subset shipped with mxtorch is in :data:`EMBEDDED_FASHION_MNIST_ROOT`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..base import MXNetError
from ..gluon.data.vision.datasets import EMBEDDED_FASHION_MNIST_ROOT, read_idx
from .base import DataBatch, DataDesc, NativeBatchIter, check_kwargs

__all__ = ["MNISTIter", "EMBEDDED_FASHION_MNIST_ROOT", "mxnet_shuffle_order"]

_LOG = logging.getLogger(__name__)
_UINT32_MAX = 0xFFFFFFFF
# accepted for MXNet compatibility; they tune MXNet's native prefetcher, which this iterator has not
_IGNORED_KWARGS = ("prefetch_buffer", "ctx", "dtype")


def mxnet_shuffle_order(n: int, seed: int) -> np.ndarray:
    """The order in which MXNet's MNISTIter puts ``n`` examples for ``seed``.

    MXNet 1.9.1 calls ``std::shuffle(v.begin(), v.end(), std::mt19937(seed))``; its libstdc++
    swaps element ``i`` (1..n-1) with element ``j``, ``j`` uniform in ``[0, i]`` drawn by
    rejection: ``scaling = (2**32 - 1) // (i + 1)``, draws ``>= (i + 1) * scaling`` are
    rejected, ``j = draw // scaling``.  numpy's ``RandomState(seed)`` is the same mt19937
    (seeded by ``init_genrand``) and gives its raw 32-bit outputs through
    ``randint(0, 2**32, dtype=uint32)``.
    """
    rs = np.random.RandomState(seed % (1 << 32))
    order = list(range(n))
    block: list[int] = []
    pos = 0
    for i in range(1, n):
        uerange = i + 1
        scaling = _UINT32_MAX // uerange
        past = uerange * scaling
        while True:
            if pos == len(block):
                block = rs.randint(0, 1 << 32, size=max(n - i, 64), dtype=np.uint32).tolist()
                pos = 0
            draw = block[pos]
            pos += 1
            if draw < past:
                break
        j = draw // scaling
        order[i], order[j] = order[j], order[i]
    return np.asarray(order, dtype=np.int64)


def _locate(path: str | os.PathLike[str], what: str) -> Path:
    p = Path(path).expanduser()
    if p.is_file():
        return p
    gz = p.with_name(p.name + ".gz")
    if gz.is_file():
        return gz
    raise MXNetError(
        f"MNISTIter: {what} file {str(p)!r} not found (nor {gz.name!r} beside it); give the path of an "
        f"idx file. mxtorch ships a Fashion-MNIST subset in {EMBEDDED_FASHION_MNIST_ROOT} "
        "(mxtorch.io.EMBEDDED_FASHION_MNIST_ROOT)"
    )


def _part(count: int, num_parts: int, part_index: int) -> tuple[int, int]:
    # MXNet computes the bounds in double precision and truncates
    start = int(count / num_parts * part_index)
    end = int(count / num_parts * (part_index + 1))
    return start, end


class MNISTIter(NativeBatchIter):
    """Iterates over MNIST-format image and label files; see the module docstring."""

    def __init__(
        self,
        image: str | os.PathLike[str] = "./train-images-idx3-ubyte",
        label: str | os.PathLike[str] = "./train-labels-idx1-ubyte",
        batch_size: int = 128,
        shuffle: bool = True,
        flat: bool = False,
        seed: int = 0,
        silent: bool = False,
        num_parts: int = 1,
        part_index: int = 0,
        data_name: str = "data",
        label_name: str = "softmax_label",
        **kwargs: Any,
    ) -> None:
        check_kwargs("MNISTIter", kwargs, _IGNORED_KWARGS)
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"MNISTIter: batch_size must be a positive int, got {batch_size!r}")
        if not isinstance(num_parts, (int, np.integer)) or num_parts < 1:
            raise ValueError(f"MNISTIter: num_parts must be a positive int, got {num_parts!r}")
        if not isinstance(part_index, (int, np.integer)) or not 0 <= part_index < num_parts:
            raise ValueError(f"MNISTIter: part_index must be in [0, num_parts={num_parts}), "
                             f"got {part_index!r}")
        super().__init__(int(batch_size))
        image_path = _locate(image, "image")
        label_path = _locate(label, "label")
        images = read_idx(image_path, ndim=3)
        labels = read_idx(label_path, ndim=1)
        if images.shape[0] != labels.shape[0]:
            raise MXNetError(f"MNISTIter: {image_path} holds {images.shape[0]} images but {label_path} holds "
                             f"{labels.shape[0]} labels; give matching image and label files")
        start, end = _part(images.shape[0], int(num_parts), int(part_index))
        rows, cols = int(images.shape[1]), int(images.shape[2])
        self._images = images[start:end]
        self._labels = labels[start:end]
        self._index = np.arange(start, end, dtype=np.uint64)
        if shuffle:
            order = mxnet_shuffle_order(end - start, int(seed))
            self._images = self._images[order]
            self._labels = self._labels[order]
            self._index = self._index[order]
        self.num_data = end - start
        self.flat = bool(flat)
        self._sample_shape: tuple[int, ...] = (rows * cols,) if self.flat else (1, rows, cols)
        self._loc = 0
        self.current_batch: DataBatch | None = None
        self.provide_data = [DataDesc(data_name, (self.batch_size,) + self._sample_shape, np.float32)]
        self.provide_label = [DataDesc(label_name, (self.batch_size,), np.float32)]
        if not silent:
            _LOG.info("MNISTIter: load %d images, shuffle=%d, shape=%s", self.num_data, int(bool(shuffle)),
                      self.provide_data[0].shape)

    def reset(self) -> None:
        """Back to the first example (the shuffled order stays the same, as in MXNet)."""
        self._loc = 0
        self.current_batch = None

    def iter_next(self) -> bool:
        self.current_batch = None
        bs = self.batch_size
        if self._loc + bs > self.num_data:
            return False
        s = slice(self._loc, self._loc + bs)
        self._loc += bs
        pixels = torch.from_numpy(self._images[s].reshape((bs,) + self._sample_shape).astype(np.float32))
        self.current_batch = DataBatch(
            data=[pixels * (1.0 / 256.0)],
            label=[torch.from_numpy(self._labels[s].astype(np.float32))],
            pad=0,
            index=self._index[s].copy(),
            provide_data=self.provide_data,
            provide_label=self.provide_label,
        )
        return True
