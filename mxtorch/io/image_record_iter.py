"""``mx.io.ImageRecordIter``: decoded, augmented image batches from a ``.rec`` file.

As MXNet 1.9.1's iterator (checked against it on tests/data/recordio):

* a worker reads its part: the file's bytes are cut into ``num_parts`` equal spans (rounded up
  to 4 bytes, as dmlc-core's input split) and part ``part_index`` holds the records that start
  in its span; parts neither overlap nor lose a record;
* per image: decode (OpenCV), resize the shorter side to ``resize`` (bilinear), crop
  ``data_shape``'s height x width (the centre, or a random place with ``rand_crop``), mirror
  with probability 1/2 with ``rand_mirror``, then ``(pixel - mean) * scale / std`` per RGB
  channel into a ``(batch, C, H, W)`` float32 batch;
* ``round_batch=True``: the last batch is completed from the start of the part and ``pad`` says
  how many; the next epoch starts after those records (MXNet's batch loader), the one after
  that from the start again.  ``round_batch=False``: the last batch's tail repeats its first
  records and ``pad`` counts them (MXNet 1.9.1 leaves that memory unset and reports pad 0).

Decoding and augmentation run on ``preprocess_threads`` threads (OpenCV releases the GIL),
``prefetch_buffer`` batches ahead of the caller;
records are read with positioned reads, so threads share one file descriptor.  The shuffle
order comes from ``seed`` (and the epoch), not MXNet's generator.
"""

from __future__ import annotations

import os
import random
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from ..base import MXNetError
from ..image.codec import decode_bgr, resize_hwc
from ..recordio import read_record_at, record_offsets, unpack
from .base import DataBatch, DataDesc, NativeBatchIter, check_kwargs

__all__ = ["ImageRecordIter"]

# accepted for MXNet compatibility: they tune MXNet's native prefetcher or augmenters not built here
_IGNORED_KWARGS = ("ctx", "verbose", "path_imglist", "shuffle_chunk_size",
                   "shuffle_chunk_seed", "max_random_scale", "min_random_scale", "max_rotate_angle",
                   "max_aspect_ratio", "max_shear_ratio", "random_h", "random_s", "random_l", "fill_value",
                   "pad", "mean_img", "mean_a", "std_a", "max_random_illumination", "max_random_contrast")


def part_offsets(offsets: list[int], file_size: int, part_index: int, num_parts: int) -> list[int]:
    """The record offsets of part ``part_index``: those starting in its span of the file's bytes."""
    step = -(-file_size // num_parts)
    step = (step + 3) // 4 * 4  # dmlc-core aligns the split to the 4-byte record words
    lo, hi = min(step * part_index, file_size), min(step * (part_index + 1), file_size)
    return [o for o in offsets if lo <= o < hi]


def _positive_shape(data_shape: Any) -> tuple[int, int, int]:
    try:
        shape = tuple(int(s) for s in data_shape)
    except (TypeError, ValueError):
        shape = ()
    if len(shape) != 3 or shape[0] not in (1, 3) or min(shape) < 1:
        raise ValueError(f"ImageRecordIter: data_shape must be (channels, height, width) with 1 or 3 "
                         f"channels, got {data_shape!r}")
    return shape  # type: ignore[return-value]


class ImageRecordIter(NativeBatchIter):
    """Batches of ``data_shape`` images and their labels from an image ``.rec`` file."""

    def __init__(self, path_imgrec: str | os.PathLike[str], data_shape: Any, batch_size: int,
                 label_width: int = 1, path_imgidx: str | os.PathLike[str] | None = None,
                 shuffle: bool = False, seed: int = 0, part_index: int = 0, num_parts: int = 1,
                 round_batch: bool = True, rand_crop: bool = False, rand_mirror: bool = False,
                 resize: int = -1, mean_r: float = 0.0, mean_g: float = 0.0, mean_b: float = 0.0,
                 std_r: float = 1.0, std_g: float = 1.0, std_b: float = 1.0, scale: float = 1.0,
                 preprocess_threads: int = 4, prefetch_buffer: int = 4, dtype: str = "float32",
                 data_name: str = "data", label_name: str = "softmax_label", inter_method: int = 1,
                 **kwargs: Any) -> None:
        check_kwargs("ImageRecordIter", kwargs, _IGNORED_KWARGS)
        self.path_imgrec = os.fspath(path_imgrec)
        if not os.path.isfile(self.path_imgrec):
            raise MXNetError(f"ImageRecordIter: path_imgrec {self.path_imgrec!r} is not a file")
        self.data_shape = _positive_shape(data_shape)
        if int(batch_size) < 1 or int(label_width) < 1 or int(preprocess_threads) < 1:
            raise ValueError(f"ImageRecordIter: batch_size ({batch_size}), label_width ({label_width}) "
                             f"and preprocess_threads ({preprocess_threads}) must be positive")
        if not 0 <= int(part_index) < int(num_parts):
            raise ValueError(f"ImageRecordIter: part_index must be in [0, num_parts={num_parts}), "
                             f"got {part_index}")
        if dtype not in ("float32", "uint8"):
            raise ValueError(f"ImageRecordIter: dtype must be 'float32' or 'uint8', got {dtype!r}")
        super().__init__(int(batch_size))
        self.label_width, self.shuffle, self.seed = int(label_width), bool(shuffle), int(seed)
        self.round_batch, self.rand_crop = bool(round_batch), bool(rand_crop)
        self.rand_mirror = bool(rand_mirror)
        self.resize, self.inter_method, self.dtype = int(resize), int(inter_method), dtype
        self._mean = np.asarray([mean_r, mean_g, mean_b][: self.data_shape[0]], np.float32)
        stds = (std_r, std_g, std_b)[: self.data_shape[0]]
        self._factor = np.asarray([scale / s for s in stds], np.float32)
        self._fd = os.open(self.path_imgrec, os.O_RDONLY)
        self._size = os.fstat(self._fd).st_size
        offsets = self._all_offsets(path_imgidx)
        self._offsets = part_offsets(offsets, self._size, int(part_index), int(num_parts))
        if not self._offsets:
            raise MXNetError(f"ImageRecordIter: part {part_index} of {num_parts} of {self.path_imgrec!r} "
                             f"holds no record ({len(offsets)} records in the file)")
        self._pool = ThreadPoolExecutor(int(preprocess_threads), thread_name_prefix="mxtorch-imagerecord")
        label_shape = (self.batch_size,) if self.label_width == 1 else (self.batch_size, self.label_width)
        self.provide_data = [DataDesc(data_name, (self.batch_size, *self.data_shape), np.dtype(dtype))]
        self.provide_label = [DataDesc(label_name, label_shape, np.float32)]
        self.prefetch_buffer = max(1, int(prefetch_buffer))
        self._pending: deque[tuple[list[Future[tuple[np.ndarray, np.ndarray]]], int, int]] = deque()
        self._epoch, self._resume = 0, 0
        self.reset()

    def _all_offsets(self, path_imgidx: str | os.PathLike[str] | None) -> list[int]:
        if path_imgidx is None:
            return record_offsets(self.path_imgrec)
        from ..recordio import MXIndexedRecordIO

        index = MXIndexedRecordIO(path_imgidx, self.path_imgrec, "r")
        index.close()
        return sorted(index.idx.values())

    def reset(self) -> None:
        self._drain()
        order = np.arange(len(self._offsets))
        if self.shuffle:
            np.random.default_rng([self.seed, self._epoch]).shuffle(order)
        self._epoch += 1
        self._order = order
        self._cursor, self._resume = self._resume, 0
        # one draw per epoch: the augmentation of each image does not depend on prefetch_buffer
        self._epoch_seed, self._planned = random.getrandbits(63), 0
        self.current_batch = None

    def _plan(self) -> tuple[list[int], int, int] | None:
        """The next batch's record positions, pad, and where the next epoch starts; None at the end."""
        n = len(self._order)
        if self._cursor >= n:
            return None
        take = [int(i) for i in self._order[self._cursor:self._cursor + self.batch_size]]
        self._cursor += len(take)
        pad, resume = self.batch_size - len(take), 0
        if pad and self.round_batch:
            resume = pad % n  # MXNet's loader starts the next epoch after the wrapped records
            take += [int(self._order[i % n]) for i in range(pad)]
        elif pad:
            take += [take[i % len(take)] for i in range(pad)]
        return take, pad, resume

    def _schedule(self) -> None:
        # keep prefetch_buffer batches decoding while the caller trains on the current one
        while len(self._pending) < self.prefetch_buffer:
            plan = self._plan()
            if plan is None:
                return
            take, pad, resume = plan
            seeds = [self._epoch_seed ^ ((self._planned + j) * 0x9E3779B97F4A7C15) for j in range(len(take))]
            self._planned += len(take)
            futures = [self._pool.submit(self._load, self._offsets[i], seed)
                       for i, seed in zip(take, seeds, strict=True)]
            self._pending.append((futures, pad, resume))

    def _drain(self) -> None:
        while self._pending:
            for f in self._pending.popleft()[0]:
                if not f.cancel():
                    f.exception()  # wait for one already running; its error belongs to no batch now

    def iter_next(self) -> bool:
        self._schedule()
        if not self._pending:
            return False
        futures, pad, resume = self._pending.popleft()
        self._resume = resume
        with torch.profiler.record_function("mxtorch/io/ImageRecordIter.batch"):
            samples = [f.result() for f in futures]
        self._schedule()
        data = torch.from_numpy(np.stack([s[0] for s in samples]))
        label = torch.from_numpy(np.stack([s[1] for s in samples]))
        self.current_batch = DataBatch([data], [label], pad=pad)
        return True

    def _load(self, offset: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        record, _ = read_record_at(self._fd, offset, self._size, self.path_imgrec)
        assert record is not None  # offsets come from the file's own headers
        header, payload = unpack(record)
        try:
            img = decode_bgr(payload, 1 if self.data_shape[0] == 3 else 0)
        except MXNetError as e:
            raise MXNetError(f"{self.path_imgrec}: record at offset {offset}: {e}") from e
        label = np.atleast_1d(np.asarray(header.label, np.float32))
        if label.size < self.label_width:
            raise MXNetError(f"{self.path_imgrec}: record at offset {offset} has {label.size} labels, "
                             f"label_width is {self.label_width}")
        label = label[0] if self.label_width == 1 else label[: self.label_width]
        return self._augment(img, random.Random(seed)), label

    def _augment(self, img: np.ndarray, rng: random.Random) -> np.ndarray:
        _, h, w = self.data_shape
        if self.resize > 0:
            img = self._resize_short(img, self.resize)
        if img.shape[0] < h or img.shape[1] < w:  # too small to crop: MXNet would stop; grow it
            img = self._resize_short(img, max(h, w))
        y = rng.randint(0, img.shape[0] - h) if self.rand_crop else (img.shape[0] - h) // 2
        x = rng.randint(0, img.shape[1] - w) if self.rand_crop else (img.shape[1] - w) // 2
        img = img[y:y + h, x:x + w]
        if self.rand_mirror and rng.random() < 0.5:
            img = img[:, ::-1]
        if img.ndim == 2:
            img = img[:, :, None]
        chw = np.ascontiguousarray(img[:, :, ::-1].transpose(2, 0, 1))  # BGR HWC -> RGB CHW
        if self.dtype == "uint8":
            return chw
        return (chw.astype(np.float32) - self._mean[:, None, None]) * self._factor[:, None, None]

    def _resize_short(self, img: np.ndarray, size: int) -> np.ndarray:
        rows, cols = img.shape[:2]
        new_w, new_h = (size, size * rows // cols) if rows > cols else (size * cols // rows, size)
        return resize_hwc(img, new_w, new_h, self.inter_method)

    def close(self) -> None:
        """Stops the decode threads and closes the file."""
        if getattr(self, "_fd", None) is not None:
            self._drain()
            self._pool.shutdown(wait=True)
            os.close(self._fd)
            self._fd = None  # type: ignore[assignment]

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass
