"""``mxtorch im2rec`` end to end on a folder of generated JPEGs and PNGs: lists as MXNet's
im2rec.py writes them, then .rec/.idx files that the readers (MXNet's format) accept."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

import mxtorch as mx
from mxtorch.cli.main import main
from mxtorch.gluon.data.vision import ImageRecordDataset


def _images(root: Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    made = {}
    for cls, n in (("cat", 3), ("dog", 4)):
        (root / cls).mkdir(parents=True)
        for i in range(n):
            img = rng.integers(0, 256, (10 + i, 14, 3), dtype=np.uint8)
            name = f"{cls}/{i}.{'png' if i % 2 else 'jpg'}"
            cv2.imwrite(str(root / name), img)
            made[name] = img
    (root / "cat" / "notes.txt").write_text("not an image")
    return made


def test_list_then_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "imgs"
    made = _images(root)
    prefix = str(tmp_path / "data")
    assert main(["im2rec", "--list", "--recursive", "--train-ratio", "0.5", prefix, str(root)]) == 0
    train = (tmp_path / "data_train.lst").read_text().splitlines()
    val = (tmp_path / "data_val.lst").read_text().splitlines()
    assert len(train) == 3 and len(val) == 4  # int(7 * 0.5) to train, the rest to val
    rows = [line.split("\t") for line in train + val]
    assert sorted(r[2] for r in rows) == sorted(made)
    for idx, label, rel in rows:
        assert label == ("0.000000" if rel.startswith("cat/") else "1.000000")
        assert int(idx) == sorted(made).index(rel)  # the listing order, before the seeded shuffle
    assert main(["im2rec", "--pass-through", "--num-thread", "2", prefix, str(root)]) == 0
    for split, lines in (("train", rows[:3]), ("val", rows[3:])):
        ds = ImageRecordDataset(str(tmp_path / f"data_{split}.rec"))
        assert len(ds) == len(lines)
        reader = mx.recordio.MXIndexedRecordIO(tmp_path / f"data_{split}.idx",
                                               tmp_path / f"data_{split}.rec", "r")
        for k, (idx, label, rel) in enumerate(lines):
            header, payload = mx.recordio.unpack(reader.read_idx(int(idx)))
            assert (header.id, header.label) == (int(idx), float(label))
            assert payload == (root / rel).read_bytes()  # pass-through keeps the file's bytes
            img, lab = ds[k]
            assert lab == float(label)
            if rel.endswith(".png"):
                np.testing.assert_array_equal(img.numpy(), made[rel][:, :, ::-1])  # RGB of cv2's BGR
        reader.close()


def test_resize_and_center_crop_reencode(tmp_path: Path) -> None:
    root = tmp_path / "imgs"
    _images(root)
    prefix = str(tmp_path / "all")
    assert main(["im2rec", "--list", "--recursive", "--no-shuffle", prefix, str(root)]) == 0
    assert main(["im2rec", "--center-crop", "--resize", "6", "--encoding", ".png", prefix, str(root)]) == 0
    ds = ImageRecordDataset(str(tmp_path / "all.rec"))
    assert [ds[i][1] for i in range(len(ds))] == [0.0] * 3 + [1.0] * 4
    assert all(ds[i][0].shape == (6, 6, 3) for i in range(len(ds)))


def test_user_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["im2rec", str(tmp_path / "p"), str(tmp_path / "missing")])
    assert e.value.code == 2
    assert "mxtorch im2rec: error: ROOT" in capsys.readouterr().err
    (tmp_path / "p.lst").write_text("0\tbad\n")
    with pytest.raises(SystemExit):
        main(["im2rec", str(tmp_path / "p"), str(tmp_path)])
    assert "line 1 is not" in capsys.readouterr().err
