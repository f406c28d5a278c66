"""Vision datasets read from their standard files: MNIST, Fashion-MNIST, CIFAR-10/100 and
folders of images.  Nothing is ever downloaded.

A sample is ``(image, label)``: the image a uint8 ``(H, W, C)`` tensor, the label a numpy int32
scalar, as MXNet gives them.  All images of a split are kept in one uint8 tensor, so the
DataLoader can fetch a batch with one indexing operation.

Where ``root`` is None the data are looked for in ``$MXNET_HOME/datasets/<name>`` (MXNet's cache,
default ``~/.mxnet``), then ``$MXTORCH_HOME/datasets/<name>`` (default ``~/.mxtorch``) and, for
Fashion-MNIST, ``/usr/share/datasets/fashion-mnist`` (Debian's ``dataset-fashion-mnist``).
A class-balanced subset of Fashion-MNIST ships with mxtorch: ``FashionMNIST(root=
EMBEDDED_FASHION_MNIST_ROOT)``.
"""

from __future__ import annotations

import gzip
import os
import struct
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ....base import MXNetError
from ..dataset import Dataset

__all__ = [
    "MNIST",
    "FashionMNIST",
    "CIFAR10",
    "CIFAR100",
    "ImageFolderDataset",
    "EMBEDDED_FASHION_MNIST_ROOT",
    "embedded_fashion_mnist_root",
    "read_idx",
]

#: folder of the Fashion-MNIST subset shipped inside mxtorch (10,000 train and 2,000 test images)
EMBEDDED_FASHION_MNIST_ROOT: str = str(Path(__file__).resolve().parents[3] / "_data" / "fashion-mnist-subset")

#: system folders searched (after the per-user caches) when root is None, per data set folder name
_SYSTEM_DIRS: dict[str, tuple[str, ...]] = {
    "fashion-mnist": ("/usr/share/datasets/fashion-mnist",),
}


def embedded_fashion_mnist_root() -> str:
    """Folder of the Fashion-MNIST subset shipped with mxtorch (idx.gz files, as the originals)."""
    return EMBEDDED_FASHION_MNIST_ROOT


def _mxnet_home() -> Path:
    return Path(os.environ.get("MXNET_HOME") or Path("~", ".mxnet")).expanduser()


def _mxtorch_home() -> Path:
    return Path(os.environ.get("MXTORCH_HOME") or Path("~", ".mxtorch")).expanduser()


def _candidate_dirs(name: str, root: str | os.PathLike[str] | None) -> list[Path]:
    if root is not None:
        return [Path(root).expanduser()]
    dirs = [_mxnet_home() / "datasets" / name, _mxtorch_home() / "datasets" / name]
    dirs += [Path(d) for d in _SYSTEM_DIRS.get(name, ())]
    return dirs


def _find(folder: Path, filename: str, allow_gz: bool) -> Path | None:
    names = (filename, filename + ".gz") if allow_gz else (filename,)
    for n in names:
        p = folder / n
        if p.is_file():
            return p
    return None


def _read_bytes(path: Path) -> bytes:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError, zlib.error) as err:
        raise MXNetError(f"cannot read {path}: the file is truncated or corrupt ({err})") from err


_IDX_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def read_idx(path: str | os.PathLike[str], ndim: int | None = None, uint8: bool = True) -> np.ndarray:
    """Read an idx file (the MNIST format; gzip-compressed when its name ends in .gz).

    ``ndim`` checks the number of dimensions the header declares, ``uint8`` that the data are
    unsigned bytes.  A wrong magic number or a size that does not match the header raises
    :class:`~mxtorch.base.MXNetError` naming the file.
    """
    path = Path(path)
    raw = _read_bytes(path)
    if len(raw) < 4:
        raise MXNetError(
            f"{path} is not an idx file: it has {len(raw)} bytes, fewer than the 4-byte magic number"
        )
    zero, code, dims = struct.unpack(">HBB", raw[:4])
    magic = int.from_bytes(raw[:4], "big")
    if zero != 0 or code not in _IDX_TYPES or (ndim is not None and dims != ndim) or (uint8 and code != 0x08):
        if ndim is not None and uint8:
            want = f"0x{0x800 + ndim:08X} ({0x800 + ndim}, uint8 data in {ndim} dimension(s))"
        else:
            want = "0x0000TTDD (TT: data type code, DD: number of dimensions)"
        raise MXNetError(
            f"{path} is not the expected idx file: expected magic number {want}, found 0x{magic:08X}"
        )
    header = 4 + 4 * dims
    if len(raw) < header:
        raise MXNetError(f"{path} is truncated: its header needs {header} bytes, the file has {len(raw)}")
    shape = struct.unpack(f">{dims}I", raw[4:header])
    dtype = _IDX_TYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    found = len(raw) - header
    if found != expected:
        raise MXNetError(
            f"{path} is truncated or corrupt: its header declares shape {tuple(shape)}, i.e. "
            f"{expected} bytes of data, but {found} bytes follow the header"
        )
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


class _InMemoryImageDataset(Dataset):
    """Images in one uint8 (N, H, W, C) tensor and int32 labels; ``transform(image, label)``
    (MXNet's dataset ``transform`` argument) is applied per sample.  A subclass reads the
    ``train`` or test split of ``root`` in :meth:`_read`."""

    _data: torch.Tensor
    _label: torch.Tensor

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        train: bool = True,
        transform: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable or None, got {transform!r}")
        self._transform = transform
        self._train = bool(train)
        self._read(root)

    def _read(self, root: str | os.PathLike[str] | None) -> None:
        raise NotImplementedError

    def _set(self, data: np.ndarray, label: np.ndarray) -> None:
        self._data = torch.from_numpy(np.ascontiguousarray(data, dtype=np.uint8))
        self._label_np = np.ascontiguousarray(label, dtype=np.int32)
        self._label = torch.from_numpy(self._label_np)

    def __len__(self) -> int:
        return int(self._label_np.shape[0])

    def __getitem__(self, idx: int) -> Any:
        if self._transform is not None:
            return self._transform(self._data[idx], self._label_np[idx])
        return self._data[idx], self._label_np[idx]

    def _batchable(self) -> bool:
        return self._transform is None

    def _get_batch(self, indices: torch.Tensor) -> Any:
        return [self._data[indices], self._label[indices]]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} images of shape {tuple(self._data.shape[1:])})"


def _not_found(what: str, dirs: list[Path], files: list[str], extra: str = "") -> MXNetError:
    searched = "\n".join(f"  {d}" for d in dirs)
    wanted = "\n".join(f"  {f}" for f in files)
    return MXNetError(
        f"{what} not found; mxtorch never downloads data sets. Searched:\n{searched}\n"
        f"Put these files in one of those folders (or pass root=<folder holding them>):\n{wanted}{extra}"
    )


class MNIST(_InMemoryImageDataset):
    """MNIST handwritten digits: 28x28x1 uint8 images, int32 labels 0-9.

    ``root`` holds ``train-images-idx3-ubyte.gz`` and ``train-labels-idx1-ubyte.gz`` (and the
    ``t10k-`` pair for ``train=False``), gzipped or not.  ``transform(image, label)`` is
    applied to each sample.
    """

    _folder = "mnist"
    _display = "MNIST"

    def _read(self, root: str | os.PathLike[str] | None) -> None:
        train = self._train
        prefix = "train" if train else "t10k"
        names = (f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte")
        dirs = _candidate_dirs(self._folder, root)
        for d in dirs:
            img, lab = _find(d, names[0], True), _find(d, names[1], True)
            if img is not None and lab is not None:
                break
        else:
            raise _not_found(
                f"{self._display} {'training' if train else 'test'} data",
                dirs,
                [f"{n}.gz (or {n}, uncompressed)" for n in names],
                self._hint(),
            )
        self.root = str(d)
        images = read_idx(img, 3)
        labels = read_idx(lab, 1)
        if images.shape[0] != labels.shape[0]:
            raise MXNetError(
                f"{img} holds {images.shape[0]} images but {lab} holds {labels.shape[0]} labels; "
                "expected the same number"
            )
        self._set(images.reshape(images.shape + (1,)), labels)

    def _hint(self) -> str:
        return ""


class FashionMNIST(MNIST):
    """Fashion-MNIST (Zalando): 28x28x1 uint8 images of clothes, int32 labels 0-9; same files
    and arguments as :class:`MNIST`.

    ``FashionMNIST(root=EMBEDDED_FASHION_MNIST_ROOT)`` uses the subset shipped with mxtorch.
    """

    _folder = "fashion-mnist"
    _display = "Fashion-MNIST"

    def _hint(self) -> str:
        return (
            "\nOn Debian/Ubuntu, `apt-get install dataset-fashion-mnist` puts the full data set in "
            "/usr/share/datasets/fashion-mnist.\nOr use the 10,000/2,000-image subset shipped with mxtorch: "
            "FashionMNIST(root=mxtorch.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT)."
        )


def _read_cifar(path: Path, label_bytes: int, label_pos: int) -> tuple[np.ndarray, np.ndarray]:
    raw = _read_bytes(path)
    record = label_bytes + 3 * 32 * 32
    if len(raw) == 0 or len(raw) % record:
        raise MXNetError(
            f"{path} is truncated or corrupt: a CIFAR binary file holds records of {record} bytes "
            f"({label_bytes} label byte(s) + 3072 pixels), but its size {len(raw)} is not a positive "
            f"multiple of {record}"
        )
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(-1, record)
    labels = rows[:, label_pos].astype(np.int32)
    images = rows[:, label_bytes:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return images, labels


class _CIFAR(_InMemoryImageDataset):
    _folder = ""
    _subfolder = ""
    _display = ""
    _label_bytes = 1

    def _load(self, root: str | os.PathLike[str] | None, files: list[str], label_pos: int) -> None:
        tried: list[Path] = []
        for d in _candidate_dirs(self._folder, root):
            for sub in (d, d / self._subfolder):
                tried.append(sub)
                paths = [sub / f for f in files]
                if all(p.is_file() for p in paths):
                    break
            else:
                continue
            break
        else:
            raise _not_found(f"{self._display} {'training' if self._train else 'test'} data", tried, files)
        self.root = str(sub)
        parts = [_read_cifar(p, self._label_bytes, label_pos) for p in paths]
        self._set(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


class CIFAR10(_CIFAR):
    """CIFAR-10 from its binary version: 32x32x3 uint8 images, int32 labels 0-9.

    ``root`` (or its ``cifar-10-batches-bin`` subfolder) holds ``data_batch_1.bin`` ...
    ``data_batch_5.bin`` and ``test_batch.bin``.
    """

    _folder = "cifar10"
    _subfolder = "cifar-10-batches-bin"
    _display = "CIFAR-10"

    def _read(self, root: str | os.PathLike[str] | None) -> None:
        files = [f"data_batch_{i}.bin" for i in range(1, 6)] if self._train else ["test_batch.bin"]
        self._load(root, files, 0)


class CIFAR100(_CIFAR):
    """CIFAR-100 from its binary version: 32x32x3 uint8 images, int32 labels: the 20 coarse
    classes, or the 100 fine ones with ``fine_label=True``.

    ``root`` (or its ``cifar-100-binary`` subfolder) holds ``train.bin`` and ``test.bin``.
    """

    _folder = "cifar100"
    _subfolder = "cifar-100-binary"
    _display = "CIFAR-100"
    _label_bytes = 2

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        fine_label: bool = False,
        train: bool = True,
        transform: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        self._fine_label = bool(fine_label)
        super().__init__(root, train, transform)

    def _read(self, root: str | os.PathLike[str] | None) -> None:
        self._load(root, ["train.bin" if self._train else "test.bin"], 1 if self._fine_label else 0)


_IMAGE_EXTS = (".jpg", ".jpeg", ".png")


class ImageFolderDataset(Dataset):
    """Images in class folders: ``root/<class>/<image>``; a sample is ``(image, label)`` with
    the image a uint8 ``(H, W, C)`` tensor (3 RGB channels for ``flag=1``, 1 gray for ``flag=0``),
    decoded by :func:`mxtorch.image.imread` (OpenCV, as MXNet's), and the label the index of its
    folder in :attr:`synsets` (the sorted folder names).  :attr:`items` lists ``(path, label)``
    pairs, each path ``os.path.join(root, folder, file)`` as MXNet's; files whose extension is not
    ``.jpg``/``.jpeg``/``.png`` (any case) and files directly in ``root`` are skipped with a warning.
    ``transform(image, label)`` is applied when given.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        flag: int = 1,
        transform: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        self._root = os.path.expanduser(os.fspath(root))
        if not os.path.isdir(self._root):
            raise MXNetError(f"ImageFolderDataset: root {self._root!r} is not a folder")
        if flag not in (0, 1):
            raise ValueError(f"flag must be 0 (grayscale) or 1 (colour), got {flag!r}")
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable or None, got {transform!r}")
        self._flag = flag
        self._transform = transform
        self._exts = list(_IMAGE_EXTS)
        self.synsets: list[str] = []
        self.items: list[tuple[str, int]] = []
        for folder in sorted(os.listdir(self._root)):
            path = os.path.join(self._root, folder)
            if not os.path.isdir(path):
                warnings.warn(f"ImageFolderDataset: ignoring {path}, which is not a folder", stacklevel=2)
                continue
            label = len(self.synsets)
            self.synsets.append(folder)
            for name in sorted(os.listdir(path)):
                filename = os.path.join(path, name)
                if os.path.splitext(filename)[1].lower() not in self._exts:
                    warnings.warn(
                        f"ImageFolderDataset: ignoring {filename}: its extension is not one of "
                        f"{', '.join(self._exts)}",
                        stacklevel=2,
                    )
                    continue
                self.items.append((filename, label))

    def __len__(self) -> int:
        return len(self.items)

    def _decode(self, path: str) -> torch.Tensor:
        from ....image import imread
        from ....image.codec import ImageDecodeError

        try:
            return imread(path, self._flag)
        except (ImageDecodeError, OSError) as e:
            raise MXNetError(f"ImageFolderDataset: cannot read image {path!r}: {e}") from None

    def __getitem__(self, idx: int) -> Any:
        path, label = self.items[idx]
        img = self._decode(path)
        if self._transform is not None:
            return self._transform(img, label)
        return img, label

    def __repr__(self) -> str:
        n, k = len(self.items), len(self.synsets)
        return f"ImageFolderDataset({self._root!r}, {n} images, {k} classes)"
