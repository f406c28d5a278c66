"""`mxtorch train --dataset imagerecord | imagefolder` (issue 31): a small generated `.rec` trains in
one process and with two workers, each worker reading its own records; class folders are split into
training and held-out images as documented; bad image data flags are refused before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mxtorch as mx
from mxtorch.cli.main import main
from mxtorch.cli.train_config import TrainConfig
from mxtorch.cli.train_data import load_datasets, num_classes

cv2 = pytest.importorskip("cv2")
ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
needs_allreduce = pytest.mark.skipif(not mx.kv.is_registered("horovod"),
                                     reason="the 'horovod' (allreduce) KVStore is not registered")


def coloured(i: int, rng: np.random.Generator, h: int = 20, w: int = 24) -> np.ndarray:
    """A noisy image whose class (i % 3) is its bright RGB channel."""
    img = rng.integers(0, 60, (h, w, 3), dtype=np.uint8)
    img[:, :, i % 3] += 180
    return img


def write_rec(prefix: Path, n: int, label_of=lambda i: float(i % 3), seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    w = mx.recordio.MXIndexedRecordIO(f"{prefix}.idx", f"{prefix}.rec", "w")
    for i in range(n):
        rgb = coloured(i, rng)
        header = mx.recordio.IRHeader(0, label_of(i), i, 0)
        w.write_idx(i, mx.recordio.pack_img(header, rgb[:, :, ::-1], quality=90))  # pack_img takes BGR
    w.close()
    return Path(f"{prefix}.rec")


def train_argv(out: Path, *extra: str) -> list[str]:
    return ["train", "--model", "mlp", "--data-shape", "3,16,16", "--batch-size", "8", "--lr", "0.1",
            "--no-hybridize", "--no-progress", "--output", str(out), *extra]


def test_imagerecord_trains_in_one_process(tmp_path: Path) -> None:
    train, val = write_rec(tmp_path / "train", 48), write_rec(tmp_path / "val", 12, seed=1)
    out = tmp_path / "run"
    rc = main(train_argv(out, "--dataset", "imagerecord", "--data-train", str(train), "--data-val", str(val),
                         "--epochs", "2"))
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(metrics["epochs"]) == 2 and "48 training records" in metrics["data"]
    assert metrics["final_test_acc"] > 0.9  # the colour classes are easy: chance is 1/3
    net = mx.gluon.model_zoo.vision.get_model("mlp", classes=3)  # 3 classes: 1 + the largest label
    net.load_parameters(str(out / "model.params"))


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@needs_allreduce
def test_imagerecord_two_workers_read_disjoint_parts(tmp_path: Path) -> None:
    # every record its own label, so the labels a worker trained on name the records it read
    train = write_rec(tmp_path / "train", 48, label_of=float)
    val = write_rec(tmp_path / "val", 12, label_of=float, seed=1)
    out, seen = tmp_path / "run", tmp_path / "labels"
    seen.mkdir()
    env = {**os.environ, "MXTORCH_TRAIN_HOOKS": "train_label_hooks", "MXTORCH_TEST_LABELS_DIR": str(seen),
           "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "TMPDIR": str(tmp_path)}
    argv = train_argv(out, "--dataset", "imagerecord", "--data-train", str(train), "--data-val", str(val),
                      "--epochs", "2", "--workers", "2", "--kvstore", "horovod")
    r = subprocess.run([sys.executable, "-m", "mxtorch.cli.main", *argv], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["workers"] == 2 and "workers: 2 x 4" in r.stdout
    ranks = [json.loads((seen / f"rank{k}.json").read_text()) for k in (0, 1)]
    for epoch in range(2):
        a, b = ranks[0][epoch], ranks[1][epoch]
        assert len(a) == len(b) == 24 and len(set(a)) == len(set(b)) == 24  # 6 steps of 4 each
        assert not set(a) & set(b) and set(a) | set(b) == set(range(48))  # no overlap, nothing lost
    assert ranks[0][0] != ranks[0][1]  # reshuffled every epoch


def write_folder(root: Path, per_class: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for c, name in enumerate(("blue", "green", "red")):  # sorted: labels 0, 1, 2
        (root / name).mkdir(parents=True)
        for k in range(per_class):
            rgb = coloured((2 - c) if name != "green" else 1, rng)  # red: channel 0, blue: channel 2
            ext = ".png" if k % 2 else ".jpg"
            cv2.imwrite(str(root / name / f"{k:03d}{ext}"), rgb[:, :, ::-1])


def test_imagefolder_holds_out_every_tenth_image(tmp_path: Path) -> None:
    write_folder(tmp_path / "imgs", 10)
    cfg = TrainConfig(dataset="imagefolder", data_root=str(tmp_path / "imgs"), data_shape="3,16,12")
    train, val, desc = load_datasets(cfg)
    assert (len(train), len(val)) == (27, 3) and "every tenth" in desc
    assert num_classes(cfg) == 3
    # the listing is sorted by class then file: images 9, 19, 29 are each class's 009.png
    assert [val[i][1] for i in range(3)] == [0, 1, 2]
    for img, label in (train[0], val[2]):
        assert img.shape == (16, 12, 3) and str(img.dtype) == "torch.uint8" and isinstance(label, int)
    # the centre crop of a red image keeps red the bright channel
    assert int(val[2][0][:, :, 0].float().mean()) > 150 > int(val[2][0][:, :, 2].float().mean())


def test_imagefolder_with_train_and_val_folders_trains(tmp_path: Path) -> None:
    write_folder(tmp_path / "imgs" / "train", 8)
    write_folder(tmp_path / "imgs" / "val", 2, seed=1)
    out = tmp_path / "run"
    rc = main(train_argv(out, "--dataset", "imagefolder", "--data-root", str(tmp_path / "imgs"),
                         "--epochs", "2"))
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert "24 training and 6 validation images in 3 classes" in metrics["data"]
    assert metrics["final_test_acc"] > 0.9


def test_missing_rec_is_one_line_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    missing = tmp_path / "nope.rec"
    r = subprocess.run([sys.executable, "-m", "mxtorch.cli.main", "train", "--dataset", "imagerecord",
                        "--data-train", str(missing), "--data-val", str(missing),
                        "--output", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == [f"mxtorch train: error: --data-train {missing}: no such file"]


def test_image_flags_are_checked_before_any_work(tmp_path: Path) -> None:
    from mxtorch.cli.train_checks import check_train_config

    rec = write_rec(tmp_path / "t", 3)
    write_rec(tmp_path / "vec", 2, label_of=lambda i: [1.0, 2.0])
    (tmp_path / "noidx.rec").write_bytes(rec.read_bytes())
    (tmp_path / "only" / "train" / "a").mkdir(parents=True)
    ok = {"dataset": "imagerecord", "data_train": str(rec), "data_val": str(rec),
          "output": str(tmp_path / "o")}
    cases = [
        ({"data_shape": "3,224"}, "--data-shape '3,224': give C,H,W"),
        ({"data_shape": "2,8,8"}, "C 3 (colour) or 1 (gray)"),
        ({"data_shape": "3,0,8"}, "H, W >= 1"),
        ({"data_val": None}, "needs --data-val FILE.rec"),
        ({"data_train": str(tmp_path / "noidx.rec")}, "its index"),
        ({"data_root": str(tmp_path)}, "not --data-root"),
        ({"num_classes": 0}, "--num-classes must be >= 1"),
        ({"dataset": "mnist", "data_train": None, "data_val": None, "data_shape": "3,8,8"},
         "--data-shape applies to --dataset imagerecord or imagefolder"),
        ({"dataset": "imagefolder", "data_train": None, "data_val": None}, "needs --data-root DIR"),
        ({"dataset": "imagefolder", "data_train": None, "data_val": None,
          "data_root": str(tmp_path / "only")}, "has train/ but not val/"),
        ({"dataset": "imagefolder", "data_val": None}, "--data-train applies to --dataset imagerecord"),
    ]
    for change, words in cases:
        with pytest.raises(SystemExit) as e:
            check_train_config(TrainConfig(**{**ok, **change}))
        assert words in str(e.value), (change, e.value)
    check_train_config(TrainConfig(**ok))  # the good one passes
    assert not (tmp_path / "o").exists()
    vec = TrainConfig(**{**ok, "data_train": str(tmp_path / "vec.rec")})
    with pytest.raises(SystemExit, match="label vectors of 2 values"):
        load_datasets(vec)
