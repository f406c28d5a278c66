"""What ``mxtorch train`` trains on and how it measures: the data sets (the embedded Fashion-MNIST
subset by default), the ``--ctx`` contexts and held-out accuracy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .train_config import TrainConfig

__all__ = ["evaluate", "load_datasets", "num_classes", "parse_contexts"]


def parse_contexts(spec: str) -> list[Any]:
    from ..context import as_context

    parts = [s.strip() for s in spec.split(",") if s.strip()]
    if not parts:
        raise SystemExit(f"--ctx {spec!r}: give at least one context, e.g. 'cpu' or 'cpu:0,cpu:1'")
    try:
        contexts = [as_context(s) for s in parts]
    except (ValueError, TypeError) as e:
        raise SystemExit(f"--ctx {spec!r}: {e}") from None
    gpus = [c for c in contexts if c.device_type == "gpu"]
    if gpus:
        import torch

        have = torch.cuda.device_count() if torch.cuda.is_available() else 0
        missing = [c for c in gpus if c.device_id >= have]
        if missing:
            where = (f"this machine has {have} GPU(s) (gpu:0 to gpu:{have - 1})" if have else
                     f"this torch {torch.__version__} has no usable CUDA device")
            raise SystemExit(f"--ctx {spec!r}: {missing[0]} is not available: {where}; use --ctx cpu")
    return contexts


def load_datasets(cfg: TrainConfig) -> tuple[Any, Any, str]:
    """Train and test sets plus a sentence saying which data was used; data that is not there is a
    user error (one line: the data set's own message, which says where it looked)."""
    from ..base import MXNetError

    try:
        return _load_datasets(cfg)
    except MXNetError as e:
        raise SystemExit(f"--dataset {cfg.dataset}: " + " ".join(str(e).split())) from None


def _load_datasets(cfg: TrainConfig) -> tuple[Any, Any, str]:
    from ..base import MXNetError
    from ..gluon.data import vision
    from .train_images import IMAGE_DATASETS, load_image_datasets

    if cfg.dataset in IMAGE_DATASETS:
        return load_image_datasets(cfg)
    if cfg.dataset == "fashion-mnist":
        if cfg.data_root is None:
            try:
                train = vision.FashionMNIST(train=True)
                test = vision.FashionMNIST(train=False)
                return train, test, f"full Fashion-MNIST from {train.root}"
            except MXNetError:
                root = vision.datasets.embedded_fashion_mnist_root()
                train = vision.FashionMNIST(root=root, train=True)
                test = vision.FashionMNIST(root=root, train=False)
                return train, test, (f"the Fashion-MNIST subset shipped with mxtorch ({len(train)} train / "
                                     f"{len(test)} test images; install Debian's dataset-fashion-mnist "
                                     "for the full set)")
        train = vision.FashionMNIST(root=cfg.data_root, train=True)
        test = vision.FashionMNIST(root=cfg.data_root, train=False)
        return train, test, f"Fashion-MNIST from {train.root}"
    cls = {"mnist": vision.MNIST, "cifar10": vision.CIFAR10, "cifar100": vision.CIFAR100}[cfg.dataset]
    train, test = cls(root=cfg.data_root, train=True), cls(root=cfg.data_root, train=False)
    return train, test, f"{cfg.dataset} from {getattr(train, 'root', cfg.data_root)}"


def num_classes(cfg: TrainConfig) -> int:
    """The classes of ``cfg``'s data set: the network's output units."""
    from .train_images import IMAGE_DATASETS, image_num_classes

    if cfg.dataset in IMAGE_DATASETS:
        return image_num_classes(cfg)
    return 100 if cfg.dataset == "cifar100" else 10


def evaluate(net: Any, loader: Any, ctx: list[Any]) -> float:
    """Held-out accuracy of ``net`` over ``loader``."""
    import torch

    from .. import autograd, metric
    from ..gluon.utils import split_and_load

    acc = metric.Accuracy()
    with torch.no_grad(), autograd.predict_mode():
        for data, label in loader:
            parts = split_and_load(data, ctx, even_split=False)
            labels = split_and_load(label, ctx, even_split=False)
            acc.update(labels, [net(x) for x in parts])
    return float(acc.get()[1])
