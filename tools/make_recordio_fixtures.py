"""Writes tests/data/recordio/ with real Apache MXNet 1.9.1 (run it with MXNet's own Python).

    /tmp/mxref/bin/python tools/make_recordio_fixtures.py tests/data/recordio

The reference venv has MXNet but no cv2, so images are PNGs encoded here in pure Python
(zlib, filter 0) and packed with ``mx.recordio.pack``; MXNet's decoder (its own OpenCV) gives
the expected pixels.  Outputs, all tiny:

- ``plain.rec``: ``MXRecordIO`` writes of the payloads in ``expected.json`` (empty, unaligned,
  holding the magic word at aligned and unaligned offsets, so records split into parts);
- ``images.rec`` + ``images.idx``: ``MXIndexedRecordIO.write_idx(i, pack(header, png))``;
- ``multilabel.rec``: records whose header carries a label vector;
- ``expected.json``: the inputs, the headers, and what MXNet's readers returned
  (``ImageRecordIter`` label order, parts and padding);
- ``expected.npz``: decoded pixels and ``ImageRecordIter`` batches from MXNet.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import zlib

import mxnet as mx
import numpy as np

MAGIC = struct.pack("<I", 0xCED7230A)


def png_bytes(rgb: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of ``rgb`` (H x W x 3 uint8), stored without filtering."""
    h, w, _ = rgb.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\0" + rgb[y].tobytes() for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def plain_payloads() -> list[bytes]:
    return [b"", b"a", b"abcd", b"hello world", MAGIC, b"xy" + MAGIC + b"zw", MAGIC + b"1234" + MAGIC,
            b"0123" + MAGIC + b"4567" + MAGIC + MAGIC + b"tail!", bytes(range(256)) * 3]


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    expected: dict = {"mxnet": mx.__version__}
    payloads = plain_payloads()
    w = mx.recordio.MXRecordIO(os.path.join(out, "plain.rec"), "w")
    for p in payloads:
        w.write(p)
    w.close()
    expected["plain"] = [p.hex() for p in payloads]

    rng = np.random.default_rng(31)
    sizes = [(8, 10), (10, 8), (9, 9), (12, 7), (7, 12), (8, 8), (11, 10), (10, 11), (9, 13), (13, 9)]
    images, headers = [], []
    w = mx.recordio.MXIndexedRecordIO(os.path.join(out, "images.idx"), os.path.join(out, "images.rec"), "w")
    for i, (h, wd) in enumerate(sizes):
        rgb = rng.integers(0, 256, (h, wd, 3), dtype=np.uint8)
        header = mx.recordio.IRHeader(0, float(i), i, 0)
        w.write_idx(i, mx.recordio.pack(header, png_bytes(rgb)))
        images.append(rgb)
        headers.append([0, float(i), i, 0])
    w.close()
    expected["images"] = headers
    arrays: dict[str, np.ndarray] = {}
    r = mx.recordio.MXIndexedRecordIO(os.path.join(out, "images.idx"), os.path.join(out, "images.rec"), "r")
    for i in range(len(sizes)):
        _, img = mx.recordio.unpack(r.read_idx(i))
        arrays[f"decoded_{i}"] = mx.image.imdecode(img).asnumpy()  # RGB, as mx.image returns
        assert (arrays[f"decoded_{i}"] == images[i]).all()
    r.close()

    w = mx.recordio.MXRecordIO(os.path.join(out, "multilabel.rec"), "w")
    multi = []
    for i in range(3):
        label = [float(i), i + 0.5, -1.25 * i]
        w.write(mx.recordio.pack(mx.recordio.IRHeader(0, label, 100 + i, 7), png_bytes(images[i])))
        multi.append({"label": label, "id": 100 + i, "id2": 7})
    w.close()
    expected["multilabel"] = multi

    iters = {}
    for name, kw in {"center": {}, "parts0": {"num_parts": 2, "part_index": 0},
                     "parts1": {"num_parts": 2, "part_index": 1}, "noround": {"round_batch": False},
                     "resize": {"resize": 6}}.items():
        it = mx.io.ImageRecordIter(path_imgrec=os.path.join(out, "images.rec"), data_shape=(3, 4, 4),
                                   batch_size=4, shuffle=False, preprocess_threads=1, **kw)
        batches = []
        for b, batch in enumerate(it):
            batches.append({"label": batch.label[0].asnumpy().tolist(), "pad": batch.pad})
            arrays[f"iter_{name}_{b}"] = batch.data[0].asnumpy()
        iters[name] = batches
    expected["iter"] = iters
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    np.savez_compressed(os.path.join(out, "expected.npz"), **arrays)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/recordio")
