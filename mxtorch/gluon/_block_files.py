"""``Block.save(prefix)`` / ``Block.load(prefix)``: MXNet 1.9's model files.

``<prefix>-model.json`` holds the block tree (MXNet's layout: each block an entry named by its
class and its position in a depth-first walk, with its name when saved, whether it was
hybridized and how its parent keyed each child) and ``<prefix>-model.params`` the parameters
(``save_parameters``).  ``load`` needs a block built the same way; it puts the children back
under the keys they were saved with (their parameters' attribute paths depend on them), turns
hybridization back on where it was on, then loads the parameters.

MXNet also stores each hybridized block's traced graph; torch re-traces on the first call, so
the files written here mark such blocks ``mxtorch_hybridized`` and leave MXNet's ``hybridized``
false (MXNet 1.9 then reads them as plain blocks); graphs in MXNet's files are not needed here.
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch

from .. import bounded_json
from ..base import MXNetError

__all__ = ["BlockModelFiles"]

MAX_MODEL_JSON_BYTES = 64 << 20
"""Largest ``-model.json`` read (MXNet's holds symbol graphs: far below this)."""


def _entry_key(block: torch.nn.Module, index: int) -> str:
    return f"{type(block).__name__.lower()}{index}"


def _name_of(block: torch.nn.Module, key: str) -> str:
    name = getattr(type(block), "name", None)
    # a Block's name; a plain torch module has none, so its key stands in
    return block.name if isinstance(name, property) else key  # type: ignore[return-value]


def _structure(block: torch.nn.Module, index: list[int], into: dict[str, Any]) -> None:
    entry: dict[str, Any] = {"orig_name": _name_of(block, type(block).__name__.lower()), "hybridized": False}
    if getattr(block, "_hybrid_active", False):
        entry["mxtorch_hybridized"] = True
    into[_entry_key(block, index[0])] = entry
    children: dict[str, str] = {}
    entry["children"] = children
    for key, child in block.named_children():
        index[0] += 1
        children[_name_of(child, key)] = key
        _structure(child, index, entry)


def _restore(block: torch.nn.Module, index: list[int], saved: dict[str, Any], source: str) -> str:
    """Restore ``block`` from its entry in ``saved``; return the name it was saved under."""
    key = _entry_key(block, index[0])
    entry = saved.get(key)
    if not isinstance(entry, dict) or not isinstance(entry.get("children"), dict) \
            or not isinstance(entry.get("orig_name"), str):
        raise MXNetError(f"{source}: no entry {key!r} for this block's {type(block).__name__}: build the "
                         "block the same way as the saved one (same classes, same order)")
    hybridized = entry.get("hybridized") is True or entry.get("mxtorch_hybridized") is True
    hybridize = getattr(block, "hybridize", None)
    if hybridized and callable(hybridize):
        hybridize(True)
    saved_keys = entry["children"]
    keyed = []
    for child in block.children():
        index[0] += 1
        # the parent keyed each child by the child's name when saved
        orig = saved_keys.get(_restore(child, index, entry, source))
        if not isinstance(orig, str):
            raise MXNetError(f"{source}: {key!r} has no saved child named like this block's "
                             f"{type(child).__name__}: build the block the same way as the saved one")
        keyed.append((orig, child))
    if len({k for k, _ in keyed}) != len(keyed):
        raise MXNetError(f"{source}: two children of {key!r} were saved under one key")
    if any(new != old for (new, _), old in zip(keyed, block._modules)):
        block._modules.clear()
        block._modules.update(keyed)
    return entry["orig_name"]


class BlockModelFiles:
    """A mixin before ``torch.nn.Module`` in :class:`~mxtorch.gluon.Block`'s bases."""

    def save(self, prefix: str) -> None:
        """Write ``<prefix>-model.json`` (the block tree) and ``<prefix>-model.params``."""
        model: dict[str, Any] = {}
        _structure(self, [0], model)  # type: ignore[arg-type]
        with open(os.fspath(prefix) + "-model.json", "w") as fp:
            json.dump(model, fp)
        self.save_parameters(os.fspath(prefix) + "-model.params")  # type: ignore[attr-defined]

    def load(self, prefix: str) -> None:
        """Load files written by :meth:`save` (here or by MXNet 1.9) into a block built the same way."""
        path = os.fspath(prefix) + "-model.json"
        with open(path, "rb") as fp:
            raw = fp.read(MAX_MODEL_JSON_BYTES + 1)
        # one nesting level per block level (and one for its children map)
        model = bounded_json.loads(raw, repr(path), MXNetError, max_bytes=MAX_MODEL_JSON_BYTES,
                                   max_depth=512, expect=dict)
        _restore(self, [0], model, repr(path))  # type: ignore[arg-type]
        self.load_parameters(os.fspath(prefix) + "-model.params")  # type: ignore[attr-defined]
