"""MXNet's symbolic model parallelism: ctx_group attributes + group2ctx(s) place nodes on contexts;
training across cpu(0)/cpu(1) equals training on one context."""

from __future__ import annotations

import numpy as np
import torch

import mxtorch as mx


def _net() -> mx.sym.Symbol:
    data = mx.sym.var("data")
    with mx.AttrScope(ctx_group="dev1"):
        h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=16, name="fc1"), act_type="tanh")
    with mx.AttrScope(ctx_group="dev2"):
        out = mx.sym.FullyConnected(h, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(out, name="softmax")


def _train(group2ctxs: dict | None, arg: dict) -> dict:
    rng = np.random.RandomState(0)
    x, y = rng.randn(40, 6).astype("float32"), rng.randint(0, 3, 40).astype("float32")
    it = mx.io.NDArrayIter(x, y, batch_size=10)
    mod = mx.mod.Module(_net(), context=mx.cpu(), group2ctxs=group2ctxs)
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params(arg_params=arg)
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.3, "momentum": 0.9})
    if group2ctxs is not None:
        steps = mod._exec_group.execs[0]._plan.steps
        placed = {st.name: st.device for st in steps}
        assert placed["fc1"] == mx.cpu(0).torch_device and placed["fc2"] == mx.cpu(1).torch_device
    for _ in range(3):
        it.reset()
        for batch in it:
            mod.forward_backward(batch)
            mod.update()
    return {k: v.clone() for k, v in mod.get_params()[0].items()}


def test_two_groups_on_two_contexts_train_like_one_context() -> None:
    g = torch.Generator().manual_seed(1)
    arg = {"fc1_weight": torch.randn(16, 6, generator=g) * 0.3, "fc1_bias": torch.zeros(16),
           "fc2_weight": torch.randn(3, 16, generator=g) * 0.3, "fc2_bias": torch.zeros(3)}
    split = _train({"dev1": mx.cpu(0), "dev2": mx.cpu(1)}, arg)
    single = _train(None, arg)
    assert split.keys() == single.keys()
    for k in split:
        torch.testing.assert_close(split[k], single[k], rtol=1e-6, atol=1e-7)
    assert not torch.equal(single["fc1_weight"], arg["fc1_weight"])  # it trained


def test_ctx_group_is_an_attribute_of_every_node_made_in_the_scope() -> None:
    attrs = _net().attr_dict()
    assert attrs["fc1"]["__ctx_group__"] == "dev1" and attrs["fc1_weight"]["ctx_group"] == "dev1"
    assert attrs["fc2"]["__ctx_group__"] == "dev2"
    assert "__ctx_group__" not in attrs.get("softmax", {})
