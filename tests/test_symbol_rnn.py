"""mx.sym.RNN (MXNet's fused RNN operator) against outputs and gradients of real MXNet 1.9.1
(tests/data/symbol_rnn: seeded inputs, flat parameters and head gradients)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError

DATA = np.load(Path(__file__).parent / "data" / "symbol_rnn" / "rnn.npz")


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
def test_rnn_operator_matches_mxnet(mode: str) -> None:
    d = mx.sym.var("data")
    s = mx.sym.RNN(
        d, state_size=4, num_layers=2, mode=mode, bidirectional=True, state_outputs=True, name="rnn"
    )
    names = s.list_arguments()
    want_names = ["data", "rnn_parameters", "rnn_state"] + (["rnn_state_cell"] if mode == "lstm" else [])
    assert names == want_names
    assert s.list_outputs() == ["rnn_output", "rnn_state_output"] + (
        ["rnn_statecell_output"] if mode == "lstm" else []
    )
    arg_shapes, out_shapes, _ = s.infer_shape(data=(5, 3, 6))
    assert [tuple(DATA[f"{mode}/arg/{n}"].shape) for n in names] == arg_shapes
    args = {n: torch.as_tensor(DATA[f"{mode}/arg/{n}"]) for n in names}
    grads = {n: torch.zeros_like(v) for n, v in args.items()}
    ex = s.bind(mx.cpu(), args, args_grad=grads)
    outs = ex.forward(is_train=True)
    heads = [torch.as_tensor(DATA[f"{mode}/head/{i}"]) for i in range(len(out_shapes))]
    ex.backward(heads)
    for i, o in enumerate(outs):
        np.testing.assert_allclose(o.numpy(), DATA[f"{mode}/out/{i}"], rtol=1e-5, atol=1e-6)
    for n in names:
        np.testing.assert_allclose(grads[n].numpy(), DATA[f"{mode}/grad/{n}"], rtol=1e-4, atol=1e-5)


def test_rnn_operator_errors() -> None:
    d = mx.sym.var("data")
    with pytest.raises(MXNetError, match="mode must be one of"):
        mx.sym.RNN(d, state_size=4, mode="lstmx")
    s = mx.sym.RNN(d, state_size=4, num_layers=1, mode="gru")
    with pytest.raises(MXNetError, match="seq_len, batch, input_size"):
        s.infer_shape(data=(5, 6))
