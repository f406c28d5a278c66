"""Gluon names equal MXNet 1.9.1's: layer prefixes (aliases) and every model zoo network's
parameter names, shapes and order, and the node names of its symbolic graph.

The reference is tests/data/model_zoo_names/fixture.json, written by real MXNet 1.9.1 with
tests/data/model_zoo_names/make_fixture.py (the layer table below mirrors its LAYERS).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

import mxtorch as mx
from mxtorch.gluon import Block, nn, rnn
from mxtorch.gluon.model_zoo import vision

FIXTURE_PATH = os.path.join(os.path.dirname(__file__), "data", "model_zoo_names", "fixture.json")
with open(FIXTURE_PATH) as _f:
    FIXTURE: dict[str, Any] = json.load(_f)

# fixture entry -> (our module, class name, positional args); MXNet's contrib classes live in nn / rnn
LAYERS: dict[str, tuple[Any, str, tuple[Any, ...]]] = {
    "Activation": (nn, "Activation", ("relu",)),
    "Activation:tanh": (nn, "Activation", ("tanh",)),
    "Activation:softrelu": (nn, "Activation", ("softrelu",)),
    "Dense": (nn, "Dense", (2,)),
    "Dropout": (nn, "Dropout", (0.5,)),
    "Flatten": (nn, "Flatten", ()),
    "Embedding": (nn, "Embedding", (10, 2)),
    "BatchNorm": (nn, "BatchNorm", ()),
    "BatchNormReLU": (nn, "BatchNormReLU", ()),
    "InstanceNorm": (nn, "InstanceNorm", ()),
    "LayerNorm": (nn, "LayerNorm", ()),
    "GroupNorm": (nn, "GroupNorm", ()),
    "LeakyReLU": (nn, "LeakyReLU", (0.1,)),
    "PReLU": (nn, "PReLU", ()),
    "ELU": (nn, "ELU", ()),
    "SELU": (nn, "SELU", ()),
    "GELU": (nn, "GELU", ()),
    "Swish": (nn, "Swish", ()),
    "Lambda": (nn, "Lambda", ("relu",)),
    "HybridLambda": (nn, "HybridLambda", ("relu",)),
    "Sequential": (nn, "Sequential", ()),
    "HybridSequential": (nn, "HybridSequential", ()),
    "ReflectionPad2D": (nn, "ReflectionPad2D", ()),
    "Identity": (nn, "Identity", ()),
    "SyncBatchNorm": (nn, "SyncBatchNorm", ()),
    "PixelShuffle1D": (nn, "PixelShuffle1D", (2,)),
    "PixelShuffle2D": (nn, "PixelShuffle2D", (2,)),
    "PixelShuffle3D": (nn, "PixelShuffle3D", (2,)),
    "RNN": (rnn, "RNN", (2,)),
    "LSTM": (rnn, "LSTM", (2,)),
    "GRU": (rnn, "GRU", (2,)),
    "RNNCell": (rnn, "RNNCell", (2,)),
    "LSTMCell": (rnn, "LSTMCell", (2,)),
    "GRUCell": (rnn, "GRUCell", (2,)),
    "LSTMPCell": (rnn, "LSTMPCell", (2, 1)),
    "SequentialRNNCell": (rnn, "SequentialRNNCell", ()),
    "HybridSequentialRNNCell": (rnn, "HybridSequentialRNNCell", ()),
    "DropoutCell": (rnn, "DropoutCell", (0.5,)),
}
for _nd in (1, 2, 3):
    for _kind in ("Conv{}D", "Conv{}DTranspose"):
        LAYERS[_kind.format(_nd)] = (nn, _kind.format(_nd), (2, 3))
    for _kind in ("MaxPool{}D", "AvgPool{}D", "GlobalMaxPool{}D", "GlobalAvgPool{}D"):
        LAYERS[_kind.format(_nd)] = (nn, _kind.format(_nd), ())

# cells wrapping others: (the wrapped cell class, how many), made first in the same scope
WRAPPERS: dict[str, tuple[str, int]] = {"ZoneoutCell": ("LSTMCell", 1), "ResidualCell": ("GRUCell", 1),
                                        "BidirectionalCell": ("LSTMCell", 2)}

# public classes with no prefix test: bases never built directly, and SiLU (not in MXNet 1.9.1)
NOT_LAYERS = {"Block", "HybridBlock", "SymbolBlock", "RecurrentCell", "HybridRecurrentCell", "ModifierCell",
              "SiLU"}


def in_fresh_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` in a new thread, where automatic prefixes count from 0 (as in the fixture)."""
    box: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as e:  # re-raised in the test's thread
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if errors:
        raise errors[0]
    return box[0]


def _shape_text(shape: Any) -> str:
    return "x".join(str(int(d)) for d in shape)


# ---- layer aliases -----------------------------------------------------------------------------
@pytest.mark.parametrize("entry", sorted(LAYERS))
def test_layer_prefix_matches_mxnet(entry: str) -> None:
    mod, cls, args = LAYERS[entry]
    parent = nn.HybridSequential(prefix="p_")
    with parent.name_scope():
        layer = getattr(mod, cls)(*args)
    assert layer.prefix == FIXTURE["layer_prefixes"][entry]


@pytest.mark.parametrize("entry", sorted(WRAPPERS))
def test_wrapper_cell_prefix_matches_mxnet(entry: str) -> None:
    inner, n = WRAPPERS[entry]
    parent = nn.HybridSequential(prefix="p_")
    with parent.name_scope():
        cells = [getattr(rnn, inner)(2) for _ in range(n)]
        cell = getattr(rnn, entry)(*cells)
    assert cell.prefix == FIXTURE["layer_prefixes"][entry]


def test_every_layer_class_is_checked() -> None:
    ours = {name for mod in (nn, rnn) for name, obj in vars(mod).items()
            if inspect.isclass(obj) and issubclass(obj, Block) and not name.startswith("_")}
    checked = {LAYERS[e][1] for e in LAYERS} | set(WRAPPERS)
    assert ours - NOT_LAYERS - checked == set()
    assert set(FIXTURE["layer_prefixes"]) == set(LAYERS) | set(WRAPPERS)


def test_layer_aliases_count_separately_and_ignore_the_class() -> None:
    parent = nn.HybridSequential(prefix="net_")
    with parent.name_scope():
        layers = [nn.Conv2D(2, 3), nn.Conv1DTranspose(2, 3), nn.MaxPool2D(), nn.GlobalAvgPool2D(),
                  nn.Activation("relu"), nn.Activation("tanh"), nn.Activation("relu"), nn.Dense(2)]
    assert [b.prefix for b in layers] == ["net_conv0_", "net_conv1_", "net_pool0_", "net_pool1_",
                                          "net_relu0_", "net_tanh0_", "net_relu1_", "net_dense0_"]
    assert list(parent.collect_params()) == []  # made in the scope, not added
    assert [p.name for p in layers[0].collect_params().values()] == ["net_conv0_weight", "net_conv0_bias"]
    assert list(layers[1].collect_params()) == ["net_conv1_weight", "net_conv1_bias"]


def test_activation_with_unknown_type_is_still_refused() -> None:
    with pytest.raises(ValueError, match="unknown activation act_type 42"):
        nn.Activation(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown activation act_type 'nope'"):
        nn.Activation("nope")


# ---- model zoo parameters ----------------------------------------------------------------------
def _params(name: str) -> list[tuple[str, str]]:
    net = in_fresh_thread(lambda: vision.get_model(name))
    return [(k, _shape_text(p.shape)) for k, p in net.collect_params().items()]


@pytest.mark.parametrize("name", sorted(FIXTURE["params"]))
def test_model_parameters_match_mxnet(name: str) -> None:
    ref = FIXTURE["params"][name]
    ours = _params(name)
    if "params" in ref:  # names (after the network's prefix) and shapes in full
        assert [f"{k} {s}" for k, s in ours] == [ref["prefix"] + e for e in ref["params"]]
    else:  # deep networks: the count, the prefix, and the digest of all 'name shape' lines
        assert len(ours) == ref["count"]
        assert all(k.startswith(ref["prefix"]) for k, _ in ours)
    text = "\n".join(f"{k} {s}" for k, s in ours)
    assert hashlib.sha256(text.encode()).hexdigest() == ref["sha256"]


@pytest.mark.parametrize("name", sorted(FIXTURE["structure"]))
def test_model_attribute_paths_match_mxnet(name: str) -> None:
    """The keys of save_parameters files ('features.0.weight') are MXNet's, so files written by
    either framework load into the other's model zoo network."""
    keys = list(vision.get_model(name)._collect_params_with_prefix().keys())
    ref = FIXTURE["structure"][name]
    assert len(keys) == ref["count"]
    assert hashlib.sha256("\n".join(keys).encode()).hexdigest() == ref["sha256"]


def test_densenet_and_inception_attribute_paths_spelled_out() -> None:
    dense = list(vision.densenet121()._collect_params_with_prefix())
    assert dense[5:7] == ["features.4.0.1.0.gamma", "features.4.0.1.0.beta"]  # block 1, layer 0, body
    inception = list(vision.inception_v3()._collect_params_with_prefix())
    assert "features.16.1.0.0.0.weight" in inception  # E1, 3x3 branch, its 1x1 stem's conv
    assert "features.16.1.1.0.0.0.weight" in inception  # E1, 3x3 branch, the (1, 3) split


def test_every_mxnet_network_is_in_the_fixture() -> None:
    ours_only = {"mlp", "lenet", "lenet_bn", "cifar_resnet20_v1", "cifar_resnet56_v1", "cifar_resnet110_v1",
                 "cifar_resnet20_v2", "cifar_resnet56_v2", "cifar_resnet110_v2"}
    assert set(vision.list_models()) - ours_only == set(FIXTURE["params"]) == set(FIXTURE["structure"])


def test_resnet18_v1_names_spelled_out() -> None:
    names = [k for k, _ in _params("resnet18_v1")]
    assert names[:2] == ["resnetv10_conv0_weight", "resnetv10_batchnorm0_gamma"]
    assert "resnetv10_stage1_conv0_weight" in names
    assert "resnetv10_stage2_conv2_weight" in names  # stage 2's projection shortcut
    assert names[-2:] == ["resnetv10_dense0_weight", "resnetv10_dense0_bias"]


def test_networks_without_mxnet_counterpart_follow_the_same_scheme() -> None:
    assert [k for k, _ in _params("mlp")] == [
        f"mlp0_dense{i}_{p}" for i in range(3) for p in ("weight", "bias")]
    assert [k for k, _ in _params("lenet")] == [
        f"lenet0_{layer}_{p}" for layer in ("conv0", "conv1", "dense0", "dense1") for p in ("weight", "bias")]
    cifar = [k for k, _ in _params("cifar_resnet20_v1")]
    assert cifar[0] == "cifarresnetv10_conv0_weight"
    assert [s for s in (1, 2, 3) if f"cifarresnetv10_stage{s}_conv0_weight" in cifar] == [1, 2, 3]
    assert "cifarresnetv10_stage2_conv6_weight" in cifar  # 3 units x 2 convs, then the shortcut


def test_second_network_in_a_thread_counts_on() -> None:
    names = in_fresh_thread(lambda: [vision.resnet18_v1().prefix, vision.resnet18_v1().prefix,
                                     vision.resnet18_v2().prefix])
    assert names == ["resnetv10_", "resnetv11_", "resnetv20_"]


# ---- model zoo graphs --------------------------------------------------------------------------
def _internals(name: str) -> list[str]:
    def build() -> list[str]:
        net = vision.get_model(name)
        return list(net(mx.sym.var("data")).get_internals().list_outputs())

    return in_fresh_thread(build)  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", sorted(FIXTURE["internals"]))
def test_model_graph_node_names_match_mxnet(name: str) -> None:
    ref = FIXTURE["internals"][name]
    expected = [o[1:] if o.startswith("=") else ref["prefix"] + o for o in ref["outputs"]]
    assert _internals(name) == expected


def test_resnet_graph_has_mxnet_test_nodes() -> None:
    outs = _internals("resnet18_v1")
    # MXNet's test_symbol_block_save_load cuts the graph here
    assert "resnetv10_stage1_activation0_output" in outs
    plus = outs.index("resnetv10_stage1__plus0_output")
    assert outs[plus + 1] == "resnetv10_stage1_activation0_output"
    assert outs[-1] == "resnetv10_dense0_fwd_output"


def test_mobilenet_v2_graph_uses_clip_and_elemwise_add() -> None:
    outs = _internals("mobilenetv2_0.25")
    assert "mobilenetv20_features_linearbottleneck0_relu60_relu6_output" in outs
    assert "mobilenetv20_features_linearbottleneck2_elemwise_add0_output" in outs
    assert outs[-3:] == ["mobilenetv20_output_pred_weight", "mobilenetv20_output_pred_fwd_output",
                         "mobilenetv20_output_flatten0_flatten0_output"]
