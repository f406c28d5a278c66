"""Writes rnn.npz for tests/test_symbol_rnn.py with REAL MXNet 1.9.1 (not a test dependency):
/tmp/conformance-venv-mxnet/bin/python make_fixture.py

For each mode, a 2-layer bidirectional RNN op (T=5, N=3, I=6, H=4) on seeded inputs, flat
parameters and initial states: MXNet's outputs and the gradients of sum(out * w) (w seeded)."""

import os

import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
out = {}
for mode in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
    rng = np.random.RandomState(0)
    d = mx.sym.var("data")
    s = mx.sym.RNN(d, state_size=4, num_layers=2, mode=mode, bidirectional=True, state_outputs=True,
                   name="rnn")
    arg_shapes, out_shapes, _ = s.infer_shape(data=(5, 3, 6))
    args = {n: mx.nd.array(rng.uniform(-0.5, 0.5, sh)) for n, sh in zip(s.list_arguments(), arg_shapes)}
    grads = {n: mx.nd.zeros(sh) for n, sh in zip(s.list_arguments(), arg_shapes)}
    heads = [mx.nd.array(rng.uniform(-1, 1, sh)) for sh in out_shapes]
    ex = s.bind(mx.cpu(), args, args_grad=grads)
    ex.forward(is_train=True)
    ex.backward(heads)
    for n, v in args.items():
        out[f"{mode}/arg/{n}"] = v.asnumpy()
        out[f"{mode}/grad/{n}"] = grads[n].asnumpy()
    for i, (o, h) in enumerate(zip(ex.outputs, heads)):
        out[f"{mode}/out/{i}"] = o.asnumpy()
        out[f"{mode}/head/{i}"] = h.asnumpy()
np.savez_compressed(os.path.join(HERE, "rnn.npz"), **out)
