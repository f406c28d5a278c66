"""What the model-zoo networks share: a ``features`` body followed by an ``output`` head, and
loading local pretrained weights."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from typing import Any

import torch

from ....base import MXNetError
from ...block import HybridBlock

DEFAULT_ROOT = os.path.join("~", ".mxnet", "models")


class FeaturesOutput(HybridBlock):
    """A network computing ``output(features(x))``; a subclass builds the two children (their
    names make MXNet's parameter names and exported graphs)."""

    features: HybridBlock
    output: HybridBlock

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(self.features(x))  # type: ignore[no-any-return]


def load_pretrained(net: HybridBlock, pretrained: bool, name: str, root: str = DEFAULT_ROOT,
                    ctx: Any = None) -> HybridBlock:
    """``net`` itself, with its weights loaded from a local file when ``pretrained`` is set.

    The file is ``<root>/<name>.params``, else MXNet's ``<root>/<name>-<hash>.params`` (the
    first in sorted order): one written by ``save_parameters``.  mxtorch never downloads, so
    when neither exists an ``MXNetError`` says where to put the file.
    """
    if not pretrained:
        return net
    folder = os.path.expanduser(root)
    exact = os.path.join(folder, f"{name}.params")
    hashed = sorted(glob.glob(os.path.join(glob.escape(folder), f"{glob.escape(name)}-*.params")))
    for path in [exact, *hashed]:
        if os.path.isfile(path):
            net.load_parameters(path, ctx=ctx)
            return net
    raise MXNetError(
        f"pretrained=True for {name!r}: no local weights in {folder!r}, and mxtorch never downloads. "
        f"Put {name}.params there (a file written by net.save_parameters, e.g. from a network trained "
        f"or converted elsewhere), or pass root=<folder holding it>; or build the network with "
        f"pretrained=False and call net.load_parameters('/path/to/file.params')"
    )


def preset(name: str, build: Callable[..., HybridBlock], *args: Any, doc: str,
           **fixed: Any) -> Callable[..., HybridBlock]:
    """The constructor ``name(**kwargs)``: ``build(*args, **kwargs)`` with the ``fixed`` keyword
    arguments overriding the caller's (``vgg11_bn = preset("vgg11_bn", get_vgg, 11, batch_norm=True,
    doc=...)``); it is named and documented as a function of ``build``'s module."""

    def make(**kwargs: Any) -> HybridBlock:
        return build(*args, **{**kwargs, **fixed})

    make.__name__ = make.__qualname__ = name
    make.__module__ = build.__module__
    make.__doc__ = doc
    return make
