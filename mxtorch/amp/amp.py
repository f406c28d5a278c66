"""Automatic mixed precision (AMP) for Gluon blocks and Trainers, on ``torch.autocast``.

How it works here
-----------------
``init(target_dtype)`` installs two process-wide module hooks
(``torch.nn.modules.module.register_module_forward_pre_hook`` / ``..._forward_hook``).  When an
mxtorch ``Block`` is called while no autocast region is active, the hooks open
``torch.autocast(device_type, target_dtype)`` for the duration of that call (``device_type``
comes from the first tensor argument); nested blocks then run inside that one region.  So
after ``init()`` every top-level ``net(x)`` computes matmuls/convolutions in the low precision
while the parameters stay float32 (autocast casts them per call).  Plain ``torch.nn`` modules
called at top level are left alone, and a region the user opened himself is never changed.

Precision lists: torch's autocast decides per operator (linear, conv, matmul, bmm in low
precision; on CUDA also softmax, log_softmax, norms, losses, exp/log... in float32).  CPU
autocast's float32 list is shorter (softmax and the norms follow their input dtype), so these
*blocks* are always run in float32 (autocast switched off, floating inputs cast up):
``gluon.loss.Loss`` subclasses and the normalisation layers (BatchNorm, LayerNorm, GroupNorm,
InstanceNorm, and torch's own norm modules inside an AMP region).  A bare
``torch.softmax``/``nd.softmax`` call inside a forward follows autocast's list for the device.

float16 on CPU: torch can run it but the CPU has no fast float16 matmul and bfloat16 needs no
loss scaling; the first CPU forward under ``target_dtype='float16'`` warns once
(``RuntimeWarning``) recommending ``'bfloat16'`` and then proceeds in float16.

Hybridized blocks compiled by ``torch.compile``: the hooks do nothing while dynamo traces,
so call a compiled network inside ``with amp.autocast():`` (dynamo supports that context).

Trainer integration (:func:`init_trainer`) sets a :class:`LossScalingHook` on the Trainer
through its documented update hooks (``Trainer.add_update_hook``), see that function.  Loss
scaling is only needed for float16; bfloat16 has float32's exponent range, and ``init_trainer``
then starts at scale 1 unless told otherwise.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch

from .._dtype import to_torch_dtype
from ..base import MXNetError
from .loss_scaler import LossScaler

__all__ = ["init", "is_initialized", "target_dtype", "reset", "autocast", "init_trainer", "scale_loss",
           "unscale", "convert_hybrid_block", "LossScalingHook", "amp_hook_of", "LOW_PRECISION_LAYERS",
           "FP32_LAYERS"]

_TARGETS = {torch.float16: "float16", torch.bfloat16: "bfloat16"}


def _target(dtype: Any) -> torch.dtype:
    try:
        t = to_torch_dtype(dtype)
    except Exception as e:
        raise ValueError(f"amp: target_dtype must be 'float16' or 'bfloat16', got {dtype!r}") from e
    if t not in _TARGETS:
        raise ValueError(f"amp: target_dtype must be 'float16' or 'bfloat16', got {dtype!r}")
    return t


# ---- global state and hooks ----------------------------------------------------------------
class _State(threading.local):
    def __init__(self) -> None:
        # (module, autocast context or None) for each block the hooks entered, innermost last
        self.stack: list[tuple[torch.nn.Module, Any]] = []


_tls = _State()
_config: dict[str, Any] = {"dtype": None, "handles": None, "warned_cpu_fp16": False}


@functools.cache
def _fp32_classes() -> tuple[type, ...]:
    from ..gluon import nn
    from ..gluon.loss import Loss

    norms = (nn.BatchNorm, nn.LayerNorm, nn.GroupNorm, nn.InstanceNorm)  # SyncBatchNorm is a BatchNorm
    return (Loss, *norms, torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm, torch.nn.GroupNorm)


@functools.cache
def _block_class() -> type:
    from ..gluon.block import Block

    return Block


def _first_device(obj: Any) -> torch.device | None:
    if isinstance(obj, torch.Tensor):
        return obj.device
    if isinstance(obj, (list, tuple)):
        for o in obj:
            d = _first_device(o)
            if d is not None:
                return d
    if isinstance(obj, dict):
        return _first_device(tuple(obj.values()))
    return None


def _to_fp32(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point() and obj.dtype in (torch.float16, torch.bfloat16):
            return obj.float()
        return obj
    if isinstance(obj, tuple):
        return tuple(_to_fp32(o) for o in obj)
    if isinstance(obj, list):
        return [_to_fp32(o) for o in obj]
    return obj


def _autocast_for(dev_type: str, dtype: torch.dtype) -> Any:
    if dev_type == "cpu" and dtype == torch.float16 and not _config["warned_cpu_fp16"]:
        _config["warned_cpu_fp16"] = True
        warnings.warn("amp: target_dtype='float16' on CPU runs slowly (no fast float16 matmul) and needs "
                      "loss scaling; use amp.init(target_dtype='bfloat16') on CPU", RuntimeWarning,
                      stacklevel=4)
    return torch.autocast(dev_type, dtype=dtype)


def _pre_hook(module: torch.nn.Module, args: tuple[Any, ...]) -> Any:
    dtype = _config["dtype"]
    if dtype is None or torch.compiler.is_compiling():
        return None
    is_block = isinstance(module, _block_class())
    stack = _tls.stack
    if not is_block and not stack:
        return None
    dev = _first_device(args)
    dev_type = dev.type if dev is not None else "cpu"
    if isinstance(module, _fp32_classes()):
        ctx = None
        if torch.is_autocast_enabled(dev_type):
            ctx = torch.autocast(dev_type, enabled=False)
            ctx.__enter__()
        stack.append((module, ctx))
        return _to_fp32(args)
    if not is_block:
        return None
    ctx = None
    if not stack and not torch.is_autocast_enabled(dev_type):
        ctx = _autocast_for(dev_type, dtype)
        ctx.__enter__()
    stack.append((module, ctx))
    return None


def _post_hook(module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
    stack = _tls.stack
    if not stack or stack[-1][0] is not module or torch.compiler.is_compiling():
        return
    _, ctx = stack.pop()
    if ctx is not None:
        ctx.__exit__(None, None, None)


def init(target_dtype: str | torch.dtype = "float16") -> None:
    """Turn AMP on for the process: every top-level Block call runs under ``torch.autocast``.

    Calling it again changes the target dtype.  ``reset()`` turns AMP off (mxtorch extension).
    """
    dtype = _target(target_dtype)
    _config["dtype"] = dtype
    if _config["handles"] is None:
        mm = torch.nn.modules.module
        _config["handles"] = (mm.register_module_forward_pre_hook(_pre_hook),
                              mm.register_module_forward_hook(_post_hook, always_call=True))


def is_initialized() -> bool:
    return _config["dtype"] is not None


def target_dtype() -> torch.dtype | None:
    """The dtype set by :func:`init`, or None when AMP is off."""
    return _config["dtype"]  # type: ignore[no-any-return]


def reset() -> None:
    """Turn AMP off again and remove the hooks (an mxtorch extension, handy in tests)."""
    handles = _config["handles"]
    if handles is not None:
        for h in handles:
            h.remove()
    _config["handles"] = None
    _config["dtype"] = None
    _tls.stack.clear()


@contextmanager
def autocast(target_dtype: str | torch.dtype | None = None, device_type: str = "cpu",
             enabled: bool = True) -> Iterator[None]:
    """An explicit AMP region (``torch.autocast``); the dtype defaults to the one from ``init``,
    else bfloat16 on CPU and float16 elsewhere."""
    if target_dtype is not None:
        dtype = _target(target_dtype)
    elif _config["dtype"] is not None:
        dtype = _config["dtype"]
    else:
        dtype = torch.bfloat16 if device_type == "cpu" else torch.float16
    with torch.autocast(device_type, dtype=dtype, enabled=enabled):
        yield


# ---- Trainer integration -----------------------------------------------------------------
class LossScalingHook:
    """The :class:`gluon.UpdateHook <mxtorch.gluon.trainer.UpdateHook>` that :func:`init_trainer`
    sets: dynamic loss scaling inside ``Trainer.step``/``update``.

    After an exact reduction every context (and, with a distributed store, every worker) holds
    the same sums, so the overflow check on the reduced gradients agrees everywhere; with
    ``update_on_kvstore`` the local gradients are checked before they are pushed.

    A store that *compresses* gradients would hide an overflow (2bit sends an ``inf`` as
    ``+threshold``) and keep it in its error-feedback residual for good.  There the gradients
    are unscaled and checked *before* the reduction (one fused pass), the workers agree on the
    outcome with one tiny integer all-reduce, and an overflow skips the reduction as well as the
    update: the compressor only ever sees finite, unscaled gradients, so its threshold and its
    residuals do not depend on the loss scale.

    Its state (``state_dict``) is the scaler's, saved by ``Trainer.save_states`` in the file's
    ``'amp'`` hook section.
    """

    name = "amp"

    def __init__(self, scaler: LossScaler) -> None:
        self.scaler = scaler
        self.unscaled: str | None = None  # who divided this step's gradients: "user" or "reduce"
        self.last_overflow = False
        self._overflow_before_reduce: bool | None = None
        self._forced_overflow = False

    def force_overflow(self) -> None:
        """Make the coming step count as an overflow (skipped, scale lowered) whatever this rank's
        gradients hold: for jobs whose ranks hold different parameters (pipeline stages), which
        agree on an overflow among themselves before ``Trainer.step``."""
        self._forced_overflow = True

    def before_reduce(self, trainer: Any, grads: list[torch.Tensor]) -> bool:
        """With a compressing store: unscale and check this worker's gradients, agree with the
        other workers; False (skip the reduction) on an overflow anywhere."""
        self._overflow_before_reduce = None
        kv = trainer.kvstore
        if getattr(kv, "compressor", None) is None or trainer.update_on_kvstore:
            return True
        if self.unscaled is not None:  # amp.unscale already divided the scale out
            overflow = self.scaler.has_overflow(grads)
        else:
            overflow = self.scaler.unscale_(grads)
            self.unscaled = "reduce"
        if kv.num_workers > 1:
            flag = torch.tensor([int(overflow)], dtype=torch.int64)
            kv.pushpull("amp.overflow", flag)  # integers are never compressed
            overflow = bool(flag.item())
        self._overflow_before_reduce = overflow
        return not overflow

    def before_update(self, trainer: Any, grads: list[torch.Tensor]) -> float | None:
        """Check ``grads`` for inf/nan in one fused pass and apply the scaler's policy; None (skip
        the update) on overflow, else the factor that unscales the gradients."""
        unscaled, self.unscaled = self.unscaled, None
        early, self._overflow_before_reduce = self._overflow_before_reduce, None
        forced, self._forced_overflow = self._forced_overflow, False
        overflow = True if (early or forced) else self.scaler.has_overflow(grads)
        used = self.scaler.loss_scale  # the scale this step's gradients carry, before the policy changes it
        self.scaler.update_scale(overflow)
        self.last_overflow = overflow  # the Trainer's MXNet-era _amp_last_overflow reads it
        if overflow:
            return None
        return 1.0 if unscaled is not None else 1.0 / used

    def state_dict(self) -> dict[str, Any]:
        return {"loss_scaler": self.scaler.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping) or not isinstance(state.get("loss_scaler"), dict):
            raise MXNetError(f"amp: not an AMP hook state (no 'loss_scaler' dict): {state!r:.200}")
        self.scaler.load_state_dict(state["loss_scaler"])
        self.unscaled = None
        self._overflow_before_reduce = None
        self._forced_overflow = False


def amp_hook_of(trainer: Any) -> LossScalingHook | None:
    """The :class:`LossScalingHook` that :func:`init_trainer` added to ``trainer``, or None."""
    find = getattr(trainer, "update_hook_named", None)
    hook = find(LossScalingHook.name) if callable(find) else None
    return hook if isinstance(hook, LossScalingHook) else None


def _hook_of(trainer: Any) -> LossScalingHook:
    hook = amp_hook_of(trainer)
    if hook is None:
        raise MXNetError("amp: this Trainer has no loss scaler; call amp.init_trainer(trainer) first")
    return hook


def _scaler_of(trainer: Any) -> LossScaler:
    return _hook_of(trainer).scaler


def _trainer_grads(trainer: Any) -> list[torch.Tensor]:
    return [g for _, grads in trainer.gradient_copies() for g in grads if g is not None]


def init_trainer(trainer: Any, loss_scaler: LossScaler | None = None) -> LossScaler:
    """Attach a dynamic :class:`LossScaler` to a ``gluon.Trainer`` and return it.

    The Trainer gets a :class:`LossScalingHook` (``trainer.add_update_hook``): then
    ``trainer.step(batch_size)`` reduces gradients, checks them for inf/nan in one fused pass,
    and on overflow skips the update (weights, optimizer states and update counts untouched,
    gradients discarded) and divides the scale; otherwise it folds ``1/loss_scale`` into the
    optimizer's ``rescale_grad`` (no extra pass over the gradients) unless :func:`unscale`
    already divided them.  ``trainer.update`` does the same after ``allreduce_grads()``.
    ``Trainer.save_states``/``load_states`` keep the scale (call ``init_trainer`` before
    ``load_states``).  With bfloat16 targets the default scaler starts at 1.0.  As in MXNet the
    scaler is also ``trainer._amp_loss_scaler``.
    """
    from ..gluon.trainer import Trainer

    if not isinstance(trainer, Trainer):
        raise TypeError(f"amp.init_trainer expects a gluon.Trainer, got {type(trainer).__name__}")
    if amp_hook_of(trainer) is not None:
        raise MXNetError("amp.init_trainer: this Trainer is already initialized for AMP")
    if loss_scaler is None:
        loss_scaler = LossScaler(init_scale=1.0) if _config["dtype"] == torch.bfloat16 else LossScaler()
    elif not isinstance(loss_scaler, LossScaler):
        raise TypeError(f"amp.init_trainer: loss_scaler must be a LossScaler, "
                        f"got {type(loss_scaler).__name__}")
    trainer.add_update_hook(LossScalingHook(loss_scaler))  # the Trainer's _amp_loss_scaler shows it
    return loss_scaler


@contextmanager
def scale_loss(loss: Any, trainer: Any) -> Iterator[Any]:
    """``with amp.scale_loss(loss, trainer) as scaled: autograd.backward(scaled)``: yields the
    loss (a tensor, or a list/tuple of them) multiplied by the trainer's current loss scale."""
    scale = _scaler_of(trainer).loss_scale
    if isinstance(loss, (list, tuple)):
        yield type(loss)(_mul(x, scale) for x in loss)
    else:
        yield _mul(loss, scale)


def _mul(x: Any, scale: float) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"amp.scale_loss: the loss must be a tensor (or a list of them), "
                        f"got {type(x).__name__}")
    # Scale in float32: a float16 loss times 2**16 overflows by itself.
    return x.float() * scale if x.dtype in (torch.float16, torch.bfloat16) else x * scale


def unscale(trainer: Any) -> bool:
    """Divide the trainer's gradients in place by the loss scale, so that e.g.
    ``gluon.utils.clip_global_norm`` sees the true gradients; the next ``step``/``update`` then
    does not divide again.  Returns whether the gradients overflowed (the step will be skipped).
    Calling it twice before a step is an error."""
    hook = _hook_of(trainer)
    if hook.unscaled == "user":
        raise MXNetError("amp.unscale: the gradients were already unscaled since the last step")
    if hook.unscaled == "reduce":  # a compressing store's reduction already unscaled them
        return bool(hook._overflow_before_reduce)
    overflow = hook.scaler.unscale_(_trainer_grads(trainer))
    hook.unscaled = "user"
    return overflow


# ---- model conversion ----------------------------------------------------------------------
@functools.cache
def _low_precision_classes() -> tuple[type, ...]:
    from ..gluon import nn, rnn

    # gluon's public layers (their private bases are gluon's business)
    convs = (nn.Conv1D, nn.Conv2D, nn.Conv3D, nn.Conv1DTranspose, nn.Conv2DTranspose, nn.Conv3DTranspose)
    recurrent = (rnn.RNN, rnn.LSTM, rnn.GRU, rnn.RNNCell, rnn.LSTMCell, rnn.GRUCell, rnn.LSTMPCell)
    return (nn.Dense, *convs, *recurrent, torch.nn.Linear, torch.nn.modules.conv._ConvNd)


LOW_PRECISION_LAYERS = ("Dense", "Conv*D", "Conv*DTranspose", "RNN/LSTM/GRU layers and cells",
                        "torch.nn.Linear", "torch.nn.Conv*")
"""Layers whose parameters ``convert_hybrid_block`` always casts (their main op runs in low precision)."""
FP32_LAYERS = ("BatchNorm", "SyncBatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm", "torch norm modules",
               "gluon.loss.Loss")
"""Layers whose parameters and statistics stay float32 and which run in float32 under AMP."""


def _autocast_block_hooks(block: torch.nn.Module, dtype: torch.dtype) -> None:
    old = getattr(block, "_amp_block_hooks", None)
    if old is not None:
        for h in old:
            h.remove()
    state: list[Any] = []

    def pre(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        if torch.compiler.is_compiling():
            return
        dev = _first_device(args)
        dev_type = dev.type if dev is not None else "cpu"
        ctx = None
        if not torch.is_autocast_enabled(dev_type):
            ctx = _autocast_for(dev_type, dtype)
            ctx.__enter__()
        state.append(ctx)

    def post(module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if torch.compiler.is_compiling() or not state:
            return
        ctx = state.pop()
        if ctx is not None:
            ctx.__exit__(None, None, None)

    hooks = (block.register_forward_pre_hook(pre, prepend=True),
             block.register_forward_hook(post, always_call=True))
    object.__setattr__(block, "_amp_block_hooks", hooks)


def convert_hybrid_block(block: Any, target_dtype: str | torch.dtype = "float16",
                         cast_optional_params: bool = False, **kwargs: Any) -> Any:
    """Convert ``block`` (in place) to mixed precision and return it.

    Parameters of layers whose main operator runs in low precision (Dense, convolutions,
    recurrent layers: :data:`LOW_PRECISION_LAYERS`) are cast to ``target_dtype``; parameters and
    running statistics of normalisation layers (:data:`FP32_LAYERS`) stay float32.  The other
    parameters (e.g. Embedding, PReLU's alpha, parameters of custom blocks) are *optional*:
    cast only with ``cast_optional_params=True``.  The block's forward then always runs under
    ``torch.autocast(target_dtype)`` (a hook on this block; no global ``init`` needed), which
    casts inputs and the remaining float32 parameters per operator.  MXNet's ``target_dtype_ops``
    / ``fp32_ops`` / ``excluded_sym_names`` lists have no equivalent: torch's autocast lists decide.
    """
    from ..gluon.block import Block

    if not isinstance(block, torch.nn.Module):
        raise TypeError(f"amp.convert_hybrid_block expects a Block, got {type(block).__name__}")
    unsupported = {k for k, v in kwargs.items() if v is not None}
    if unsupported:
        raise MXNetError(f"amp.convert_hybrid_block: {sorted(unsupported)} are not supported here (torch's "
                         "autocast operator lists are used); leave them None")
    dtype = _target(target_dtype)
    fp32_cls = _fp32_classes()
    lp_cls = _low_precision_classes()
    for mod in block.modules():
        if isinstance(mod, fp32_cls):
            continue
        if not (cast_optional_params or isinstance(mod, lp_cls)):
            continue
        gp = getattr(mod, "_gluon_params", None)
        if isinstance(mod, Block) and gp is not None:
            for p in gp.values():
                if to_torch_dtype(p.dtype).is_floating_point:
                    p.cast(dtype)
        with torch.no_grad():
            for name, tp in mod._parameters.items():
                if tp is not None and tp.is_floating_point() and (gp is None or name not in gp):
                    tp.data = tp.data.to(dtype)
    _autocast_block_hooks(block, dtype)
    return block
