"""MXNet's classic Gluon LeNet script, unchanged except for the import line.

Two CPU contexts act as two replicas (as on a two-GPU machine); the Trainer sums their
gradients through the 'device' KVStore.  Run: python examples/lenet_two_contexts.py
"""
import mxtorch as mx
from mxtorch import gluon, autograd, nd  # noqa: F401
from mxtorch.gluon import nn

ctx = [mx.cpu(0), mx.cpu(1)]                      # two replicas, as MXNet users write it
net = nn.HybridSequential()
net.add(nn.Conv2D(20, kernel_size=5, activation='relu'), nn.MaxPool2D(2, 2),
        nn.Conv2D(50, kernel_size=5, activation='relu'), nn.MaxPool2D(2, 2),
        nn.Flatten(), nn.Dense(500, activation='relu'), nn.Dense(10))
net.initialize(mx.init.Xavier(magnitude=2.24), ctx=ctx)
net.hybridize()
trainer = gluon.Trainer(net.collect_params(), 'sgd',
                        {'learning_rate': 0.05, 'momentum': 0.9, 'wd': 1e-4})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
metric = mx.metric.Accuracy()
train = gluon.data.DataLoader(
    gluon.data.vision.FashionMNIST(train=True).transform_first(gluon.data.vision.transforms.ToTensor()),
    batch_size=128, shuffle=True, last_batch='discard')
for epoch in range(2):
    for data, label in train:
        parts = gluon.utils.split_and_load(data, ctx)
        labels = gluon.utils.split_and_load(label, ctx)
        with autograd.record():
            losses = [loss_fn(net(x), y) for x, y in zip(parts, labels)]
        for l in losses:
            l.backward()
        trainer.step(data.shape[0])
net.save_parameters('lenet.params')
