"""mx.mod.BucketingModule: buckets share parameters, optimizer and states (MXNet's semantics)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError


def _sym_gen(seq_len: int):  # type: ignore[no-untyped-def]
    data = mx.sym.var("data")
    emb = mx.sym.Embedding(data, input_dim=10, output_dim=4, name="emb")
    pooled = mx.sym.mean(emb, axis=1)
    fc = mx.sym.FullyConnected(pooled, num_hidden=3, name="fc")
    return mx.sym.SoftmaxOutput(fc, name="softmax"), ("data",), ("softmax_label",)


def _batch(seq_len: int, seed: int) -> mx.io.DataBatch:
    rng = np.random.RandomState(seed)
    x = torch.as_tensor(rng.randint(0, 10, (4, seq_len)).astype("float32"))
    y = torch.as_tensor(rng.randint(0, 3, 4).astype("float32"))
    return mx.io.DataBatch([x], [y], bucket_key=seq_len, provide_data=[mx.io.DataDesc("data", x.shape)],
                           provide_label=[mx.io.DataDesc("softmax_label", y.shape)])


def _plain_module(seq_len: int, arg: dict, aux: dict) -> mx.mod.Module:
    sym, dn, ln = _sym_gen(seq_len)
    mod = mx.mod.Module(sym, dn, ln)
    mod.bind([("data", (4, seq_len))], [("softmax_label", (4,))])
    mod.init_params(arg_params=arg, aux_params=aux)
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.5, "momentum": 0.9})
    return mod


def test_buckets_share_parameters_and_optimizer_states() -> None:
    mod = mx.mod.BucketingModule(_sym_gen, default_bucket_key=6)
    mod.bind([("data", (4, 6))], [("softmax_label", (4,))])
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.5, "momentum": 0.9})
    arg0, aux0 = (dict((k, v.clone()) for k, v in d.items()) for d in mod.get_params())
    # the same three steps on one Module per key, in turn, carrying parameters and momentum across
    # keys is what a single shared model does; here a single Module bound per step with the
    # bucketing module's current weights must give the same outputs
    batches = [_batch(6, 0), _batch(3, 1), _batch(6, 2), _batch(3, 3)]
    ref_arg = {k: v.clone() for k, v in arg0.items()}
    ref_mom: dict[str, torch.Tensor] = {k: torch.zeros_like(v) for k, v in ref_arg.items()}
    for b in batches:
        mod.forward(b, is_train=True)
        mod.backward()
        mod.update()
        # reference: hand-written SGD with momentum on the same graph at this key
        ref = _plain_module(b.bucket_key, ref_arg, aux0)
        ref.forward(b, is_train=True)
        ref.backward()
        ex = ref._exec_group.execs[0]
        for k in ref_arg:
            g = ex.grad_dict[k] / 4.0
            ref_mom[k] = 0.9 * ref_mom[k] - 0.5 * g
            ref_arg[k] = ref_arg[k] + ref_mom[k]
    assert set(mod._buckets) == {6, 3}
    got, _ = mod.get_params()
    for k in ref_arg:
        torch.testing.assert_close(got[k], ref_arg[k], rtol=1e-5, atol=1e-6)
    # every bucket's executor holds the same (shared) arrays
    w6 = mod._buckets[6]._exec_group.execs[0].arg_dict["fc_weight"]
    w3 = mod._buckets[3]._exec_group.execs[0].arg_dict["fc_weight"]
    assert w6.data_ptr() == w3.data_ptr()


def test_bucketing_module_fit_and_score() -> None:
    mod = mx.mod.BucketingModule(_sym_gen, default_bucket_key=6)

    class Iter(mx.io.DataIter):
        def __init__(self) -> None:
            super().__init__(4)
            self.provide_data = [mx.io.DataDesc("data", (4, 6))]
            self.provide_label = [mx.io.DataDesc("softmax_label", (4,))]
            self.i = 0

        def reset(self) -> None:
            self.i = 0

        def next(self) -> mx.io.DataBatch:
            if self.i >= 4:
                raise StopIteration
            self.i += 1
            return _batch(6 if self.i % 2 else 3, self.i)

    it = Iter()
    mod.fit(it, num_epoch=3, optimizer_params={"learning_rate": 0.1})
    assert set(mod._buckets) == {6, 3}
    res = dict(mod.score(it, "acc"))
    assert 0.0 <= res["accuracy"] <= 1.0


def test_bucketing_module_needs_a_default_key() -> None:
    with pytest.raises(MXNetError, match="default_bucket_key"):
        mx.mod.BucketingModule(_sym_gen)


def test_set_params_replaces_all_or_only_the_given_ones_in_every_bucket() -> None:
    mod = mx.mod.BucketingModule(_sym_gen, default_bucket_key=6)
    mod.bind([("data", (4, 6))], [("softmax_label", (4,))])
    mod.init_params(mx.init.Xavier())
    arg, aux = mod.get_params()
    new = {k: torch.full_like(v, 0.5) for k, v in arg.items()}
    mod.set_params(new, aux)
    mod.switch_bucket(3, [("data", (4, 3))], [("softmax_label", (4,))])  # another bucket shares them
    for k, v in mod.get_params()[0].items():
        torch.testing.assert_close(v, new[k])
    # allow_missing: only fc_bias changes, the rest stay
    mod.set_params({"fc_bias": torch.full((3,), 7.0)}, {}, allow_missing=True)
    got = mod.get_params()[0]
    torch.testing.assert_close(got["fc_bias"], torch.full((3,), 7.0))
    torch.testing.assert_close(got["fc_weight"], new["fc_weight"])
    with pytest.warns(UserWarning, match="force_init=False"):
        mod.set_params({"fc_bias": torch.zeros(3)}, {}, allow_missing=True, force_init=False)
    torch.testing.assert_close(mod.get_params()[0]["fc_bias"], torch.full((3,), 7.0))


def test_load_gives_a_module_bound_with_the_checkpoints_parameters(tmp_path) -> None:
    mod = mx.mod.BucketingModule(_sym_gen, default_bucket_key=6)
    mod.bind([("data", (4, 6))], [("softmax_label", (4,))])
    mod.init_params(mx.init.Uniform(0.5))
    prefix = str(tmp_path / "bucket")
    mod.save_checkpoint(prefix, 3)
    with pytest.raises(MXNetError, match="sym_gen and default_bucket_key"):
        mx.mod.BucketingModule.load(prefix, 3)
    again = mx.mod.BucketingModule.load(prefix, 3, sym_gen=_sym_gen, default_bucket_key=6)
    assert again.params_initialized and not again.binded
    again.bind([("data", (4, 6))], [("softmax_label", (4,))])
    want, got = mod.get_params()[0], again.get_params()[0]
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_array_equal(got[k].asnumpy(), want[k].asnumpy())
    batch = _batch(3, seed=1)  # another bucket shares the loaded parameters
    mod.forward(batch, is_train=False)
    again.forward(batch, is_train=False)
    np.testing.assert_allclose(again.get_outputs()[0].asnumpy(), mod.get_outputs()[0].asnumpy(), rtol=1e-6)
