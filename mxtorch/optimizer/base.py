"""Optimizer base class, registry, and the KVStore-style ``Updater``.

Every optimizer updates plain ``torch.Tensor`` weights in place under ``torch.no_grad()``.
Gradient preprocessing follows MXNet 2.0: ``g = clip(rescale_grad * grad, -clip_gradient, clip_gradient)``;
where weight decay enters the rule is documented per optimizer.
"""

from __future__ import annotations

import inspect
import io
import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..base import MXNetError
from ..registry import Registry, RegistryError

__all__ = [
    "Optimizer",
    "Updater",
    "register",
    "create",
    "get_updater",
    "LRSchedulerConflictError",
]

_LOW_PRECISION = (torch.float16, torch.bfloat16)
_STATE_FORMAT = "mxtorch.optimizer.Updater/1"
_MISSING = object()

# name (lower case) -> optimizer class; filled by register() below
_REGISTRY: Registry[type[Optimizer]] = Registry("optimizer", error=RegistryError)


class LRSchedulerConflictError(MXNetError, UserWarning):
    """Raised when the learning rate is set by hand while an ``lr_scheduler`` owns it.

    It derives from ``UserWarning`` as well, because MXNet raises ``UserWarning`` in this case.
    """


# ----------------------------------------------------------------------------------------------
# argument checks shared by the optimizers
# ----------------------------------------------------------------------------------------------
def _check_real(
    name: str,
    value: Any,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """Return ``float(value)`` after checking that it is a finite real number within the bounds."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo}, got {value!r}")
    if hi is not None and (v > hi or (hi_open and v == hi)):
        raise ValueError(f"{name} must be {'<' if hi_open else '<='} {hi}, got {value!r}")
    return v


def _check_unit(name: str, value: Any) -> float:
    """A decay rate (beta, rho, momentum): a number in [0, 1)."""
    return _check_real(name, value, lo=0.0, hi=1.0, hi_open=True)


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def _check_optional_positive(name: str, value: Any) -> float | None:
    if value is None:
        return None
    return _check_real(name, value, lo=0.0, lo_open=True)


def _check_int(name: str, value: Any, lo: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r} of type {type(value).__name__}")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value!r}")
    return int(value)


def _as_list(name: str, value: Any, n: int) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(
            f"index is a list of {n} entries, so {name} must be a list of the same length; "
            f"got {type(value).__name__}"
        )
    if len(value) != n:
        raise ValueError(f"index has {n} entries but {name} has {len(value)}")
    return list(value)


def _preprocess_grads(
    grads: list[torch.Tensor],
    weights: list[torch.Tensor],
    rescale: float,
    clip: float | None,
    wd: float,
) -> list[torch.Tensor]:
    """New tensors ``clip(rescale * grad, -clip, clip) + wd * weight`` (the inputs are untouched)."""
    gs = list(torch._foreach_mul(grads, rescale))
    if clip is not None:
        torch._foreach_clamp_min_(gs, -clip)
        torch._foreach_clamp_max_(gs, clip)
    if wd != 0.0:
        torch._foreach_add_(gs, weights, alpha=wd)
    return gs


def _norm(t: torch.Tensor) -> torch.Tensor:
    """L2 norm of ``t`` as a 0-dim tensor, accumulated in fp32 for fp16/bf16 inputs."""
    if t.dtype in _LOW_PRECISION:
        return torch.linalg.vector_norm(t, dtype=torch.float32)
    return torch.linalg.vector_norm(t)


def _is_sparse(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.layout != torch.strided


def _in_layout_of(dense: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``dense`` in the sparse layout of ``like`` (csr, or COO with ``like``'s sparse dimensions)."""
    if like.layout == torch.sparse_csr:
        return dense.to_sparse_csr()
    return dense.to_sparse(like.sparse_dim())


def _zeros_pair(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two zero buffers like ``weight`` (the two moments most optimizers keep)."""
    return (
        torch.zeros_like(weight, memory_format=torch.preserve_format),
        torch.zeros_like(weight, memory_format=torch.preserve_format),
    )


def _prep_grad(grad: torch.Tensor, rescale: float, clip: float | None) -> torch.Tensor:
    """A new tensor ``clip(rescale * grad, -clip, clip)``."""
    g = grad * rescale
    if clip is not None:
        g.clamp_(-clip, clip)
    return g


# ----------------------------------------------------------------------------------------------
# registry
# ----------------------------------------------------------------------------------------------
def register(klass: type[Optimizer]) -> type[Optimizer]:
    """Class decorator: make ``klass`` available to :func:`create` under ``klass.__name__.lower()``.

    The rules of :class:`mxtorch.registry.Registry`: a second, different class under a name
    already taken replaces it with a warning (MXNet's rule).
    """
    if not (isinstance(klass, type) and issubclass(klass, Optimizer)):
        raise TypeError(f"register expects a subclass of mxtorch.optimizer.Optimizer, got {klass!r}")
    return _REGISTRY.register(klass)


def create(name: str | Optimizer | type[Optimizer], **kwargs: Any) -> Optimizer:
    """Instantiate the optimizer registered as ``name`` (case-insensitive) with ``kwargs``.

    An ``Optimizer`` instance is returned as is (``kwargs`` must then be empty); an ``Optimizer``
    subclass is instantiated with ``kwargs``.
    """
    if isinstance(name, Optimizer):
        if kwargs:
            raise ValueError(
                f"create() got an Optimizer instance ({type(name).__name__}) together with keyword "
                f"arguments {sorted(kwargs)}; pass either a name with arguments or a ready optimizer"
            )
        return name
    if isinstance(name, type) and issubclass(name, Optimizer):
        return name(**kwargs)
    if not isinstance(name, str):
        raise TypeError(f"optimizer must be a name (str) or an Optimizer, got {name!r}")
    klass: type[Optimizer] = _REGISTRY[name]
    return klass(**kwargs)


def _sym_info(sym: Any) -> tuple[Any, ...]:
    """``(attr_dict, argument names)`` of a symbol (its ``__lr_mult__``/``__wd_mult__`` attributes)."""
    if sym is None:
        return ()
    if not (callable(getattr(sym, "attr_dict", None)) and callable(getattr(sym, "list_arguments", None))):
        raise TypeError(
            f"sym must be a Symbol (with attr_dict() and list_arguments()), got {type(sym).__name__}"
        )
    return (dict(sym.attr_dict()), list(sym.list_arguments()))


def _sym_mults(sym_info: tuple[Any, ...], key: str) -> dict[Any, float]:
    if not sym_info:
        return {}
    attrs, names = sym_info
    out: dict[Any, float] = {}
    for name in names:
        attr = attrs.get(name)
        if isinstance(attr, dict) and key in attr:
            out[name] = float(attr[key])
    return out


# ----------------------------------------------------------------------------------------------
# Optimizer
# ----------------------------------------------------------------------------------------------
class Optimizer:
    """Base class of all optimizers.

    Args:
        learning_rate: the global learning rate.  ``None`` (the default): the ``lr_scheduler``'s
            ``base_lr``, else the optimizer's default (0.01 unless documented otherwise).  Given
            together with an ``lr_scheduler``, it overwrites the scheduler's ``base_lr``.
        wd: weight decay (L2) coefficient.
        rescale_grad: every gradient is multiplied by this first (the Trainer sets ``1/batch_size``).
        clip_gradient: if not None, clip the rescaled gradient into ``[-clip_gradient, clip_gradient]``.
        lr_scheduler: callable ``num_update -> lr``; its ``base_lr`` is set to ``learning_rate``.
        multi_precision: keep an fp32 master copy of fp16/bf16 weights in the state.
        param_dict: index -> object with ``lr_mult`` and ``wd_mult`` (a gluon Parameter).
        begin_num_update: the update count every index starts from.
        param_idx2name: index -> name, used by ``set_lr_mult``/``set_wd_mult`` with names.
        sym: a Symbol whose arguments' ``__lr_mult__``/``__wd_mult__`` attributes become the
            multipliers of those names (MXNet's Module passes it).
        use_fused_step, aggregate_num: accepted for MXNet compatibility, no effect (every
            optimizer updates a list of weights in one call).
    """

    opt_registry = _REGISTRY

    def __init__(
        self,
        learning_rate: float | None = None,
        wd: float = 0.0,
        rescale_grad: float = 1.0,
        clip_gradient: float | None = None,
        lr_scheduler: Callable[[int], float] | None = None,
        multi_precision: bool = False,
        param_dict: dict[Any, Any] | None = None,
        begin_num_update: int = 0,
        param_idx2name: dict[Any, str] | None = None,
        sym: Any = None,
        use_fused_step: bool | None = None,
        aggregate_num: int | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs:
            raise TypeError(
                f"{type(self).__name__}() got unknown keyword argument(s) {sorted(kwargs)}; "
                f"accepted: {self._accepted_arguments()}"
            )
        if lr_scheduler is not None and not callable(lr_scheduler):
            raise TypeError(f"lr_scheduler must be callable (num_update -> lr), got {lr_scheduler!r}")
        if learning_rate is None:
            # MXNet: without a learning rate the scheduler's base_lr rules, else 0.01
            base = getattr(lr_scheduler, "base_lr", None) if lr_scheduler is not None else None
            chosen: Any = base if isinstance(base, numbers.Real) else self._default_learning_rate
            self.lr: float = _check_real("learning_rate", chosen, lo=0.0)
        else:
            self.lr = _check_real("learning_rate", learning_rate, lo=0.0)
            if lr_scheduler is not None:
                try:  # an explicit learning rate overwrites the scheduler's base_lr (MXNet)
                    lr_scheduler.base_lr = self.lr  # type: ignore[attr-defined]
                except (AttributeError, TypeError):
                    pass  # a plain callable without a base_lr slot
        self.lr_scheduler = lr_scheduler
        self.wd: float = _check_real("wd", wd, lo=0.0)
        self.rescale_grad: float = _check_real("rescale_grad", rescale_grad)
        self.clip_gradient: float | None = _check_optional_positive("clip_gradient", clip_gradient)
        self.multi_precision: bool = _check_bool("multi_precision", multi_precision)
        if param_dict is not None and not isinstance(param_dict, dict):
            raise TypeError(f"param_dict must be a dict index -> Parameter, got {type(param_dict).__name__}")
        self.param_dict: dict[Any, Any] = param_dict if param_dict is not None else {}
        if param_idx2name is not None and not isinstance(param_idx2name, dict):
            raise TypeError(
                f"param_idx2name must be a dict index -> name, got {type(param_idx2name).__name__}"
            )
        self.idx2name: dict[Any, str] = dict(param_idx2name) if param_idx2name else {}
        self.sym_info: tuple[Any, ...] = _sym_info(sym)
        self.begin_num_update: int = _check_int("begin_num_update", begin_num_update)
        self.num_update: int = self.begin_num_update
        # one update count per index and device (MXNet's _set_current_context); device 0 by default
        self._all_index_update_counts: dict[int, dict[Any, int]] = {0: {}}
        self._index_update_count: dict[Any, int] = self._all_index_update_counts[0]
        self.aggregate_num: int = 0 if aggregate_num is None else _check_int("aggregate_num", aggregate_num)
        self.lr_mult: dict[Any, float] = {}
        self.wd_mult: dict[Any, float] = {}
        self.set_lr_mult({})
        self.set_wd_mult({})

    _decayed_suffixes: tuple[str, ...] = ("weight", "gamma")  # names set_wd_mult keeps decaying
    _default_learning_rate = 0.01  # the learning rate when neither one nor a scheduler is given
    _master_first = True  # multi-precision state: (master, inner) as MXNet's base; SGD-like: (inner, master)
    lazy_update = False  # a row_sparse gradient updates only its rows (else: dense, absent rows zero)

    def _accepted_arguments(self) -> list[str]:
        names: set[str] = set()
        for klass in type(self).__mro__:
            init = klass.__dict__.get("__init__")
            if init is None:
                continue
            for p in inspect.signature(init).parameters.values():
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self":
                    names.add(p.name)
        return sorted(names)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(learning_rate={self.learning_rate!r}, wd={self.wd!r})"

    # ---------------------------------------------------------------- learning rate
    @property
    def learning_rate(self) -> float:
        """The current global learning rate: ``lr_scheduler(num_update)`` if a scheduler is set."""
        if self.lr_scheduler is not None:
            return float(self.lr_scheduler(self.num_update))
        return self.lr

    @learning_rate.setter
    def learning_rate(self, lr: float) -> None:
        self.set_learning_rate(lr)

    def set_learning_rate(self, lr: float) -> None:
        """Set the global learning rate; not allowed while an ``lr_scheduler`` is attached."""
        if self.lr_scheduler is not None:
            raise LRSchedulerConflictError(
                f"cannot set the learning rate to {lr!r}: this optimizer has an lr_scheduler "
                f"({type(self.lr_scheduler).__name__}), which decides the learning rate; change the "
                "scheduler's base_lr instead, or create the optimizer without a scheduler"
            )
        self.lr = _check_real("learning_rate", lr, lo=0.0)

    # ---------------------------------------------------------------- multipliers
    def set_lr_mult(self, args_lr_mult: dict[Any, float]) -> None:
        """Replace the per-parameter learning-rate multipliers (keys: index or name)."""
        if not isinstance(args_lr_mult, dict):
            raise TypeError(
                f"set_lr_mult expects a dict index/name -> float, got {type(args_lr_mult).__name__}"
            )
        mult = _sym_mults(self.sym_info, "__lr_mult__")
        mult.update({k: _check_real(f"lr_mult[{k!r}]", v) for k, v in args_lr_mult.items()})
        self.lr_mult = mult

    def set_wd_mult(self, args_wd_mult: dict[Any, float]) -> None:
        """Replace the per-parameter weight-decay multipliers (keys: index or name).

        As in MXNet, when ``param_idx2name`` was given, names that do not end in ``weight`` or
        ``gamma`` (biases, betas, ...) get a multiplier of 0 unless ``args_wd_mult`` says otherwise.
        """
        if not isinstance(args_wd_mult, dict):
            raise TypeError(
                f"set_wd_mult expects a dict index/name -> float, got {type(args_wd_mult).__name__}"
            )
        mult: dict[Any, float] = {}
        for name in self.idx2name.values():
            if not str(name).endswith(self._decayed_suffixes):
                mult[name] = 0.0
        mult.update(_sym_mults(self.sym_info, "__wd_mult__"))
        mult.update({k: _check_real(f"wd_mult[{k!r}]", v) for k, v in args_wd_mult.items()})
        self.wd_mult = mult

    def _lr_mult_of(self, index: Any) -> float:
        param = self.param_dict.get(index) if self.param_dict else None
        if param is not None:
            return float(param.lr_mult)
        if index in self.lr_mult:
            return self.lr_mult[index]
        name = self.idx2name.get(index)
        if name is not None:
            return self.lr_mult.get(name, 1.0)
        return 1.0

    def _wd_mult_of(self, index: Any) -> float:
        param = self.param_dict.get(index) if self.param_dict else None
        if param is not None:
            return float(param.wd_mult)
        if index in self.wd_mult:
            return self.wd_mult[index]
        name = self.idx2name.get(index)
        if name is not None:
            return self.wd_mult.get(name, 1.0)
        return 1.0

    def _base_lr(self) -> float:
        if self.lr_scheduler is not None:
            return float(self.lr_scheduler(self.num_update))
        return self.lr

    def _get_lr(self, index: Any) -> float:
        """Learning rate for ``index``: global (or scheduled) lr times its ``lr_mult``."""
        return self._base_lr() * self._lr_mult_of(index)

    def _get_wd(self, index: Any) -> float:
        """Weight decay for ``index``: ``wd`` times its ``wd_mult``."""
        return self.wd * self._wd_mult_of(index)

    def _get_lrs(self, indices: Sequence[Any]) -> list[float]:
        lr = self._base_lr()
        if not (self.param_dict or self.lr_mult or self.idx2name):
            return [lr] * len(indices)
        mult = self._lr_mult_of
        return [lr * mult(i) for i in indices]

    def _get_wds(self, indices: Sequence[Any]) -> list[float]:
        wd = self.wd
        if not (self.param_dict or self.wd_mult or self.idx2name):
            return [wd] * len(indices)
        mult = self._wd_mult_of
        return [wd * mult(i) for i in indices]

    def _set_current_context(self, device_id: int) -> None:
        """Count updates separately for device ``device_id`` from now on (MXNet: one count per
        index and device, so that replicas on several devices each advance once per step)."""
        counts = self._all_index_update_counts.get(device_id)
        if counts is None:
            counts = self._all_index_update_counts[device_id] = {}
        self._index_update_count = counts

    def _update_count(self, index: Any) -> None:
        """Count one more update of ``index`` (an index or a list); ``num_update`` is the maximum."""
        counts = self._index_update_count
        for i in index if isinstance(index, (list, tuple)) else (index,):
            c = counts.get(i, self.begin_num_update) + 1
            counts[i] = c
            if c > self.num_update:
                self.num_update = c

    # ---------------------------------------------------------------- states
    def create_state(self, index: Any, weight: torch.Tensor) -> Any:
        """Auxiliary state for ``weight`` (None, a tensor or a tuple of tensors)."""
        return None

    def create_state_multi_precision(self, index: Any, weight: torch.Tensor) -> Any:
        """Like ``create_state``; with ``multi_precision`` and an fp16/bf16 weight the state also
        holds an fp32 master copy of the weight: ``(master, create_state(index, master))``, or
        ``(create_state(index, master), master)`` for SGD, NAG, LARS and LBSGD (MXNet's layouts)."""
        if not isinstance(weight, torch.Tensor):
            raise TypeError(f"weight must be a torch.Tensor, got {type(weight).__name__}")
        if _is_sparse(weight):  # states of a sparse weight are dense (it is updated in dense form)
            weight = weight.detach().to_dense()
        if weight.dtype in _LOW_PRECISION:
            if self.multi_precision:
                master = weight.detach().to(dtype=torch.float32, copy=True)
                inner = self.create_state(index, master)
                return (master, inner) if self._master_first else (inner, master)
            warnings.warn(
                f"updating a {weight.dtype} weight (index {index!r}) in {weight.dtype} can lose accuracy; "
                "consider multi_precision=True",
                stacklevel=2,
            )
        return self.create_state(index, weight)

    # ---------------------------------------------------------------- updates
    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} must implement _step(index, weight, grad, state, lr, wd) "
            "or override update()"
        )

    def _apply_sparse(
        self,
        indices: list[Any],
        weights: list[Any],
        grads: list[Any],
        states: list[Any],
        multi_precision: bool = False,
    ) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
        """Update the entries with a sparse weight or a row_sparse gradient; return the others.

        A row_sparse gradient updates lazily or densely (``lazy_update``, see
        ``mxtorch.optimizer.sparse``).  A sparse weight (row_sparse or csr) is updated through its
        dense form, written back in its own layout; another sparse gradient (csr) is made dense.
        These are MXNet's storage fallbacks.
        """
        if not any(_is_sparse(g) for g in grads) and not any(_is_sparse(w) for w in weights):
            return indices, weights, grads, states
        from .sparse import is_row_sparse, update_sparse

        rest: tuple[list[Any], list[Any], list[Any], list[Any]] = ([], [], [], [])
        for i, w, g, s in zip(indices, weights, grads, states):
            if _is_sparse(w):
                dense = w.detach().to_dense()
                if multi_precision:
                    self.update_multi_precision(i, dense, g, s)
                else:
                    self.update(i, dense, g, s)
                with torch.no_grad():
                    w.copy_(_in_layout_of(dense, w))
            elif is_row_sparse(g):
                update_sparse(self, i, w, g, s)
            else:
                for lst, v in zip(rest, (i, w, g.to_dense() if _is_sparse(g) else g, s)):
                    lst.append(v)
        return rest

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Update ``weight`` in place from ``grad``; ``index`` may be an int or a list (then all are).

        A row_sparse ``grad`` updates only its rows (MXNet's lazy update; mxtorch.optimizer.sparse).
        """
        if isinstance(index, (list, tuple)):
            n = len(index)
            self.update_multi(
                list(index),
                _as_list("weight", weight, n),
                _as_list("grad", grad, n),
                _as_list("state", state, n),
            )
            return
        if _is_sparse(grad) or _is_sparse(weight):
            rest = self._apply_sparse([index], [weight], [grad], [state])
            if not rest[0]:
                return
            index, weight, grad, state = (r[0] for r in rest)
        if not isinstance(weight, torch.Tensor) or not isinstance(grad, torch.Tensor):
            raise TypeError(
                f"weight and grad must be torch.Tensor, got {type(weight).__name__} and {type(grad).__name__}"
            )
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        with torch.no_grad():
            try:
                self._step(index, weight, grad, state, lr, wd)
            except RuntimeError as err:
                _explain_failure([index], [weight], [grad], err)
                raise

    def update_multi(
        self, indices: list[Any], weights: list[Any], grads: list[Any], states: list[Any]
    ) -> None:
        """Update several weights at once; this base version calls ``update`` for each."""
        n = len(indices)
        weights = _as_list("weights", weights, n)
        grads = _as_list("grads", grads, n)
        states = _as_list("states", states, n)
        for i, w, g, s in zip(indices, weights, grads, states):
            self.update(i, w, g, s)

    def _unpack_mp_state(self, index: Any, weight: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
        """``(master, inner state)`` of a multi-precision state (see ``create_state_multi_precision``)."""
        if isinstance(state, (tuple, list)) and len(state) == 2:
            master, inner = (state[0], state[1]) if self._master_first else (state[1], state[0])
            if (
                isinstance(master, torch.Tensor)
                and master.dtype == torch.float32
                and master.shape == weight.shape
            ):
                return master, inner
        layout = "(fp32 master weight, inner state)"
        if not self._master_first:
            layout = "(inner state, fp32 master weight)"
        raise MXNetError(
            f"multi_precision is on and weight {index!r} is {weight.dtype}, so its state must be "
            f"{layout} as made by create_state_multi_precision; got {type(state).__name__}"
        )

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """``update`` that, with ``multi_precision``, updates the fp32 master copy of fp16/bf16 weights
        (with an fp32 gradient) and copies the result back into the low-precision weight."""
        if isinstance(index, (list, tuple)):
            n = len(index)
            indices = list(index)
            weights = _as_list("weight", weight, n)
            grads = _as_list("grad", grad, n)
            states = _as_list("state", state, n)
        else:
            indices, weights, grads, states = [index], [weight], [grad], [state]
        indices, weights, grads, states = self._apply_sparse(indices, weights, grads, states, True)
        if not indices:
            return
        if not self.multi_precision:
            self.update_multi(indices, weights, grads, states)
            return
        eff_w: list[Any] = []
        eff_g: list[Any] = []
        eff_s: list[Any] = []
        back: list[tuple[torch.Tensor, torch.Tensor]] = []
        for i, w, g, s in zip(indices, weights, grads, states):
            if isinstance(w, torch.Tensor) and w.dtype in _LOW_PRECISION:
                master, inner = self._unpack_mp_state(i, w, s)
                eff_w.append(master)
                eff_g.append(g.to(torch.float32) if isinstance(g, torch.Tensor) else g)
                eff_s.append(inner)
                back.append((w, master))
            else:
                eff_w.append(w)
                eff_g.append(g)
                eff_s.append(s)
        self.update_multi(indices, eff_w, eff_g, eff_s)
        if back:
            with torch.no_grad():
                for w, master in back:
                    w.copy_(master)

    # ---------------------------------------------------------------- serialization helpers
    def _hyper_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        for key, value in vars(self).items():
            if key.startswith("_") or key in ("num_update", "begin_num_update"):
                continue
            if value is None or isinstance(value, (bool, int, float, str)):
                params[key] = value
            elif key in ("lr_mult", "wd_mult", "idx2name") and isinstance(value, dict):
                if all(
                    isinstance(k, (int, str)) and isinstance(v, (int, float, str)) for k, v in value.items()
                ):
                    params[key] = dict(value)
        return {"name": type(self).__name__.lower(), "params": params}

    def _load_hyper_params(self, blob: Any) -> None:
        if not isinstance(blob, dict) or not isinstance(blob.get("params"), dict):
            raise MXNetError(f"optimizer entry of the states blob is malformed: {type(blob).__name__}")
        name = blob.get("name")
        if name != type(self).__name__.lower():
            raise MXNetError(
                f"the states blob was written by optimizer {name!r}, but this updater uses "
                f"{type(self).__name__.lower()!r}"
            )
        for key, value in blob["params"].items():
            if isinstance(key, str) and not key.startswith("_") and hasattr(self, key):
                setattr(self, key, dict(value) if isinstance(value, dict) else value)


def _explain_failure(indices: list[Any], weights: list[Any], grads: list[Any], err: BaseException) -> None:
    """Turn a torch shape/device/dtype failure into a message naming the parameter."""
    for i, w, g in zip(indices, weights, grads):
        if not isinstance(w, torch.Tensor) or not isinstance(g, torch.Tensor):
            raise TypeError(
                f"weight and grad of index {i!r} must be torch.Tensor, "
                f"got {type(w).__name__} and {type(g).__name__}"
            ) from err
        if w.shape != g.shape:
            raise ValueError(
                f"grad of index {i!r} has shape {tuple(g.shape)}, "
                f"expected the weight's shape {tuple(w.shape)}"
            ) from err
        if w.device != g.device:
            raise ValueError(
                f"grad of index {i!r} is on {g.device}, expected the weight's device {w.device}"
            ) from err


def _homogeneous(weights: list[Any], lrs: list[float], wds: list[float]) -> bool:
    """True when all weights share dtype and device and all lrs and wds are equal (one group)."""
    n = len(weights)
    if lrs.count(lrs[0]) != n or wds.count(wds[0]) != n:
        return False
    dt0 = weights[0].dtype
    dev0 = weights[0].device
    for w in weights:
        if w.dtype is not dt0 or w.device != dev0:
            return False
    return True


class _FusedOptimizer(Optimizer):
    """Optimizers whose update runs as ``torch._foreach_*`` ops over all same-dtype tensors at once.

    Subclasses implement ``_fused_step(weights, grads, states, lr, wd)`` for one group of tensors
    sharing device, dtype, learning rate and weight decay; the single-tensor ``update`` runs the
    same code on a group of one, so both paths give identical results.
    """

    def _fused_step(
        self, weights: list[torch.Tensor], grads: list[torch.Tensor], states: list[Any], lr: float, wd: float
    ) -> None:
        raise NotImplementedError

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Update ``weight`` in place from ``grad``; ``index`` may be an int or a list (then all are)."""
        if isinstance(index, (list, tuple)):
            n = len(index)
            self.update_multi(
                list(index),
                _as_list("weight", weight, n),
                _as_list("grad", grad, n),
                _as_list("state", state, n),
            )
        else:
            self.update_multi([index], [weight], [grad], [state])

    def update_multi(
        self, indices: list[Any], weights: list[Any], grads: list[Any], states: list[Any]
    ) -> None:
        """Update many weights with one ``torch._foreach_*`` pass per (device, dtype, lr, wd) group."""
        n = len(indices)
        if len(weights) != n or len(grads) != n or len(states) != n:
            raise ValueError(
                f"update_multi needs lists of equal length: {n} indices, {len(weights)} weights, "
                f"{len(grads)} grads, {len(states)} states"
            )
        indices, weights, grads, states = self._apply_sparse(indices, weights, grads, states)
        n = len(indices)
        if n == 0:
            return
        self._update_count(indices)
        lrs = self._effective_lrs(indices, self._get_lrs(indices))
        wds = self._get_wds(indices)
        groups: dict[tuple[Any, ...], tuple[list[Any], list[Any], list[Any], list[Any]]] = {}
        try:
            if _homogeneous(weights, lrs, wds):
                w0 = weights[0]
                groups[(w0.dtype, w0.device, lrs[0], wds[0])] = (indices, weights, grads, states)
            else:
                self._group(groups, indices, weights, grads, states, lrs, wds)
        except AttributeError as err:
            _explain_failure(indices, weights, grads, err)
            raise
        with torch.no_grad():
            for (_, _, lr, wd), (idx, ws, gs, ss) in groups.items():
                try:
                    self._fused_step(ws, gs, ss, lr, wd)
                except (RuntimeError, TypeError, IndexError, ValueError) as err:
                    _explain_failure(idx, ws, gs, err)
                    self._explain_states(idx, ss, err)
                    raise

    @staticmethod
    def _group(
        groups: dict[tuple[Any, ...], tuple[list[Any], list[Any], list[Any], list[Any]]],
        indices: list[Any],
        weights: list[Any],
        grads: list[Any],
        states: list[Any],
        lrs: list[float],
        wds: list[float],
    ) -> None:
        for i, w, g, s, lr, wd in zip(indices, weights, grads, states, lrs, wds):
            key = (w.dtype, w.device, lr, wd)
            group = groups.get(key)
            if group is None:
                groups[key] = ([i], [w], [g], [s])
            else:
                group[0].append(i)
                group[1].append(w)
                group[2].append(g)
                group[3].append(s)

    def _effective_lrs(self, indices: list[Any], lrs: list[float]) -> list[float]:
        """Per-index learning rates as the update uses them (Adam folds its bias correction in here)."""
        return lrs

    def _bias_corrected(
        self, indices: list[Any], lrs: list[float], beta1: float, beta2: float
    ) -> list[float]:
        counts = self._index_update_count
        cache: dict[int, float] = {}
        out = []
        for i, lr in zip(indices, lrs):
            t = counts[i]
            c = cache.get(t)
            if c is None:
                c = cache[t] = math.sqrt(1.0 - beta2**t) / (1.0 - beta1**t)
            out.append(lr * c)
        return out

    _state_layout = "tensor"  # 'tensor' or 'pair': what _fused_step expects in each state

    def _explain_states(self, indices: list[Any], states: list[Any], err: Exception) -> None:
        if self._state_layout == "tensor" and getattr(self, "momentum", 1.0) == 0.0:
            return  # no state is used
        for i, s in zip(indices, states):
            if self._state_layout == "pair":
                ok = (
                    isinstance(s, (tuple, list))
                    and len(s) == 2
                    and all(isinstance(x, torch.Tensor) for x in s)
                )
                what = "a (mean, var) tuple of tensors"
            else:
                ok = isinstance(s, torch.Tensor)
                what = "a momentum tensor"
            if not ok:
                raise MXNetError(
                    f"{type(self).__name__} needs {what} as the state of index {i!r}, got "
                    f"{type(s).__name__}; create states with create_state (and recreate them if "
                    "hyper-parameters such as momentum changed)"
                ) from err


# ----------------------------------------------------------------------------------------------
# Updater
# ----------------------------------------------------------------------------------------------
def _to_device(state: Any, device: torch.device) -> Any:
    if isinstance(state, torch.Tensor):
        return state.to(device)
    if isinstance(state, tuple):
        return tuple(_to_device(s, device) for s in state)
    if isinstance(state, list):
        return [_to_device(s, device) for s in state]
    return state


def _plain_state(key: Any, state: Any) -> Any:
    if state is None or isinstance(state, (bool, int, float, str)):
        return state
    if isinstance(state, torch.Tensor):
        return state.detach()
    if isinstance(state, (tuple, list)):
        return tuple(_plain_state(key, s) for s in state)
    raise MXNetError(
        f"cannot serialize the optimizer state of index {key!r}: {type(state).__name__} is not a tensor, "
        "number, None or tuple of those"
    )


class Updater:
    """Callable ``(index, grad, weight)`` that keeps one optimizer state per index (KVStore updater).

    States are created lazily with ``create_state_multi_precision`` and updated with
    ``update_multi_precision``; ``index``/``grad``/``weight`` may also be equal-length lists.
    """

    def __init__(self, optimizer: Optimizer) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"Updater needs an mxtorch Optimizer, got {type(optimizer).__name__}")
        self.optimizer = optimizer
        self.states: dict[Any, Any] = {}
        self.states_synced: dict[Any, bool] = {}

    def __call__(self, index: Any, grad: Any, weight: Any) -> None:
        if isinstance(index, (list, tuple)):
            n = len(index)
            indices = list(index)
            grads = _as_list("grad", grad, n)
            weights = _as_list("weight", weight, n)
        else:
            indices, grads, weights = [index], [grad], [weight]
        states = []
        for i, w in zip(indices, weights):
            st = self.states.get(i, _MISSING)
            if st is _MISSING:
                st = self.optimizer.create_state_multi_precision(i, w)
                self.states[i] = st
                self.states_synced[i] = True
            elif not self.states_synced.get(i, True):
                st = _to_device(st, w.device)
                self.states[i] = st
                self.states_synced[i] = True
            states.append(st)
        self.optimizer.update_multi_precision(indices, weights, grads, states)

    def get_states(self, dump_optimizer: bool = False) -> bytes:
        """Serialize the states, per-index update counts and ``num_update`` (``torch.save`` bytes).

        With ``dump_optimizer`` the optimizer's scalar hyper-parameters are included too (the
        lr_scheduler and param_dict are not).
        """
        opt = self.optimizer
        payload: dict[str, Any] = {
            "format": _STATE_FORMAT,
            "states": {k: _plain_state(k, v) for k, v in self.states.items()},
            "index_update_count": {k: int(v) for k, v in opt._index_update_count.items()},
            "num_update": int(opt.num_update),
        }
        if dump_optimizer:
            payload["optimizer"] = opt._hyper_params()
        buf = io.BytesIO()
        torch.save(payload, buf)
        return buf.getvalue()

    def set_states(self, states: bytes) -> None:
        """Load a blob written by ``get_states`` (read with ``torch.load(weights_only=True)``)."""
        if not isinstance(states, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"set_states expects the bytes returned by get_states, got {type(states).__name__}"
            )
        raw = bytes(states)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                payload = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
        except Exception as err:  # any unreadable blob, whatever torch raises
            detail = str(err).splitlines()[0][:200] if str(err) else ""
            raise MXNetError(
                f"cannot load optimizer states from {len(raw)} bytes: not a blob written by "
                f"Updater.get_states ({type(err).__name__}: {detail})"
            ) from err
        if not isinstance(payload, dict):
            raise MXNetError(
                f"the optimizer states blob holds a {type(payload).__name__}, expected the dict written by "
                "Updater.get_states"
            )
        if payload.get("format") != _STATE_FORMAT:
            raise MXNetError(
                f"the optimizer states blob has format {payload.get('format')!r}, expected {_STATE_FORMAT!r}"
            )
        loaded = payload.get("states")
        counts = payload.get("index_update_count")
        num_update = payload.get("num_update")
        if not isinstance(loaded, dict) or not isinstance(counts, dict) or not isinstance(num_update, int):
            raise MXNetError(
                "the optimizer states blob is missing 'states', 'index_update_count' or 'num_update'"
            )
        if not all(isinstance(v, int) for v in counts.values()):
            raise MXNetError("the optimizer states blob has non-integer update counts")
        if "optimizer" in payload:
            self.optimizer._load_hyper_params(payload["optimizer"])
        self.states = dict(loaded)
        self.states_synced = dict.fromkeys(self.states, False)
        opt = self.optimizer
        opt._index_update_count.clear()  # the current device's dict (in _all_index_update_counts)
        opt._index_update_count.update(counts)
        opt.num_update = num_update


def get_updater(optimizer: Optimizer) -> Updater:
    """An :class:`Updater` for ``optimizer``."""
    return Updater(optimizer)


Optimizer.register = staticmethod(register)  # type: ignore[attr-defined]
Optimizer.create_optimizer = staticmethod(create)  # type: ignore[attr-defined]
