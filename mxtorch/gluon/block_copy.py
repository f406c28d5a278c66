"""Copying a network: a deep copy whose parameters belong to the copy."""

from __future__ import annotations

import copy
import weakref
from typing import Any

from .block import Block

__all__ = ["deepcopy_block"]


def deepcopy_block(net: Block) -> Block:
    """A deep copy of ``net`` whose parameters are new objects owned by the copy's blocks and by no
    Trainer (``copy.deepcopy`` alone would leave them pointing at the original blocks); compiled
    forwards are rebuilt by the copy, not copied."""
    memo: dict[int, Any] = {}
    for m in net.modules():  # compiled forwards are rebuilt by the copy, not copied
        if "_compiled" in m.__dict__:
            memo[id(m.__dict__["_compiled"])] = None
    new = copy.deepcopy(net, memo)
    for p in new.collect_params().values():
        owners = []
        for ref, attr in p._owners:
            old = ref()
            if old is not None:
                owners.append((weakref.ref(memo.get(id(old), old)), attr))
        p._owners = owners
        p._trainer_ref = None
        p.__dict__.pop("_var", None)
    for m in new.modules():
        if "_compiled" in m.__dict__:
            object.__setattr__(m, "_compiled", None)
            object.__setattr__(m, "_trial", None)
    return new
