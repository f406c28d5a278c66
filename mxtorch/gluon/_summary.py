"""``Block.summary``: a table of layers, output shapes and parameter counts (MXNet's layout)."""

from __future__ import annotations

from typing import Any

import torch

from .parameter_core import GluonUsageError

__all__ = ["summarize"]


def _shapes(out: Any) -> str:
    if isinstance(out, torch.Tensor):
        return str(tuple(out.shape))
    if isinstance(out, (list, tuple)):
        return "[" + ", ".join(_shapes(o) for o in out) + "]"
    return type(out).__name__


def summarize(block: Any, *inputs: Any) -> str:
    """Run ``block(*inputs)`` once with a forward hook on every sub-module; the table's text.

    As in MXNet a hybridized block cannot be summarized (its compiled forward hides the layers):
    that is an error (also an ``AssertionError``, which MXNet raised) before anything runs.
    """
    for name, mod in block.named_modules():
        if getattr(mod, "_hybrid_active", False):
            raise GluonUsageError(f"{type(mod).__name__} {name or '(the network)'!s} is hybridized: call "
                                  "summary() before hybridize(), or after hybridize(False)")
    rows: list[tuple[str, str, int]] = []
    hooks = []

    def hook(mod: torch.nn.Module, _inp: Any, out: Any, name: str = "") -> None:
        n = sum(p.numel() for p in mod.parameters(recurse=False))
        gp = getattr(mod, "_gluon_params", {})
        n = max(n, sum(int(torch.Size(p.shape).numel()) for p in gp.values()
                       if p.shape is not None and p.is_initialized))
        rows.append((f"{name or 'Input'} ({type(mod).__name__})", _shapes(out), n))

    for name, mod in block.named_modules():
        hooks.append(torch.nn.Module.register_forward_hook(
            mod, lambda m, i, o, name=name: hook(m, i, o, name)))
    try:
        block(*inputs)
    finally:
        for h in hooks:
            h.remove()
    rows = [rows[-1]] + rows[:-1] if rows else rows
    total = sum(p.numel() for p in block.parameters())
    trainable = sum(p.numel() for p in block.parameters() if p.requires_grad)
    w = max([len(r[0]) for r in rows] + [20])
    lines = ["-" * (w + 40), f"{'Layer (type)':<{w}} {'Output Shape':<25} {'Param #':>12}",
             "=" * (w + 40)]
    lines += [f"{a:<{w}} {b:<25} {c:>12,}" for a, b, c in rows]
    lines += ["=" * (w + 40), f"Parameters in forward computation graph: {total:,}",
              f"Trainable params: {trainable:,}", f"Non-trainable params: {total - trainable:,}",
              "-" * (w + 40)]
    text = "\n".join(lines)
    print(text)
    return text
