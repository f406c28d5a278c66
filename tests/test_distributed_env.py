"""mxtorch.distributed: launch variables, the process group, the multi-process test helpers."""

from __future__ import annotations

import os
import sys

import dist_workers as w
import pytest

from mxtorch.base import MXNetError
from mxtorch.distributed import env, group
from mxtorch.distributed.env import DistributedConfigError, WorldInfo, default_timeout, world_info_from_env
from mxtorch.distributed.testing import WorkerFailed, WorkerTimeout, free_port, run_script, run_workers

MASTER = {"MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "29500"}


# ---- parsing (no processes) ------------------------------------------------------------------


def test_nothing_set_means_not_launched():
    assert world_info_from_env({}) is None
    assert world_info_from_env({"MASTER_ADDR": "x", "MASTER_PORT": "1", "LOCAL_RANK": "0"}) is None


def test_torchrun_variables():
    info = world_info_from_env({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
                                "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", **MASTER})
    assert info == WorldInfo(5, 8, 1, 4, 1, 2, "10.1.2.3", 29500, "torchrun")


def test_torchrun_minimal_is_one_host():
    info = world_info_from_env({"RANK": "1", "WORLD_SIZE": "3", "MASTER_PORT": "1234"})
    assert info == WorldInfo(1, 3, 1, 3, 0, 1, "127.0.0.1", 1234, "torchrun")


def test_single_process_needs_no_rendezvous():
    info = world_info_from_env({"RANK": "0", "WORLD_SIZE": "1"})
    assert info is not None and info.world_size == 1 and info.master_port is None


def test_openmpi_pmi_slurm_dmlc():
    ompi = world_info_from_env({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
                                "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
                                **MASTER})
    assert ompi == WorldInfo(3, 4, 1, 2, 1, 2, "10.1.2.3", 29500, "openmpi")
    pmi = world_info_from_env({"PMI_RANK": "2", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0",
                               "MPI_LOCALNRANKS": "2", **MASTER})
    assert pmi == WorldInfo(2, 4, 0, 2, 1, 2, "10.1.2.3", 29500, "pmi")
    slurm = world_info_from_env({"SLURM_PROCID": "5", "SLURM_NTASKS": "6", "SLURM_LOCALID": "2",
                                 "SLURM_NODEID": "1", "SLURM_NNODES": "2", **MASTER})
    assert slurm == WorldInfo(5, 6, 2, 3, 1, 2, "10.1.2.3", 29500, "slurm")
    dmlc = world_info_from_env({"DMLC_ROLE": "worker", "DMLC_WORKER_ID": "1", "DMLC_NUM_WORKER": "2",
                                "DMLC_PS_ROOT_URI": "10.9.9.9", "MASTER_PORT": "7000"})
    assert dmlc == WorldInfo(1, 2, 1, 2, 0, 1, "10.9.9.9", 7000, "dmlc")
    assert world_info_from_env({"DMLC_ROLE": "server", "DMLC_NUM_WORKER": "2"}) is None


def test_horovodrun_variables_are_the_job_identity():
    hvd = world_info_from_env({"HOROVOD_RANK": "3", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1",
                               "HOROVOD_LOCAL_SIZE": "2", "HOROVOD_CROSS_RANK": "1",
                               "HOROVOD_CROSS_SIZE": "2", **MASTER})
    assert hvd == WorldInfo(3, 4, 1, 2, 1, 2, "10.1.2.3", 29500, "horovodrun")
    # rank and size only: one host, local rank = rank
    alone = world_info_from_env({"HOROVOD_RANK": "1", "HOROVOD_SIZE": "2", "MASTER_PORT": "7000"})
    assert alone == WorldInfo(1, 2, 1, 2, 0, 1, "127.0.0.1", 7000, "horovodrun")
    with pytest.raises(DistributedConfigError, match="HOROVOD_RANK='0' is set but HOROVOD_SIZE is not"):
        world_info_from_env({"HOROVOD_RANK": "0"})
    # torchrun's variables (what mxtorch launch sets) win over an enclosing horovodrun's
    both = world_info_from_env({"HOROVOD_RANK": "0", "HOROVOD_SIZE": "1", "RANK": "1", "WORLD_SIZE": "2",
                                **MASTER})
    assert both is not None and both.launcher == "torchrun"


def test_torchrun_wins_over_an_enclosing_slurm_allocation():
    info = world_info_from_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "RANK": "1", "WORLD_SIZE": "2",
                                **MASTER})
    assert info is not None and (info.rank, info.world_size, info.launcher) == (1, 2, "torchrun")


@pytest.mark.parametrize("variables,quoted", [
    ({"RANK": "0"}, "RANK='0' is set but WORLD_SIZE is not"),
    ({"WORLD_SIZE": "2"}, "WORLD_SIZE='2' is set but RANK is not"),
    ({"OMPI_COMM_WORLD_RANK": "1"}, "OMPI_COMM_WORLD_SIZE is not"),
    ({"RANK": "one", "WORLD_SIZE": "2", **MASTER}, "RANK='one' is not an integer"),
    ({"RANK": "-1", "WORLD_SIZE": "2", **MASTER}, "RANK=-1 must be >= 0"),
    ({"RANK": "2", "WORLD_SIZE": "2", **MASTER}, "RANK=2 is not below WORLD_SIZE=2"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE=0 must be >= 1"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2", **MASTER},
     "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000"}, "MASTER_PORT=70000 is not a TCP port"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "0"}, "MASTER_PORT=0 must be >= 1"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "http"}, "MASTER_PORT='http' is not an integer"),
    ({"RANK": "0", "WORLD_SIZE": "2"}, "needs MASTER_PORT"),
    ({"RANK": "0", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "MASTER_PORT": "5"}, "needs MASTER_ADDR"),
    ({"DMLC_ROLE": "worker", "DMLC_NUM_WORKER": "2"}, "DMLC_WORKER_ID is not"),
])
def test_bad_configurations_say_what_to_set(variables, quoted):
    with pytest.raises(DistributedConfigError) as err:
        world_info_from_env(variables)
    assert quoted in str(err.value)
    assert isinstance(err.value, MXNetError)


def test_launch_hint_is_quoted():
    with pytest.raises(DistributedConfigError, match="mxtorch launch -n N"):
        world_info_from_env({"RANK": "0"})


def test_default_timeout():
    assert default_timeout({}) == 300.0
    assert default_timeout({"MXTORCH_DIST_TIMEOUT": " 2.5 "}) == 2.5
    for bad in ("soon", "0", "-3", "inf", "nan"):
        with pytest.raises(DistributedConfigError, match="MXTORCH_DIST_TIMEOUT"):
            default_timeout({"MXTORCH_DIST_TIMEOUT": bad})


def test_every_variable_is_a_named_constant():
    names = [n for n in env.__all__ if n.isupper() and n not in ("DEFAULT_TIMEOUT_S", "LAUNCH_HINT")]
    assert len(names) >= 25
    for n in names:
        assert getattr(env, n) == n


def test_init_without_launch_explains_how(monkeypatch):
    for name in [n for n in env.__all__ if n.isupper()]:
        monkeypatch.delenv(name, raising=False)
    hint = "not started as part of a distributed job.*mxtorch launch"
    with pytest.raises(DistributedConfigError, match=hint):
        group.init()
    assert not group.is_initialized()
    with pytest.raises(DistributedConfigError, match="call mxtorch.distributed.init"):
        group.world()


# ---- processes ---------------------------------------------------------------------------------


def test_free_port_is_bindable():
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_group_init_barrier_allreduce():
    results = run_workers(w.group_roundtrip, 2, timeout=60)
    for rank, res in enumerate(results):
        port = res["info"].master_port
        assert res["info"] == WorldInfo(rank, 2, rank, 2, 0, 1, "127.0.0.1", port, "torchrun")
        assert res["same"] and res["initialized"] and res["backend"] == "gloo"
        assert res["sum"] == 3.0


@pytest.mark.parametrize("method", ["forkserver", pytest.param("spawn", marks=pytest.mark.slow)])
def test_ranks_get_the_parents_current_environment(monkeypatch, tmp_path, method):
    # forkserver (the default) forks ranks from a server started by an earlier test: a variable
    # set or removed since must still reach the ranks as it would a spawned process
    monkeypatch.setenv("MXTORCH_TEST_START_METHOD", method)
    run_workers(w.rank_environment, 1, [], timeout=60)  # the server exists from here on
    monkeypatch.setenv("MXTORCH_SET_AFTER_START", "yes")
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    results = run_workers(w.rank_environment, 2, ["MXTORCH_SET_AFTER_START", "HOME", "RANK"],
                          env={"MXTORCH_EXTRA": "1"}, timeout=60)
    assert [r["env"] for r in results] == [
        {"MXTORCH_SET_AFTER_START": "yes", "HOME": None, "RANK": str(rank)} for rank in range(2)]
    assert all(r["cwd"] == str(tmp_path) for r in results)
    assert len({r["pid"] for r in results}) == 2 and all(r["pid"] != os.getpid() for r in results)


def test_a_bad_start_method_says_what_to_set(monkeypatch):
    monkeypatch.setenv("MXTORCH_TEST_START_METHOD", "fork")
    with pytest.raises(ValueError, match=r"MXTORCH_TEST_START_METHOD='fork'.*'forkserver' or 'spawn'"):
        run_workers(w.rank_environment, 1, [], timeout=60)


def test_worker_exception_reaches_the_parent_with_its_traceback():
    with pytest.raises(WorkerFailed) as err:
        run_workers(w.return_rank_or_raise, 2, 1, timeout=60)
    assert err.value.rank == 1
    assert "ValueError: boom from rank 1" in err.value.traceback
    assert "return_rank_or_raise" in err.value.traceback  # the worker's own frames


def test_stuck_worker_times_out_and_is_named():
    with pytest.raises(WorkerTimeout) as err:
        run_workers(w.sleep_on, 2, 1, 60.0, timeout=8)
    assert err.value.ranks == [1]
    assert "did not finish within 8 s" in str(err.value)


def test_worker_that_exits_without_result_fails():
    with pytest.raises(WorkerFailed, match="exited with code 3 without returning") as err:
        run_workers(w.exit_without_result, 2, 3, timeout=60)
    assert err.value.rank == 1


def test_run_script_sets_the_launch_variables():
    code = "import os; print(os.environ['RANK'], os.environ['WORLD_SIZE'], os.environ['MASTER_ADDR'], " \
           "os.environ.get('EXTRA'), 'HOME' in os.environ)"
    results = run_script([sys.executable, "-c", code], 2, timeout=30, env={"EXTRA": "x", "HOME": None})
    assert [(rc, out.split()) for rc, out, _ in results] == [
        (0, ["0", "2", "127.0.0.1", "x", "False"]), (0, ["1", "2", "127.0.0.1", "x", "False"])]


CLEAN_EXIT = """
import torch, torch.distributed as dist
import mxtorch.distributed as mxdist
torch.set_num_threads(1)
info = mxdist.init()
t = torch.full((1000,), float(info.rank + 1))
works = [dist.all_reduce(torch.ones(100), async_op=True) for _ in range(4)]
for work in works:
    work.wait()
print("start", t[0].item())
dist.all_reduce(t)  # last: a gloo thread may still hold this op's tensor as the interpreter exits
"""


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): every job test above also checks clean exits
@pytest.mark.parametrize("jobs", [4, 10])
def test_jobs_in_a_row_exit_cleanly(jobs):
    # Without mxtorch's shutdown at exit, ranks of this script often abort on torch 2.13 + gloo
    # (5 of 20 when measured: "terminate called without an active exception"); see
    # mxtorch.distributed.group for why.  4 jobs (8 rank exits) miss that rate 10% of the time,
    # 10 jobs (the slow run) 0.3%.
    for attempt in range(jobs):
        results = run_script([sys.executable, "-c", CLEAN_EXIT], 2, timeout=60)
        for rank, (rc, out, err) in enumerate(results):
            assert "terminate called" not in err, f"run {attempt}, rank {rank}:\n{err}"
            assert rc == 0, f"run {attempt}, rank {rank} exited with {rc}:\n{err}"
            assert "start" in out
