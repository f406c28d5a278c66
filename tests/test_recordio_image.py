"""mx.image against MXNet 1.9.1's decoded pixels (tests/data/recordio) and hand computations;
gluon's RecordFileDataset / ImageRecordDataset with DataLoader worker processes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.gluon.data import DataLoader, RecordFileDataset
from mxtorch.gluon.data.vision import ImageRecordDataset, transforms
from mxtorch.image import ImageDecodeError

DATA = Path(__file__).parent / "data" / "recordio"
EXPECTED = json.loads((DATA / "expected.json").read_text())
ARRAYS = np.load(DATA / "expected.npz")
N = len(EXPECTED["images"])


def _payload(i: int) -> bytes:
    r = mx.recordio.MXIndexedRecordIO(DATA / "images.idx", DATA / "images.rec", "r")
    try:
        return mx.recordio.unpack(r.read_idx(i))[1]
    finally:
        r.close()


def test_imdecode_gives_mxnets_png_pixels_exactly() -> None:
    for i in range(N):
        img = mx.image.imdecode(_payload(i))
        assert img.dtype == torch.uint8
        np.testing.assert_array_equal(img.numpy(), ARRAYS[f"decoded_{i}"])
    bgr = mx.image.imdecode(_payload(0), to_rgb=False).numpy()
    np.testing.assert_array_equal(bgr, ARRAYS["decoded_0"][:, :, ::-1])
    gray = mx.image.imdecode(_payload(0), flag=0)
    assert gray.shape == (*ARRAYS["decoded_0"].shape[:2], 1)


def test_imread_reads_a_file(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(_payload(3))
    np.testing.assert_array_equal(mx.image.imread(tmp_path / "a.png").numpy(), ARRAYS["decoded_3"])


def test_garbage_bytes_raise_the_decode_error() -> None:
    for junk in (b"", b"\x89PNG\r\n\x1a\n", b"not an image at all" * 10):
        with pytest.raises(ImageDecodeError, match="cannot decode"):
            mx.image.imdecode(junk)


def test_crops_and_resizes_by_hand() -> None:
    img = torch.arange(6 * 8 * 3, dtype=torch.uint8).reshape(6, 8, 3)  # h=6, w=8
    assert mx.image.scale_down((8, 6), (4, 4)) == (4, 4)
    assert mx.image.scale_down((3, 6), (4, 4)) == (3, 3)
    out, box = mx.image.center_crop(img, (4, 2))
    assert box == (2, 2, 4, 2)
    assert torch.equal(out, img[2:4, 2:6])
    assert torch.equal(mx.image.fixed_crop(img, 1, 0, 3, 2), img[0:2, 1:4])
    assert mx.image.fixed_crop(img, 0, 0, 4, 4, size=(2, 2)).shape == (2, 2, 3)
    assert mx.image.resize_short(img, 3).shape == (3, 4, 3)  # the short side (h) becomes 3
    assert mx.image.imresize(img, 5, 7).shape == (7, 5, 3)
    random.seed(3)
    out, (x0, y0, w, h) = mx.image.random_crop(img, (4, 4))
    assert (w, h) == (4, 4) and 0 <= x0 <= 4 and 0 <= y0 <= 2 and torch.equal(out, img[y0:y0 + 4, x0:x0 + 4])
    out, _ = mx.image.random_size_crop(img, (5, 5), (0.3, 1.0), (3 / 4, 4 / 3))
    assert out.shape == (5, 5, 3)
    norm = mx.image.color_normalize(img.float(), torch.tensor([1.0, 2.0, 3.0]), torch.tensor([2.0, 2.0, 2.0]))
    assert torch.equal(norm[0, 0], (img[0, 0].float() - torch.tensor([1.0, 2.0, 3.0])) / 2)
    with pytest.raises(ValueError, match="interp"):
        mx.image.imresize(img, 2, 2, interp=7)


def test_record_file_dataset_gives_raw_records() -> None:
    ds = RecordFileDataset(str(DATA / "images.rec"))
    assert len(ds) == N
    header, _ = mx.recordio.unpack(ds[4])
    assert list(header) == EXPECTED["images"][4]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        RecordFileDataset(str(DATA / "missing.rec"))


def test_image_record_dataset_with_two_loader_workers() -> None:
    ds = ImageRecordDataset(str(DATA / "images.rec"))
    img, label = ds[2]
    np.testing.assert_array_equal(img.numpy(), ARRAYS["decoded_2"])
    assert label == EXPECTED["images"][2][1]
    cropped = ds.transform_first(transforms.CenterCrop(4))
    seen_labels, seen_pixels = [], []
    for data, labels in DataLoader(cropped, batch_size=3, num_workers=2):
        assert data.shape[1:] == (4, 4, 3)
        seen_labels += [float(v) for v in labels]
        seen_pixels += list(data)
    assert seen_labels == [h[1] for h in EXPECTED["images"]]
    for i, px in enumerate(seen_pixels):
        np.testing.assert_array_equal(px.numpy(), transforms.CenterCrop(4)(ds[i][0]).numpy())


def test_image_record_dataset_split_between_two_workers() -> None:
    from mxtorch.gluon.data import SplitSampler

    ds = ImageRecordDataset(str(DATA / "images.rec")).transform_first(transforms.CenterCrop(4))
    parts = []
    for part in range(2):
        sampler = SplitSampler(len(ds), num_parts=2, part_index=part, shuffle=True, seed=7)
        parts.append([float(v) for _, labels in DataLoader(ds, batch_size=2, sampler=sampler, num_workers=2)
                      for v in labels])
    assert not set(parts[0]) & set(parts[1])
    assert sorted(parts[0] + parts[1]) == [h[1] for h in EXPECTED["images"]]
