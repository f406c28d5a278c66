"""Pruner state across a resume: ``state_dict`` (tensors only, ``weights_only`` loadable, or JSON
values) with the parameters and the Trainer's states lets a resumed run continue the schedule
exactly as an uninterrupted one."""

from __future__ import annotations

import io
import json

import pytest
import torch
from test_pruning import mlp  # tests/ is on sys.path

from mxtorch import autograd, gluon
from mxtorch.base import MXNetError
from mxtorch.contrib import pruning
from mxtorch.gluon import nn

STEPS, STOP = 12, 5  # the schedule: masks change at steps 2, 4, 6, 8 and 10 (the end)
SETTINGS = {"schedule": "polynomial", "sparsity": 0.7, "begin_step": 2, "end_epoch": 2,
            "steps_per_epoch": 5, "frequency": 2, "seed": 4}


def make_trainer(net: gluon.Block) -> gluon.Trainer:
    return gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3})


def run(net, trainer, pruner, first: int, last: int) -> list[dict[str, torch.Tensor]]:
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    masks = []
    for step in range(first, last):
        g = torch.Generator().manual_seed(step)
        x, y = torch.randn(16, 20, generator=g), torch.randint(0, 10, (16,), generator=g)
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(16)
        pruner.step()
        masks.append(pruner.masks)
    return masks


def weights(net):
    return {k: p.data().detach().clone() for k, p in net._collect_params_with_prefix().items()}


@pytest.mark.parametrize("method,via", [("l1", "torch"), ("random", "json"), ("structured", "torch"),
                                        ("l2", "apply-first")])
def test_resume_continues_the_schedule_exactly(tmp_path, method, via):
    net = mlp(0)
    trainer = make_trainer(net)
    pruner = pruning.Pruner(method, **SETTINGS)
    pruner.apply(net)
    full = run(net, trainer, pruner, 0, STEPS)
    expected = weights(net)
    assert pruning.sparsity(net)["total"] > 0.3

    net = mlp(0)
    trainer = make_trainer(net)
    pruner = pruning.Pruner(method, **SETTINGS)
    pruner.apply(net)
    run(net, trainer, pruner, 0, STOP)
    net.save_parameters(str(tmp_path / "net.params"))
    trainer.save_states(str(tmp_path / "trainer.states"))
    state = pruner.state_dict()
    if via == "json":
        saved = json.dumps(pruning.state_to_json(state))
    else:
        buf = io.BytesIO()
        torch.save(state, buf)
    del net, trainer, pruner

    # a new process: other initial weights, everything restored from the files
    net = mlp(7)
    net.load_parameters(str(tmp_path / "net.params"))
    trainer = make_trainer(net)
    pruner = pruning.Pruner(method, **SETTINGS)
    if via == "json":
        restored = pruning.state_from_json(json.loads(saved))
    else:
        buf.seek(0)
        restored = torch.load(buf, weights_only=True)
    if via == "apply-first":
        pruner.apply(net)
        pruner.load_state_dict(restored)
    else:
        pruner.load_state_dict(restored)  # before apply: apply takes these masks, prunes nothing
        pruner.apply(net)
    assert pruner.num_update == STOP
    assert all(torch.equal(pruner.masks[k], m) for k, m in full[STOP - 1].items())
    trainer.load_states(str(tmp_path / "trainer.states"))
    resumed = run(net, trainer, pruner, STOP, STEPS)
    for a, b in zip(full[STOP:], resumed):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    got = weights(net)
    for k, v in expected.items():
        assert torch.equal(got[k], v), k


def test_state_checks():
    net = mlp(0)
    pruner = pruning.Pruner("l1", **SETTINGS)
    pruner.apply(net)
    run(net, make_trainer(net), pruner, 0, 5)
    state = pruner.state_dict()
    assert set(state) == {"format", "num_update", "broadcasts", "config", "masks"}
    assert all(m.dtype == torch.uint8 for m in state["masks"].values())
    other = pruning.Pruner("l1", **{**SETTINGS, "sparsity": 0.5})
    other.load_state_dict(state)
    with pytest.raises(MXNetError, match="sparsity: saved 0.7, here 0.5"):
        other.apply(mlp(1))
    loose = pruning.Pruner("l1", **{**SETTINGS, "sparsity": 0.5})
    loose.load_state_dict(state, strict=False)
    loose.apply(mlp(1))
    assert loose.num_update == 5 and loose.masks.keys() == pruner.masks.keys() != set()
    with pytest.raises(MXNetError, match="does not fit"):
        small = nn.HybridSequential()
        small.add(nn.Dense(4, in_units=20), nn.Dense(10, in_units=4))
        small.initialize()
        p = pruning.Pruner("l1", **SETTINGS)
        p.apply(small)
        p.load_state_dict(state)
    with pytest.raises(MXNetError, match="not a Pruner state"):
        pruning.state_from_json({"format": "x"})
    js = pruning.state_to_json(state)
    back = pruning.state_from_json(json.loads(json.dumps(js)))
    assert all(torch.equal(back["masks"][k], state["masks"][k]) for k in state["masks"])
