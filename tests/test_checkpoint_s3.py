"""Checkpoints on ``s3://`` through s3fs, against a local S3 server the test starts (moto's
ThreadedMotoServer on 127.0.0.1; never the internet): the CLI's ``--checkpoint-dir s3://bucket/run``
killed mid-epoch and resumed gives the model.params of an uninterrupted run; a corrupt file in the
bucket is refused naming it and ``restore`` falls back to the previous checkpoint.

Needs the optional packages: ``pip install -c constraints-cpu.txt -e .[s3,s3test]`` (s3fs; moto
with its server); the tests are skipped without them (the test command does not install them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
import torch

pytest.importorskip("s3fs", reason="s3fs is not installed (pip install -e .[s3])")
pytest.importorskip("moto.server", reason="moto's server is not installed (pip install -e .[s3test])")
pytest.importorskip("flask", reason="moto's server needs flask (pip install -e .[s3test])")

import train_test_hooks  # noqa: E402  (tests/ is on sys.path)

import mxtorch as mx  # noqa: E402
from mxtorch import autograd, gluon  # noqa: E402
from mxtorch.checkpoint import CheckpointError, CheckpointManager  # noqa: E402
from mxtorch.gluon import nn  # noqa: E402

ROOT = mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT


@pytest.fixture(scope="module")
def s3_env():
    """A local S3 server and the environment that points botocore (and so s3fs) at it."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem()
    fs.mkdir("mxtorch-ckpt")
    try:
        yield env
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def make(seed: int):
    torch.manual_seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu", in_units=6), nn.Dense(3, in_units=8))
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    return net, trainer


def steps(net, trainer, n: int) -> None:
    g = torch.Generator().manual_seed(7)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(n):
        x, y = torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g).float()
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(4)


@pytest.mark.timeout(600)
def test_manager_round_trip_and_corrupt_file_on_s3(s3_env):
    uri = f"s3://mxtorch-ckpt/{uuid.uuid4().hex}"
    net, trainer = make(0)
    mgr = CheckpointManager(uri, keep_last=2, async_save=True)
    for s in (1, 2, 3):
        steps(net, trainer, 1)
        mgr.save(s, net=net, trainer=trainer, note=f"step {s}")
    mgr.wait()
    assert mgr.list() == [2, 3] and mgr.latest() == 3  # keep_last deleted step 1 in the bucket
    want = {k: p.data().clone() for k, p in net._collect_params_with_prefix().items()}
    net2, trainer2 = make(1)
    steps(net2, trainer2, 1)
    assert CheckpointManager(uri).restore(net=net2, trainer=trainer2) == 3
    for k, p in net2._collect_params_with_prefix().items():
        assert torch.equal(p.data(), want[k]), k
    # truncate step 3's trainer states in the bucket: refused naming the file, step 2 used
    import s3fs

    fs = s3fs.S3FileSystem()
    path = uri[len("s3://"):] + "/step-3/trainer.rank0.states"
    fs.pipe_file(path, fs.cat_file(path)[:-10])
    with pytest.raises(CheckpointError, match=r"s3://mxtorch-ckpt/.*/step-3/trainer.rank0.states has \d+ "
                                              "bytes, the manifest says"):
        CheckpointManager(uri).verify(3)
    mgr3 = CheckpointManager(uri)
    with pytest.warns(UserWarning, match="Falling back to checkpoint step 2"):
        assert mgr3.restore(net=net2, trainer=trainer2) == 2
    assert mgr3.extra == {"note": "step 2"}


@pytest.mark.timeout(400)
def test_cli_checkpoint_dir_on_s3_killed_and_resumed(s3_env, tmp_path):
    uri = f"s3://mxtorch-ckpt/{uuid.uuid4().hex}/run"
    base = [sys.executable, "-m", "mxtorch.cli.main", "train", "--model", "mlp", "--data-root", ROOT,
            "--epochs", "2", "--batch-size", "256", "--lr", "0.1", "--no-progress", "--threads", "1"]
    env = {k: v for k, v in os.environ.items() if k != "MXTORCH_TEST_KILL_AT_STEP"}

    def run(args, **extra_env):
        return subprocess.run([*base, *args], capture_output=True, text=True, timeout=180,
                              env={**env, **extra_env})

    r = run(["--output", str(tmp_path / "plain")])
    assert r.returncode == 0, r.stderr[-3000:]
    cmd = ["--output", str(tmp_path / "resumed"), "--checkpoint-dir", uri, "--checkpoint-every", "10",
           "--resume"]
    r = run(cmd, **train_test_hooks.env(MXTORCH_TEST_KILL_AT_STEP="45"))  # the test-only kill hook
    assert r.returncode == -9, (r.returncode, r.stderr[-3000:])
    r = run(cmd)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"resumed from checkpoint step 40 under {uri}" in r.stdout
    plain, resumed = tmp_path / "plain", tmp_path / "resumed"
    assert (plain / "model.params").read_bytes() == (resumed / "model.params").read_bytes()
    metrics = json.loads((resumed / "metrics.json").read_text())
    assert metrics["checkpoint"]["dir"] == uri and metrics["checkpoint"]["steps"] == [50, 60, 70]
