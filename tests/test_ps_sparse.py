"""Row-sparse values on the parameter server (real jobs: a scheduler, 2 servers, 2 workers):
row-sparse push/pull/pushpull and row_sparse_pull compared with the local store, the servers'
lazy optimizer updates, a Trainer with sparse embedding gradients, and the recommender example
launched with ``mxtorch launch -s``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import ps_workers as w  # noqa: I001  (tests/ is on sys.path)
import pytest
import torch
from torch.testing import assert_close

import mxtorch as mx
from mxtorch.kvstore.ps import rows as psrows
from mxtorch.kvstore.ps.testing import run_ps_job
from mxtorch.kvstore.ps.worker import place
from mxtorch.nd import sparse

ROOT = Path(__file__).resolve().parents[1]
SHAPE = (7, 3)
SMALL_BOUND = {"MXNET_KVSTORE_BIGARRAY_BOUND": "10"}  # 7x3 keys: 11 + 10 elements, row 3 cut in two


def _exact(a, b):
    assert_close(a, b, rtol=0, atol=0)


def _dense(t):
    return sparse.tostype(t, "default")


# ---- geometry of rows in slices (no processes) ------------------------------------------------
def test_rows_of_a_slice_and_their_elements():
    ids = torch.tensor([0, 3, 4, 6])
    assert psrows.rows_in_slice(ids, 3, 0, 11) == (0, 2)  # elements 0..10: rows 0..3
    assert psrows.rows_in_slice(ids, 3, 11, 10) == (1, 4)  # elements 11..20: rows 3..6
    assert psrows.rows_in_slice(torch.tensor([], dtype=torch.int64), 3, 0, 11) == (0, 0)
    value = torch.arange(21.0)
    for off, size in ((0, 11), (11, 10), (0, 21), (9, 12)):
        lo, hi = psrows.rows_in_slice(ids, 3, off, size)
        sub = ids[lo:hi]
        data = psrows.gather_rows(value[off:off + size], sub, 3, off, size)
        _, inside = psrows.element_positions(sub, 3, off, size)
        out = torch.zeros(hi - lo, 3)
        psrows.scatter_rows(out, data, sub, 3, off, size)
        want = value.view(7, 3)[sub] * inside  # the parts of those rows inside the slice
        _exact(out, want)
    assert psrows.stored_rows(torch.tensor([0, 0, 5.0, 0, 0, 0, 0, 0, 0, 0]), 3, 11, 10).tolist() == [4]
    assert psrows.stored_rows(torch.tensor([1.0, 0, 0, 0, 0, 0]), 3, 9, 6).tolist() == [3]


def test_merged_rows_are_summed_by_row():
    a = psrows.Rows(torch.tensor([1, 4]), torch.ones(2, 2))
    b = psrows.Rows(torch.tensor([0, 4]), torch.full((2, 2), 2.0))
    m = psrows.merge_rows([a, b], torch.float32)
    assert m.ids.tolist() == [0, 1, 4] and m.values.tolist() == [[2, 2], [1, 1], [3, 3]]


def test_row_sparse_keys_are_placed_at_row_boundaries():
    assert place(21, 4, [0, 0], bound=10) == [(0, 0, 11), (1, 11, 10)]
    assert place(21, 4, [0, 0], bound=10, row=3) == [(0, 0, 12), (1, 12, 9)]
    assert place(21, 4, [0, 0, 0], bound=10, row=7) == [(0, 0, 7), (1, 7, 7), (2, 14, 7)]
    assert place(20, 4, [0, 0, 0], bound=10, row=10) == [(0, 0, 7), (1, 7, 7), (2, 14, 6)]  # 2 rows


# ---- a real job -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def semantics(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sparse")
    return folder, run_ps_job(w.sparse_semantics, 2, 2, str(folder), timeout=120, env=SMALL_BOUND)


def _local_reference():
    """The local store given both workers' values: what every worker of the job must see."""
    kv = mx.kv.create("local")
    grads = {step: [w._rsp(w.SPARSE_GRADS[step][r], SHAPE) for r in range(2)] for step in w.SPARSE_GRADS}
    kv.init("e", torch.full(SHAPE, 9.0))
    kv.push("e", grads[0])
    assigned = torch.full(SHAPE, -1.0)
    kv.pull("e", out=assigned)
    stored = sparse.zeros("row_sparse", SHAPE)
    kv.pull("e", out=stored, ignore_sparse=False)
    pushed = [grads[1][0], w._rsp({0: 1.0}, SHAPE), grads[1][1], w._rsp({0: 1.0}, SHAPE)]
    kv.pushpull("e", pushed)
    return assigned, w._parts(stored), w._parts(pushed[0])


def test_sync_row_sparse_arithmetic_matches_the_local_store(semantics):
    assigned, stored, summed = _local_reference()
    for res in semantics[1]:
        _exact(res["assigned"], assigned)  # pushed rows summed, every other row zero
        assert res["ignored"][0] == [1]  # pull() leaves a row_sparse out alone by default
        assert res["stored"][0] == stored[0] == [0, 3, 6]
        _exact(res["stored"][1], stored[1])
        for ids, rows in res["pushpull"]:  # every out of the list: the rows of both workers, summed
            assert ids == summed[0]
            _exact(rows, summed[1])
        _exact(res["fp16"][3], torch.tensor([2001.0, 2001.125, 2001.25]).half())  # summed in fp32
        _exact(res["mixed_round"], torch.ones(SHAPE) + _dense(w._rsp({3: 2.0}, SHAPE)))  # dense + rows


def test_row_sparse_pull_fetches_the_rows_asked_for(semantics):
    value = torch.arange(21.0).reshape(SHAPE)
    expected = torch.zeros(SHAPE)
    expected[[0, 3, 5]] = value[[0, 3, 5]]  # ids 5, 3, 5, 0: unsorted, repeated
    for res in semantics[1]:
        dense, (ids, rows) = res["rsp_lists"]
        _exact(dense, expected)
        assert ids == [2, 6]
        _exact(rows, value[[2, 6]])
        nnz, shape, after = res["rsp_empty"]
        assert (nnz, shape) == (0, SHAPE)
        _exact(after, torch.zeros(SHAPE))  # no ids: an out with no rows
        assert "row_sparse_pull of key 't' needs row_sparse outs" in res["dense_out"]
        (ids0, rows0), (ids1, rows1) = res["rsp_keys"][0]
        assert (ids0, ids1) == ([4], [3])  # the first out was pulled again for a list of keys
        _exact(rows0, value[[4]])
        _exact(rows1, value[[3]])
        _exact(res["rsp_keys"][1], torch.tensor([[0.0, 0], [1, 1], [1, 1], [0, 0]]))


def test_a_row_sparse_initialized_key_is_split_by_rows(semantics):
    for res in semantics[1]:
        assert res["r_placement"] == ([(0, 0, 12), (1, 12, 9)], [(0, 0, 11), (1, 11, 10)])
        _exact(res["r_init"], _dense(w._rsp({1: 1.0, 5: 2.0}, SHAPE)))
        ids, rows = res["r_rows"]
        assert ids == [3, 4, 5]
        _exact(rows, torch.stack([torch.zeros(3), 3 + torch.arange(3) / 4, torch.zeros(3)]))


def test_row_sparse_usage_errors(semantics):
    for res in semantics[1]:
        assert "mix row_sparse and dense" in res["mixed"]
        assert "row id 7 is out of range for a value with 7 rows" in res["out_of_range"]
        assert "needs row_ids=" in res["no_ids"]
        assert "key 's' holds a scalar: it has no rows" in res["scalar"]


def test_server_optimizer_updates_only_the_touched_rows_like_the_local_store(semantics):
    folder, results = semantics
    for res in results:
        got, want = res["optimizer"]
        for key in ("w", "w_small"):
            for step, (g, ref) in enumerate(zip(got[key], want[key])):
                assert_close(g, ref, rtol=1e-6, atol=1e-7, msg=f"{key} after step {step}")
        start = torch.arange(21.0).reshape(SHAPE) / 10
        _exact(got["w"][0][[1, 2, 4, 5]], start[[1, 2, 4, 5]])  # rows never pushed: untouched
    # the states (momentum of the touched rows only) equal the local store's, in the same file format
    dist, local = mx.optimizer.Updater(mx.optimizer.SGD()), mx.optimizer.Updater(mx.optimizer.SGD())
    with open(results[0]["states"], "rb") as f:
        dist.set_states(f.read())
    with open(results[0]["states"] + ".local", "rb") as f:
        local.set_states(f.read())
    assert set(dist.states) == set(local.states) == {"w", "w_small"}
    for k in local.states:
        assert_close(dist.states[k], local.states[k], rtol=1e-6, atol=1e-7)


def test_async_row_sparse_pushes_apply_on_arrival():
    for res in run_ps_job(w.sparse_async, 2, 2, timeout=120, env=SMALL_BOUND):
        ids, rows = res["rows"]
        assert ids == [0, 1, 2, 29]
        _exact(rows, torch.tensor([[-3.0, -3], [-3, -3], [0, 0], [-3, -3]]))  # 3 pushes of 1, each applied


# ---- Trainer with sparse embedding gradients ---------------------------------------------------------
STEPS = 4


@pytest.fixture(scope="module")
def embedding_reference():
    return w.embedding_training("local", STEPS)


@pytest.mark.parametrize("mode", ["server", "server_rows"])  # 'worker' is refused, as in MXNet
def test_trainer_with_sparse_embedding_gradients_equals_one_process(mode, embedding_reference):
    env = {"MXNET_KVSTORE_BIGARRAY_BOUND": "100"}  # the 40x4 embedding is split over both servers
    for params in run_ps_job(w.embedding_training, 2, 2, mode, STEPS, timeout=120, env=env):
        for got, want in zip(params, embedding_reference):
            assert_close(got, want, rtol=1e-5, atol=1e-6)


# ---- the recommender example through the launcher ----------------------------------------------------
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_recommend_example_runs_on_a_parameter_server_job():
    args = ["--kvstore", "dist_sync", "--epochs", "2", "--users", "300", "--items", "80",
            "--impressions-per-user", "40", "--batch-size", "256"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "MXTORCH_DIST_TIMEOUT": "60"}
    proc = subprocess.run([sys.executable, "-m", "mxtorch.cli.main", "launch", "-n", "2", "-s", "1", "python",
                           str(ROOT / "examples" / "recommend_mf.py"), *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    baseline = float(re.search(r"baseline popularity: held-out AUC ([0-9.]+)", proc.stdout).group(1))  # type: ignore
    aucs = [float(a) for a in re.findall(r"epoch \d+: .*held-out AUC ([0-9.]+)", proc.stdout)]
    assert len(aucs) == 2 and aucs[1] > baseline, proc.stdout
    assert "kvstore 'dist_sync', 2 worker(s)" in proc.stdout
