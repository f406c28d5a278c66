"""mxtorch.contrib.pruning on parameter-server stores: 2 workers (scheduler + server + 2 workers,
real processes over 127.0.0.1) pruning with a gradual schedule hold identical masks at every step;
with the optimizer on the servers the pruned weights pulled back are zero after every step."""

from __future__ import annotations

import pytest
import torch

from mxtorch.kvstore.ps.testing import run_ps_job

STEPS = 7  # masks change at steps 1, 3, 5 and 6 (begin 1, frequency 2, end 2 * 3)


def _same_masks(r0, r1):
    assert len(r0["masks"]) == len(r1["masks"]) == STEPS
    for step, (m0, m1) in enumerate(zip(r0["masks"], r1["masks"])):
        assert m0.keys() == m1.keys(), step
        for k in m0:
            assert torch.equal(m0[k], m1[k]), (step, k)


@pytest.mark.parametrize("update_on_kvstore", [True, False])
def test_dist_sync_identical_masks_and_weights(update_on_kvstore):
    import pruning_workers as w

    r0, r1 = run_ps_job(w.gradual_ps, 2, 1, "dist_sync", update_on_kvstore, STEPS, timeout=90)
    assert r0["update_on_kvstore"] is update_on_kvstore
    _same_masks(r0, r1)
    for k in r0["weights"]:
        assert torch.equal(r0["weights"][k], r1["weights"][k]), k
    assert all(r0["zero"]) and all(r1["zero"])
    assert r0["sparsity"] == pytest.approx(0.75, abs=1e-2)


def test_dist_async_server_optimizer_keeps_pruned_weights_zero():
    import pruning_workers as w

    r0, r1 = run_ps_job(w.gradual_ps, 2, 1, "dist_async", None, STEPS, timeout=90)
    assert r0["update_on_kvstore"] is True
    _same_masks(r0, r1)  # rank 0's masks, broadcast through the servers
    assert all(r0["zero"]) and all(r1["zero"])
    for r in (r0, r1):
        final = r["masks"][-1]
        assert all(bool((r["weights"][k][~m] == 0).all()) for k, m in final.items())
        assert r["sparsity"] == pytest.approx(0.75, abs=1e-2)
