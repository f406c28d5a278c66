"""PipelineNet.train_step's loss with data parallelism: the global batch's mean on every rank (real
processes, gloo on 127.0.0.1; rank functions in tests/pipeline_workers.py)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import pipeline_workers as pw  # noqa: E402


def test_dp2_train_step_returns_the_global_batch_mean_loss_on_every_rank(run_ranks, tmp_path):
    """Each replica trains on its own half (different losses); both return the mean over the whole batch."""
    res = run_ranks(pw.train, 2, 2, 1, "gpipe", 2, 1, str(tmp_path / "dp2.params"), timeout=90)
    ref = pw.reference()
    assert [r["dp_rank"] for r in res] == [0, 1]
    for r in res:
        assert r["losses"] == pytest.approx(ref["losses"], abs=1e-5)
