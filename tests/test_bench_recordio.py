"""A small run of bench/recordio.py: its rows, and torchvision's epoch reads every image (no timing is
checked).  MXNet's row needs its venv and torchvision's its folder: they are checked where present."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("cv2")


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_recordio", ROOT / "bench" / "recordio.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_small_run_without_the_references(tmp_path, capsys):
    load_bench().main(["--images", "20", "--size", "64", "--threads", "1",
                       "--mxnet-python", str(tmp_path / "no-python"), "--torchvision-path", str(tmp_path)])
    out = capsys.readouterr().out
    assert re.search(r"mxtorch ImageRecordIter +[0-9.]+ images/s", out), out
    assert out.count("not installed") == 2


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@pytest.mark.skipif(not os.path.isdir(os.path.join(os.environ.get("MXTORCH_TORCHVISION_PATH", "/tmp/tvref"),
                                                   "torchvision")),
                    reason="torchvision is not installed where the bench looks (MXTORCH_TORCHVISION_PATH)")
def test_torchvision_row_reads_every_image(tmp_path):
    bench = load_bench()
    bench.make_rec(str(tmp_path), 70, 64)  # two batches of 64: a warm-up batch, then a whole epoch
    rate, version, images = bench.torchvision_folder(str(tmp_path), 1, bench.DEFAULT_TORCHVISION_PATH)
    assert rate > 0 and version.startswith("0.") and images == 70
