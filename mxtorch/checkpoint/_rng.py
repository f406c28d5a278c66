"""The global random generators as one :class:`~mxtorch.stateful.Stateful` object.

A checkpoint keeps them so that a resumed job draws the numbers the uninterrupted one would
have drawn (dropout masks, shuffles, random augmentation).  The state is JSON values only.
"""

from __future__ import annotations

import base64
import random
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ..base import MXNetError

__all__ = ["RNGState", "capture_rng", "restore_rng", "RNG_FORMAT"]

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
                          f"{have}: CUDA generators are left as they are", stacklevel=4)



class RNGState:
    """Python's ``random``, numpy's global generator, torch's CPU generator and each CUDA
    device's, as one stateful object: ``state_dict()`` captures them now (JSON values),
    ``load_state_dict(state)`` puts them back (every part is checked before any generator
    changes).  ``source`` names where a loaded state came from in errors."""

    def __init__(self, source: str = "RNG state") -> None:
        self.source = source

    def state_dict(self) -> dict[str, Any]:
        return capture_rng()

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        if not isinstance(state_dict, Mapping):
            raise MXNetError(f"{self.source}: not an RNG state (a {type(state_dict).__name__}, not a dict)")
        restore_rng(state_dict, self.source)
