"""What a checkpoint holds besides files a library writes: the snapshots taken (synchronously) at
``save`` and their JSON encodings, and putting them back.

Everything here is JSON, safetensors, or ``torch.save`` archives of tensors and plain values read
with ``torch.load(weights_only=True)``: nothing is ever unpickled.
"""

from __future__ import annotations

import io
import json
import math
import warnings
from collections.abc import Mapping
from typing import Any

import torch

from ..base import MXNetError

__all__ = ["snapshot_tensors", "encode_tensor_state", "decode_tensor_state", "encode_params",
           "decode_params", "scheduler_state", "restore_scheduler", "check_json"]


def snapshot_tensors(state: Mapping[str, Any], what: str) -> dict[str, torch.Tensor]:
    """A model's state dict (``net.state_dict()``: name -> tensor) copied to CPU memory now, so
    that later training steps do not change what is written in the background."""
    out: dict[str, torch.Tensor] = {}
    copies: dict[int, torch.Tensor] = {}
    for name, t in state.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"CheckpointManager.save: {what}.state_dict()[{name!r}] is a {type(t).__name__}, "
                            "not a tensor: net= takes a model whose state dict maps names to tensors")
        if id(t) not in copies:  # a tensor shared under several names is copied once
            copies[id(t)] = t.detach().to("cpu", copy=True).contiguous()
        out[name] = copies[id(t)]
    return out


def encode_tensor_state(state: Mapping[str, Any]) -> bytes:
    """A state dict holding tensors as ``torch.save`` bytes (read back without unpickling)."""
    buf = io.BytesIO()
    torch.save(dict(state), buf)
    return buf.getvalue()


def decode_tensor_state(raw: bytes, source: str) -> Any:
    """What :func:`encode_tensor_state` wrote, by ``torch.load(weights_only=True)``: tensors and
    plain values only, nothing is unpickled."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as err:  # whatever torch raises for bytes that are not its format
        detail = str(err).splitlines()[0][:200] if str(err) else ""
        raise MXNetError(f"{source} ({len(raw)} bytes) is not a state file of this mxtorch "
                         f"({type(err).__name__}: {detail})") from err


def encode_params(tensors: Mapping[str, torch.Tensor]) -> bytes:
    """safetensors bytes (a parameter shared under several names is stored once per name)."""
    from safetensors.torch import save

    seen: set[int] = set()
    flat: dict[str, torch.Tensor] = {}
    for k, t in tensors.items():
        flat[k] = t.clone() if id(t) in seen else t  # safetensors refuses shared storage
        seen.add(id(t))
    return save(flat, metadata={"format": "mxtorch"})


def decode_params(raw: bytes, source: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load

    try:
        return load(raw)
    except Exception as err:  # safetensors raises its own error types
        raise MXNetError(f"{source}: not a valid safetensors file ({type(err).__name__}: {err})") from err


def _plain(v: Any) -> bool:
    if v is None or isinstance(v, (bool, int, str)):
        return True
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, (list, tuple)) and all(_plain(x) for x in v)


def scheduler_state(trainer: Any) -> dict[str, Any] | None:
    """The lr scheduler's settings (its public scalars and lists of them), or None without one.

    mxtorch's schedulers are functions of the update count (restored with the optimizer) and of
    these settings, so this is all the state they have."""
    sched = getattr(getattr(trainer, "optimizer", None), "lr_scheduler", None)
    if sched is None or not hasattr(sched, "__dict__"):
        return None
    attrs = {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(sched).items()
             if not k.startswith("_") and _plain(v)}
    return {"type": type(sched).__name__, "attrs": attrs}


def restore_scheduler(trainer: Any, saved: Mapping[str, Any] | None, source: str) -> None:
    sched = getattr(getattr(trainer, "optimizer", None), "lr_scheduler", None)
    if saved is None or sched is None:
        if saved is not None:
            warnings.warn(f"{source} holds the settings of a {saved.get('type')} lr scheduler, but the "
                          "trainer's optimizer has none: they are not restored", stacklevel=3)
        return
    if type(sched).__name__ != saved.get("type"):
        warnings.warn(f"{source} holds the settings of a {saved.get('type')} lr scheduler, the trainer has a "
                      f"{type(sched).__name__}: its settings are left as they are", stacklevel=3)
        return
    for k, v in dict(saved.get("attrs") or {}).items():
        if hasattr(sched, k) and not k.startswith("_"):
            setattr(sched, k, v)


def check_json(extra: Mapping[str, Any]) -> str:
    """``extra`` as JSON text; a value JSON cannot hold raises TypeError naming its key."""
    for k, v in extra.items():
        try:
            json.dumps(v)
        except (TypeError, ValueError) as err:
            raise TypeError(f"CheckpointManager.save: extra value {k}={v!r:.100} is not JSON-serializable "
                            f"({err}); pass numbers, strings, lists and dicts of these") from err
    return json.dumps(dict(extra), sort_keys=True)
