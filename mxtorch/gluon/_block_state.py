"""``Block.load_state_dict``: torch's contract with Gluon's parameter rules.

A Block is a ``torch.nn.Module``, so ``state_dict()`` is torch's (names are attribute paths,
'0.weight', the names ``save_parameters`` writes) and a Block is a
:class:`~mxtorch.stateful.Stateful`.  Loading goes through Gluon's parameters instead of
torch's copy into one tensor, so that a parameter on several contexts gets the value on all of
them, a parameter whose shape waits for the first forward pass is initialized from it, a
Trainer whose store holds the weights takes the new ones, and every name, shape and dtype is
checked before anything changes (as ``load_parameters``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch
from torch.nn.modules.module import _IncompatibleKeys

from ..base import MXNetError
from .parameter_core import Parameter, wrap_torch_parameter

__all__ = ["BlockState", "params_by_path"]


class BlockState:
    """A mixin before ``torch.nn.Module`` in :class:`~mxtorch.gluon.Block`'s bases."""

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> Any:
        """Load ``state_dict`` (as ``torch.nn.Module.load_state_dict``: ``strict`` requires the
        same names; returns the missing and unexpected names).  Gluon parameters are loaded as by
        ``load_parameters`` (every context, deferred ones initialized, shapes and dtypes checked
        first: an :class:`MXNetError` names what does not fit); buffers of plain torch modules
        inside as torch loads them.  ``assign=True`` is torch's own load."""
        module: Any = super()
        if assign:
            return module.load_state_dict(state_dict, strict=strict, assign=True)
        from .serialization import load_named

        params = params_by_path(self)  # type: ignore[arg-type]
        torch_keys = set(module.state_dict(keep_vars=True))  # initialized parameters and buffers
        ours = {k: v for k, v in state_dict.items() if k in params}
        rest = {k: v for k, v in state_dict.items() if k not in params}
        missing = [k for k in params if k not in ours]
        missing += [k for k in torch_keys if k not in params and k not in rest]
        unexpected = [k for k in rest if k not in torch_keys]
        if strict and (unexpected or any(k not in params for k in missing)):
            raise MXNetError(f"load_state_dict: the state dict does not fit {type(self).__name__}: missing "
                             f"{[k for k in missing if k not in params][:10]}, unexpected {unexpected[:10]}; "
                             "pass strict=False to load what fits")
        load_named(params, ours, "the state dict", allow_missing=not strict, ignore_extra=True)
        if rest:
            with torch.no_grad():
                module.load_state_dict({k: v for k, v in rest.items() if k in torch_keys}, strict=False)
        return _IncompatibleKeys(missing, unexpected)


def params_by_path(module: torch.nn.Module, prefix: str = "") -> OrderedDict[str, Parameter]:
    """The parameters of ``module`` (a Block, or any torch module: its tensors are wrapped) by
    attribute path ('0.weight'); a parameter reached by several paths appears under each."""
    out: OrderedDict[str, Parameter] = OrderedDict()
    dot = prefix + "." if prefix else ""
    gp: dict[str, Parameter] = getattr(module, "_gluon_params", {})
    for pname, p in gp.items():
        out[dot + pname] = p
    for pname, tp in module._parameters.items():
        if tp is not None and pname not in gp:
            out[dot + pname] = wrap_torch_parameter(tp, dot + pname)
    for cname, child in module._modules.items():
        if child is not None:
            out.update(params_by_path(child, dot + cname))
    return out
