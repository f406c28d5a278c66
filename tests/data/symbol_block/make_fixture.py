"""Writes the fixture of tests/test_symbol_block.py: a small network exported by REAL MXNet 1.9.1.

Needs MXNet (not a test dependency): /tmp/conformance-venv-mxnet/bin/python make_fixture.py
Files: mxnet_net-symbol.json, mxnet_net-0000.params (MXNet's formats, as MXNet's export writes
them), io.npz (a fixed input and MXNet's output for it, in inference mode).
"""

import os

import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
mx.random.seed(7)
net = mx.gluon.nn.HybridSequential()
with net.name_scope():
    net.add(mx.gluon.nn.Conv2D(4, 3, padding=1, activation="relu"), mx.gluon.nn.BatchNorm(),
            mx.gluon.nn.AvgPool2D(2), mx.gluon.nn.Flatten(), mx.gluon.nn.Dense(6, activation="sigmoid"),
            mx.gluon.nn.Dense(3))
net.initialize(mx.init.Xavier())
x = mx.nd.array(np.arange(2 * 3 * 6 * 6, dtype="float32").reshape(2, 3, 6, 6) / 100.0 - 1.0)
with mx.autograd.record():  # training step: moving statistics move away from 0/1
    net(x)
net.hybridize()
y = net(x)
net.export(os.path.join(HERE, "mxnet_net"))
np.savez(os.path.join(HERE, "io.npz"), x=x.asnumpy(), y=y.asnumpy())
