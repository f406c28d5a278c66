"""tools/observability_figures.py draws a merged trace's spans and --tensorboard's scalars (matplotlib:
the ``bench`` extra; skipped without it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the figures need matplotlib: pip install 'mxtorch[bench]'")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "observability_figures.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_timeline_draws_a_lane_per_process_and_span(tmp_path):
    events = [{"ph": "M", "name": "process_name", "pid": p, "args": {"name": f"rank {p}"}} for p in (0, 1)]
    for p in (0, 1):
        for step in range(4):  # each step: forward, then trainer.step; rank 1 a little later
            t0 = 1000.0 * step + 100 * p
            for name, start, dur in (("mxtorch/forward", 0, 300), ("mxtorch/trainer.step", 400, 200),
                                     ("aten::mm", 10, 50)):  # torch's operators are not drawn
                events.append({"ph": "X", "name": name, "pid": p, "tid": 1, "ts": t0 + start, "dur": dur})
    trace = tmp_path / "job.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    out = tmp_path / "timeline.png"
    r = _run("timeline", str(trace), "-o", str(out), "--steps", "2")
    assert r.returncode == 0, r.stderr
    assert "4 lanes" in r.stdout and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = _run("timeline", str(trace), "-o", str(out), "--skip", "4")
    assert r.returncode != 0 and "not more than --skip 4" in r.stderr


def test_scalars_draws_every_rank_s_tags(tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    for folder, rank in ((tmp_path, 0), (tmp_path / "rank1", 1)):
        with SummaryWriter(str(folder)) as w:
            for step in range(1, 4):
                w.add_scalar(f"rank{rank}/step_time", 0.1 * step, step)
                if rank == 0:
                    w.add_scalar("train/loss", 1.0 / step, step)
    out = tmp_path / "scalars.png"
    r = _run("scalars", str(tmp_path), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "3 tags in 2 panels" in r.stdout and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
