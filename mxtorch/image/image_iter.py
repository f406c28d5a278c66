"""``mx.image.ImageIter``: batches from a ``.rec`` file, a ``.lst`` list or a Python list,
through ``mx.image`` augmenters (MXNet's Python image iterator).

Sources as MXNet's: ``path_imgrec`` (with ``path_imgidx`` for random access and shuffling),
``path_imglist`` (``index<TAB>label(s)<TAB>path`` lines, images under ``path_root``, or labels
for the records of ``path_imgrec``) or ``imglist`` (``[label, ..., path]`` items, keys 1, 2, ...).
``num_parts`` cuts the key sequence into equal parts (the remainder dropped, as MXNet).
The last batch: ``'pad'`` (completed from the start, ``pad`` counts the filler), ``'discard'``
or ``'roll_over'`` (the leftover starts the next epoch; MXNet 1.9.1 reports that batch's
``pad`` as ``batch_size`` minus the leftover, and so does this).  Label orders, parts and
last batches were compared with MXNet 1.9.1's ImageIter on tests/data/recordio.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..base import MXNetError
from ..io.base import DataBatch, DataDesc, DataIter
from ..recordio import MXIndexedRecordIO, MXRecordIO, unpack
from .augmenters import Augmenter, CreateAugmenter
from .image import imdecode

__all__ = ["ImageIter"]


def _read_lst(path: str, dtype: str) -> tuple[dict[Any, tuple[np.ndarray, str]], list[Any]]:
    items: dict[Any, tuple[np.ndarray, str]] = {}
    keys: list[Any] = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            fields = line.strip().split("\t")
            if fields == [""]:
                continue
            try:
                if len(fields) < 3:
                    raise ValueError(f"{len(fields)} fields, expected index, label(s), path")
                key = int(fields[0])
                items[key] = (np.asarray([float(x) for x in fields[1:-1]], dtype=dtype), fields[-1])
            except ValueError as e:
                raise MXNetError(f"{path}: line {lineno} is not 'index<TAB>label<TAB>path' ({e})") from e
            keys.append(key)
    return items, keys


class ImageIter(DataIter):
    """Image batches ``(batch, C, H, W)`` with labels ``(batch,)`` or ``(batch, label_width)``."""

    def __init__(self, batch_size: int, data_shape: Sequence[int], label_width: int = 1,
                 path_imgrec: str | None = None, path_imglist: str | None = None,
                 path_root: str | None = None, path_imgidx: str | None = None, shuffle: bool = False,
                 part_index: int = 0, num_parts: int = 1,
                 aug_list: list[Augmenter] | None = None, imglist: list[Any] | None = None,
                 data_name: str = "data", label_name: str = "softmax_label", dtype: str = "float32",
                 last_batch_handle: str = "pad", **kwargs: Any) -> None:
        super().__init__(int(batch_size))
        if not (path_imgrec or path_imglist or imglist is not None):
            raise ValueError("ImageIter: give path_imgrec, path_imglist or imglist")
        if len(data_shape) != 3 or data_shape[0] not in (1, 3):
            raise ValueError(f"ImageIter: data_shape must be (1 or 3, height, width), got {data_shape!r}")
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise ValueError(f"ImageIter: last_batch_handle must be 'pad', 'discard' or 'roll_over', "
                             f"got {last_batch_handle!r}")
        if not 0 <= part_index < num_parts:
            raise ValueError(f"ImageIter: part_index must be in [0, {num_parts}), got {part_index}")
        self.data_shape, self.label_width, self.shuffle = tuple(data_shape), int(label_width), shuffle
        self.path_root, self.dtype, self.last_batch_handle = path_root or "", dtype, last_batch_handle
        self.imgrec: MXRecordIO | None = None
        seq: list[Any] | None = None
        if path_imgrec and path_imgidx:
            self.imgrec = MXIndexedRecordIO(path_imgidx, path_imgrec, "r")
            seq = list(self.imgrec.keys)
        elif path_imgrec:
            self.imgrec = MXRecordIO(path_imgrec, "r")
        self.imglist: dict[Any, tuple[np.ndarray, str]] | None = None
        if path_imglist:
            self.imglist, seq = _read_lst(path_imglist, dtype)
        elif imglist is not None:
            self.imglist, seq = {}, []
            for i, item in enumerate(imglist, 1):
                label = item[:-1] if len(item) > 2 else item[0]
                self.imglist[str(i)] = (np.atleast_1d(np.asarray(label, dtype=dtype)), str(item[-1]))
                seq.append(str(i))
        if seq is not None and num_parts > 1:
            per = len(seq) // num_parts
            seq = seq[part_index * per:(part_index + 1) * per]
        elif seq is None and (num_parts > 1 or shuffle):
            raise ValueError("ImageIter: shuffle and num_parts need random access: give path_imgidx too")
        self.seq = seq
        self.auglist = CreateAugmenter(data_shape, **kwargs) if aug_list is None else aug_list
        shape_l = (self.batch_size,) if self.label_width == 1 else (self.batch_size, self.label_width)
        self.provide_data = [DataDesc(data_name, (self.batch_size, *self.data_shape), np.dtype(dtype))]
        self.provide_label = [DataDesc(label_name, shape_l, np.dtype(dtype))]
        self._carry: list[tuple[Any, torch.Tensor]] = []
        self.cur, self._done = 0, False
        self.reset()

    def reset(self) -> None:
        if self.shuffle and self.seq is not None:
            random.shuffle(self.seq)
        if self.imgrec is not None and self.seq is None:
            self.imgrec.reset()
        self.cur, self._done = 0, False

    def next_sample(self) -> tuple[Any, bytes]:
        """``(label, encoded image)`` of the next example; StopIteration at the end."""
        if self.seq is None:
            assert self.imgrec is not None
            record = self.imgrec.read()
            if record is None:
                raise StopIteration
            header, img = unpack(record)
            return header.label, img
        if self.cur >= len(self.seq):
            raise StopIteration
        key = self.seq[self.cur]
        self.cur += 1
        if self.imgrec is not None:
            header, img = unpack(self.imgrec.read_idx(key))  # type: ignore[attr-defined]
            return (header.label if self.imglist is None else self.imglist[key][0]), img
        assert self.imglist is not None
        label, fname = self.imglist[key]
        with open(os.path.join(self.path_root, fname), "rb") as f:
            return label, f.read()

    def _example(self, label: Any, encoded: bytes) -> tuple[Any, torch.Tensor]:
        img = imdecode(encoded, 1 if self.data_shape[0] == 3 else 0)
        for aug in self.auglist:
            img = aug(img)
        if tuple(img.shape) != (self.data_shape[1], self.data_shape[2], self.data_shape[0]):
            raise MXNetError(f"ImageIter: the augmenters gave an image of shape {tuple(img.shape)}, "
                             f"data_shape {self.data_shape} needs (H, W, C) = "
                             f"{(self.data_shape[1], self.data_shape[2], self.data_shape[0])}")
        return label, img.permute(2, 0, 1)

    def next(self) -> DataBatch:
        if self._done:
            raise StopIteration
        examples, self._carry = self._carry, []
        carried = len(examples)
        while len(examples) < self.batch_size:
            try:
                examples.append(self._example(*self.next_sample()))
            except StopIteration:
                break
        if not examples or (len(examples) < self.batch_size and self.last_batch_handle == "discard"):
            raise StopIteration
        pad = self.batch_size - len(examples)
        if pad and self.last_batch_handle == "roll_over":
            self._carry = examples
            raise StopIteration
        if pad:
            self.reset()
            while len(examples) < self.batch_size:
                examples.append(self._example(*self.next_sample()))
            self._done = True  # until reset()
        if carried and not pad:
            pad = self.batch_size - carried  # MXNet 1.9.1 reports a rolled-over batch this way
        data = torch.stack([x for _, x in examples]).to(getattr(torch, self.dtype))
        labels = np.stack([np.asarray(lab, dtype=self.dtype).reshape(-1)[: self.label_width]
                           for lab, _ in examples])
        label = torch.from_numpy(labels.reshape(self.provide_label[0].shape))
        return DataBatch([data], [label], pad=pad)
