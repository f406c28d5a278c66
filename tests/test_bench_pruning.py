"""A small run of bench/pruning.py (the MLP, one epoch, no transfer part): its table and the
relations that hold whatever the timings (no timing is checked)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(600)
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_small_run(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_pruning", ROOT / "bench" / "pruning.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    r = bench.main(["--model", "mlp", "--epochs", "1", "--batch-size", "256", "--lr", "0.1", "--rounds", "2",
                    "--seeds", "1", "--prune-begin-epochs", "0", "--no-transfer",
                    "--work-dir", str(tmp_path)])
    acc, params = r["accuracy"], r["parameters"]
    # the compacted net computes what the masked one does: the same held-out accuracy
    assert r["compact_accuracy"] == pytest.approx(acc["structured_50"], abs=1e-9)
    assert r["per_seed"]["dense"] == [acc["dense"]]
    assert r["compact_max_diff"] < 1e-4
    assert params["dense"][0] == params["l1_80"][0] == params["l1_80_global"][0] == params["structured_50"][0]
    assert params["l1_80"][1] < 0.21 * params["l1_80"][0]
    assert params["structured_50_compact"][0] == params["structured_50_compact"][1] < 0.5 * params["dense"][0]
    assert r["sparsity"]["l1_80"] == pytest.approx(0.8, abs=1e-3)
    assert r["sparsity"]["l1_80_global"] == pytest.approx(0.8, abs=1e-3)
    assert set(r["seconds"]) == {"dense", "l1_80", "structured_50_compact"}
    assert r["table"].count("\n| ") == 6 and r["transfer"] == []
