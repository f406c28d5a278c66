"""``CSVIter``: batches from CSV files, with the semantics of MXNet 1.x's native ``CSVIter``.

Each CSV row is one example, reshaped to ``data_shape`` (and, from ``label_csv``, a label row
reshaped to ``label_shape``; without ``label_csv`` every label is 0).  Blank lines are skipped.
Values are parsed as ``dtype`` ('float32' default, 'int32' or 'int64').

The last batch, when the rows do not fill it:

* ``round_batch=True`` (default): it is completed with rows from the start of the file and
  ``pad`` says how many; the next epoch (after ``reset()``) then starts right after those rows,
  as in MXNet (a ``batch_size`` larger than the number of rows is refused here);
* ``round_batch=False``: ``pad`` says how many rows at the end of the batch are filler; as in
  MXNet they hold the rows that were in those positions of the previous batch (zeros when there
  was none), and every epoch starts at the first row.

Batches are float32 (or ``dtype``) tensors of shape ``(batch_size,) + data_shape``; a label
shape of ``(1,)`` gives labels of shape ``(batch_size,)`` (MXNet flattens a ``(batch, 1)``
label).  ``index`` holds the row numbers (uint64) of the batch's examples.

Unlike MXNet, the files are read (and checked) in full when the iterator is made, in the
calling thread; a row that does not parse or has the wrong number of values raises
:class:`~mxtorch.base.MXNetError` naming the file and line, and a label file must have as many
rows as the data file.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..base import MXNetError
from .base import DataBatch, DataDesc, NativeBatchIter, check_kwargs

__all__ = ["CSVIter"]

_DTYPES = {"float32": np.float32, "int32": np.int32, "int64": np.int64}
# accepted for MXNet compatibility; they tune MXNet's native prefetcher, which this iterator has not
_IGNORED_KWARGS = ("prefetch_buffer", "ctx")


def _shape_arg(shape: Any, what: str) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    try:
        out = tuple(int(s) for s in shape)
    except (TypeError, ValueError) as err:
        raise ValueError(f"CSVIter: {what} must be a tuple of positive ints, got {shape!r}") from err
    if not out or any(s < 1 for s in out):
        raise ValueError(f"CSVIter: {what} must be a non-empty tuple of positive ints, got {shape!r}")
    return out


def _dtype_key(dtype: Any) -> str:
    if dtype is None:
        return "float32"
    if isinstance(dtype, str):
        return dtype
    try:
        return np.dtype(dtype).name
    except TypeError:
        return repr(dtype)


def _csv_files(path: str | os.PathLike[str], what: str) -> list[Path]:
    p = Path(path).expanduser()
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file())
        if not files:
            raise MXNetError(f"CSVIter: {what} {str(p)!r} is a directory with no files in it")
        return files
    if not p.is_file():
        raise MXNetError(f"CSVIter: {what} file {str(p)!r} not found; give the path of a CSV file "
                         "or of a directory of CSV files")
    return [p]


def _parse_slowly(f: Path, first_row: int, width: int, dtype: type, what: str,
                  shape: tuple[int, ...]) -> np.ndarray:
    """The rows of one file parsed line by line; errors name the row, file and line."""
    rows: list[list[Any]] = []
    convert = float if dtype is np.float32 else int
    with open(f, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            text = line.strip()
            if not text:
                continue
            fields = text.split(",")
            if fields[-1].strip() == "":
                fields.pop()  # a trailing comma
            where = f"{what} row {first_row + len(rows)} ({f}, line {lineno})"
            if len(fields) != width:
                raise MXNetError(f"CSVIter: {where} has {len(fields)} values, but the shape {shape} needs "
                                 f"{width}; fix the row or the shape")
            try:
                values = [convert(x.strip()) for x in fields]
            except ValueError as err:
                raise MXNetError(
                    f"CSVIter: {where} is malformed: {err}; every value must be "
                    f"{'an integer' if convert is int else 'a number'} for this dtype"
                ) from err
            rows.append(values)
    try:
        return np.asarray(rows, dtype=dtype).reshape(len(rows), width)
    except OverflowError as err:
        raise MXNetError(f"CSVIter: a {what} value in {f} does not fit in {np.dtype(dtype).name}: "
                         f"{err}") from err


def _parse_rows(files: list[Path], width: int, dtype: type, what: str, shape: tuple[int, ...]) -> np.ndarray:
    """All non-blank rows of ``files`` as a (rows, width) array."""
    blocks: list[np.ndarray] = []
    count = 0
    for f in files:
        try:  # fast path; what it rejects is parsed line by line to name the bad row
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "input contained no data" for a blank file
                block: np.ndarray = np.loadtxt(f, delimiter=",", dtype=dtype, ndmin=2, comments=None,
                                               encoding="utf-8")
            if block.size and block.shape[1] != width:
                raise ValueError("wrong number of columns")
            block = block.reshape(-1, width)
        except (ValueError, OverflowError):
            block = _parse_slowly(f, count, width, dtype, what, shape)
        blocks.append(block)
        count += block.shape[0]
    return np.concatenate(blocks, axis=0)


class CSVIter(NativeBatchIter):
    """Iterates over the rows of a CSV file (or a directory of them); see the module docstring.

    ``batch_size`` is required, as in MXNet.  ``data_name`` / ``label_name`` name the arrays in
    ``provide_data`` / ``provide_label``.
    """

    def __init__(
        self,
        data_csv: str | os.PathLike[str],
        data_shape: Sequence[int] | int,
        label_csv: str | os.PathLike[str] | None = None,
        label_shape: Sequence[int] | int = (1,),
        batch_size: int | None = None,
        round_batch: bool = True,
        dtype: str | None = None,
        data_name: str = "data",
        label_name: str = "softmax_label",
        **kwargs: Any,
    ) -> None:
        check_kwargs("CSVIter", kwargs, _IGNORED_KWARGS)
        if batch_size is None:
            raise ValueError("CSVIter: batch_size is required")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"CSVIter: batch_size must be a positive int, got {batch_size!r}")
        key = _dtype_key(dtype)
        if key not in _DTYPES:
            raise ValueError(f"CSVIter: dtype {dtype!r} is not supported; use one of {sorted(_DTYPES)}")
        super().__init__(int(batch_size))
        self.data_shape = _shape_arg(data_shape, "data_shape")
        self.label_shape = _shape_arg(label_shape, "label_shape")
        self.round_batch = bool(round_batch)
        self.dtype = _DTYPES[key]
        d_width = math.prod(self.data_shape)
        self._data = _parse_rows(_csv_files(data_csv, "data_csv"), d_width, self.dtype, "data_csv",
                                 self.data_shape)
        n = self._data.shape[0]
        if n == 0:
            raise MXNetError(f"CSVIter: data_csv {str(data_csv)!r} has no rows")
        l_width = math.prod(self.label_shape)
        if label_csv is not None and str(label_csv) != "NULL":
            self._label = _parse_rows(_csv_files(label_csv, "label_csv"), l_width, self.dtype, "label_csv",
                                      self.label_shape)
            if self._label.shape[0] != n:
                raise MXNetError(f"CSVIter: data_csv has {n} rows but label_csv has {self._label.shape[0]}; "
                                 "give one label row per data row")
        else:
            self._label = np.zeros((n, l_width), dtype=self.dtype)
        if self.round_batch and self.batch_size > n:
            raise MXNetError(f"CSVIter: batch_size {self.batch_size} is larger than the {n} rows of "
                             "data_csv, so round_batch cannot fill the last batch from the other rows; use "
                             "batch_size <= rows or round_batch=False")
        self.num_data = n
        self._label_batch_shape: tuple[int, ...] = (
            (self.batch_size,) if l_width == 1 else (self.batch_size,) + self.label_shape
        )
        # the batch buffers persist across batches: round_batch=False fills with their old rows
        self._buf_data = np.zeros((self.batch_size, d_width), dtype=self.dtype)
        self._buf_label = np.zeros((self.batch_size, l_width), dtype=self.dtype)
        self._buf_index = np.zeros(self.batch_size, dtype=np.uint64)
        self._pos = 0
        self._num_overflow = 0
        self._pad = 0
        self.current_batch: DataBatch | None = None
        self.provide_data = [DataDesc(data_name, (self.batch_size,) + self.data_shape, self.dtype)]
        self.provide_label = [DataDesc(label_name, self._label_batch_shape, self.dtype)]

    def reset(self) -> None:
        """Next epoch; with round_batch it continues after the rows used to fill the last batch."""
        if not self.round_batch or self._num_overflow == 0:
            self._pos = 0
        else:
            self._num_overflow = 0
        self.current_batch = None

    def _take(self, top: int, count: int) -> None:
        end = self._pos + count
        self._buf_data[top:top + count] = self._data[self._pos:end]
        self._buf_label[top:top + count] = self._label[self._pos:end]
        self._buf_index[top:top + count] = np.arange(self._pos, end, dtype=np.uint64)
        self._pos = end

    def iter_next(self) -> bool:
        self.current_batch = None
        if self._num_overflow:
            return False  # the epoch ended by wrapping round; reset() starts the next one
        bs, n = self.batch_size, self.num_data
        top = min(bs, n - self._pos)
        if top == 0:
            return False
        self._take(0, top)
        self._pad = 0
        if top < bs:
            if self.round_batch:
                self._pos = 0
                self._take(top, bs - top)
                self._num_overflow = bs - top
            self._pad = bs - top
        self.current_batch = DataBatch(
            data=[torch.from_numpy(self._buf_data.reshape((bs,) + self.data_shape).copy())],
            label=[torch.from_numpy(self._buf_label.reshape(self._label_batch_shape).copy())],
            pad=self._pad,
            index=self._buf_index.copy(),
            provide_data=self.provide_data,
            provide_label=self.provide_label,
        )
        return True
