"""Layers export themselves: each built-in Gluon layer's module registers the layer's MXNet graph
(``symbol_translation``, keyed by the class); ``gluon/symbolic.py`` only looks translations up."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

import mxtorch as mx
from mxtorch.base import MXNetError
from mxtorch.gluon import nn, rnn
from mxtorch.gluon.symbolic import symbol_translation, translation_of


def _nodes(out: Any) -> list[dict[str, Any]]:
    return [n for n in json.loads(out.tojson())["nodes"] if n["op"] != "null"]


@pytest.mark.parametrize(("layer", "op", "attrs"), [
    (lambda: nn.Dense(3, flatten=False, prefix="d_"), "FullyConnected",
     {"num_hidden": "3", "flatten": "False", "no_bias": "False"}),
    (lambda: nn.Conv2DTranspose(2, 3, strides=2, output_padding=1, prefix="c_"), "Deconvolution",
     {"kernel": "(3, 3)", "stride": "(2, 2)", "adj": "(1, 1)", "num_filter": "2"}),
    (lambda: nn.AvgPool2D(2, ceil_mode=True, count_include_pad=False, prefix="p_"), "Pooling",
     {"pool_type": "avg", "pooling_convention": "full", "count_include_pad": "False"}),
    (lambda: nn.GlobalMaxPool1D(prefix="g_"), "Pooling", {"global_pool": "True", "kernel": "(1,)"}),
    (lambda: nn.ELU(0.5, prefix="e_"), "LeakyReLU", {"act_type": "elu", "slope": "0.5"}),
    (lambda: nn.BatchNorm(momentum=0.8, scale=False, prefix="b_"), "BatchNorm",
     {"momentum": "0.8", "fix_gamma": "True"}),
    (lambda: nn.Embedding(7, 2, prefix="m_"), "Embedding", {"input_dim": "7", "output_dim": "2"}),
    (lambda: rnn.GRU(4, num_layers=2, prefix="r_"), "RNN", {"mode": "gru", "num_layers": "2"}),
])
def test_each_layer_builds_its_mxnet_operator(layer: Any, op: str, attrs: dict[str, str]) -> None:
    block = layer()
    assert translation_of(block) is not None
    node = next(n for n in _nodes(block(mx.sym.var("data"))) if n["op"] == op)
    assert {k: node["attrs"][k] for k in attrs} == attrs


def test_a_subclass_inherits_the_translation_unless_it_overrides_forward() -> None:
    class Plain(nn.Dense):
        pass

    class Doubled(nn.Dense):
        def forward(self, x: Any) -> Any:
            return x * 2

    assert translation_of(Plain(2)) is translation_of(nn.Dense(2))
    assert translation_of(Doubled(2)) is None
    assert [n["op"] for n in _nodes(Doubled(2, prefix="x_")(mx.sym.var("data")))] == ["_mul_scalar"]


def test_one_translation_per_class() -> None:
    class Mine(nn.HybridBlock):
        def forward(self, x: Any) -> Any:
            return x

    @symbol_translation(Mine)
    def first(F: Any, b: Mine, x: Any) -> Any:
        return F.relu(x)

    assert translation_of(Mine()) is first
    symbol_translation(Mine)(first)  # registering the same function again is harmless
    with pytest.raises(MXNetError, match="already has a symbol translation"):
        symbol_translation(Mine)(lambda F, b, x: x)


def test_the_lookup_module_reads_no_private_attribute() -> None:
    # the translations moved beside their layers: symbolic.py must not learn the layers' fields again
    path = Path(mx.__file__).parent / "gluon" / "symbolic.py"
    private = [f"{ast.unparse(n)} (line {n.lineno})" for n in ast.walk(ast.parse(path.read_text()))
               if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")]
    assert private == []
