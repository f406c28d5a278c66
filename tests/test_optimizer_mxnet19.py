"""MXNet 1.9's optimizer rules beyond the update formulas: learning rate and scheduler, symbol
multipliers, per-device counts, multi-precision layouts, sparse storage, and the optimizers whose
rule has randomness or memory (SGLD, LBSGD, Nadam, LARS momentum correction)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch import optimizer as opt
from mxtorch.lr_scheduler import FactorScheduler
from mxtorch.nd import sparse


# ---- learning rate and scheduler -------------------------------------------------------------
def test_scheduler_base_lr_rules_without_a_learning_rate():
    sched = FactorScheduler(step=1, base_lr=1024)
    assert opt.Optimizer(lr_scheduler=sched).learning_rate == 1024
    assert opt.SGD(lr_scheduler=FactorScheduler(step=1, base_lr=3.0)).learning_rate == 3.0
    assert opt.Ftrl(lr_scheduler=FactorScheduler(step=1, base_lr=0.5)).learning_rate == 0.5


def test_explicit_learning_rate_overwrites_scheduler_base_lr():
    sched = FactorScheduler(step=1, base_lr=1024)
    o = opt.Optimizer(lr_scheduler=sched, learning_rate=0.3)
    assert sched.base_lr == 0.3 and o.learning_rate == 0.3
    sched.base_lr = 0.4
    assert o.learning_rate == 0.4


def test_default_learning_rates_without_scheduler():
    assert opt.Optimizer().lr == 0.01
    assert opt.Ftrl().lr == 0.1 and opt.Adamax().lr == 0.002 and opt.Nadam().lr == 0.001


# ---- multipliers from a symbol ---------------------------------------------------------------
class _Sym:
    """What Optimizer reads from a Symbol: attr_dict() and list_arguments()."""

    def attr_dict(self):
        return {"fc1_weight": {"__lr_mult__": "0"}, "fc2_weight": {"__wd_mult__": "0.5"},
                "fc2_bias": {"__wd_mult__": "0.5"}, "fc1_bias": {"__lr_mult__": "1.0"}}

    def list_arguments(self):
        return ["data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]


def test_symbol_attributes_become_multipliers():
    idx2name = {0: "fc1_weight", 1: "fc1_bias", 2: "fc2_weight", 3: "fc2_bias"}
    o = opt.SGD(learning_rate=1.0, wd=0.1, sym=_Sym(), param_idx2name=idx2name)
    assert o.lr_mult == {"fc1_weight": 0.0, "fc1_bias": 1.0}
    assert o.wd_mult == {"fc1_bias": 0.0, "fc2_weight": 0.5, "fc2_bias": 0.5}
    assert o._get_lr(0) == 0.0 and o._get_wd(1) == 0.0 and o._get_wd(2) == pytest.approx(0.05)
    o.set_lr_mult({"fc1_weight": 2.0})  # explicit values override the symbol's
    assert o._get_lr(0) == 2.0


def test_sym_must_look_like_a_symbol():
    with pytest.raises(TypeError, match="attr_dict"):
        opt.SGD(sym=object())


def test_lars_decays_only_weights():
    o = opt.LARS(wd=0.1, param_idx2name={0: "bn_gamma", 1: "fc_weight"})
    assert o._get_wd(0) == 0.0 and o._get_wd(1) == pytest.approx(0.1)


# ---- update counts per device ----------------------------------------------------------------
def test_update_counts_are_kept_per_device():
    o = opt.Adam()
    o._update_count(0)
    o._set_current_context(1)
    assert o._index_update_count == {}
    o._update_count(0)
    o._update_count(0)
    assert o._index_update_count == {0: 2} and o.num_update == 2
    o._set_current_context(0)
    assert o._index_update_count == {0: 1}
    assert o._all_index_update_counts == {0: {0: 1}, 1: {0: 2}}


# ---- multi-precision state layouts -----------------------------------------------------------
@pytest.mark.parametrize("name", ["sgd", "nag", "lars"])
def test_sgd_like_multi_precision_state_is_momentum_then_master(name):
    o = opt.create(name, momentum=0.9, multi_precision=True)
    w = torch.ones(3, dtype=torch.float16)
    mom, master = o.create_state_multi_precision(0, w)
    assert mom.dtype == torch.float32 and torch.equal(mom, torch.zeros(3))
    assert master.dtype == torch.float32 and torch.equal(master, torch.ones(3))


@pytest.mark.parametrize("name", ["adam", "ftml", "rmsprop", "nadam", "lbsgd"])
def test_other_multi_precision_states_are_master_then_state(name):
    o = opt.create(name, multi_precision=True)
    master, _ = o.create_state_multi_precision(0, torch.ones(3, dtype=torch.float16))
    assert master.dtype == torch.float32 and torch.equal(master, torch.ones(3))


def test_rmsprop_states_are_tuples():
    w = torch.zeros(2)
    assert len(opt.RMSProp().create_state(0, w)) == 1
    assert len(opt.RMSProp(centered=True).create_state(0, w)) == 3
    with pytest.raises(TypeError, match=r"\(n,\)"):
        opt.RMSProp().update(0, w, torch.ones(2), torch.zeros(2))


# ---- sparse storage --------------------------------------------------------------------------
def _rows(ids, n=5, width=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return sparse.row_sparse_array((torch.rand(len(ids), width, generator=g), ids), shape=(n, width))


def test_dense_fallback_for_optimizers_without_a_sparse_kernel():
    """RMSProp has no sparse kernel in MXNet: absent rows see a zero gradient (and weight decay)."""
    grad = _rows([1, 3])
    w_sparse, w_dense = torch.ones(5, 3), torch.ones(5, 3)
    u1, u2 = opt.get_updater(opt.RMSProp(wd=0.1)), opt.get_updater(opt.RMSProp(wd=0.1))
    u1(0, grad, w_sparse)
    u2(0, grad.to_dense(), w_dense)
    assert torch.equal(w_sparse, w_dense)
    assert not torch.equal(w_sparse[0], torch.ones(3))


@pytest.mark.parametrize("name", ["ftrl", "adagrad"])
def test_ftrl_and_adagrad_are_always_lazy(name):
    w0 = torch.randn(5, 3)
    w = w0.clone()
    opt.get_updater(opt.create(name))(0, _rows([1, 3]), w)
    assert torch.equal(w[[0, 2, 4]], w0[[0, 2, 4]]) and not torch.equal(w[1], w0[1])


def test_row_sparse_weight_is_updated_in_its_layout():
    w = sparse.row_sparse_array((torch.ones(5, 3), list(range(5))), shape=(5, 3))
    o = opt.SGD(learning_rate=0.5, momentum=0.9)
    state = o.create_state_multi_precision(0, w)
    assert state.layout == torch.strided
    o.update_multi_precision(0, w, torch.ones(5, 3), state)
    assert w.layout == torch.sparse_coo
    assert torch.equal(w.to_dense(), torch.full((5, 3), 0.5))


def test_csr_weight_and_gradient_fall_back_to_dense():
    w = sparse.tostype(torch.ones(2, 3), "csr")
    o = opt.SGD(learning_rate=0.25)
    o.update(0, w, sparse.tostype(torch.ones(2, 3), "csr"), None)
    assert w.layout == torch.sparse_csr and torch.equal(w.to_dense(), torch.full((2, 3), 0.75))


# ---- optimizers with randomness or memory ----------------------------------------------------
def test_sgld_adds_seeded_gaussian_noise():
    lr, wd = 0.04, 0.1
    w = torch.ones(4, 3)
    g = torch.full((4, 3), 2.0)
    mx.random.seed(11)
    opt.SGLD(learning_rate=lr, wd=wd, rescale_grad=0.5, clip_gradient=0.8).update(0, w, g, None)
    mx.random.seed(11)
    noise = mx.nd.random.normal(0, math.sqrt(lr), shape=(4, 3), dtype=torch.float32)
    expected = 1.0 - lr / 2 * (0.8 + wd * 1.0) + noise
    torch.testing.assert_close(w, expected)


def test_lbsgd_applies_the_mean_of_batch_scale_gradients_with_warmup():
    o = opt.LBSGD(learning_rate=0.1, batch_scale=2, warmup_epochs=1, updates_per_epoch=4)
    w = torch.zeros(2)
    o.update(0, w, torch.tensor([1.0, 2.0]), None)
    assert torch.equal(w, torch.zeros(2))  # first of two: accumulated only
    o.update(0, w, torch.tensor([3.0, 4.0]), None)
    # mean gradient (2, 3); 2 of 4 warmup updates: mult = 1 + (2 - 1) * 2 / 4
    torch.testing.assert_close(w, -0.1 * 1.5 * torch.tensor([2.0, 3.0]))
    o.update(0, w, torch.tensor([1.0, 1.0]), None)
    o.update(0, w, torch.tensor([1.0, 1.0]), None)  # n = 4: warmup over, mult = batch_scale
    torch.testing.assert_close(w, -0.1 * 1.5 * torch.tensor([2.0, 3.0]) - 0.1 * 2.0 * torch.ones(2))


@pytest.mark.parametrize("strategy,mult", [("power2", 1.0 + 3 * 0.25), ("sqrt", 1.0 + 3 * math.sqrt(0.5))])
def test_lbsgd_warmup_strategies(strategy, mult):
    o = opt.LBSGD(warmup_strategy=strategy, batch_scale=4, warmup_epochs=1, updates_per_epoch=8)
    assert o._warmup_mult(4) == pytest.approx(mult)
    assert o._warmup_mult(8) == 4.0


def test_lbsgd_lars_strategy_scales_by_the_norm_ratio():
    o = opt.LBSGD(learning_rate=1.0, warmup_strategy="lars")
    w = torch.tensor([3.0, 4.0])
    o.update(0, w, torch.tensor([0.0, 1.0]), None)
    torch.testing.assert_close(w, torch.tensor([3.0, 4.0 - 5.0]))  # sqrt(25 / 1) = 5


def test_nadam_keeps_its_momentum_schedule_per_weight():
    """Two weights updated in turn get the same step as each alone (MXNet 1.9 shares one product)."""
    w_a, w_b, w_alone = torch.ones(3), torch.ones(3), torch.ones(3)
    g = torch.tensor([0.5, -1.0, 2.0])
    both, alone = opt.Nadam(learning_rate=0.1), opt.Nadam(learning_rate=0.1)
    sa, sb = both.create_state(0, w_a), both.create_state(1, w_b)
    s_alone = alone.create_state(0, w_alone)
    for _ in range(3):
        both.update(0, w_a, g, sa)
        both.update(1, w_b, g, sb)
        alone.update(0, w_alone, g, s_alone)
    assert torch.equal(w_a, w_alone) and torch.equal(w_b, w_alone)


def test_lars_momentum_correction_follows_the_scheduled_learning_rate():
    sched = FactorScheduler(step=1, factor=0.5, base_lr=1.0)
    o = opt.LARS(momentum=0.9, lr_scheduler=sched, param_idx2name={0: "fc_bias"})  # bias: lars = 1
    w = torch.zeros(2)
    state = o.create_state(0, w)
    o.update(0, w, torch.ones(2), state)  # num_update 1: lr 1.0
    mom1 = state.clone()
    o.update(0, w, torch.ones(2), state)  # lr halves: momentum 0.9 * 0.5 / 1.0
    lr2 = sched(2)
    torch.testing.assert_close(state, 0.9 * (lr2 / sched(1)) * mom1 - lr2 * torch.ones(2))
    off = opt.LARS(momentum=0.9, lr_scheduler=FactorScheduler(step=1, factor=0.5, base_lr=1.0),
                   momentum_correction=False, param_idx2name={0: "fc_bias"})
    w2, st2 = torch.zeros(2), off.create_state(0, torch.zeros(2))
    off.update(0, w2, torch.ones(2), st2)
    off.update(0, w2, torch.ones(2), st2)
    torch.testing.assert_close(st2, 0.9 * mom1 - lr2 * torch.ones(2))


def test_adadelta_ignores_the_learning_rate():
    w1, w2 = torch.ones(3), torch.ones(3)
    g = torch.tensor([1.0, -2.0, 0.5])
    for lr, w in ((0.01, w1), (5.0, w2)):
        o = opt.AdaDelta(learning_rate=lr)
        o.update(0, w, g, o.create_state(0, w))
    assert torch.equal(w1, w2)


def test_dcasgd_first_step_is_sgd_and_remembers_the_weight():
    o = opt.DCASGD(learning_rate=0.1, lamda=1.0)
    w = torch.tensor([1.0, 2.0])
    mom, prev = o.create_state(0, w)
    assert mom is None and torch.equal(prev, w)
    o.update(0, w, torch.tensor([1.0, 1.0]), (mom, prev))
    torch.testing.assert_close(w, torch.tensor([0.9, 1.9]))
    torch.testing.assert_close(prev, torch.tensor([1.0, 2.0]))
    o.update(0, w, torch.tensor([1.0, 1.0]), (mom, prev))  # compensation: g*g*(w - prev) = -0.1
    torch.testing.assert_close(w, torch.tensor([0.9, 1.9]) - 0.1 * (1.0 - 0.1))


def test_ccsgd_is_sgd():
    assert isinstance(opt.create("ccsgd"), opt.SGD) and opt.ccSGD.__name__ == "ccSGD"


def test_every_mxnet_19_optimizer_is_registered():
    names = {"sgd", "ccsgd", "nag", "adam", "adamax", "nadam", "adagrad", "adadelta", "rmsprop", "ftrl",
             "ftml", "lamb", "lars", "lbsgd", "dcasgd", "sgld", "signum", "test"}
    assert names <= set(opt.Optimizer.opt_registry)


def test_states_survive_updater_round_trip_without_pickle():
    u = opt.get_updater(opt.DCASGD(momentum=0.5))
    w = torch.ones(3)
    u(0, torch.ones(3), w)
    blob = u.get_states(dump_optimizer=True)
    u2 = opt.get_updater(opt.DCASGD(momentum=0.5))
    u2.set_states(blob)
    mom, prev = u2.states[0]
    assert torch.equal(prev, torch.ones(3)) and np.allclose(mom.numpy(), -0.01)


@pytest.mark.parametrize("name", sorted(n for n in opt.Optimizer.opt_registry if n != "sgld"))
def test_parameter_server_declaration_rebuilds_every_optimizer(name):
    """Servers build an optimizer from a worker's JSON declaration (no pickle); it must step the same."""
    from mxtorch.kvstore.ps.optimizer_spec import build_optimizer, describe_optimizer

    hp = {"momentum": 0.5} if name in ("sgd", "nag", "lars", "dcasgd", "lbsgd") else {}
    wd = 0.0 if name == "groupadagrad" else 0.01  # MXNet's GroupAdaGrad refuses weight decay
    local = opt.create(name, learning_rate=0.05, wd=wd, rescale_grad=0.5, **hp)
    remote = build_optimizer(describe_optimizer(local))
    torch.manual_seed(0)
    w1 = torch.randn(4, 3)
    w2 = w1.clone()
    u1, u2 = opt.get_updater(local), opt.get_updater(remote)
    for _ in range(3):
        g = torch.randn(4, 3)
        u1(0, g, w1)
        u2(0, g, w2)
    assert torch.equal(w1, w2)
