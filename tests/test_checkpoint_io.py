"""mxtorch.checkpoint_io: the one atomic, durable file writer."""

from __future__ import annotations

import os

import pytest
import torch

import mxtorch as mx
from mxtorch import checkpoint_io
from mxtorch.checkpoint_io import atomic_write_bytes, atomic_write_text


def test_writes_replace_the_file_and_fsync_the_file_and_its_folder(tmp_path, monkeypatch):
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append("dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "file")
        real_fsync(fd)

    monkeypatch.setattr(checkpoint_io.os, "fsync", fsync)
    path = tmp_path / "sub" / "states.bin"
    atomic_write_bytes(path, b"one")
    atomic_write_text(path, "twö")
    assert path.read_text(encoding="utf-8") == "twö"
    assert synced == ["file", "dir", "file", "dir"]
    assert os.listdir(path.parent) == ["states.bin"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "model.params"
    atomic_write_bytes(path, b"old")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint_io.os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["model.params"]


@pytest.mark.parametrize("writer", ["nd.save", "save_parameters", "metrics"])
def test_mxtorch_writers_go_through_it(tmp_path, monkeypatch, writer):
    written: list[str] = []
    real = checkpoint_io.atomic_write_bytes

    def spy(path, data):
        written.append(os.path.basename(os.fspath(path)))
        real(path, data)

    monkeypatch.setattr(checkpoint_io, "atomic_write_bytes", spy)
    if writer == "nd.save":
        import mxtorch.nd._io as nd_io

        monkeypatch.setattr(nd_io, "atomic_write_bytes", spy)
        mx.nd.save(str(tmp_path / "a.nd"), {"x": torch.ones(2)})
        assert torch.equal(mx.nd.load(str(tmp_path / "a.nd"))["x"], torch.ones(2))
    elif writer == "save_parameters":
        import mxtorch.gluon.serialization as ser

        monkeypatch.setattr(ser, "atomic_write_bytes", spy)
        net = mx.gluon.nn.Dense(2, in_units=2)
        net.initialize()
        net.save_parameters(str(tmp_path / "net.params"))
    else:
        atomic_write_text(tmp_path / "metrics.json", "{}")  # atomic_write_text calls the module's writer
    assert written and written[0] in ("a.nd", "net.params", "metrics.json")
