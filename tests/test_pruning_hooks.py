"""A Pruner attached to a Trainer (``pruner.attach(trainer)``) steps through the Trainer's update
hooks, the interface AMP uses: the same masks and weights as calling ``pruner.step()`` after each
``trainer.step``, side by side with AMP's hook, counting skipped updates, and nothing of it in the
Trainer's states file (the Pruner is saved as a Stateful of its own)."""

from __future__ import annotations

import pytest
import torch
from test_amp import backward as scaled_backward  # tests/ is on sys.path
from test_pruning import mlp, train, weights
from test_trainer_states import SkipOddSteps

from mxtorch import amp, gluon
from mxtorch.base import MXNetError
from mxtorch.contrib import pruning

SETTINGS = {"schedule": "polynomial", "sparsity": 0.7, "begin_step": 1, "end_epoch": 2,
            "steps_per_epoch": 4, "frequency": 2, "seed": 3}
STEPS = 10
_g = torch.Generator().manual_seed(5)
X, Y = torch.randn(16, 20, generator=_g), torch.randint(0, 10, (16,), generator=_g)


def make(attach: bool) -> tuple[gluon.Block, gluon.Trainer, pruning.Pruner]:
    net = mlp(0)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    pruner = pruning.Pruner("l1", **SETTINGS)
    pruner.apply(net)
    if attach:
        pruner.attach(trainer)
    return net, trainer, pruner


def test_attached_pruner_steps_with_the_trainer_as_a_manual_one():
    net_a, tr_a, p_a = make(attach=False)
    train(net_a, tr_a, X, Y, STEPS, pruner=p_a)  # pruner.step() after each trainer.step
    net_b, tr_b, p_b = make(attach=True)
    assert [h.name for h in tr_b.update_hooks] == ["pruning"]
    train(net_b, tr_b, X, Y, STEPS)
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
        for _ in range(STEPS):
            scaled_backward(net, trainer, X, Y)
            trainer.step(16)
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


def test_a_skipped_update_is_a_step_of_the_schedule():
    net, trainer, pruner = make(attach=False)
    trainer.add_update_hook(SkipOddSteps())
    pruner.attach(trainer)
    train(net, trainer, X, Y, 6)
    assert trainer.optimizer.num_update == 3  # every other update skipped by the first hook
    assert pruner.num_update == 6  # the pruner's hook was not asked, but its step ran each time
    trainer.remove_update_hook("skip_odd")
    assert [h.name for h in trainer.update_hooks] == ["pruning"]
    with pytest.raises(MXNetError, match="no update hook 'skip_odd'"):
        trainer.remove_update_hook("skip_odd")
