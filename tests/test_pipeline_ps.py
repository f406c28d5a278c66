"""Pipelines with data parallelism over the parameter servers, and with compressed gradients.

Real processes on 127.0.0.1: a scheduler, a server and 4 workers (ZeroMQ for the store) that
are also the 4 ranks of a dp=2 x pp=2 pipeline (gloo for the stages); each stage's keys are
pushed by its own data-parallel ranks only, so the servers count sync rounds per key over the
workers that initialized it.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

from mxtorch.distributed.testing import free_port
from mxtorch.gluon.serialization import load_tensors
from mxtorch.kvstore.ps.testing import run_ps_job

sys.path.insert(0, os.path.dirname(__file__))
import pipeline_ps_workers as pw  # noqa: E402
import pipeline_workers as w  # noqa: E402


@pytest.fixture(scope="module")
def ref():
    return w.reference()


def assert_params(path, ref, atol):
    got = load_tensors(path)
    assert set(got) == set(ref["params"])
    for k, v in ref["params"].items():
        torch.testing.assert_close(got[k], v, rtol=0, atol=atol, msg=lambda m, k=k: f"{k}: {m}")


def test_dp2_pp2_over_parameter_servers_matches_one_process(tmp_path, ref):
    path = str(tmp_path / "ps.params")
    res = run_ps_job(pw.train_over_servers, 4, 1, free_port(), path, timeout=120)
    assert [(r["dp_rank"], r["pp_rank"]) for r in res] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert [r["members"] for r in res] == [[0, 1], [0, 1], [2, 3], [2, 3]]
    assert [r["prefix"] for r in res] == ["pp0/", "pp0/", "pp1/", "pp1/"]
    assert all(r["update_on_kvstore"] is False for r in res)  # servers sum, workers update
    assert_params(path, ref, 1e-5)
    for r in res:
        torch.testing.assert_close(r["out"], ref["out"], rtol=0, atol=1e-5)
    for a, b in ((res[0], res[1]), (res[2], res[3])):  # each dp rank's loss is its half's mean
        assert [(u + v) / 2 for u, v in zip(a["losses"], b["losses"])] == pytest.approx(ref["losses"], abs=1e-5)
