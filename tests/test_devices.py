"""Per-worker devices as a pure function (CPU-only CI): mxtorch.distributed.devices."""

from __future__ import annotations

import argparse

import pytest
import torch

from mxtorch.distributed.devices import (
    backend_for,
    default_context_spec,
    gpus_per_worker,
    my_devices,
    worker_devices,
)
from mxtorch.distributed.env import DistributedConfigError


def test_one_gpu_per_worker_by_local_rank():
    assert [worker_devices(r, 8) for r in range(8)] == [[r] for r in range(8)]
    # more workers than GPUs: round-robin over them
    assert [worker_devices(r, 2) for r in range(5)] == [[0], [1], [0], [1], [0]]
    assert worker_devices(3, 0) == []  # no GPU: the CPU


def test_gpus_per_worker_blocks():
    assert [worker_devices(r, 8, 2) for r in range(4)] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert worker_devices(4, 8, 2) == [0, 1]  # wraps around the blocks
    assert [worker_devices(r, 7, 3) for r in range(3)] == [[0, 1, 2], [3, 4, 5], [0, 1, 2]]  # gpu:6 unused
    with pytest.raises(DistributedConfigError, match="shows 2"):
        worker_devices(0, 2, 4)
    for bad in (0, -1, True, 1.5):
        with pytest.raises(DistributedConfigError):
            worker_devices(0, 2, bad)
    with pytest.raises(DistributedConfigError, match="local rank"):
        worker_devices(-1, 2)


def test_environment_and_contexts():
    env = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
           "MASTER_ADDR": "h0", "MASTER_PORT": "29500"}
    assert gpus_per_worker({}) == 1
    assert gpus_per_worker({"MXTORCH_GPUS_PER_WORKER": "2"}) == 2
    with pytest.raises(DistributedConfigError, match="MXTORCH_GPUS_PER_WORKER='x'"):
        gpus_per_worker({"MXTORCH_GPUS_PER_WORKER": "x"})
    assert my_devices(env, visible=4) == [1]
    assert default_context_spec(env, visible=4) == "gpu:1"
    assert default_context_spec({**env, "MXTORCH_GPUS_PER_WORKER": "2"}, visible=4) == "gpu:2,gpu:3"
    assert default_context_spec(env, visible=0) == "cpu"
    assert default_context_spec({}, visible=2) == "gpu:0"  # not launched: local rank 0


def test_backend_for_devices():
    assert backend_for(torch.device("cuda", 1)) == "nccl"
    assert backend_for("gpu:0") == "nccl"
    assert backend_for(torch.device("cpu")) == "gloo" and backend_for("cpu") == "gloo"


def test_train_without_ctx_takes_the_workers_devices(monkeypatch):
    from mxtorch.cli.train_config import config_from_args

    monkeypatch.setattr("mxtorch.distributed.devices.visible_gpu_count", lambda: 4)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setenv("MASTER_PORT", "29500")
    assert config_from_args(argparse.Namespace(ctx=None)).ctx == "gpu:3"
    assert config_from_args(argparse.Namespace(ctx="cpu")).ctx == "cpu"  # --ctx given: kept
    monkeypatch.setattr("mxtorch.distributed.devices.visible_gpu_count", lambda: 0)
    assert config_from_args(argparse.Namespace(ctx=None)).ctx == "cpu"
