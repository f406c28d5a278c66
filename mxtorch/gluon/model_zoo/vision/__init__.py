"""Predefined vision networks: ResNet (v1, v2, CIFAR), VGG, AlexNet, DenseNet, SqueezeNet,
Inception v3, MobileNet (v1, v2), LeNet and an MLP.

Build one with random weights by constructor or by name::

    from mxtorch.gluon.model_zoo import vision
    net = vision.resnet18_v1(classes=10)
    net = vision.get_model("ResNet18_v1", classes=10)
    net.initialize(mx.init.Xavier())

Input channels are inferred at the first forward pass, so 1-channel images work too.
mxtorch never downloads pretrained weights: ``pretrained=True`` loads ``<root>/<name>.params``
(or MXNet's ``<root>/<name>-<hash>.params``), a file written by ``save_parameters``, and
raises an error saying where to put it when there is none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...block import HybridBlock
from ._base import load_pretrained
from ._concat import Concurrent
from .alexnet import AlexNet, alexnet
from .densenet import DenseNet, densenet121, densenet161, densenet169, densenet201, get_densenet
from .inception import Inception3, inception_v3
from .lenet import LeNet, get_lenet, lenet, lenet_bn
from .mlp import MLP, get_mlp, mlp
from .mobilenet import (
    RELU6,
    LinearBottleneck,
    MobileNet,
    MobileNetV2,
    get_mobilenet,
    get_mobilenet_v2,
    mobilenet0_5,
    mobilenet0_25,
    mobilenet0_75,
    mobilenet1_0,
    mobilenet_v2_0_5,
    mobilenet_v2_0_25,
    mobilenet_v2_0_75,
    mobilenet_v2_1_0,
)
from .resnet import (
    BasicBlockV1,
    BasicBlockV2,
    BottleneckV1,
    BottleneckV2,
    CIFARResNetV1,
    CIFARResNetV2,
    ResNetV1,
    ResNetV2,
    cifar_resnet20_v1,
    cifar_resnet20_v2,
    cifar_resnet56_v1,
    cifar_resnet56_v2,
    cifar_resnet110_v1,
    cifar_resnet110_v2,
    get_cifar_resnet,
    get_resnet,
    resnet18_v1,
    resnet18_v2,
    resnet34_v1,
    resnet34_v2,
    resnet50_v1,
    resnet50_v2,
    resnet101_v1,
    resnet101_v2,
    resnet152_v1,
    resnet152_v2,
)
from .squeezenet import SqueezeNet, get_squeezenet, squeezenet1_0, squeezenet1_1
from .vgg import VGG, get_vgg, vgg11, vgg11_bn, vgg13, vgg13_bn, vgg16, vgg16_bn, vgg19, vgg19_bn

_MODELS: dict[str, Callable[..., HybridBlock]] = {
    "mlp": mlp,
    "lenet": lenet,
    "lenet_bn": lenet_bn,
    "resnet18_v1": resnet18_v1,
    "resnet34_v1": resnet34_v1,
    "resnet50_v1": resnet50_v1,
    "resnet101_v1": resnet101_v1,
    "resnet152_v1": resnet152_v1,
    "resnet18_v2": resnet18_v2,
    "resnet34_v2": resnet34_v2,
    "resnet50_v2": resnet50_v2,
    "resnet101_v2": resnet101_v2,
    "resnet152_v2": resnet152_v2,
    "cifar_resnet20_v1": cifar_resnet20_v1,
    "cifar_resnet56_v1": cifar_resnet56_v1,
    "cifar_resnet110_v1": cifar_resnet110_v1,
    "cifar_resnet20_v2": cifar_resnet20_v2,
    "cifar_resnet56_v2": cifar_resnet56_v2,
    "cifar_resnet110_v2": cifar_resnet110_v2,
    "vgg11": vgg11,
    "vgg13": vgg13,
    "vgg16": vgg16,
    "vgg19": vgg19,
    "vgg11_bn": vgg11_bn,
    "vgg13_bn": vgg13_bn,
    "vgg16_bn": vgg16_bn,
    "vgg19_bn": vgg19_bn,
    "mobilenet1.0": mobilenet1_0,
    "mobilenet0.75": mobilenet0_75,
    "mobilenet0.5": mobilenet0_5,
    "mobilenet0.25": mobilenet0_25,
    "mobilenetv2_1.0": mobilenet_v2_1_0,
    "mobilenetv2_0.75": mobilenet_v2_0_75,
    "mobilenetv2_0.5": mobilenet_v2_0_5,
    "mobilenetv2_0.25": mobilenet_v2_0_25,
    "alexnet": alexnet,
    "densenet121": densenet121,
    "densenet161": densenet161,
    "densenet169": densenet169,
    "densenet201": densenet201,
    "squeezenet1.0": squeezenet1_0,
    "squeezenet1.1": squeezenet1_1,
    "inceptionv3": inception_v3,
}
# constructor function names work too (e.g. 'mobilenet1_0', 'mobilenet_v2_1_0')
_ALIASES: dict[str, str] = {fn.__name__: key for key, fn in _MODELS.items() if fn.__name__ != key}

def get_model(name: str, **kwargs: Any) -> HybridBlock:
    """Build the network registered as ``name`` (case-insensitive), e.g. 'resnet18_v1'.

    Keyword arguments go to the constructor: ``classes``, ``pretrained`` (loads a local file,
    see :func:`load_pretrained`), ``ctx``, ``root`` and network options such as ``thumbnail``
    or ``batch_norm``.
    """
    if not isinstance(name, str):
        raise TypeError(f"get_model: name must be a string, got {type(name).__name__}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _MODELS:
        raise ValueError(f"model {name!r} is not available; choose one of: {', '.join(sorted(_MODELS))}")
    return _MODELS[key](**kwargs)


def list_models() -> list[str]:
    """Names accepted by :func:`get_model`."""
    return sorted(_MODELS)


__all__ = [
    "get_model", "list_models", "load_pretrained", "Concurrent",
    "AlexNet", "alexnet", "DenseNet", "get_densenet", "densenet121", "densenet161", "densenet169",
    "densenet201", "SqueezeNet", "get_squeezenet", "squeezenet1_0", "squeezenet1_1",
    "Inception3", "inception_v3",
    "MLP", "get_mlp", "mlp", "LeNet", "get_lenet", "lenet", "lenet_bn",
    "ResNetV1", "ResNetV2", "BasicBlockV1", "BasicBlockV2", "BottleneckV1", "BottleneckV2",
    "CIFARResNetV1", "CIFARResNetV2", "get_resnet", "get_cifar_resnet",
    "resnet18_v1", "resnet34_v1", "resnet50_v1", "resnet101_v1", "resnet152_v1",
    "resnet18_v2", "resnet34_v2", "resnet50_v2", "resnet101_v2", "resnet152_v2",
    "cifar_resnet20_v1", "cifar_resnet56_v1", "cifar_resnet110_v1",
    "cifar_resnet20_v2", "cifar_resnet56_v2", "cifar_resnet110_v2",
    "VGG", "get_vgg", "vgg11", "vgg13", "vgg16", "vgg19", "vgg11_bn", "vgg13_bn", "vgg16_bn", "vgg19_bn",
    "MobileNet", "MobileNetV2", "LinearBottleneck", "RELU6", "get_mobilenet", "get_mobilenet_v2",
    "mobilenet1_0", "mobilenet0_75", "mobilenet0_5", "mobilenet0_25",
    "mobilenet_v2_1_0", "mobilenet_v2_0_75", "mobilenet_v2_0_5", "mobilenet_v2_0_25",
]
