"""A Pruner attached to a Trainer (``pruner.attach(trainer)``) steps through the Trainer's update
hooks, the interface AMP uses: the same masks and weights as calling ``pruner.step()`` after each
``trainer.step``, side by side with AMP's hook, counting skipped updates, and nothing of it in the
Trainer's states file (the Pruner is saved as a Stateful of its own)."""

from __future__ import annotations

import pytest
import torch
from test_pruning import mlp, weights  # tests/ is on sys.path

from mxtorch import amp, autograd, gluon
from mxtorch.base import MXNetError
from mxtorch.contrib import pruning

SETTINGS = {"schedule": "polynomial", "sparsity": 0.7, "begin_step": 1, "end_epoch": 2,
            "steps_per_epoch": 4, "frequency": 2, "seed": 3}
STEPS = 10


def make(attach: bool) -> tuple[gluon.Block, gluon.Trainer, pruning.Pruner]:
    net = mlp(0)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    pruner = pruning.Pruner("l1", **SETTINGS)
    pruner.apply(net)
    if attach:
        pruner.attach(trainer)
    return net, trainer, pruner


def train(net, trainer, pruner, steps: int, manual: bool, scaled: bool = False) -> None:
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for step in range(steps):
        g = torch.Generator().manual_seed(step)
        x, y = torch.randn(16, 20, generator=g), torch.randint(0, 10, (16,), generator=g)
        with autograd.record():
            loss = loss_fn(net(x), y)
        if scaled:
            with amp.scale_loss(loss, trainer) as s:
                autograd.backward(s)
        else:
            loss.backward()
        trainer.step(16)
        if manual:
            pruner.step()


def test_attached_pruner_steps_with_the_trainer_as_a_manual_one():
    net_a, tr_a, p_a = make(attach=False)
    train(net_a, tr_a, p_a, STEPS, manual=True)
    net_b, tr_b, p_b = make(attach=True)
    assert [h.name for h in tr_b.update_hooks] == ["pruning"]
    train(net_b, tr_b, p_b, STEPS, manual=False)
    assert p_b.num_update == p_a.num_update == STEPS
    assert all(torch.equal(p_a.masks[k], p_b.masks[k]) for k in p_a.masks)
    wa, wb = weights(net_a), weights(net_b)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert pruning.sparsity(net_b)["total"] > 0.5
    # attached, the Trainer steps it: a second count by hand would shift the schedule
    with pytest.raises(MXNetError, match="attached to a Trainer"):
        p_b.step()
    with pytest.raises(MXNetError, match="already has the update hook 'pruning'"):
        tr_b.add_update_hook(pruning.PruningUpdateHook(p_b))
    p_b.detach()
    assert tr_b.update_hooks == ()
    p_b.step()
    assert p_b.num_update == STEPS + 1


def test_pruner_beside_amp_on_one_trainer(tmp_path):
    amp.init("bfloat16")
    try:
        net, trainer, pruner = make(attach=False)
        amp.init_trainer(trainer)
        pruner.attach(trainer)  # after AMP's: both hooks run, AMP's still found by name
        assert [h.name for h in trainer.update_hooks] == ["amp", "pruning"]
        assert trainer._amp_loss_scaler is amp.amp_hook_of(trainer).scaler
        train(net, trainer, pruner, STEPS, manual=False, scaled=True)
        assert pruner.num_update == STEPS and trainer.optimizer.num_update == STEPS
        assert pruning.sparsity(net)["total"] > 0.5
        masks = pruner.masks
        params = net._collect_params_with_prefix()
        assert all(bool((params[k].data()[~m] == 0).all()) for k, m in masks.items())
        # the Trainer's states hold AMP's section and none for the pruning hook (it saves nothing)
        f = str(tmp_path / "t.states")
        trainer.save_states(f)
        plain = gluon.Trainer(mlp(1).collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
        amp.init_trainer(plain)
        plain.load_states(f)  # a Trainer without a Pruner takes the file
    finally:
        amp.reset()


class SkipEveryOther:
    name = "skip_every_other"

    def __init__(self):
        self.calls = 0

    def before_reduce(self, trainer, grads):
        return True

    def before_update(self, trainer, grads):
        self.calls += 1
        return None if self.calls % 2 == 0 else 1.0

    def state_dict(self):
        return {"calls": self.calls}

    def load_state_dict(self, state):
        self.calls = int(state["calls"])


def test_a_skipped_update_is_a_step_of_the_schedule():
    net, trainer, pruner = make(attach=False)
    trainer.add_update_hook(SkipEveryOther())
    pruner.attach(trainer)
    train(net, trainer, pruner, 6, manual=False)
    assert trainer.optimizer.num_update == 3  # every other update skipped by the first hook
    assert pruner.num_update == 6  # the pruner's hook was not asked, but its step ran each time
    trainer.remove_update_hook("skip_every_other")
    assert [h.name for h in trainer.update_hooks] == ["pruning"]
    with pytest.raises(MXNetError, match="no update hook 'skip_every_other'"):
        trainer.remove_update_hook("skip_every_other")
