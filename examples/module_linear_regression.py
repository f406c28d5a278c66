"""MXNet's Module linear-regression example, unchanged except the import.

Fits y = 2*x0 - 3.4*x1 + 4.2 with LinearRegressionOutput and prints the learned weights.

    python examples/module_linear_regression.py [--epochs 10]
"""

import argparse

import numpy as np

import mxtorch as mx

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--epochs", type=int, default=10)
args = parser.parse_args()

rng = np.random.RandomState(0)
X = rng.randn(1000, 2).astype('float32')
y = (2 * X[:, 0] - 3.4 * X[:, 1] + 4.2 + 0.01 * rng.randn(1000)).astype('float32')
train_iter = mx.io.NDArrayIter(X, y, batch_size=10, shuffle=True, label_name='lin_reg_label')

data = mx.sym.Variable('data')
label = mx.sym.Variable('lin_reg_label')
fc = mx.sym.FullyConnected(data, name='fc1', num_hidden=1)
net = mx.sym.LinearRegressionOutput(data=fc, label=label, name='lro')

mod = mx.mod.Module(net, data_names=['data'], label_names=['lin_reg_label'])
mod.fit(train_iter, num_epoch=args.epochs, optimizer='sgd',
        optimizer_params={'learning_rate': 0.05, 'momentum': 0.9}, eval_metric='mse')
arg_params, _ = mod.get_params()
w, b = arg_params["fc1_weight"], arg_params["fc1_bias"]
print("weight:", w.asnumpy().round(3), "bias:", b.asnumpy().round(3))
print("mse:", mod.score(mx.io.NDArrayIter(X, y, batch_size=100, label_name='lin_reg_label'), 'mse'))
