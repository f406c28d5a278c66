"""Optimizer base class and registry (``Updater``: :mod:`.updater`; multi-tensor optimizers: :mod:`.fused`).

Every optimizer updates plain ``torch.Tensor`` weights in place under ``torch.no_grad()``.
Gradient preprocessing follows MXNet 2.0: ``g = clip(rescale_grad * grad, -clip_gradient, clip_gradient)``;
where weight decay enters the rule is documented per optimizer.
"""

from __future__ import annotations

import inspect
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch

from ..base import MXNetError
from ..registry import Registry, RegistryError
from .checks import _as_list, _check_bool, _check_int, _check_optional_positive, _check_real
from .rows import is_row_sparse, sparse_rows, step_rows
from .tensors import _LOW_PRECISION, _in_layout_of, _is_sparse, _zeros_pair

__all__ = [
    "Optimizer",
    "register",
    "create",
    "LRSchedulerConflictError",
]

# name (lower case) -> optimizer class; filled by register() below
_REGISTRY: Registry[type[Optimizer]] = Registry("optimizer", error=RegistryError)


class LRSchedulerConflictError(MXNetError, UserWarning):
    """Raised when the learning rate is set by hand while an ``lr_scheduler`` owns it.

    It derives from ``UserWarning`` as well, because MXNet raises ``UserWarning`` in this case.
    """


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
    # MXNet's class-level entry points, bound below (module functions register and create)
    register: ClassVar[Callable[[type[Optimizer]], type[Optimizer]]]
    create_optimizer: ClassVar[Callable[..., Optimizer]]

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
            self.lr: float = _check_real("learning_rate", chosen)
        else:
            self.lr = _check_real("learning_rate", learning_rate)
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
        self.lr = _check_real("learning_rate", lr)

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

    def _mult_of(self, index: Any, kind: str) -> float:
        """The ``kind`` ('lr' or 'wd') multiplier of ``index``: its Parameter's, else the one set by
        index, else by the index's name, else 1."""
        param = self.param_dict.get(index) if self.param_dict else None
        if param is not None:
            return float(getattr(param, f"{kind}_mult"))
        table = self.lr_mult if kind == "lr" else self.wd_mult
        if index in table:
            return table[index]
        name = self.idx2name.get(index)
        if name is not None:
            return table.get(name, 1.0)
        return 1.0

    def _lr_mult_of(self, index: Any) -> float:
        return self._mult_of(index, "lr")

    def _wd_mult_of(self, index: Any) -> float:
        return self._mult_of(index, "wd")

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
                step_rows(self, i, w, *sparse_rows(i, w, g), s)
            else:
                for lst, v in zip(rest, (i, w, g.to_dense() if _is_sparse(g) else g, s)):
                    lst.append(v)
        return rest

    def _update_listed(self, index: Any, weight: Any, grad: Any, state: Any) -> bool:
        """When ``index`` is a list: update its entries with ``update_multi`` and return True."""
        if not isinstance(index, (list, tuple)):
            return False
        n = len(index)
        self.update_multi(
            list(index), _as_list("weight", weight, n), _as_list("grad", grad, n), _as_list("state", state, n)
        )
        return True

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Update ``weight`` in place from ``grad``; ``index`` may be an int or a list (then all are).

        A row_sparse ``grad`` updates only its rows (MXNet's lazy update; mxtorch.optimizer.sparse).
        """
        if self._update_listed(index, weight, grad, state):
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



class _PairStateOptimizer(Optimizer):
    """An optimizer whose state is two zero tensors like the weight (two moments or accumulators)."""

    _state_layout = "pair"  # what a multi-tensor subclass's _fused_step expects (see .fused)

    def create_state(self, index: Any, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Two zero tensors like ``weight`` (what they hold: the comment on the subclass line)."""
        return _zeros_pair(weight)

Optimizer.register = staticmethod(register)  # type: ignore[assignment]
Optimizer.create_optimizer = staticmethod(create)  # type: ignore[assignment]
