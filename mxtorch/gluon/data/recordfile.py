"""``gluon.data.RecordFileDataset``: the records of an indexed ``.rec`` file as a dataset."""

from __future__ import annotations

import os
from typing import Any

from ...recordio import MXIndexedRecordIO
from .dataset import Dataset


class RecordFileDataset(Dataset):
    """Each sample is one raw record (bytes) of ``filename``; its ``.idx`` file (same name,
    ``.idx`` suffix) gives the order and random access.  DataLoader workers reopen the file."""

    def __init__(self, filename: str | os.PathLike[str]) -> None:
        self.filename = os.fspath(filename)
        self.idx_file = os.path.splitext(self.filename)[0] + ".idx"
        for path, what in ((self.filename, "record file"), (self.idx_file, "index")):
            if not os.path.isfile(path):
                raise FileNotFoundError(f"RecordFileDataset: the {what} {path!r} does not exist "
                                        "(make both with mxtorch im2rec or MXIndexedRecordIO)")
        self._record = MXIndexedRecordIO(self.idx_file, self.filename, "r")

    def __getitem__(self, idx: int) -> Any:
        return self._record.read_idx(self._record.keys[idx])

    def __len__(self) -> int:
        return len(self._record.keys)
