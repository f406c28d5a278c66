"""dist_async with a staleness bound (real jobs: a scheduler, servers and 2 workers): a worker may
be at most k pushes of a key ahead of the slowest live worker, its pull waits otherwise; k=0
trains like dist_sync; dead and finished workers hold nobody back."""

from __future__ import annotations

import ps_workers as w  # noqa: I001  (tests/ is on sys.path)
import pytest
from torch.testing import assert_close

import mxtorch as mx
from mxtorch.kvstore import KVStoreError
from mxtorch.kvstore.ps import PSConfig
from mxtorch.kvstore.ps.testing import ps_cluster, run_ps_job

STEPS = 12
FAST = {"MXTORCH_PS_HEARTBEAT_S": "0.3", "MXTORCH_PS_DEAD_S": "2"}


def test_staleness_is_read_from_the_environment_and_checked():
    env = {"DMLC_ROLE": "worker", "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": "9000",
           "DMLC_NUM_SERVER": "1", "DMLC_NUM_WORKER": "2"}
    assert PSConfig.from_env({**env, "MXTORCH_PS_STALENESS": "3"}).staleness == 3
    assert PSConfig.from_env(env).staleness is None
    with pytest.raises(mx.MXNetError, match="MXTORCH_PS_STALENESS='-1'.*>= 0"):
        PSConfig.from_env({**env, "MXTORCH_PS_STALENESS": "-1"})
    with pytest.raises(KVStoreError, match="staleness must be an int >= 0"):
        mx.kv.create("dist_async", staleness=-2)
    with pytest.raises(KVStoreError, match="'dist_sync' is synchronous already"):
        mx.kv.create("dist_sync", staleness=1)


def test_unbounded_async_lets_a_fast_worker_run_ahead(tmp_path):
    fast, _ = run_ps_job(w.staleness_race, 2, 1, STEPS, str(tmp_path), True, timeout=120)
    assert fast["staleness"] is None
    # the slow worker pushed once, then waited for the fast one to finish all its pushes
    assert max(fast["gaps"]) == STEPS - 1, fast["gaps"]


@pytest.mark.parametrize("bound", [pytest.param(1, marks=pytest.mark.slow), 0])
def test_a_staleness_bound_holds_the_fast_worker_back(tmp_path, bound):
    fast, slow = run_ps_job(w.staleness_race, 2, 2, STEPS, str(tmp_path), False, timeout=120,
                            env={"MXTORCH_PS_STALENESS": str(bound)})
    assert fast["staleness"] == slow["staleness"] == bound
    assert len(fast["gaps"]) == STEPS and max(fast["gaps"]) <= bound, fast["gaps"]


def test_staleness_zero_trains_like_dist_sync():
    sync = run_ps_job(w.plain_sgd_steps, 2, 2, "dist_sync", 4, timeout=120)
    bounded = run_ps_job(w.plain_sgd_steps, 2, 2, "dist_async", 4, timeout=120,
                         env={"MXTORCH_PS_STALENESS": "0"})
    for got in [*sync, *bounded]:
        for a, b in zip(got, sync[0]):
            assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_a_finished_worker_does_not_hold_the_others_back():
    rest, leaver = run_ps_job(w.staleness_leaver, 2, 1, STEPS, "closes", timeout=120)
    assert leaver["value"] >= 2 * w.SLOW
    assert rest["value"] == STEPS + 2 * w.SLOW  # every push applied once


def test_a_dead_worker_does_not_hold_the_others_back():
    with ps_cluster(2, 1, env=FAST, timeout=90) as c:
        c.start_workers(w.staleness_leaver, STEPS, "dies")
        alive, dead = c.join_workers()
        assert dead.exitcode == -9
        assert alive.ok, alive.error
        assert alive.value["value"] == STEPS + 2 * w.SLOW
        assert c.wait_exit() == {"scheduler": 0, "server 0": 0}
