"""``gluon.data.vision.ImageRecordDataset``: decoded images and labels from a ``.rec`` file."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ....image import imdecode
from ....recordio import unpack
from ..recordfile import RecordFileDataset


class ImageRecordDataset(RecordFileDataset):
    """A sample is ``(image, label)``: the image a uint8 ``(H, W, 3)`` RGB tensor (``flag=1``)
    or ``(H, W, 1)`` gray (``flag=0``), the label the header's float or float32 vector;
    ``transform(image, label)`` is applied when given."""

    def __init__(self, filename: str | os.PathLike[str], flag: int = 1,
                 transform: Callable[[Any, Any], Any] | None = None) -> None:
        if flag not in (0, 1):
            raise ValueError(f"ImageRecordDataset: flag must be 0 (gray) or 1 (colour), got {flag!r}")
        if transform is not None and not callable(transform):
            raise TypeError(f"ImageRecordDataset: transform must be callable or None, got {transform!r}")
        super().__init__(filename)
        self._flag = flag
        self._transform = transform

    def __getitem__(self, idx: int) -> Any:
        header, payload = unpack(super().__getitem__(idx))
        img = imdecode(payload, self._flag)
        if self._transform is not None:
            return self._transform(img, header.label)
        return img, header.label
