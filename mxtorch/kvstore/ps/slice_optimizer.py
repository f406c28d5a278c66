"""The optimizer a parameter server runs: one state and one update count per key slice.

A server may hold several slices of one key (a key above ``MXNET_KVSTORE_BIGARRAY_BOUND`` is
cut into pieces of at most ``MXTORCH_PS_PIECE_BYTES``, spread round-robin over the servers),
so states and update counts are kept per ``(key, shard)``, not per key as a local
:class:`~mxtorch.optimizer.Updater` keeps them.  The optimizer itself still sees the user's
key as its index: per-key ``lr_mult``/``wd_mult`` and names apply to every slice, and each
slice's update count (Adam's bias correction, schedulers) is the number of updates of that
slice, which is the key's number of steps.  A key of a worker group (one pipeline stage's
``pp<r>/<key>``) is updated by that group's own optimizer under the group's name of the key
(:attr:`KeyShard.own_key <.shard.KeyShard.own_key>`: its Trainer's index), while its state and
count stay filed under the server's ``(key, shard)``.

On the wire and in snapshots, states are ``[[key, shard, tree], ...]`` (``tree`` as packed by
:func:`~.protocol.pack_tree`) and counts ``[[key, shard, count], ...]``, with keys as
:func:`~.protocol.key_to_json` writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from ...optimizer import Optimizer
from ...optimizer.sparse import update_rows
from ..base import Key
from . import protocol as P
from .optimizer_spec import build_optimizer, describe_optimizer
from .protocol import ProtocolError
from .rows import Rows
from .shard import KeyShard

__all__ = ["SliceId", "SliceOptimizer"]

SliceId = tuple[Key, int]


class SliceOptimizer:
    """``optimizer`` with a state and an update count per key slice (see the module docstring)."""

    def __init__(self, optimizer: Optimizer) -> None:
        self.optimizer = optimizer
        self.states: dict[SliceId, Any] = {}
        self.counts: dict[SliceId, int] = {}

    # ---- updates -----------------------------------------------------------------------------
    def _counted(self, sid: SliceId, key: Key, fn: Callable[[], None]) -> None:
        """Run ``fn`` (an update of slice ``sid``, index ``key`` for the optimizer) with the optimizer
        counting that slice's updates."""
        opt = self.optimizer
        counts = opt._index_update_count
        counts[key] = self.counts.get(sid, opt.begin_num_update)
        fn()
        self.counts[sid] = counts[key]

    def _state(self, sid: SliceId, key: Key, weight: torch.Tensor) -> Any:
        state = self.states.get(sid)
        if state is None and sid not in self.states:
            state = self.states[sid] = self.optimizer.create_state_multi_precision(key, weight)
        return state

    def step(self, sh: KeyShard, grad: torch.Tensor, weight: torch.Tensor) -> None:
        """One optimizer step of slice ``sh`` (``weight``, updated in place) with the dense ``grad``."""
        sid, key = (sh.key, sh.shard), sh.own_key
        state = self._state(sid, key, weight)
        opt = self.optimizer
        self._counted(sid, key, lambda: opt.update_multi_precision([key], [weight], [grad], [state]))

    def step_rows(self, sh: KeyShard, weight: torch.Tensor, rows: Rows) -> None:
        """The lazy update of the rows ``rows`` touch only (states viewed like the weight)."""
        sid, key = (sh.key, sh.shard), sh.own_key
        state = self.states[sid] = _contiguous(self._state(sid, key, weight))
        w2, ids, g2 = sh.rows_view(weight, rows)
        view = _view_like(state, weight.shape, w2.shape)
        self._counted(sid, key, lambda: update_rows(self.optimizer, key, w2, ids, g2, view))

    # ---- states on the wire and on disk --------------------------------------------------------
    def pack(self, held: Iterable[SliceId], tensors: list[torch.Tensor]) -> dict[str, Any]:
        """The states and counts of the slices ``held`` (tensors appended to ``tensors``)."""
        held = list(held)
        return {
            "states": [[P.key_to_json(k), s, P.pack_tree(self.states[(k, s)], tensors)]
                       for k, s in held if (k, s) in self.states],
            "counts": [[P.key_to_json(k), s, int(self.counts[(k, s)])]
                       for k, s in held if (k, s) in self.counts],
            "num_update": int(self.optimizer.num_update),
        }

    @classmethod
    def restore(cls, m: dict[str, Any], tensors: list[torch.Tensor],
                held: Iterable[SliceId]) -> SliceOptimizer:
        """The optimizer a :meth:`record` or a GET_STATES reply (``m``, ``tensors``) describes, with its
        states for the key slices ``held``."""
        updater = cls(build_optimizer(m.get("optimizer")))
        by_key: dict[Key, list[int]] = {}
        for key, shard in held:
            by_key.setdefault(key, []).append(shard)
        updater.load(m, tensors, by_key)
        return updater

    def record(self, held: Iterable[SliceId], tensors: list[torch.Tensor]) -> dict[str, Any]:
        """:meth:`pack` plus the optimizer's declaration: all a restarted server needs."""
        return {"optimizer": describe_optimizer(self.optimizer), **self.pack(held, tensors)}

    def load(self, m: dict[str, Any], tensors: list[torch.Tensor],
             held: dict[Key, list[int]] | None = None) -> None:
        """Take states and counts written by :meth:`pack`.

        ``held`` (key -> the shards this server holds) reads the older per-key form
        ``[key, tree]`` / ``[key, count]``: the entry is the state of the one slice of that key
        this server holds.
        """
        states, counts, num_update = m.get("states"), m.get("counts"), m.get("num_update")
        if not isinstance(states, list) or not isinstance(counts, list) or not isinstance(num_update, int):
            raise ProtocolError("malformed optimizer states message")
        for item in states:
            sid, value = _entry(item, "optimizer state", held)
            self.states[sid] = P.unpack_tree(value, tensors)
        for item in counts:
            sid, value = _entry(item, "update count", held)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ProtocolError(f"malformed update count {value!r}")
            self.counts[sid] = value
        self.optimizer.num_update = max(num_update, self.optimizer.num_update)


def _entry(item: Any, what: str, held: dict[Key, list[int]] | None) -> tuple[SliceId, Any]:
    if isinstance(item, list) and len(item) == 3 and type(item[1]) is int:
        return (P.key_from_json(item[0]), item[1]), item[2]
    if isinstance(item, list) and len(item) == 2 and held is not None:
        key = P.key_from_json(item[0])
        shards = held.get(key, [])
        if len(shards) == 1:
            return (key, shards[0]), item[1]
    raise ProtocolError(f"malformed {what} entry {str(item)[:80]!r}")


def _contiguous(state: Any) -> Any:
    """``state`` with every tensor contiguous (states loaded from frames or files may not be)."""
    if isinstance(state, torch.Tensor):
        return state if state.is_contiguous() else state.contiguous()
    if isinstance(state, (tuple, list)):
        return type(state)(_contiguous(s) for s in state)
    return state


def _view_like(state: Any, shape: tuple[int, ...] | torch.Size, view: tuple[int, ...] | torch.Size) -> Any:
    """``state`` with every tensor of the weight's ``shape`` viewed as ``view`` (shared memory)."""
    if isinstance(state, torch.Tensor):
        return state.view(view) if state.shape == shape else state
    if isinstance(state, (tuple, list)):
        return type(state)(_view_like(s, shape, view) for s in state)
    return state
