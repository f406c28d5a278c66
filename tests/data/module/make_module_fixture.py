"""Write a Module checkpoint with real MXNet 1.9.1 (run with the MXNet venv, not mxtorch's).

    /tmp/conformance-venv-mxnet/bin/python tests/data/module/make_module_fixture.py

Output, next to this script: ``mxnet_mlp-symbol.json`` and ``mxnet_mlp-0001.params`` (MXNet's
binary format: FullyConnected, BatchNorm with moving statistics, SoftmaxOutput) after one epoch of
training, and ``mxnet_mlp-predict.npz`` (``data``: inputs, ``prob``: what MXNet's
``Module.predict`` gave for them with the checkpoint's parameters, ``batch_size`` used).
"""

from __future__ import annotations

import os

import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.path.join(HERE, "mxnet_mlp")


def build() -> mx.sym.Symbol:
    data = mx.sym.Variable("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=6, name="fc1")
    bn = mx.sym.BatchNorm(fc1, fix_gamma=False, momentum=0.8, name="bn")
    act = mx.sym.Activation(bn, act_type="relu", name="relu1")
    fc2 = mx.sym.FullyConnected(act, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(fc2, name="softmax")


def main() -> None:
    mx.random.seed(7)
    rng = np.random.RandomState(7)
    x = rng.randn(32, 5).astype(np.float32)
    y = rng.randint(0, 3, size=32).astype(np.float32)
    train = mx.io.NDArrayIter(x, y, batch_size=8)
    mod = mx.mod.Module(build(), context=mx.cpu())
    mod.fit(train, num_epoch=1, initializer=mx.init.Xavier(), optimizer="sgd",
            optimizer_params={"learning_rate": 0.5, "momentum": 0.9})
    mod.save_checkpoint(PREFIX, 1)
    test_x = rng.randn(7, 5).astype(np.float32)
    loaded = mx.mod.Module.load(PREFIX, 1)
    loaded.bind(data_shapes=[("data", (3, 5))], label_shapes=[("softmax_label", (3,))], for_training=False)
    # 7 rows in batches of 3: the last batch is padded with 2 rows that predict drops
    prob = loaded.predict(mx.io.NDArrayIter(test_x, np.zeros(7, np.float32), batch_size=3)).asnumpy()
    np.savez(PREFIX + "-predict.npz", data=test_x, prob=prob, batch_size=np.int64(3))


if __name__ == "__main__":
    main()
