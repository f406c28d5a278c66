"""Block.save / Block.load: MXNet 1.9's <prefix>-model.json + <prefix>-model.params pair."""

import json

import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError
from mxtorch.gluon import nn


class _NamedChain(mx.gluon.nn.Block):
    """Keys its children by their names, so a second build keys them differently."""

    def __init__(self, *blocks: torch.nn.Module) -> None:
        super().__init__()
        for b in blocks:
            self.register_child(b, b.name + "_at" + str(len(self._children)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self._children.values():
            x = b(x)
        return x


def _build() -> _NamedChain:
    return _NamedChain(_NamedChain(nn.Dense(3, in_units=4)), nn.Dense(2, in_units=3))


def test_save_then_load_into_a_block_built_the_same_way(tmp_path) -> None:
    net1 = _build()
    net1.initialize()
    net1.hybridize()
    x = mx.nd.ones((2, 4))
    out1 = net1(x)
    net1.save(str(tmp_path / "m"))
    saved = json.loads((tmp_path / "m-model.json").read_text())
    top = saved["_namedchain0"]
    assert top["orig_name"] == net1.name and set(top["children"].values()) == set(net1._children)

    net2 = _build()  # new names, so new child keys: load puts the saved keys back
    assert list(net2._children) != list(net1._children)
    net2.load(str(tmp_path / "m"))
    assert list(net2._children) == list(net1._children)
    torch.testing.assert_close(net2(x), out1)
    dense = list(net2._children.values())[1]
    assert dense._hybrid_active  # hybridization comes back where it was on


def test_load_reads_mxnet_layout_and_turns_hybridization_on(tmp_path) -> None:
    net = nn.HybridSequential()
    net.add(nn.Dense(2, in_units=2))
    net.initialize()
    net.save_parameters(str(tmp_path / "mx-model.params"))
    # MXNet's file for a hybridized net (its traced graph is not needed here)
    model = {"hybridsequential0": {"orig_name": "hybridsequential0", "hybridized": True, "symbol": "{}",
                                   "inputs": ["{}"], "in_format": [0], "out_format": [0],
                                   "children": {"dense0": "0"},
                                   "dense1": {"orig_name": "dense0", "hybridized": False, "children": {}}}}
    (tmp_path / "mx-model.json").write_text(json.dumps(model))
    fresh = nn.HybridSequential()
    fresh.add(nn.Dense(2, in_units=2))
    fresh.load(str(tmp_path / "mx"))
    assert fresh._hybrid_active
    torch.testing.assert_close(fresh[0].weight.data(), net[0].weight.data())


def test_a_differently_built_block_or_a_bad_file_is_refused(tmp_path) -> None:
    net = _build()
    net.initialize()
    net.save(str(tmp_path / "m"))
    other = nn.HybridSequential()
    other.add(nn.Dense(2, in_units=4))
    with pytest.raises(MXNetError, match="m-model.json.*no entry 'hybridsequential0'"):
        other.load(str(tmp_path / "m"))
    (tmp_path / "bad-model.json").write_bytes(b"[" * 4096)
    with pytest.raises(MXNetError, match="bad-model.json"):
        net.load(str(tmp_path / "bad"))
