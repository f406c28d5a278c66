"""What a checkpoint holds besides files a library writes: the snapshots taken (synchronously) at
``save`` and their JSON encodings, and putting them back.

Everything here is JSON or safetensors: nothing is ever unpickled.
"""

from __future__ import annotations

import base64
import json
import math
import random
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ..base import MXNetError

__all__ = ["capture_rng", "restore_rng", "snapshot_params", "encode_params", "decode_params",
           "scheduler_state", "restore_scheduler", "check_json"]

RNG_FORMAT = "mxtorch.checkpoint.rng"


def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.contiguous().numpy().tobytes()).decode("ascii")


def _unb64(s: Any, what: str) -> torch.Tensor:
    if not isinstance(s, str):
        raise MXNetError(f"bad RNG state: {what} is not a base64 string")
    raw = bytearray(base64.b64decode(s.encode("ascii"), validate=True))
    return torch.frombuffer(raw, dtype=torch.uint8).clone() if raw else torch.empty(0, dtype=torch.uint8)


def capture_rng() -> dict[str, Any]:
    """Every global generator a training step may draw from: Python's ``random``, numpy's global
    generator, torch's CPU generator and (when CUDA is available) each CUDA device's.

    ``mx.random`` and ``mx.nd.random`` draw from torch's generators, and samplers that shuffle
    with their own seed (``SplitSampler``) keep it in their own state, so these are all of them.
    """
    version, internal, gauss = random.getstate()
    name, key, pos, has_gauss, cached = np.random.get_state(legacy=True)  # type: ignore[misc]
    state: dict[str, Any] = {
        "format": RNG_FORMAT, "version": 1,
        "python": {"version": int(version), "state": [int(x) for x in internal], "gauss": gauss},
        "numpy": {"name": str(name), "key": [int(x) for x in key], "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": _b64(torch.get_rng_state()),
        "cuda": [_b64(s) for s in torch.cuda.get_rng_state_all()] if torch.cuda.is_available() else [],
    }
    return state


def restore_rng(state: Mapping[str, Any], source: str) -> None:
    """Put back the generators :func:`capture_rng` saved (``source`` names the file in errors).

    Every part is decoded before any generator changes.  CUDA states are restored when this
    process sees as many CUDA devices as the saving one; otherwise a warning says they were not.
    """
    if state.get("format") != RNG_FORMAT or state.get("version") != 1:
        raise MXNetError(f"{source}: not an RNG state file of this mxtorch (format {state.get('format')!r}, "
                         f"version {state.get('version')!r})")
    try:
        py = state["python"]
        py_state = (int(py["version"]), tuple(int(x) for x in py["state"]), py["gauss"])
        if py["gauss"] is not None and not isinstance(py["gauss"], float):
            raise TypeError(f"python gauss must be a float or null, got {py['gauss']!r:.40}")
        npd = state["numpy"]
        np_state = (str(npd["name"]), np.asarray(npd["key"], dtype=np.uint32), int(npd["pos"]),
                    int(npd["has_gauss"]), float(npd["cached_gaussian"]))
        cpu = _unb64(state["torch"], "torch")
        cuda = [_unb64(s, f"cuda[{i}]") for i, s in enumerate(state.get("cuda", []))]
        # tried on scratch generators first: a state they refuse changes no global generator
        random.Random().setstate(py_state)
        np.random.RandomState().set_state(np_state)
        torch.Generator().set_state(cpu)
    except (KeyError, TypeError, ValueError, IndexError, OverflowError, RuntimeError) as err:
        raise MXNetError(f"{source}: malformed RNG state ({type(err).__name__}: {str(err)[:200]})") from err
    random.setstate(py_state)
    np.random.set_state(np_state)
    torch.set_rng_state(cpu)
    if cuda:
        if torch.cuda.is_available() and torch.cuda.device_count() == len(cuda):
            torch.cuda.set_rng_state_all(cuda)
        else:
            have = torch.cuda.device_count() if torch.cuda.is_available() else 0
            warnings.warn(f"{source} holds the RNG states of {len(cuda)} CUDA device(s), this process sees "
                          f"{have}: CUDA generators are left as they are", stacklevel=3)


def snapshot_params(net: Any) -> dict[str, torch.Tensor]:
    """The parameters of ``net`` by the names ``net.save_parameters`` gives them, copied to CPU
    memory now (later training steps do not change the snapshot)."""
    out: dict[str, torch.Tensor] = {}
    copies: dict[int, torch.Tensor] = {}
    for name, p in net._collect_params_with_prefix().items():
        if id(p) not in copies:
            t = p._reduce()
            if any(t.untyped_storage().data_ptr() == d.untyped_storage().data_ptr() for d in p._check()):
                t = t.clone()  # a CPU parameter: _reduce gave the live tensor
            copies[id(p)] = t.contiguous()
        out[name] = copies[id(p)]
    return out


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
