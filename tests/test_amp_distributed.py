"""AMP across workers: an overflow on one worker skips the step on every worker."""

import os
import sys

import pytest

from mxtorch.distributed.testing import run_workers

sys.path.insert(0, os.path.dirname(__file__))
import amp_workers  # noqa: E402


# slow tier: the overflow on rank 0 (rank 1's case stays in the default run)
@pytest.mark.parametrize("bad_rank", [pytest.param(0, marks=pytest.mark.slow), 1])
def test_overflow_on_one_worker_skips_step_on_all(bad_rank):
    res = run_workers(amp_workers.overflow_on_one_rank, 2, bad_rank, timeout=120)
    for r in res:
        assert r["skipped"], "an overflow on any worker must skip the update on every worker"
        assert r["after"] == r["start"] / 2  # every worker halved its scale
        assert r["moved"]  # the next, clean step updates
    assert res[0]["weight"] == res[1]["weight"]  # replicas did not diverge
