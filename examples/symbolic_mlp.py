"""MXNet's symbolic MLP tutorial, unchanged except the import: mx.sym + Module.fit on Fashion-MNIST.

Reads the Fashion-MNIST subset mxtorch ships (the idx files MXNet's MNISTIter reads), trains a
two-layer perceptron with SGD through the 'local' KVStore, checkpoints every epoch with
``do_checkpoint`` and loads the last checkpoint back.

    python examples/symbolic_mlp.py [--epochs 10] [--prefix runs/mlp/mlp]
"""

import argparse
import logging
import os

import mxtorch as mx
from mxtorch.gluon.data.vision.datasets import EMBEDDED_FASHION_MNIST_ROOT as ROOT

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--prefix", default="runs/mlp/mlp")
args = parser.parse_args()
logging.basicConfig(level=logging.INFO)
os.makedirs(os.path.dirname(args.prefix) or ".", exist_ok=True)

train = mx.io.MNISTIter(image=os.path.join(ROOT, "train-images-idx3-ubyte.gz"),
                        label=os.path.join(ROOT, "train-labels-idx1-ubyte.gz"),
                        batch_size=100, shuffle=True, flat=True)
val = mx.io.MNISTIter(image=os.path.join(ROOT, "t10k-images-idx3-ubyte.gz"),
                      label=os.path.join(ROOT, "t10k-labels-idx1-ubyte.gz"),
                      batch_size=100, shuffle=False, flat=True)

data = mx.sym.Variable('data')
fc1 = mx.sym.FullyConnected(data=data, num_hidden=128, name='fc1')
act1 = mx.sym.Activation(data=fc1, act_type='relu', name='relu1')
fc2 = mx.sym.FullyConnected(data=act1, num_hidden=10, name='fc2')
net = mx.sym.SoftmaxOutput(data=fc2, name='softmax')

mod = mx.mod.Module(net, data_names=['data'], label_names=['softmax_label'], context=mx.cpu())
mod.fit(train, eval_data=val, optimizer='sgd', optimizer_params={'learning_rate': 0.1},
        eval_metric='acc', num_epoch=args.epochs, kvstore='local', initializer=mx.init.Xavier(),
        batch_end_callback=mx.callback.Speedometer(100, 100),
        epoch_end_callback=mx.callback.do_checkpoint(args.prefix))
score = mod.score(val, 'acc')
print(f"validation accuracy: {score[0][1]:.4f}")

sym, arg_params, aux_params = mx.model.load_checkpoint(args.prefix, args.epochs)
again = mx.mod.Module(sym, context=mx.cpu())
again.bind(data_shapes=val.provide_data, label_shapes=val.provide_label, for_training=False)
again.set_params(arg_params, aux_params)
print(f"reloaded checkpoint accuracy: {again.score(val, 'acc')[0][1]:.4f}")
