"""VGG networks (Simonyan & Zisserman, "Very Deep Convolutional Networks for Large-Scale Image
Recognition"), with optional BatchNorm after every convolution."""

from __future__ import annotations

from typing import Any

from .... import context as _context
from ... import nn
from ...block import HybridBlock
from ._base import DEFAULT_ROOT, FeaturesOutput, load_pretrained, preset

__all__ = ["VGG", "get_vgg", "vgg11", "vgg13", "vgg16", "vgg19",
           "vgg11_bn", "vgg13_bn", "vgg16_bn", "vgg19_bn"]


# depth -> convolutions in each of the five stages
_VGG_SPEC: dict[int, list[int]] = {
    11: [1, 1, 2, 2, 2],
    13: [2, 2, 2, 2, 2],
    16: [2, 2, 3, 3, 3],
    19: [2, 2, 4, 4, 4],
}
_VGG_FILTERS = [64, 128, 256, 512, 512]


class VGG(FeaturesOutput):
    """VGG: ``features`` (conv stages with max-pooling, then two Dense(4096) + Dropout(0.5))
    and ``output`` (Dense(classes)).

    ``layers`` gives the number of 3x3 convolutions per stage and ``filters`` their widths;
    ``batch_norm=True`` inserts BatchNorm after each convolution.  Convolutions start from
    Xavier (gaussian, fan-out, magnitude 2) and the Dense layers from a normal distribution,
    whatever initializer ``initialize`` is given.  Inputs need at least 32x32 pixels.
    """

    def __init__(self, layers: list[int], filters: list[int], classes: int = 1000, batch_norm: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if len(layers) != len(filters):
            raise ValueError(f"VGG: layers and filters must have the same length, got {list(layers)} "
                             f"and {list(filters)}")
        from ....initializer import Xavier

        conv_init = Xavier(rnd_type="gaussian", factor_type="out", magnitude=2)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            for num, width in zip(layers, filters):
                for _ in range(int(num)):
                    self.features.add(nn.Conv2D(width, kernel_size=3, padding=1, weight_initializer=conv_init,
                                                bias_initializer="zeros"))
                    if batch_norm:
                        self.features.add(nn.BatchNorm())
                    self.features.add(nn.Activation("relu"))
                self.features.add(nn.MaxPool2D(strides=2))
            for _ in range(2):
                self.features.add(nn.Dense(4096, activation="relu", weight_initializer="normal",
                                           bias_initializer="zeros"), nn.Dropout(rate=0.5))
            self.output = nn.Dense(classes, weight_initializer="normal", bias_initializer="zeros")


def get_vgg(num_layers: int, pretrained: bool = False, ctx: _context.Context | None = None,
            root: str = DEFAULT_ROOT, **kwargs: Any) -> HybridBlock:
    """VGG of depth ``num_layers`` (11, 13, 16 or 19); ``batch_norm=True`` for the BN variant.

    ``pretrained=True`` loads ``<root>/vgg<depth>[_bn].params`` onto ``ctx`` (never downloaded).
    """
    if num_layers not in _VGG_SPEC:
        raise ValueError(f"VGG depth {num_layers} is not supported; choose one of {sorted(_VGG_SPEC)}")
    name = f"vgg{num_layers}{'_bn' if kwargs.get('batch_norm') else ''}"
    return load_pretrained(VGG(_VGG_SPEC[num_layers], _VGG_FILTERS, **kwargs), pretrained, name, root, ctx)


vgg11 = preset("vgg11", get_vgg, 11, doc="VGG-11 (configuration A).")
vgg13 = preset("vgg13", get_vgg, 13, doc="VGG-13 (configuration B).")
vgg16 = preset("vgg16", get_vgg, 16, doc="VGG-16 (configuration D).")
vgg19 = preset("vgg19", get_vgg, 19, doc="VGG-19 (configuration E).")
vgg11_bn = preset("vgg11_bn", get_vgg, 11, batch_norm=True, doc="VGG-11 with BatchNorm.")
vgg13_bn = preset("vgg13_bn", get_vgg, 13, batch_norm=True, doc="VGG-13 with BatchNorm.")
vgg16_bn = preset("vgg16_bn", get_vgg, 16, batch_norm=True, doc="VGG-16 with BatchNorm.")
vgg19_bn = preset("vgg19_bn", get_vgg, 19, batch_norm=True, doc="VGG-19 with BatchNorm.")
