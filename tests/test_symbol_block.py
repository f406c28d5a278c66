"""Gluon and symbols: blocks called with symbols, HybridBlock.export, SymbolBlock and
SymbolBlock.imports (with files real MXNet 1.9.1 wrote, tests/data/symbol_block)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch import gluon
from mxtorch.base import MXNetError
from mxtorch.gluon import nn

DATA = Path(__file__).parent / "data" / "symbol_block"


def _net() -> nn.HybridSequential:
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(
            nn.Conv2D(4, 3, padding=1, activation="relu"),
            nn.BatchNorm(),
            nn.MaxPool2D(2),
            nn.Flatten(),
            nn.Dense(8, activation="tanh"),
            nn.Dropout(0.5),
            nn.Dense(3),
        )
    net.initialize(mx.init.Xavier())
    return net


def _x(seed: int = 0) -> torch.Tensor:
    return torch.as_tensor(np.random.RandomState(seed).randn(2, 3, 8, 8).astype("float32"))


def test_block_called_with_a_symbol_gives_mxnet_names_and_shapes() -> None:
    net = nn.HybridSequential(prefix="")
    with net.name_scope():
        net.add(nn.Conv2D(10, (3, 3)), nn.Dense(50, activation="relu"))
    net.initialize()
    net(torch.ones(1, 1, 50, 50))
    out = net(mx.sym.var("data"))
    args = out.list_arguments()
    assert args[0] == "data"
    # every parameter of the block is an argument of the graph, under its own name
    assert sorted(args[1:]) == sorted(net.collect_params().keys())
    arg_shapes, out_shapes, _ = out.infer_shape(data=(1, 1, 50, 50))
    assert out_shapes == [(1, 50)]
    assert dict(zip(args, arg_shapes, strict=True))[args[3]] == (50, 10 * 48 * 48)
    # the dense layer's activation is its own node after the FullyConnected node
    ops = [n["op"] for n in json.loads(out.tojson())["nodes"] if n["op"] != "null"]
    assert ops == ["Convolution", "FullyConnected", "Activation"]


def test_export_then_imports_computes_what_the_block_computes(tmp_path: Path) -> None:
    net = _net()
    x = _x()
    with mx.autograd.record():  # training: BatchNorm's moving statistics move
        net(x)
    want = net(x)
    sym_file, params_file = net.export(str(tmp_path / "net"), epoch=3)
    assert sym_file.endswith("net-symbol.json") and params_file.endswith("net-0003.params")
    with open(params_file, "rb") as f:  # MXNet's binary list magic, not safetensors
        assert int.from_bytes(f.read(8), "little") == 0x112
    loaded = mx.nd.load(params_file)
    names = set(net.collect_params().keys())
    assert {k.split(":", 1)[1] for k in loaded} == names
    assert {k.split(":", 1)[0] for k in loaded if "running" in k} == {"aux"}
    back = gluon.SymbolBlock.imports(sym_file, ["data"], params_file)
    got = back(x)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def test_imports_reads_a_network_mxnet_exported() -> None:
    io = np.load(DATA / "io.npz")
    block = gluon.SymbolBlock.imports(
        str(DATA / "mxnet_net-symbol.json"), "data", str(DATA / "mxnet_net-0000.params")
    )
    got = block(torch.as_tensor(io["x"]))
    np.testing.assert_allclose(got.detach().numpy(), io["y"], rtol=1e-5, atol=1e-6)


def test_symbol_block_trains_like_the_block_it_came_from(tmp_path: Path) -> None:
    net = _net()
    x, label = _x(1), torch.tensor([0.0, 2.0])
    net(x)
    net.export(str(tmp_path / "m"))
    twin = gluon.SymbolBlock.imports(
        str(tmp_path / "m-symbol.json"), ["data"], str(tmp_path / "m-0000.params")
    )
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    grads = []
    for block in (net, twin):
        mx.random.seed(5)  # the same dropout mask
        with mx.autograd.record():
            out = loss(block(x), label)
        out.backward()
        grads.append(
            {
                k.split("_", 1)[1]: p.grad().clone()
                for k, p in block.collect_params().items()
                if p.grad_req != "null"
            }
        )
    assert grads[0].keys() == grads[1].keys()
    for k in grads[0]:
        torch.testing.assert_close(grads[1][k], grads[0][k], rtol=1e-5, atol=1e-6)
    # and a Trainer updates it
    trainer = gluon.Trainer(twin.collect_params(), "sgd", {"learning_rate": 0.5})
    before = loss(twin(x), label).mean().item()
    for _ in range(5):
        with mx.autograd.record():
            out = loss(twin(x), label)
        out.backward()
        trainer.step(2)
    assert loss(twin(x), label).mean().item() < before


def test_symbol_block_on_internals_shares_parameters_and_infers_shapes() -> None:
    net = nn.HybridSequential(prefix="m_")
    with net.name_scope():
        net.add(nn.Dense(5, activation="relu"), nn.Dense(2))
    net.initialize()
    internals = net(mx.sym.var("data")).get_internals()
    assert "m_dense0_relu_fwd_output" in internals.list_outputs()  # MXNet's name of Dense's activation
    feat = gluon.SymbolBlock(
        internals["m_dense0_relu_fwd_output"], mx.sym.var("data"), params=net.collect_params()
    )
    x = _x(2).reshape(2, -1)[:, :7]
    full = net(x)  # completes deferred shapes
    hidden = feat(x)
    assert hidden.shape == (2, 5)
    torch.testing.assert_close(net[1](hidden), full)
    assert feat.collect_params()["m_dense0_weight"] is net.collect_params()["m_dense0_weight"]


def test_legacy_params_load_into_a_symbol_block(tmp_path: Path) -> None:
    net = nn.HybridSequential(prefix="")
    with net.name_scope():
        net.add(nn.Conv2D(10, (3, 3)), nn.Dense(50))
    net.initialize()
    x = torch.ones(1, 1, 12, 12)
    want = net(x)
    net(mx.sym.var("data")).save(str(tmp_path / "t.json"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        net.save_params(str(tmp_path / "t.params"))
        model = gluon.nn.SymbolBlock(
            outputs=mx.sym.load_json((tmp_path / "t.json").read_text()), inputs=mx.sym.var("data")
        )
        model.load_params(str(tmp_path / "t.params"), ctx=mx.cpu())
    torch.testing.assert_close(model(x), want)


def test_hybrid_forward_blocks_get_F_sym_and_their_parameters_as_variables() -> None:
    class Scale(gluon.HybridBlock):
        def __init__(self) -> None:
            super().__init__(prefix="scale_")
            self.w = self.params.get("w", shape=(3,), init=mx.init.One())

        def hybrid_forward(self, F, x, w):  # noqa: N803 - MXNet's F
            return F.broadcast_mul(x, w) + 1

    blk = Scale()
    blk.initialize()
    out = blk(mx.sym.var("data"))
    assert out.list_arguments() == ["data", "scale_w"]
    ex = out.bind(mx.cpu(), {"data": torch.full((2, 3), 2.0), "scale_w": torch.tensor([1.0, 2.0, 3.0])})
    torch.testing.assert_close(ex.forward()[0], torch.tensor([[3.0, 5.0, 7.0], [3.0, 5.0, 7.0]]))


def test_torch_functions_on_symbols_map_to_mxnet_operators() -> None:
    import torch.nn.functional as F

    x = mx.sym.var("x")
    y = F.relu(x) + torch.sigmoid(x)
    z = torch.cat([y, F.softmax(x, dim=1)], dim=1)
    ops = sorted(n["op"] for n in json.loads(z.tojson())["nodes"] if n["op"] != "null")
    assert ops == ["Activation", "Activation", "Concat", "elemwise_add", "softmax"]
    v = torch.tensor([[-1.0, 2.0]])
    got = z.eval(x=v)[0]
    want = torch.cat([torch.relu(v) + torch.sigmoid(v), torch.softmax(v, dim=1)], dim=1)
    torch.testing.assert_close(got, want)
    with pytest.raises(MXNetError, match="cannot take a Symbol"):
        torch.fft.fft(x)


def test_gluon_losses_on_symbols_equal_the_losses_on_tensors() -> None:
    pred, label = torch.tensor([[0.5, -1.0], [2.0, 0.0]]), torch.tensor([[1.0, 1.0], [0.0, 3.0]])
    for loss in (
        gluon.loss.L1Loss(),
        gluon.loss.L2Loss(),
        gluon.loss.SoftmaxCrossEntropyLoss(sparse_label=False),
    ):
        graph = loss(mx.sym.var("pred"), mx.sym.var("label"))
        got = graph.eval(pred=pred, label=label)[0]
        torch.testing.assert_close(got, loss(pred, label), msg=type(loss).__name__)


def test_symbol_block_errors_name_the_problem() -> None:
    x = mx.sym.var("x")
    with pytest.raises(TypeError, match="variables"):
        gluon.SymbolBlock(x * 2, x * 3)
    with pytest.raises(MXNetError, match="not arguments"):
        gluon.SymbolBlock(x * 2, mx.sym.var("other"))
    blk = gluon.SymbolBlock(x * 2, x)
    with pytest.raises(MXNetError, match="takes 1 inputs"):
        blk(torch.ones(1), torch.ones(1))


def test_symbol_block_trains_on_two_contexts_through_a_store_like_on_one(tmp_path: Path) -> None:
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(6, activation="relu"), nn.Dense(3))
    net.initialize(mx.init.Xavier())
    x, label = _x(3).reshape(4, -1)[:, :5], torch.tensor([0.0, 1.0, 2.0, 1.0])
    net(x)
    net.export(str(tmp_path / "d"))
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    results = []
    for ctx, store in (([mx.cpu(0)], None), ([mx.cpu(0), mx.cpu(1)], "device")):
        blk = gluon.SymbolBlock.imports(
            str(tmp_path / "d-symbol.json"), ["data"], str(tmp_path / "d-0000.params"), ctx=ctx
        )
        trainer = gluon.Trainer(
            blk.collect_params(), "sgd", {"learning_rate": 0.5, "momentum": 0.9}, kvstore=store or "device"
        )
        for _ in range(3):
            xs = gluon.utils.split_and_load(x, ctx)
            ys = gluon.utils.split_and_load(label, ctx)
            with mx.autograd.record():
                losses = [loss(blk(a), b) for a, b in zip(xs, ys, strict=True)]
            for v in losses:
                v.backward()
            trainer.step(4)
        results.append(
            {k.split("_", 1)[1]: p.data(ctx[-1]).detach().clone() for k, p in blk.collect_params().items()}
        )
    assert results[0].keys() == results[1].keys()
    for k in results[0]:
        torch.testing.assert_close(results[1][k], results[0][k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
def test_rnn_layers_export_as_mxnets_fused_rnn_graph(tmp_path: Path, kind: str) -> None:
    from mxtorch.gluon import rnn

    layer = {
        "lstm": lambda: rnn.LSTM(5, num_layers=2, bidirectional=True, layout="NTC"),
        "gru": lambda: rnn.GRU(5),
        "rnn": lambda: rnn.RNN(5, activation="tanh"),
    }[kind]()
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Embedding(20, 4), layer, nn.Dense(3, flatten=False))
    net.initialize(mx.init.Xavier())
    x = torch.as_tensor(np.random.RandomState(0).randint(0, 20, (2, 7)).astype("float32"))
    want = net(x)
    sym_file, params_file = net.export(str(tmp_path / kind))
    graph = json.loads(Path(sym_file).read_text())
    rnn_nodes = [n for n in graph["nodes"] if n["op"] == "RNN"]
    assert len(rnn_nodes) == 1 and rnn_nodes[0]["attrs"]["mode"] == {"rnn": "rnn_tanh"}.get(kind, kind)
    back = gluon.SymbolBlock.imports(sym_file, ["data"], params_file)
    torch.testing.assert_close(back(x), want, rtol=1e-5, atol=1e-6)
    # with explicit states the layer's graph returns the new states too
    states = [mx.sym.var(f"s{i}") for i in range(2 if kind == "lstm" else 1)]
    out, new_states = layer(mx.sym.var("seq"), states)
    assert len(new_states) == len(states) and out.list_outputs()[0].endswith("_output")
