"""MXNet's KVStore-style ``Updater``: one optimizer state per index, saved in a versioned format.

``get_states`` writes a dict tagged ``format: "mxtorch.optimizer.Updater/1"`` with ``torch.save``;
``set_states`` reads it back with ``weights_only=True`` (nothing is unpickled).
"""

from __future__ import annotations

import io
import warnings
from typing import Any

import torch

from ..base import MXNetError
from .base import Optimizer
from .checks import _as_list

__all__ = ["Updater", "get_updater"]

_STATE_FORMAT = "mxtorch.optimizer.Updater/1"
_MISSING = object()


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
