"""What MXNet code reads from a Block beyond its public API: ``_children``, ``_reg_params``,
and the warning about Blocks hidden in containers.

A mixin placed before ``torch.nn.Module`` in :class:`~mxtorch.gluon.Block`'s bases; every field
is a view of torch's own registries, so nothing is kept twice.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from .parameter_core import Parameter

__all__ = ["MXNetBlockFields"]

# torch.nn.Module's own dicts (of children, parameters, hooks): never user containers
_TORCH_REGISTRIES = frozenset(vars(torch.nn.Module()))


class MXNetBlockFields:
    """MXNet's private Block fields and hook API, on top of ``torch.nn.Module``."""

    _modules: dict[str, torch.nn.Module | None]
    _gluon_params: OrderedDict[str, Parameter]

    @property
    def _children(self) -> dict[str, torch.nn.Module]:
        """The child blocks by name, in registration order (MXNet's ``Block._children``)."""
        return self._modules  # type: ignore[return-value]

    @property
    def _reg_params(self) -> OrderedDict[str, Parameter]:
        """The parameters assigned as this block's own attributes (MXNet's ``Block._reg_params``)."""
        return self._gluon_params

    def _check_container_with_block(self) -> None:
        """Warn about lists, tuples or dicts of Blocks held as attributes: such Blocks are not
        registered (their parameters are not collected); MXNet warns the same way."""
        children = {id(c) for c in self._modules.values()}

        def unregistered(data: Any) -> bool:
            if isinstance(data, (list, tuple)):
                return any(unregistered(d) for d in data)
            if isinstance(data, dict):
                return any(unregistered(d) for d in data.values())
            return isinstance(data, torch.nn.Module) and id(data) not in children

        for k, v in self.__dict__.items():
            if isinstance(v, (list, tuple, dict)) and not k.startswith("__") and k not in _TORCH_REGISTRIES \
                    and unregistered(v):
                warnings.warn(f'"{type(self).__name__}.{k}" is an unregistered container with Blocks: Blocks '
                              "inside a list, tuple or dict are not registered; register them with "
                              "register_child() or use nn.Sequential/nn.HybridSequential", stacklevel=3)
