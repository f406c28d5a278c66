"""ParameterDict: an ordered full name -> Parameter mapping with MXNet's bulk operations
(initialize, zero_grad, reset_ctx, setattr, save/load in MXNet's legacy name-keyed format)."""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import torch

from .. import initializer as _init
from .._dtype import to_torch_dtype
from ..base import MXNetError
from ..context import Context
from .parameter_core import Constant, Parameter
from .serialization import load_named, load_tensors, save_tensors

__all__ = ["ParameterDict"]


class ParameterDict(MutableMapping[str, Parameter]):
    """An ordered full name → Parameter mapping with MXNet's bulk operations.

    ``get(name, **kwargs)`` follows MXNet 1.x: it returns the parameter named
    ``prefix + name``, taken from ``shared`` when that dict has it, else created with
    ``kwargs``; the attributes given must agree with those of a parameter found.
    """

    def __init__(self, prefix: str = "", shared: ParameterDict | None = None) -> None:
        if not isinstance(prefix, str):
            raise TypeError(f"ParameterDict prefix must be a str, got {type(prefix).__name__}")
        if shared is not None and not isinstance(shared, ParameterDict):
            raise TypeError(f"shared must be a ParameterDict or None, got {type(shared).__name__}")
        self._params: OrderedDict[str, Parameter] = OrderedDict()
        self._prefix = prefix
        self._shared = shared

    @property
    def prefix(self) -> str:
        """Prepended to the names of the parameters ``get`` creates."""
        return self._prefix

    def __getitem__(self, key: str) -> Parameter:
        return self._params[key]

    def __setitem__(self, key: str, value: Parameter) -> None:
        if not isinstance(value, Parameter):
            raise TypeError(f"ParameterDict values must be Parameters, got {type(value).__name__}")
        self._params[key] = value

    def __delitem__(self, key: str) -> None:
        del self._params[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def __contains__(self, key: object) -> bool:
        return key in self._params

    def __repr__(self) -> str:
        body = "\n".join(f"  {v!r}" for v in self._params.values())
        return f"{self._prefix} (\n{body}\n)"

    def _get_impl(self, full: str) -> Parameter | None:
        if full in self._params:
            return self._params[full]
        if self._shared is not None:
            p = self._shared._get_impl(full)
            if p is not None:
                self._params[full] = p
                return p
        return None

    def get(self, name: str, **kwargs: Any) -> Parameter:  # type: ignore[override]
        """The parameter ``prefix + name`` (from this dict or the shared one), created if absent.

        For a parameter found, each keyword must match its attribute (unknown dimensions of a
        shape, 0 or -1, are filled in; an attribute it lacks or holds as None is set).
        """
        full = self._prefix + name
        p = self._get_impl(full)
        if p is None:
            p = Parameter(full, **kwargs)
            p._named = True
            self._params[full] = p
            return p
        for key, want in kwargs.items():
            _reconcile(p, key, want)
        return p

    def get_constant(self, name: str, value: Any = None) -> Constant:
        """The :class:`Constant` ``prefix + name``, created with ``value`` if absent."""
        full = self._prefix + name
        p = self._get_impl(full)
        if p is None:
            if value is None:
                raise KeyError(f"no constant named {full!r}: give a value to create it")
            c = Constant(full, value)
            c._named = True
            self._params[full] = c
            return c
        if not isinstance(p, Constant):
            raise MXNetError(f"parameter {full!r} exists but is not a Constant")
        if value is not None:
            v = torch.as_tensor(value)
            if tuple(v.shape) != tuple(p._value.shape) or not torch.equal(v.to(p._value.dtype), p._value):
                raise MXNetError(f"constant {full!r} exists with another value: {p._value.tolist()} "
                                 f"(given {v.tolist()})")
        return p

    def update(self, other: Any = (), /, **kw: Any) -> None:  # type: ignore[override]
        """Add the parameters of ``other``; a name held by a different parameter is an error."""
        items = list(other.items() if hasattr(other, "items") else other)
        for k, v in items:
            if k in self._params and self._params[k] is not v:
                raise MXNetError(
                    f"cannot update ParameterDict: two different Parameters are named {k!r} (blocks "
                    "created with the same prefix, or outside the parent's name_scope()?); give each "
                    "block its own prefix, or share with params=other.collect_params()"
                )
        for k, v in items:
            self[k] = v

    def initialize(
        self,
        init: Any = None,
        ctx: Context | Sequence[Context] | None = None,
        verbose: bool = False,
        force_reinit: bool = False,
    ) -> None:
        """Initialize every parameter (its own ``init`` wins over ``init`` given here)."""
        if verbose and init is not None:
            init = _init.create(init)
            init.set_verbosity(verbose=True)
        for p in self._params.values():
            p.initialize(None, ctx, default_init=init, force_reinit=force_reinit)

    def zero_grad(self) -> None:
        """Set the gradient of every parameter that has one to zero."""
        for p in self._params.values():
            if p.grad_req != "null":
                p.zero_grad()

    def reset_ctx(self, ctx: Context | Sequence[Context]) -> None:
        for p in self._params.values():
            p.reset_ctx(ctx)

    def setattr(self, name: str, value: Any) -> None:
        """Set attribute ``name`` (e.g. 'grad_req', 'lr_mult') on every parameter."""
        for p in self._params.values():
            setattr(p, name, value)

    def list_ctx(self) -> list[Context]:
        out: list[Context] = []
        for p in self._params.values():
            for c in p.list_ctx():
                if c not in out:
                    out.append(c)
        return out

    def select(self, select: str | None) -> ParameterDict:
        """The parameters whose names match the regular expression ``select`` (``re.match``)."""
        if select is None:
            return self
        pattern = re.compile(select)
        out = ParameterDict(self._prefix)
        for k, v in self._params.items():
            if pattern.match(k):
                out._params[k] = v
        return out

    def state_dict(self) -> dict[str, torch.Tensor]:
        """{name: value} of every initialized parameter (the mean of its copies, on the CPU): the
        :class:`~mxtorch.stateful.Stateful` protocol."""
        return {k: p._reduce() for k, p in self._params.items() if p.is_initialized}

    def load_state_dict(self, state_dict: Mapping[str, torch.Tensor], strict: bool = True) -> None:
        """Load a :meth:`state_dict` by name into every context (shapes and dtypes checked before
        anything changes; parameters waiting for their shape are initialized).  ``strict=False``
        keeps the parameters it lacks and skips names this dict does not have."""
        load_named(dict(self._params), state_dict, "the state dict", allow_missing=not strict,
                   ignore_extra=not strict)

    def save(self, filename: str, strip_prefix: str = "", format: str | None = None) -> None:
        """Save every parameter under its name, less ``strip_prefix`` (MXNet's legacy naming), in
        MXNet's NDArray format unless ``format='safetensors'`` or the name ends in ``.safetensors``."""
        tensors = {}
        for p in self._params.values():
            if not p.name.startswith(strip_prefix):
                raise ValueError(
                    f"cannot strip prefix {strip_prefix!r} from parameter {p.name!r}: it does not start "
                    "with it (a parameter shared from another block, or a child created outside "
                    "name_scope()?); use save_parameters, which names parameters by attribute path"
                )
            tensors[p.name[len(strip_prefix):]] = p._reduce()
        save_tensors(filename, tensors, format=format)

    def load(self, filename: str, ctx: Any = None, allow_missing: bool = False,
             ignore_extra: bool = False, restore_prefix: str = "", cast_dtype: bool = False,
             dtype_source: str = "current") -> None:
        """Load a file saved by :meth:`save`; ``restore_prefix`` is prepended to the saved names."""
        if restore_prefix:
            for name in self._params:
                if not name.startswith(restore_prefix):
                    raise ValueError(f"restore_prefix is {restore_prefix!r} but parameter {name!r} does "
                                     "not start with it")
        self.load_dict(load_tensors(filename), ctx, allow_missing, ignore_extra, restore_prefix,
                       filename, cast_dtype, dtype_source)

    def load_dict(self, param_dict: Mapping[str, torch.Tensor], ctx: Any = None,
                  allow_missing: bool = False, ignore_extra: bool = False, restore_prefix: str = "",
                  filename: str | None = None, cast_dtype: bool = False,
                  dtype_source: str = "current") -> None:
        """Load ``param_dict`` (name → array; MXNet's 'arg:'/'aux:' name prefixes are dropped)."""
        arrays = {restore_prefix + (k[4:] if k.startswith(("arg:", "aux:")) else k): v
                  for k, v in param_dict.items()}
        source = repr(os.fspath(filename)) if filename is not None else "the given dict"
        load_named(dict(self._params), arrays, source, ctx=ctx, allow_missing=allow_missing,
                   ignore_extra=ignore_extra, cast_dtype=cast_dtype, dtype_source=dtype_source)


def _reconcile(p: Parameter, key: str, want: Any) -> None:
    """ParameterDict.get on an existing parameter: ``want`` must agree with its ``key``."""
    if key == "shape" and want is not None:
        want_t = (int(want),) if isinstance(want, int) else tuple(int(d) for d in want)
        have = p._shape
        if have is None:
            p._shape = want_t
            return
        if len(have) == len(want_t) and all(a <= 0 or b <= 0 or a == b for a, b in zip(have, want_t)):
            p._shape = tuple(b if b > 0 else a for a, b in zip(want_t, have))
            return
    elif key == "dtype" and want is not None:
        if to_torch_dtype(want) == p._dtype:
            return
    else:
        have = getattr(p, key, None)
        if have is None:
            setattr(p, key, want)
            return
        if want is None or want == have:
            return
    raise MXNetError(
        f"cannot retrieve Parameter {p.name!r}: {key}={want!r} was asked for but it has "
        f"{key}={getattr(p, key, None)!r}"
    )
