"""`mxtorch train --prune --checkpoint-dir`: the Pruner goes into checkpoints through the Stateful
protocol (its own file, ``state.pruner.rank0.pt``), and a checkpoint written before that, with the
Pruner's state as JSON in the extra values of ``state.json``, still resumes exactly."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

import mxtorch as mx
from mxtorch.cli.main import main
from mxtorch.contrib import pruning

ROOT = mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT
# one epoch of 39 steps; the schedule masks every step up to the last, so step 30 is mid-schedule
ARGS = ["train", "--model", "mlp", "--data-root", ROOT, "--epochs", "1", "--batch-size", "256", "--lr", "0.1",
        "--no-progress", "--threads", "1", "--prune", "l1", "--sparsity", "0.6", "--prune-end-epoch", "1",
        "--prune-frequency", "3"]
PRUNER_FILE = "state.pruner.rank0.pt"


def as_legacy(folder) -> None:
    """Rewrite checkpoint ``folder`` as mxtorch wrote it before the Pruner was a Stateful: its state
    as JSON values (state_to_json) in state.json's extra under "pruner", no file of its own."""
    import torch

    sd = torch.load(folder / PRUNER_FILE, map_location="cpu", weights_only=True)
    (folder / PRUNER_FILE).unlink()

    def legacy(state: dict) -> None:
        state["extra"]["pruner"] = pruning.state_to_json(sd)
        state.pop("stateful", None)

    rewrite_state(folder, legacy, drop=PRUNER_FILE)


def rewrite_state(folder, change, drop: str | None = None) -> None:
    """``change`` state.json of checkpoint ``folder`` in place; its manifest follows (``drop``: a
    file no longer there)."""
    state = json.loads((folder / "state.json").read_text())
    change(state)
    raw = json.dumps(state).encode()
    (folder / "state.json").write_bytes(raw)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"].pop(drop, None)
    manifest["files"]["state.json"] = {"size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.timeout(600)
def test_pruner_is_a_stateful_of_the_checkpoint_and_old_checkpoints_resume(tmp_path, capsys):
    ck = tmp_path / "ckpt"
    assert main([*ARGS, "--output", str(tmp_path / "plain"), "--checkpoint-dir", str(ck),
                 "--checkpoint-every", "10"]) == 0
    step = ck / "step-30"
    assert (step / PRUNER_FILE).is_file()
    assert "pruner" not in json.loads((step / "state.json").read_text())["extra"]
    expected = (tmp_path / "plain" / "model.params").read_bytes()

    def resumed(name: str, legacy: bool) -> bytes:
        folder = tmp_path / name
        shutil.copytree(ck, folder)
        if legacy:
            as_legacy(folder / "step-30")
        assert main([*ARGS, "--output", str(tmp_path / f"{name}-out"), "--checkpoint-dir", str(folder),
                     "--resume"]) == 0
        assert "resumed from checkpoint step 30" in capsys.readouterr().out
        return (tmp_path / f"{name}-out" / "model.params").read_bytes()

    # this version's checkpoint, resumed from step 30: the same model as the whole run; the same
    # checkpoint in the layout of before (the JSON extra restores the masks and schedule) too
    assert resumed("new", legacy=False) == expected
    assert resumed("old", legacy=True) == expected

    # neither a state file nor the extra (a run without --prune wrote it): refused, naming it
    none = tmp_path / "none"
    shutil.copytree(ck, none)
    as_legacy(none / "step-30")
    rewrite_state(none / "step-30", lambda state: state["extra"].pop("pruner"))
    with pytest.raises(SystemExit, match="holds no 'pruner' state"):
        main([*ARGS, "--output", str(tmp_path / "c"), "--checkpoint-dir", str(none), "--resume"])
