"""Holistic Trace Analysis (``holistictraceanalysis``, not a dependency: ``pip install
HolisticTraceAnalysis==0.5.0`` pulls in JupyterLab, pandas and plotly) loads the per-rank traces of a
profiled 2-worker horovod job and runs its communication/computation overlap analysis on them."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("hta", reason="Holistic Trace Analysis is not installed: pip install "
                                  "HolisticTraceAnalysis==0.5.0 (heavy: JupyterLab, pandas, plotly)")

import profiler_workers as w  # noqa: E402  (tests/ is on sys.path)

from mxtorch.distributed.testing import run_workers  # noqa: E402


@pytest.mark.slow
def test_hta_loads_the_ranks_traces_and_runs_the_overlap_analysis(tmp_path):
    from hta.trace_analysis import TraceAnalysis

    folder = str(tmp_path / "traces")
    os.makedirs(folder)
    run_workers(w.horovod_job, 2, folder, 3, timeout=240)
    for r in range(2):  # torch's own fields are kept: HTA reads the rank from distributedInfo
        with open(os.path.join(folder, f"profile.rank{r}.json")) as f:
            assert json.load(f)["distributedInfo"]["rank"] == r
    analysis = TraceAnalysis(trace_dir=folder)
    assert sorted(analysis.t.traces) == [0, 1]
    names = set(analysis.t.symbol_table.get_sym_table())  # our spans are among HTA's events
    assert {"mxtorch/allreduce", "mxtorch/trainer.step", "mxtorch/forward"} <= names
    assert all(len(analysis.t.get_trace(r)) > 0 for r in range(2))
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    assert sorted(overlap["rank"]) == [0, 1]
    # a percentage of GPU communication time overlapped by computation: NaN without GPU kernels
    values = overlap["comp_comm_overlap_pctg"].dropna()
    assert ((values >= 0) & (values <= 100)).all()
