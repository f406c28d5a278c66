"""The image data sets of ``mxtorch train``: ``--dataset imagerecord`` reads ``.rec`` files (with their
``.idx`` index, as ``mxtorch im2rec`` and MXNet's ``tools/im2rec.py`` write them) and ``--dataset
imagefolder`` reads class folders (``root/<class>/<image>``), both decoded with OpenCV.

* **imagerecord**: ``--data-train train.rec --data-val val.rec`` (both needed; ``im2rec
  --train-ratio`` makes ``PREFIX_train.rec`` and ``PREFIX_val.rec``).
* **imagefolder**: ``--data-root DIR``; when ``DIR/train`` and ``DIR/val`` exist they are the two
  splits (ImageNet's layout, the same class folder names in both), otherwise ``DIR``'s class folders
  are split: every tenth image of the listing (``index % 10 == 9``, the listing sorted by class and
  file name) is held out for validation.

Each sample is cropped to ``--data-shape C,H,W`` (default 3,224,224; C is 3 for colour, 1 for gray):
training images take a random crop of 8-100 % of the area with aspect ratio 3/4-4/3 resized to H x W
and a random horizontal flip; validation images are resized so that the short side is
``min(H, W) / 0.875`` and centre-cropped.  The class count is ``--num-classes``, or: the class
folders, or 1 + the largest label in the training ``.rec`` (its record headers alone are read).

In a distributed job every worker reads only its own part of the training set: the training loop's
``SplitSampler(len, num_workers, rank)`` hands each worker disjoint record indices, and the
``.idx`` file gives random access to them, so no worker decodes another's images.
"""

from __future__ import annotations

import math
import os
import random
import struct
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .train_config import TrainConfig

__all__ = ["DEFAULT_DATA_SHAPE", "HOLD_OUT_EVERY", "IMAGE_DATASETS", "EvalCrop", "TrainCrop",
           "check_image_flags", "image_num_classes", "load_image_datasets", "parse_data_shape"]

IMAGE_DATASETS = ("imagerecord", "imagefolder")
DEFAULT_DATA_SHAPE = (3, 224, 224)
HOLD_OUT_EVERY = 10
"""imagefolder without train/ and val/: every HOLD_OUT_EVERY-th image is a validation image."""
_EVAL_RESIZE = 0.875  # the crop's share of the resized short side (ImageNet's 224 of 256)


def parse_data_shape(spec: str | None) -> tuple[int, int, int]:
    """``(C, H, W)`` of ``--data-shape C,H,W`` (None: the default); a bad one is a one-line error."""
    if spec is None:
        return DEFAULT_DATA_SHAPE
    try:
        shape = tuple(int(s) for s in spec.split(","))
    except ValueError:
        shape = ()
    if len(shape) != 3 or shape[0] not in (1, 3) or min(shape) < 1:
        raise SystemExit(f"--data-shape {spec!r}: give C,H,W with C 3 (colour) or 1 (gray) and H, W >= 1, "
                         "e.g. 3,224,224")
    return shape  # type: ignore[return-value]


def _index_of(rec: str) -> str:
    return os.path.splitext(rec)[0] + ".idx"


def _check_rec(flag: str, path: str | None) -> None:
    if path is None:
        raise SystemExit(f"--dataset imagerecord needs {flag} FILE.rec (mxtorch im2rec --train-ratio makes "
                         "PREFIX_train.rec and PREFIX_val.rec)")
    if not os.path.isfile(path):
        raise SystemExit(f"{flag} {path}: no such file")
    if not os.path.isfile(_index_of(path)):
        raise SystemExit(f"{flag} {path}: its index {_index_of(path)} does not exist (mxtorch im2rec writes "
                         "both; or index the file with mx.recordio.MXIndexedRecordIO)")


def _class_folders(root: str) -> list[str]:
    return sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))


def _folder_splits(root: str) -> tuple[str, str | None]:
    """The imagefolder's training folder and its validation folder (None: held out of the first)."""
    train, val = os.path.join(root, "train"), os.path.join(root, "val")
    if os.path.isdir(train) or os.path.isdir(val):
        if not (os.path.isdir(train) and os.path.isdir(val)):
            raise SystemExit(f"--data-root {root}: has {'train/' if os.path.isdir(train) else 'val/'} but "
                             f"not {'val/' if os.path.isdir(train) else 'train/'}: give both, or only class "
                             "folders (every tenth image is then held out)")
        return train, val
    return root, None


def check_image_flags(cfg: TrainConfig) -> None:
    """Refuse the image data flags that do not fit ``cfg.dataset`` (cheap: nothing is decoded)."""
    given = [f for f, v in (("--data-train", cfg.data_train), ("--data-val", cfg.data_val),
                            ("--data-shape", cfg.data_shape), ("--num-classes", cfg.num_classes))
             if v is not None]
    if cfg.dataset not in IMAGE_DATASETS:
        if given:
            raise SystemExit(f"{given[0]} applies to --dataset imagerecord or imagefolder, not {cfg.dataset}")
        return
    parse_data_shape(cfg.data_shape)
    if cfg.num_classes is not None and cfg.num_classes < 1:
        raise SystemExit(f"--num-classes must be >= 1, got {cfg.num_classes}")
    if cfg.dataset == "imagerecord":
        if cfg.data_root is not None:
            raise SystemExit("--dataset imagerecord reads --data-train and --data-val, not --data-root")
        _check_rec("--data-train", cfg.data_train)
        _check_rec("--data-val", cfg.data_val)
        return
    for flag in ("--data-train", "--data-val"):
        if flag in given:
            raise SystemExit(f"{flag} applies to --dataset imagerecord; imagefolder reads --data-root DIR")
    if cfg.data_root is None:
        raise SystemExit("--dataset imagefolder needs --data-root DIR (DIR/<class>/<image>, or "
                         "DIR/train/<class>/... and DIR/val/<class>/...)")
    if not os.path.isdir(cfg.data_root):
        raise SystemExit(f"--data-root {cfg.data_root}: no such folder")
    train, val = _folder_splits(cfg.data_root)
    for folder in (train, val):
        if folder is not None and not _class_folders(folder):
            raise SystemExit(f"--data-root {cfg.data_root}: {folder} has no class folders "
                             "(expected <class>/<image>.jpg|.jpeg|.png)")


class TrainCrop:
    """A training sample's augmentation: a random crop of 8-100 % of the area (aspect ratio 3/4-4/3)
    resized to ``(h, w)``, flipped left-right with probability 1/2; the label as a class index."""

    def __init__(self, h: int, w: int) -> None:
        self.h, self.w = h, w

    def __call__(self, img: Any, label: Any) -> tuple[Any, int]:
        from ..image import random_size_crop

        img, _ = random_size_crop(img, (self.w, self.h), (0.08, 1.0), (3 / 4, 4 / 3))
        if random.random() < 0.5:  # Python's generator, as mx.image's augmenters
            img = img.flip(1)
        return img, int(label)


class EvalCrop:
    """A validation sample: the short side resized to ``min(h, w) / 0.875``, the centre ``(h, w)``."""

    def __init__(self, h: int, w: int) -> None:
        self.h, self.w = h, w
        self.short = max(math.ceil(min(h, w) / _EVAL_RESIZE), 1)

    def __call__(self, img: Any, label: Any) -> tuple[Any, int]:
        from ..image import center_crop, resize_short

        img, _ = center_crop(resize_short(img, self.short), (self.w, self.h))
        return img, int(label)


def _first_label(path: str) -> None:
    """Refuse a ``.rec`` whose records hold label vectors (this command classifies: one label each)."""
    from ..gluon.data import RecordFileDataset
    from ..recordio import unpack

    data = RecordFileDataset(path)
    if len(data) == 0:
        raise SystemExit(f"--dataset imagerecord: {path} holds no records")
    header, _ = unpack(data[0])
    if header.flag > 0:
        raise SystemExit(f"--dataset imagerecord: {path} holds label vectors of {header.flag} values; "
                         "mxtorch train classifies images with one label each")


def _max_label(path: str) -> int:
    """The largest label in ``path``'s record headers, read from the first bytes of every record
    (a record whose first part is shorter than its header is read whole)."""
    from ..recordio import MAGIC, MAX_PART_BYTES, MXIndexedRecordIO, unpack

    labels: list[float] = []
    index = MXIndexedRecordIO(_index_of(path), path, "r")
    try:
        with open(path, "rb") as f:
            for key in index.keys:
                head = os.pread(f.fileno(), 8 + 24, index.idx[key])
                magic, lrec = struct.unpack("<II", head[:8]) if len(head) >= 8 else (0, 0)
                if magic == MAGIC and (lrec & MAX_PART_BYTES) >= 24 and len(head) == 32:
                    labels.append(struct.unpack("<f", head[12:16])[0])
                else:
                    labels.append(float(unpack(index.read_idx(key))[0].label))
    finally:
        index.close()
    if not labels:
        raise SystemExit(f"--dataset imagerecord: {path} holds no records")
    top = max(labels)
    if not math.isfinite(top) or min(labels) < 0:
        raise SystemExit(f"--dataset imagerecord: {path} has labels outside 0, 1, 2, ... (from {min(labels)} "
                         f"to {top}); give class indices")
    return int(top)


def image_num_classes(cfg: TrainConfig) -> int:
    """The number of classes the network predicts for an image data set."""
    if cfg.num_classes is not None:
        return cfg.num_classes
    if cfg.dataset == "imagefolder":
        assert cfg.data_root is not None
        return len(_class_folders(_folder_splits(cfg.data_root)[0]))
    assert cfg.data_train is not None
    return _max_label(cfg.data_train) + 1


def load_image_datasets(cfg: TrainConfig) -> tuple[Any, Any, str]:
    """Training and validation sets of an image data set, each sample ``(uint8 (H, W, C), class)``."""
    from ..gluon.data import FilterSampler
    from ..gluon.data.vision import ImageFolderDataset, ImageRecordDataset

    c, h, w = parse_data_shape(cfg.data_shape)
    flag = 1 if c == 3 else 0
    if cfg.dataset == "imagerecord":
        assert cfg.data_train is not None and cfg.data_val is not None
        _first_label(cfg.data_train)
        train = ImageRecordDataset(cfg.data_train, flag, TrainCrop(h, w))
        records = ImageRecordDataset(cfg.data_val, flag, EvalCrop(h, w))
        return train, records, (f"{len(train)} training records from {cfg.data_train}, {len(records)} "
                                f"validation records from {cfg.data_val}, cropped to {c}x{h}x{w}")
    assert cfg.data_root is not None
    train_dir, val_dir = _folder_splits(cfg.data_root)
    train_all: Any = ImageFolderDataset(train_dir, flag, TrainCrop(h, w))
    if val_dir is not None:
        val: Any = ImageFolderDataset(val_dir, flag, EvalCrop(h, w))
        if val.synsets != train_all.synsets:
            raise SystemExit(f"--data-root {cfg.data_root}: train/ and val/ have different class folders")
        return train_all, val, (f"{len(train_all)} training and {len(val)} validation images in "
                                f"{len(train_all.synsets)} classes from {cfg.data_root}, cropped to "
                                f"{c}x{h}x{w}")
    n = len(train_all)
    if n < HOLD_OUT_EVERY:
        raise SystemExit(f"--data-root {cfg.data_root}: {n} images are too few to hold every tenth out "
                         f"(need {HOLD_OUT_EVERY} or more)")
    held = FilterSampler(lambda i: i % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1, range(n))
    kept = FilterSampler(lambda i: i % HOLD_OUT_EVERY != HOLD_OUT_EVERY - 1, range(n))
    val = ImageFolderDataset(train_dir, flag, EvalCrop(h, w)).sample(held)
    return train_all.sample(kept), val, (
        f"{len(kept)} training and {len(held)} held-out images (every tenth) in {len(train_all.synsets)} "
        f"classes from {cfg.data_root}, cropped to {c}x{h}x{w}")
