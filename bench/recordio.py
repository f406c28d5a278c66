"""Images/s of mx.io.ImageRecordIter here against real MXNet 1.9.1's on the same ``.rec`` file.

    PYTHONPATH=$PWD .venv/bin/python bench/recordio.py --images 2000 --threads 2

Makes ``--images`` JPEGs (``--size`` pixels on the long side, quality 90) into one ``.rec`` with
``mx.recordio.pack_img``, then runs one epoch of each reader with the same options (resize the
short side to 256, random 224x224 crop, random mirror, batch 64, ``--threads`` decode threads),
after one warm-up batch.  MXNet runs in its own venv (``--mxnet-python``).  torchvision's
``ImageFolder`` + ``DataLoader`` (``--threads`` loader processes, Pillow decoding, the same resize,
crop and mirror, then ``ToTensor``) reads the same JPEGs as files, in a subprocess of this Python with
``--torchvision-path`` first on its path, where torchvision 0.28.0 (the release for torch 2.13) is
installed apart from the project's venv:

    .venv/bin/python -m pip install --no-deps --target /tmp/tvref torchvision==0.28.0
    PYTHONPATH=$PWD .venv/bin/python bench/recordio.py --torchvision-path /tmp/tvref

The package index's torchvision 0.28.0 is a CUDA build whose compiled operators do not load
against the CPU torch 2.13 here ("operator torchvision::nms does not exist"); the subprocess then
imports torchvision without registering them: ``ImageFolder``, the PIL transforms and the
``DataLoader`` (all this row uses) are Python.  Figures move with the load on the machine: compare
the ratios of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import mxtorch as mx

DEFAULT_MXNET_PYTHON = os.environ.get("MXTORCH_MXNET_PYTHON", "/tmp/mxref/bin/python")
DEFAULT_TORCHVISION_PATH = os.environ.get("MXTORCH_TORCHVISION_PATH", "/tmp/tvref")
BATCH, DATA_SHAPE, RESIZE = 64, (3, 224, 224), 256

_MXNET_SCRIPT = """
import json, sys, time
import mxnet as mx
rec, threads, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 224, 224), batch_size=batch, resize=256,
                           rand_crop=True, rand_mirror=True, preprocess_threads=threads, shuffle=False)
it.next().data[0].wait_to_read()
it.reset()
n, t = 0, time.perf_counter()
for b in it:
    b.data[0].wait_to_read()
    n += batch - b.pad
print(json.dumps({"images": n, "seconds": time.perf_counter() - t}))
"""


_TORCHVISION_SCRIPT = """
import json, sys, time, types
try:
    import torchvision
except RuntimeError as e:  # a CUDA build's operators against a CPU torch: skip their registration
    if "does not exist" not in str(e):
        raise
    for name in [m for m in sys.modules if m.startswith("torchvision")]:
        del sys.modules[name]
    for name in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        sys.modules[name] = types.ModuleType(name)
    import torchvision
import torch
from torchvision import datasets, transforms as T
folder, threads, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tf = T.Compose([T.Resize(256), T.RandomCrop(224), T.RandomHorizontalFlip(), T.ToTensor()])
loader = torch.utils.data.DataLoader(datasets.ImageFolder(folder, tf), batch_size=batch, shuffle=False,
                                     num_workers=threads, persistent_workers=threads > 0)
next(iter(loader))  # a warm-up batch starts the loader processes; then a whole epoch from the start
n, t = 0, time.perf_counter()
for x, _ in loader:
    n += len(x)
print(json.dumps({"images": n, "seconds": time.perf_counter() - t, "version": torchvision.__version__}))
"""


def make_rec(folder: str, count: int, size: int, seed: int = 0) -> str:
    """``count`` smooth random JPEGs (natural-image-like sizes) packed into ``folder/bench.rec``."""
    import cv2

    rng = np.random.default_rng(seed)
    rec = os.path.join(folder, "bench.rec")
    w = mx.recordio.MXIndexedRecordIO(os.path.join(folder, "bench.idx"), rec, "w")
    for i in range(count):
        h = int(size * rng.uniform(0.7, 1.0))
        small = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
        img = cv2.resize(small, (size, h), interpolation=cv2.INTER_CUBIC)
        w.write_idx(i, mx.recordio.pack_img(mx.recordio.IRHeader(0, float(i % 10), i, 0), img, quality=90))
        cls = os.path.join(folder, "images", str(i % 10))
        os.makedirs(cls, exist_ok=True)
        cv2.imwrite(os.path.join(cls, f"{i}.jpg"), img, [cv2.IMWRITE_JPEG_QUALITY, 90])
    w.close()
    return rec


def ours(rec: str, threads: int) -> float:
    it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=DATA_SHAPE, batch_size=BATCH, resize=RESIZE,
                               rand_crop=True, rand_mirror=True, preprocess_threads=threads)
    it.next()
    it.reset()
    n, t = 0, time.perf_counter()
    for b in it:
        n += BATCH - b.pad
    it.close()
    return n / (time.perf_counter() - t)


def mxnet(rec: str, threads: int, python: str) -> float | None:
    if not os.path.exists(python):
        return None
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([python, "-c", _MXNET_SCRIPT, rec, str(threads), str(BATCH)], env=env,
                         capture_output=True, text=True, check=True, timeout=1800)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return float(res["images"]) / float(res["seconds"])


def torchvision_folder(folder: str, threads: int, path: str) -> tuple[float, str, int] | None:
    """Images/s, version and images read in the timed epoch of torchvision's ImageFolder + DataLoader
    (None: no torchvision there)."""
    if not os.path.isdir(os.path.join(path, "torchvision")):
        return None
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([path, os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1")  # the loader processes are the parallelism (each runs one torch thread)
    out = subprocess.run([sys.executable, "-c", _TORCHVISION_SCRIPT, os.path.join(folder, "images"),
                          str(threads), str(BATCH)], env=env, capture_output=True, text=True, check=True,
                         timeout=1800)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return float(res["images"]) / float(res["seconds"]), str(res["version"]), int(res["images"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--size", type=int, default=320, help="long side of each generated JPEG")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mxnet-python", default=DEFAULT_MXNET_PYTHON)
    ap.add_argument("--torchvision-path", default=DEFAULT_TORCHVISION_PATH,
                    help="folder holding torchvision (pip install --no-deps --target DIR "
                         "torchvision==0.28.0)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mxtorch-bench-recordio-") as folder:
        rec = make_rec(folder, args.images, args.size)
        rows = [("mxtorch ImageRecordIter", ours(rec, args.threads)),
                ("MXNet 1.9.1 ImageRecordIter", mxnet(rec, args.threads, args.mxnet_python))]
        tv = torchvision_folder(folder, args.threads, args.torchvision_path)
        rows.append((f"torchvision {tv[1] if tv else ''} ImageFolder + DataLoader".replace("  ", " "),
                     tv[0] if tv else None))
    print(f"{args.images} JPEGs ({args.size}px), resize {RESIZE}, random crop 224 + mirror, batch {BATCH}, "
          f"{args.threads} threads")
    base = rows[1][1]
    for name, rate in rows:
        if rate is None:
            print(f"  {name:50s} not installed")
        else:
            ratio = f"  {rate / base:.2f}x MXNet" if base else ""
            print(f"  {name:50s} {rate:8.1f} images/s{ratio}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
