#!/usr/bin/env python3
"""Regenerate mxtorch/_data/fashion-mnist-subset/ from the full Fashion-MNIST data set.

Takes a class-balanced subset: TRAIN_PER_CLASS images of each of the 10 classes from the
official training split and TEST_PER_CLASS from the official test split, chosen by
``numpy.random.RandomState(SEED)`` (a generator whose stream numpy keeps fixed), and writes them,
in their original order, in the original idx format, gzipped reproducibly (mtime 0, no file name).

    python tools/make_embedded_fashion_mnist.py [--src /usr/share/datasets/fashion-mnist] [--dst ...]

Needs only numpy.  The source defaults to the folder of Debian's ``dataset-fashion-mnist``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import struct
import sys
from pathlib import Path

import numpy as np

SEED = 20170825  # Fashion-MNIST's release date
TRAIN_PER_CLASS = 1000
TEST_PER_CLASS = 200
NUM_CLASSES = 10

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SRC = Path("/usr/share/datasets/fashion-mnist")
DEFAULT_DST = REPO / "mxtorch" / "_data" / "fashion-mnist-subset"


def read_idx(path: Path) -> np.ndarray:
    """Read a (gzipped) uint8 idx file, checking its header against its size."""
    with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
        raw = f.read()
    zero, code, dims = struct.unpack(">HBB", raw[:4])
    if zero != 0 or code != 0x08:
        sys.exit(f"{path}: not a uint8 idx file (magic 0x{int.from_bytes(raw[:4], 'big'):08X})")
    shape = struct.unpack(f">{dims}I", raw[4 : 4 + 4 * dims])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims)
    if data.size != int(np.prod(shape)):
        sys.exit(f"{path}: header declares shape {shape} but holds {data.size} bytes of data")
    return data.reshape(shape)


def write_idx_gz(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array as a gzipped idx file, byte-for-byte reproducibly."""
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as f:
        f.write(header)
        f.write(np.ascontiguousarray(array, dtype=np.uint8).tobytes())
    path.write_bytes(buf.getvalue())


def choose(labels: np.ndarray, per_class: int, seed: int) -> np.ndarray:
    """Indices of ``per_class`` images of every class, drawn without replacement, sorted."""
    rs = np.random.RandomState(seed)
    picked = []
    for c in range(NUM_CLASSES):
        members = np.flatnonzero(labels == c)
        if members.size < per_class:
            sys.exit(f"class {c} has only {members.size} images, fewer than {per_class}")
        picked.append(rs.choice(members, size=per_class, replace=False))
    return np.sort(np.concatenate(picked))


def find(src: Path, name: str) -> Path:
    for candidate in (src / f"{name}.gz", src / name):
        if candidate.is_file():
            return candidate
    sys.exit(f"{name}(.gz) not found in {src} (apt-get install dataset-fashion-mnist)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=DEFAULT_SRC, help=f"full data set ({DEFAULT_SRC})")
    parser.add_argument("--dst", type=Path, default=DEFAULT_DST, help=f"output folder ({DEFAULT_DST})")
    args = parser.parse_args()
    args.dst.mkdir(parents=True, exist_ok=True)
    for split, per_class in (("train", TRAIN_PER_CLASS), ("t10k", TEST_PER_CLASS)):
        images = read_idx(find(args.src, f"{split}-images-idx3-ubyte"))
        labels = read_idx(find(args.src, f"{split}-labels-idx1-ubyte"))
        idx = choose(labels, per_class, SEED)
        outputs = {f"{split}-images-idx3-ubyte.gz": images[idx], f"{split}-labels-idx1-ubyte.gz": labels[idx]}
        for name, arr in outputs.items():
            out = args.dst / name
            write_idx_gz(out, arr)
            digest = hashlib.sha256(out.read_bytes()).hexdigest()
            print(f"{out}: shape {arr.shape}, {out.stat().st_size} bytes, sha256 {digest}")
        counts = np.bincount(labels[idx], minlength=NUM_CLASSES).tolist()
        print(f"{split}: {idx.size} of {labels.size} images; per class {counts}; first {idx[:5].tolist()}")


if __name__ == "__main__":
    main()
