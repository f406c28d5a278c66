"""mx.mod.Module on several processes: 'horovod' (all-reduce) and 'dist_sync' (scheduler, server and
two workers) jobs, each worker on half of every global batch, give the parameters of the
one-process Module job on the whole batch -- as does a job started by ``mxtorch launch``.

Module's ``rescale_grad`` is ``1/(batch * num_workers)`` for 'dist_sync' (MXNet's rule) and for
'horovod', whose store sums the gradients: that is what Horovod's own MXNet recipe
(``hvd.DistributedOptimizer``, which averages, with ``kvstore=None``) computes, also checked here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import test_module as tm  # noqa: I001  (tests/ is on sys.path)
import torch

from mxtorch.distributed.testing import run_workers
from mxtorch.kvstore.ps.testing import run_ps_job

EPOCHS = 3
GLOBAL_BATCH = 8
SCRIPT = Path(__file__).resolve().parent / "data" / "module" / "launch_module_job.py"


def worker_rows(rank: int, num_workers: int, n: int = 24, batch: int = GLOBAL_BATCH) -> np.ndarray:
    """This worker's part of every global batch, in batch order."""
    part = batch // num_workers
    return np.concatenate([np.arange(b + rank * part, b + (rank + 1) * part) for b in range(0, n, batch)])


def reference() -> dict[str, torch.Tensor]:
    return tm.module_job(tm.mx.cpu(), "local", epochs=EPOCHS, batch=GLOBAL_BATCH)


# ---- functions the worker processes run -------------------------------------------------------------
def train_half(kvstore: str, as_object: bool) -> dict[str, Any]:
    """Module.fit on this worker's half of each global batch, through the store ``kvstore``."""
    import mxtorch as mx

    kv = mx.kv.create(kvstore)
    x, y = tm.dataset()
    rows = worker_rows(kv.rank, kv.num_workers)
    mod = mx.mod.Module(tm.mlp())
    mod.fit(mx.io.NDArrayIter(x[rows], y[rows], batch_size=GLOBAL_BATCH // kv.num_workers), num_epoch=EPOCHS,
            arg_params=tm.clone(tm.initial_params()), kvstore=kv if as_object else kvstore,
            optimizer="sgd", optimizer_params=tm.SGD)
    return {"params": tm.clone(mod.get_params()[0]), "rescale_grad": mod._optimizer.rescale_grad,
            "store": (mod._kvstore.type, mod._update_on_kvstore), "rank": kv.rank}


def train_half_horovod_recipe() -> dict[str, Any]:
    """Horovod's MXNet recipe: DistributedOptimizer (averages the gradients), ``kvstore=None``."""
    import mxtorch as mx
    import mxtorch.horovod as hvd

    hvd.init()
    x, y = tm.dataset()
    rows = worker_rows(hvd.rank(), hvd.size())
    local_batch = GLOBAL_BATCH // hvd.size()
    net = tm.mlp()
    # with the parameter names, as Module would create it: no weight decay on the biases
    sgd = mx.optimizer.create("sgd", rescale_grad=1.0 / local_batch, sym=net,
                              param_idx2name=dict(enumerate(tm.PARAMS)), **tm.SGD)
    opt = hvd.DistributedOptimizer(sgd)
    mod = mx.mod.Module(net)
    mod.fit(mx.io.NDArrayIter(x[rows], y[rows], batch_size=local_batch), num_epoch=EPOCHS,
            arg_params=tm.clone(tm.initial_params()), kvstore=None, optimizer=opt)
    return {"params": tm.clone(mod.get_params()[0])}


def _check(results: list[dict[str, Any]]) -> None:
    want = reference()
    for res in results:
        tm.assert_params_close(res["params"], want)


# ---- tests ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("as_object", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["name", "store-object"])
def test_horovod_workers_on_half_batches_equal_one_process(as_object):
    results = run_workers(train_half, 2, "horovod", as_object, timeout=120)
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        assert r["store"] == ("horovod", False)  # the store sums gradients, the workers update
        assert r["rescale_grad"] == pytest.approx(1 / GLOBAL_BATCH)
    _check(results)


def test_horovod_distributed_optimizer_recipe_equals_one_process():
    _check(run_workers(train_half_horovod_recipe, 2, timeout=120))


@pytest.mark.parametrize("update_on_kvstore", ["1", "0"], ids=["servers-update", "workers-update"])
def test_dist_sync_workers_on_half_batches_equal_one_process(update_on_kvstore):
    results = run_ps_job(train_half, 2, 1, "dist_sync", False, timeout=120,
                         env={"MXNET_UPDATE_ON_KVSTORE": update_on_kvstore})
    for r in results:
        assert r["store"] == ("dist_sync", update_on_kvstore == "1")
        assert r["rescale_grad"] == pytest.approx(1 / GLOBAL_BATCH)  # 1/(4 * 2 workers), as MXNet
    _check(results)


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_module_job_under_mxtorch_launch(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mxtorch.cli.main", "launch", "-n", "2", "python", str(SCRIPT),
                        str(tmp_path)], capture_output=True, text=True, timeout=180,
                       env={**os.environ, "TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-3000:]
    want = reference()
    for rank in range(2):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        assert got["world"] == 2 and got["rank"] == rank
        tm.assert_params_close(got["params"], want)
