"""Block and HybridBlock: Gluon's building blocks, as ``torch.nn.Module`` subclasses."""

from __future__ import annotations

import os
import re
import statistics
import sys
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from typing import Any

import torch

from .. import _autograd_symbol, autograd, nd
from .._dtype import to_torch_dtype
from ..base import MXNetError
from ..context import Context
from ..nd._ndarray_type import compiled_for_ndarrays
from ..profiler import span
from ..symbol._scope import Prefix
from ._block_fields import MXNetBlockFields
from ._block_files import BlockModelFiles
from ._block_state import BlockState, params_by_path
from ._hybrid_inputs import check_against, check_kinds, check_one_context, input_format
from ._op_hooks import install_op_hooks
from ._summary import summarize
from .parameter_core import Parameter, _fwd, wrap_torch_parameter
from .parameter_dict import ParameterDict
from .serialization import load_named, load_tensors, save_tensors
from .symbolic import call_symbolic, has_symbol
from .symbolic import input_names as symbolic_input_names
from .utils import HookHandle

__all__ = ["Block", "HybridBlock", "collect_params", "params_by_path", "as_parameters", "HYBRIDIZE_ENV"]

HYBRIDIZE_ENV = "MXTORCH_HYBRIDIZE"
"""Environment variable choosing what ``hybridize()`` does: 'auto' (default: torch.compile on
CUDA, eager on CPU, where compiling small networks was measured slower), 'compile' or 'eager'."""
_HYBRIDIZE_CHOICES = ("auto", "compile", "eager", "measure")
_TRIAL_CALLS = 5
"""Timed forward calls each way before ``measure`` keeps the faster (after warm-up and compile)."""
_TRIAL_MARGIN = 0.97
"""The compiled forward is kept only when its median time is below this fraction of eager's."""


def _hybridize_policy() -> str:
    v = os.environ.get(HYBRIDIZE_ENV, "auto").strip().lower() or "auto"
    if v not in _HYBRIDIZE_CHOICES:
        raise MXNetError(f"{HYBRIDIZE_ENV}={v!r} is not valid: use one of {_HYBRIDIZE_CHOICES}")
    return v


def _synchronizer(args: tuple[Any, ...]) -> Callable[[], None]:
    """A function that waits for the GPU of the first CUDA tensor in ``args`` (a no-op on CPU)."""
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_cuda:
            dev = a.device
            return lambda: torch.cuda.synchronize(dev)
    return lambda: None


def _input_context(args: tuple[Any, ...]) -> Context | None:
    for a in args:
        if isinstance(a, torch.Tensor):
            tag = getattr(a, "_mx_ctx", None)
            if tag is not None:
                return tag  # type: ignore[no-any-return]
            if a.device.type == "cuda":
                return Context("gpu", a.device.index or 0)
            return None
        if isinstance(a, (list, tuple)) and a:
            return _input_context(tuple(a))
    return None


def _amp_region(args: tuple[Any, ...]) -> Any:
    amp = sys.modules.get("mxtorch.amp")
    if amp is None or not amp.is_initialized():
        return nullcontext()
    dev = next((a.device.type for a in args if isinstance(a, torch.Tensor)), "cpu")
    if torch.is_autocast_enabled(dev):
        return nullcontext()
    return amp.autocast(device_type=dev)


def _symbolic_call(block: Block, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``block`` called with symbols: its graph under its name scope (none for prefix '')."""
    check_kinds(block, args)
    prefix = None if block._empty_prefix else block.prefix
    return call_symbolic(block, args, kwargs, prefix, block._gluon_params)


class _ScopeState(threading.local):
    current: _BlockScope | None = None
    counters: dict[str, int] | None = None  # automatic prefixes of blocks made outside any scope


_scope_state = _ScopeState()


class _BlockScope:
    """``with block.name_scope():`` — blocks created inside are named under ``block.prefix``.

    MXNet 1.x's naming: a block made with ``prefix=None`` gets ``'<class name lowercased><n>_'``,
    ``n`` counting the blocks of that class made in the same scope (outside any scope: in this
    thread); inside a scope the parent's prefix is prepended, and the block's parameters are
    looked up in the parent's shared ParameterDict.  A block with prefix ``''`` opens no scope.
    """

    def __init__(self, block: Block) -> None:
        self._block = block
        self._counter: dict[str, int] = {}
        self._old: _BlockScope | None = None
        self._names: Prefix | None = None

    @staticmethod
    def create(prefix: str | None, params: ParameterDict | None, hint: str) -> tuple[str, ParameterDict]:
        if prefix is not None and not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str or None, got {type(prefix).__name__}")
        if params is not None and not isinstance(params, ParameterDict):
            raise TypeError(f"params must be a ParameterDict (e.g. other.collect_params()) or None, got "
                            f"{type(params).__name__}")
        current = _scope_state.current
        if current is None:
            if prefix is None:
                counters = _scope_state.counters
                if counters is None:
                    counters = _scope_state.counters = {}
                count = counters.get(hint, 0)
                counters[hint] = count + 1
                prefix = f"{hint}{count}_"
            pdict = ParameterDict(prefix) if params is None else ParameterDict(params.prefix, params)
            return prefix, pdict
        if prefix is None:
            count = current._counter.get(hint, 0)
            current._counter[hint] = count + 1
            prefix = f"{hint}{count}_"
        if params is None:
            parent = current._block.params
            pdict = ParameterDict(parent.prefix + prefix, parent._shared)
        else:
            pdict = ParameterDict(params.prefix, params)
        return current._block.prefix + prefix, pdict

    def __enter__(self) -> _BlockScope:
        if not self._block._empty_prefix:
            self._old = _scope_state.current
            _scope_state.current = self
            # symbols made inside are named under the block's prefix too, as in MXNet
            self._names = Prefix(self._block.prefix)
            self._names.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._block._empty_prefix:
            if self._names is not None:
                self._names.__exit__(*exc)
            _scope_state.current = self._old
            self._old = None


class Block(MXNetBlockFields, BlockModelFiles, BlockState, torch.nn.Module):
    """Base class of all Gluon layers and models; a ``torch.nn.Module``.

    Assigning a :class:`Parameter` or a child block as an attribute registers it.  Names follow
    MXNet 1.x: ``prefix`` (automatic: ``'dense0_'``; inside a parent's ``name_scope()`` the
    parent's prefix comes first) starts the name of every parameter the block creates with
    ``self.params.get(name, ...)``; ``params`` (another block's ``collect_params()``) makes the
    new block take its parameters from there (parameter sharing).  ``collect_params()`` is keyed
    by those full names; ``save_parameters``, ``named_parameters()`` and ``state_dict()`` use
    attribute paths ('0.weight').
    """

    _gluon_params: OrderedDict[str, Parameter]
    _prefix: str
    _params_1x: ParameterDict
    _empty_prefix: bool
    _scope: _BlockScope

    def __init__(self, prefix: str | None = None, params: ParameterDict | None = None) -> None:
        super().__init__()
        full_prefix, pdict = _BlockScope.create(prefix, params, self._alias())
        object.__setattr__(self, "_gluon_params", OrderedDict())
        object.__setattr__(self, "_empty_prefix", prefix == "")
        object.__setattr__(self, "_prefix", full_prefix)
        object.__setattr__(self, "_params_1x", pdict)
        object.__setattr__(self, "_scope", _BlockScope(self))

    def _alias(self) -> str:
        """The stem of automatic prefixes: the class name in lower case."""
        return type(self).__name__.lower()

    # ---- registration ------------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, Parameter):
            gp = self.__dict__.get("_gluon_params")
            if gp is None:
                raise MXNetError("call super().__init__() before assigning parameters in a Block")
            old = gp.get(name)
            if old is not None and old is not value:
                old._owners = [(r, a) for r, a in old._owners if not (r() is self and a == name)]
                old_name = old.name
                if self._params_1x._params.get(old_name) is old:  # replaced: no longer this block's
                    del self._params_1x._params[old_name]
            self.__dict__.pop(name, None)
            self._modules.pop(name, None)
            self._buffers.pop(name, None)
            if not value._named:
                # a parameter made on its own joins this block's ParameterDict under its full name
                value.name = self._params_1x.prefix + value.name
                value._named = True
                self._params_1x.update({value.name: value})
            gp[name] = value
            object.__setattr__(self, name, value)
            value._add_owner(self, name)
        else:
            super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        gp = self.__dict__.get("_gluon_params")
        if gp is not None and name in gp:
            p = gp.pop(name)
            p._owners = [(r, a) for r, a in p._owners if not (r() is self and a == name)]
            self._parameters.pop(name, None)
            object.__delattr__(self, name)
        else:
            super().__delattr__(name)

    def register_forward_pre_hook(self, hook: Any, **kwargs: Any) -> HookHandle:  # type: ignore[override]
        """Call ``hook(block, inputs)`` before each forward; ``handle.detach()`` removes it."""
        return HookHandle(super().register_forward_pre_hook(hook, **kwargs))

    def register_forward_hook(self, hook: Any, **kwargs: Any) -> HookHandle:  # type: ignore[override]
        """Call ``hook(block, inputs, output)`` after each forward; ``handle.detach()`` removes it."""
        return HookHandle(super().register_forward_hook(hook, **kwargs))

    def register_child(self, block: torch.nn.Module, name: str | None = None) -> torch.nn.Module:
        """Register ``block`` as a child (named by position when ``name`` is None)."""
        self.add_module(name if name is not None else str(len(self._modules)), block)
        return block

    @property
    def prefix(self) -> str:
        """This block's prefix, e.g. 'sequential0_dense1_' (the start of its parameters' names)."""
        return self._prefix

    @property
    def name(self) -> str:
        """The prefix without its trailing '_'."""
        return self._prefix[:-1] if self._prefix.endswith("_") else self._prefix

    @property
    def params(self) -> ParameterDict:
        """This block's own ParameterDict (not its children's): ``self.params.get(name, shape=...)``."""
        return self._params_1x

    def name_scope(self) -> _BlockScope:
        """``with self.name_scope():`` names the child blocks created inside under this prefix."""
        return self._scope

    # ---- parameters --------------------------------------------------------------------
    def collect_params(self, select: str | None = None) -> ParameterDict:
        """This block's and its children's parameters, keyed by full name ('dense0_weight').

        ``select`` is a regular expression the names must match (``re.match``), e.g.
        ``'.*weight|.*bias'``.  Parameters of plain torch modules inside are named by the
        prefix of the nearest block and their attribute path ('net0_fc.weight').
        """
        for mod in self.modules():
            if isinstance(mod, Block):
                mod._check_container_with_block()
        return collect_params(self, select)

    def _collect_params_with_prefix(self, prefix: str = "") -> OrderedDict[str, Parameter]:
        """Parameters by attribute path ('0.weight'); a shared one appears under every path."""
        return params_by_path(self, prefix)

    def initialize(
        self,
        init: Any = None,
        ctx: Context | Sequence[Context] | None = None,
        verbose: bool = False,
        force_reinit: bool = False,
    ) -> None:
        """Initialize all parameters (default initializer: Uniform(0.07), as MXNet)."""
        self.collect_params().initialize(init if init is not None else "uniform", ctx, verbose, force_reinit)

    def share_parameters(self, shared: ParameterDict | dict[str, Parameter]) -> Block:
        """Replace parameters by those in ``shared`` with the same attribute paths ('0.weight')."""
        for name, p in shared.items():
            mod: torch.nn.Module = self
            *path, attr = name.split(".")
            for part in path:
                mod = getattr(mod, part)
            setattr(mod, attr, p)
        return self

    def save_parameters(self, filename: str, deduplicate: bool = False, format: str | None = None) -> None:
        """Save the parameters keyed by attribute path ('0.weight'), in MXNet's NDArray format
        (MXNet 1.x's ``load_parameters`` reads it) or, with ``format='safetensors'`` or a
        ``.safetensors`` file name, as safetensors.

        A parameter shared by several sub-blocks is saved under each of its paths, or once
        (under its first path) with ``deduplicate=True``.  Copies on several contexts are averaged.
        """
        out: dict[str, torch.Tensor] = {}
        seen: set[int] = set()
        for k, p in self._collect_params_with_prefix().items():
            if deduplicate and id(p) in seen:
                continue
            seen.add(id(p))
            out[k] = p._reduce()
        save_tensors(filename, out, format=format)

    def load_parameters(
        self,
        filename: str,
        ctx: Context | Sequence[Context] | None = None,
        allow_missing: bool = False,
        ignore_extra: bool = False,
        cast_dtype: bool = False,
        dtype_source: str = "current",
    ) -> None:
        """Load a file written by ``save_parameters`` (or by the legacy ``save_params``).

        Names are attribute paths; a file whose names are all free of '.' and are not this
        block's attribute paths is read as a legacy file of full names less this block's prefix.
        ``cast_dtype`` converts saved arrays to the parameters' dtypes (``dtype_source='current'``)
        or the parameters to the saved dtypes (``'saved'``).  Errors name the parameter.
        """
        loaded = load_tensors(filename)
        params = self._collect_params_with_prefix()
        if not loaded and not params:
            return
        legacy = not any("." in k for k in loaded) and not all(k in params for k in loaded)
        if legacy:
            self.collect_params().load_dict(loaded, ctx, allow_missing, ignore_extra, self.prefix,
                                            filename, cast_dtype, dtype_source)
            return
        load_named(params, loaded, repr(os.fspath(filename)), ctx=ctx, allow_missing=allow_missing,
                   ignore_extra=ignore_extra, cast_dtype=cast_dtype, dtype_source=dtype_source)

    def save_params(self, filename: str) -> None:
        """Deprecated (MXNet 1.x): save under full names less this block's prefix; prefer
        :meth:`save_parameters`, whose names do not depend on how blocks were created."""
        warnings.warn("save_params is deprecated: use save_parameters", DeprecationWarning, stacklevel=2)
        self.collect_params().save(filename, strip_prefix=self.prefix)

    def load_params(self, filename: str, ctx: Context | Sequence[Context] | None = None,
                    allow_missing: bool = False, ignore_extra: bool = False) -> None:
        """Deprecated (MXNet 1.x): :meth:`load_parameters`."""
        warnings.warn("load_params is deprecated: use load_parameters", DeprecationWarning, stacklevel=2)
        self.load_parameters(filename, ctx, allow_missing, ignore_extra)

    def cast(self, dtype: Any) -> Block:
        """Cast this block's parameters and its children's to ``dtype`` (layers may override,
        e.g. BatchNorm keeps float32 statistics)."""
        for p in self._gluon_params.values():
            p.cast(dtype)
        for child in self.children():
            if isinstance(child, Block):
                child.cast(dtype)
            else:
                child.to(to_torch_dtype(dtype))
        return self

    def reset_ctx(self, ctx: Context | Sequence[Context]) -> None:
        self.collect_params().reset_ctx(ctx)

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        """Hybridize every HybridBlock child (a plain Block itself always runs eagerly)."""
        for child in self.children():
            if isinstance(child, Block):
                child.hybridize(active, **kwargs)

    # ---- calling -----------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if has_symbol(args):
            return _symbolic_call(self, args, kwargs)
        if _fwd.depth or torch.compiler.is_compiling():
            return super().__call__(*args, **kwargs)
        prev, _fwd.ctx, _fwd.depth = _fwd.ctx, _input_context(args), 1
        try:
            with span("forward", block=type(self).__name__):  # the outermost block: one span a call
                return super().__call__(*args, **kwargs)
        finally:
            _fwd.depth = 0
            _fwd.ctx = prev

    def forward(self, *args: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def summary(self, *inputs: Any) -> str:
        """Print (and return) a table of layers, output shapes and parameter counts (the network
        must not be hybridized, as in MXNet)."""
        return summarize(self, *inputs)


def collect_params(module: torch.nn.Module, select: str | None = None) -> ParameterDict:
    """Gluon parameters of ``module`` and its children by full name (torch parameters wrapped)."""
    pattern = re.compile(select) if select else None
    out = ParameterDict(module.params.prefix if isinstance(module, Block) else "")
    _collect_named(module, "", out, pattern)
    return out


def as_parameters(params: Any) -> list[tuple[str, Parameter]]:
    """Normalize what a Trainer accepts: ParameterDict, dict, list of Parameters or torch params."""
    if isinstance(params, (ParameterDict, dict)):
        items = list(params.items())
    elif isinstance(params, torch.nn.Module):
        items = list(collect_params(params).items())
    elif isinstance(params, Iterable) and not isinstance(params, (str, torch.Tensor)):
        items = []
        for i, p in enumerate(params):
            items.append((getattr(p, "name", None) or f"param{i}", p))
    else:
        raise TypeError(
            f"expected a ParameterDict, a dict or a list of Parameters, got {type(params).__name__}"
        )
    out: list[tuple[str, Parameter]] = []
    seen: set[int] = set()
    for name, p in items:
        if isinstance(p, torch.nn.Parameter):
            p = wrap_torch_parameter(p, name)
        if not isinstance(p, Parameter):
            raise TypeError(f"parameter {name!r} is a {type(p).__name__}, expected gluon.Parameter")
        if id(p) in seen:
            continue
        seen.add(id(p))
        out.append((name, p))
    return out



def _collect_named(module: torch.nn.Module, path: str, out: ParameterDict,
                   pattern: re.Pattern[str] | None) -> None:
    # path: where a plain torch module sits below the nearest block ('' inside a block itself)
    found: list[tuple[str, Parameter]] = []
    gp: dict[str, Parameter] = {}
    if isinstance(module, Block):
        found.extend(module._params_1x.items())
        gp = module._gluon_params
        found.extend((p.name, p) for p in gp.values())
        base = module.prefix
    else:
        base = path
    for pname, tp in module._parameters.items():
        if tp is not None and pname not in gp:
            found.append((base + pname, wrap_torch_parameter(tp, base + pname)))
    if pattern is not None:
        found = [(k, p) for k, p in found if pattern.match(k)]
    out.update([(k, p) for k, p in found if out._params.get(k) is not p])
    for cname, child in module._modules.items():
        if child is not None:
            _collect_named(child, "" if isinstance(child, Block) else f"{base}{cname}.", out, pattern)


class HybridBlock(Block):
    """A Block whose computation can be compiled (``hybridize()`` → ``torch.compile``).

    Define ``forward(self, x, ...)``; MXNet 1.x style ``hybrid_forward(self, F, x, ...,
    **params)`` also works (``F`` is ``mxtorch.nd``, the parameters arrive as tensors).
    """

    _hybrid_active: bool
    _compiled: Any
    _compile_kwargs: dict[str, Any]
    _compile_failed: bool
    _trial: dict[str, list[float]] | None
    _hybrid_choice: str | None
    _warmed_up: bool
    _infer_pending: bool

    def __init__(self, prefix: str | None = None, params: ParameterDict | None = None) -> None:
        super().__init__(prefix, params)
        object.__setattr__(self, "_hybrid_active", False)
        object.__setattr__(self, "_compiled", None)
        object.__setattr__(self, "_compile_kwargs", {})
        object.__setattr__(self, "_compile_failed", False)
        object.__setattr__(self, "_warmed_up", False)
        object.__setattr__(self, "_trial", None)
        object.__setattr__(self, "_hybrid_choice", None)
        # a subclass overriding infer_shape gets it called until its parameters are known
        object.__setattr__(self, "_infer_pending", type(self).infer_shape is not HybridBlock.infer_shape)

    def hybridize(self, active: bool = True, backend: str | None = None, static_alloc: bool = False,
                  static_shape: bool = False, **kwargs: Any) -> None:
        """Compile this block's forward with torch.compile when that is expected to be faster.

        ``backend=None`` follows ``MXTORCH_HYBRIDIZE`` ('auto': compile on CUDA, stay eager on
        CPU); ``backend='eager'`` never compiles; any other value is a torch.compile backend
        (e.g. 'inductor') and forces compilation.  A compilation failure falls back to eager
        execution with one warning.  ``static_shape=True`` asks for a non-dynamic graph.
        """
        if backend is not None and not isinstance(backend, str):
            raise TypeError(f"backend must be a string or None, got {backend!r}")
        if backend not in (None, "eager"):
            import torch._dynamo

            known = torch._dynamo.list_backends(exclude_tags=())
            if backend not in known:
                raise ValueError(f"hybridize: unknown backend {backend!r}; use 'eager' or one of {known}")
        object.__setattr__(self, "_hybrid_active", bool(active))
        object.__setattr__(self, "_in_format", None)
        object.__setattr__(self, "_compiled", None)
        object.__setattr__(self, "_compile_failed", False)
        object.__setattr__(self, "_trial", None)
        object.__setattr__(self, "_hybrid_choice", None)
        opts = dict(kwargs)
        object.__setattr__(self, "_inline_limit", int(opts.pop("inline_limit", 2)))  # MXNet's: get_symbol
        if static_shape:
            opts.setdefault("dynamic", False)
        object.__setattr__(self, "_compile_kwargs", {"backend": backend, **opts})
        # children are compiled as part of this block, not on their own
        for child in self.children():
            if isinstance(child, Block):
                child.hybridize(False)

    def _compile_mode(self, args: tuple[Any, ...]) -> str:
        """'eager', 'compile', or 'measure' (time both on the first calls, keep the faster)."""
        backend = self._compile_kwargs.get("backend")
        if backend == "eager":
            return "eager"
        if backend is not None:
            return "compile"
        policy = _hybridize_policy()
        if policy != "auto":
            return policy
        # auto: small networks on a GPU are often launch-bound, where a compiled graph's guards and
        # wrappers cost more than its fused kernels save, so measure; on CPU compiling was slower
        return "measure" if any(isinstance(a, torch.Tensor) and a.is_cuda for a in args) else "eager"

    def _timed_call(self, kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One forward call (``kind`` 'eager' or 'compiled') timed for the hybridize trial."""
        trial = self._trial
        sync = _synchronizer(args)
        sync()
        t0 = time.perf_counter()
        out = super().__call__(*args, **kwargs) if kind == "eager" else self._compiled_call(args, kwargs)
        sync()
        if self._trial is trial and trial is not None:  # a compile failure ends the trial
            trial[kind].append(time.perf_counter() - t0)
            if len(trial["compiled"]) >= _TRIAL_CALLS:
                t_compiled, t_eager = statistics.median(trial["compiled"]), statistics.median(trial["eager"])
                fast = t_compiled < _TRIAL_MARGIN * t_eager
                object.__setattr__(self, "_hybrid_choice", "compiled" if fast else "eager")
                object.__setattr__(self, "_trial", None)
                if not fast:
                    object.__setattr__(self, "_compiled", None)
        return out

    def _compiled_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        prev = _fwd.ctx
        _fwd.ctx = _input_context(args)
        _fwd.depth = 1
        try:
            with _amp_region(args):  # amp's call hooks do not see the compiled path
                return self._compiled(*args, **kwargs)
        except Exception as e:
            error = e
        finally:
            _fwd.depth = 0
            _fwd.ctx = prev
        # An error of the input itself fails eagerly too and is raised as such; only when
        # eager execution works was the compiler at fault: then stay eager from now on.
        out = super().__call__(*args, **kwargs)
        warnings.warn(f"hybridize: torch.compile failed for {type(self).__name__} ({error!r}); "
                      "running eagerly", RuntimeWarning, stacklevel=3)
        object.__setattr__(self, "_compile_failed", True)
        object.__setattr__(self, "_trial", None)
        return out

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self._call(*args, **kwargs)
        if self._hybrid_active and not _fwd.depth and autograd.is_recording():  # one MXNet _CachedOp
            _autograd_symbol.mark_cached_call(self, args, out)
        return out

    def _call(self, *args: Any, **kwargs: Any) -> Any:
        if has_symbol(args):
            return _symbolic_call(self, args, kwargs)
        if self._hybrid_active and not _fwd.depth:
            self._check_hybrid_inputs(args)
        if self._infer_pending:
            self._run_infer_shape(args)
        if (not self._hybrid_active or self._compile_failed or self._hybrid_choice == "eager"
                or torch.compiler.is_compiling() or _fwd.depth):
            return super().__call__(*args, **kwargs)
        if not self._warmed_up:
            # the first call runs eagerly: it completes deferred shape inference
            out = super().__call__(*args, **kwargs)
            object.__setattr__(self, "_warmed_up", True)
            return out
        trial = self._trial
        if self._compiled is None:
            mode = self._compile_mode(args)
            if mode == "eager":
                return super().__call__(*args, **kwargs)
            kw = dict(self._compile_kwargs)
            if kw.get("backend") is None:
                kw.pop("backend")
            module_call = torch.nn.Module.__call__
            compiled = torch.compile(lambda *a, **k: module_call(self, *a, **k), **kw)
            object.__setattr__(self, "_compiled", compiled_for_ndarrays(compiled))
            if mode == "measure":
                trial = {"eager": [], "compiled": []}
                object.__setattr__(self, "_trial", trial)
                return self._compiled_call(args, kwargs)  # compiles: not timed
        if trial is not None:
            kind = "eager" if len(trial["eager"]) <= len(trial["compiled"]) else "compiled"
            return self._timed_call(kind, args, kwargs)
        return self._compiled_call(args, kwargs)

    def _check_hybrid_inputs(self, args: tuple[Any, ...]) -> None:
        """MXNet's rules for a hybridized block's inputs (see :mod:`._hybrid_inputs`)."""
        name = type(self).__name__
        fmt = input_format(list(args), name)
        stored = self.__dict__.get("_in_format")
        if stored is None:
            check_kinds(self, args)
            object.__setattr__(self, "_in_format", fmt)
        else:
            check_against(stored, fmt, name)
        check_one_context(args, name)

    def forward(self, *args: Any) -> Any:
        hf = getattr(self, "hybrid_forward", None)
        if hf is None:
            raise NotImplementedError(f"{type(self).__name__} must define forward() (or hybrid_forward())")
        check_kinds(self, args)
        params = {}
        for name, p in self._gluon_params.items():
            if not p.is_initialized and p._deferred is not None:
                raise MXNetError(
                    f"{type(self).__name__}.hybrid_forward: parameter {name!r} has unknown shape "
                    f"{p.shape}; give the full shape, or write forward() and call infer_shape"
                )
            params[name] = p.data()
        return hf(nd, *args, **params)

    def register_op_hook(self, callback: Callable[[str, str, torch.Tensor], Any],
                         monitor_all: bool = False) -> None:
        """Call ``callback(node_name, op_name, array)`` with the output of every operator this
        network runs (and its inputs with ``monitor_all``), named as MXNet's graph names them
        (``'dense0_fwd_output'``); a new call replaces the previous hook."""
        for h in self.__dict__.get("_op_hook_handles", ()):
            h.remove()
        object.__setattr__(self, "_op_hook_handles", install_op_hooks(self, callback, monitor_all))

    def infer_shape(self, *args: Any) -> None:
        """Override to set unknown parameter shapes from the inputs (MXNet 2.0's hook).

        Called with the block's inputs before forward while any of its own parameters still
        waits for its shape; set ``param.shape`` there (deferred init then completes).
        """

    def _run_infer_shape(self, args: tuple[Any, ...]) -> None:
        pending = [p for p in self._gluon_params.values() if p._data is None and p._deferred is not None]
        if pending:
            self.infer_shape(*args)
            for p in pending:
                if p._data is None:
                    p._finish_deferred_init()
        object.__setattr__(self, "_infer_pending", False)

    def export(self, path: str, epoch: int = 0, remove_amp_cast: bool = True) -> tuple[str, str]:
        """Write ``path-symbol.json`` (this block's graph) and ``path-%04d.params`` (``arg:``/``aux:``
        arrays) in MXNet's formats: MXNet 1.x loads them with ``SymbolBlock.imports``."""
        from ..symbol import Group, var

        inputs = [var(n) for n in symbolic_input_names(self)]
        out = self(*inputs)
        graph = Group(list(out)) if isinstance(out, (list, tuple)) else out
        sym_file, params_file = f"{path}-symbol.json", f"{path}-{epoch:04d}.params"
        graph.save(sym_file)
        args, aux = set(graph.list_arguments()), set(graph.list_auxiliary_states())
        arrays: dict[str, torch.Tensor] = {}
        for name, p in self.collect_params().items():
            if name in args:
                arrays[f"arg:{name}"] = p._reduce()
            elif name in aux:
                arrays[f"aux:{name}"] = p._reduce()
        save_tensors(params_file, arrays, format="mxnet")
        return sym_file, params_file

    def optimize_for(self, x: Any, *args: Any, backend: str | None = None, **kwargs: Any) -> None:
        self.hybridize(True, backend=backend, **kwargs)
        self(x, *args)
