"""Cut a Gluon network into a chain of units and the chain into balanced pipeline stages.

A *unit* is a block whose output is the next unit's only input; a stage is a run of
consecutive units.  :func:`chain_units` finds the units: the children of a
``Sequential``/``HybridSequential`` (nested ones are opened), the model zoo's
``output(features(x))`` (the ``features`` chain, then ``output``), or, for any other block,
its direct children when a forward on ``sample`` shows that ``forward`` is exactly a chain of
them.  :func:`partition` splits costs into contiguous stages minimising the slowest stage.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from .. import autograd
from ..base import MXNetError

__all__ = ["Unit", "chain_units", "unit_costs", "partition", "split_at", "checkpointed"]


@dataclass
class Unit:
    """One link of the chain: ``path`` is its attribute path in the net ('features.3', 'output')."""

    path: str
    block: torch.nn.Module


def _is_sequential(block: torch.nn.Module) -> bool:
    from ..gluon import nn

    return isinstance(block, (nn.Sequential, nn.HybridSequential, torch.nn.Sequential))


def _open(block: torch.nn.Module, path: str) -> list[Unit]:
    """``block`` as units: a sequential container opened (recursively), anything else whole."""
    if _is_sequential(block) and len(block._modules) > 0:
        out: list[Unit] = []
        for name, child in block._modules.items():
            if child is not None:
                out.extend(_open(child, f"{path}.{name}" if path else name))
        return out
    return [Unit(path, block)]


_HOW = ("give split_points=[child names] on a net whose forward is a chain of children, or wrap the "
        "layers in a HybridSequential")


def chain_units(net: torch.nn.Module, sample: torch.Tensor | None = None) -> list[Unit]:
    """The units of ``net`` in execution order; raise MXNetError when ``net`` is not a chain."""
    if _is_sequential(net):
        units = _open(net, "")
    else:
        children = [(n, c) for n, c in net._modules.items() if c is not None]
        names = [n for n, _ in children]
        zoo = names == ["features", "output"] and _is_sequential(children[0][1])
        if zoo and sample is None:
            units = _open(children[0][1], "features") + _open(children[1][1], "output")
        elif sample is not None:
            order = _verify_chain(net, sample)
            units = [u for n in order for u in _open(net._modules[n], n)]  # type: ignore[arg-type]
        else:
            raise MXNetError(
                f"parallelize: {type(net).__name__} is neither a Sequential/HybridSequential nor a model-zoo "
                f"net (features + output), so whether its forward is a chain of its children {names} cannot "
                f"be seen without running it: pass sample_input=<one micro-batch> to check, or {_HOW}"
            )
    if len(units) < 2:
        raise MXNetError(f"parallelize: {type(net).__name__} has {len(units)} layer(s) to split: a pipeline "
                         f"needs at least one per stage; {_HOW}")
    return units


def _verify_chain(net: torch.nn.Module, sample: torch.Tensor) -> list[str]:
    """Run ``net(sample)`` with hooks; return the children's names if each feeds the next alone."""
    calls: list[tuple[str, Any, Any]] = []
    hooks = [c.register_forward_hook(lambda m, i, o, n=n: calls.append((n, i, o)))
             for n, c in net._modules.items() if c is not None]
    try:
        with torch.no_grad():
            out = net(sample)
    finally:
        for h in hooks:
            h.remove()
    why = ""
    if not calls:
        why = "it called none of its children"
    elif len({n for n, _, _ in calls}) != len(calls):
        why = f"a child was called twice ({[n for n, _, _ in calls]})"
    elif len(calls[0][1]) != 1 or calls[0][1][0] is not sample:
        why = f"its first child {calls[0][0]!r} does not take the net's input as its only argument"
    else:
        for (pn, _, po), (n, i, _) in zip(calls, calls[1:]):
            if len(i) != 1 or i[0] is not po:
                why = f"child {n!r} does not take child {pn!r}'s output as its only input"
                break
        else:
            if out is not calls[-1][2]:
                why = f"the net's output is not its last child {calls[-1][0]!r}'s output (it computes more)"
    if why:
        raise MXNetError(f"parallelize: {type(net).__name__}.forward is not a chain of its children: {why}; "
                         f"{_HOW}")
    return [n for n, _, _ in calls]


def unit_costs(units: Sequence[Unit], sample: torch.Tensor, repeats: int = 3) -> list[float]:
    """Measured forward+backward seconds of each unit on ``sample`` (median of ``repeats``)."""
    from .. import autograd

    costs = []
    x = sample
    for u in units:
        times = []
        out = None
        for _ in range(repeats):
            inp = x.detach().requires_grad_(x.is_floating_point())
            sync = torch.cuda.synchronize if inp.is_cuda else (lambda: None)
            sync()
            t0 = time.perf_counter()
            with autograd.record():
                out = u.block(inp)
            if isinstance(out, torch.Tensor) and out.requires_grad:
                out.backward(torch.ones_like(out))
            sync()
            times.append(time.perf_counter() - t0)
        for p in u.block.parameters():
            p.grad = None
        if not isinstance(out, torch.Tensor):
            raise MXNetError(f"parallelize: layer {u.path!r} returns {type(out).__name__}, not one tensor: a "
                             "pipeline stage boundary carries a single tensor; split elsewhere")
        costs.append(statistics.median(times))
        x = out.detach()
    return costs


def partition(costs: Sequence[float], stages: int) -> list[int]:
    """Start index of each of ``stages`` contiguous runs minimising the largest run's cost."""
    n = len(costs)
    if stages > n:
        raise MXNetError(f"parallelize: {stages} pipeline stages but only {n} layers to place: lower pp "
                         "(or stages_per_rank), or split a layer into more blocks")
    prefix = [0.0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    inf = float("inf")
    # best[s][i]: the smallest max-stage cost placing the first i units into s stages
    best = [[inf] * (n + 1) for _ in range(stages + 1)]
    cut = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for s in range(1, stages + 1):
        for i in range(s, n - (stages - s) + 1):
            for j in range(s - 1, i):
                v = max(best[s - 1][j], prefix[i] - prefix[j])
                if v < best[s][i]:
                    best[s][i], cut[s][i] = v, j
    starts = []
    i = n
    for s in range(stages, 0, -1):
        i = cut[s][i]
        starts.append(i)
    return starts[::-1]


def split_at(units: Sequence[Unit], points: Sequence[str], stages: int) -> list[int]:
    """Start indices from ``points``: the unit paths (or child names) where stages 2..S begin."""
    if len(points) != stages - 1:
        raise MXNetError(f"parallelize: split_points has {len(points)} names but {stages} stages need "
                         f"{stages - 1} (the first layer of every stage after the first)")
    paths = [u.path for u in units]
    starts = [0]
    for p in points:
        hits = [i for i, q in enumerate(paths) if q == p or q.startswith(p + ".")]
        if not hits:
            raise MXNetError(f"parallelize: split point {p!r} is not a layer of the chain; the layers are "
                             f"{paths}")
        if hits[0] <= starts[-1]:
            raise MXNetError(f"parallelize: split points must be in execution order and leave every stage "
                             f"a layer; {p!r} does not come after the previous one")
        starts.append(hits[0])
    return starts


def checkpointed(block: Any, x: torch.Tensor) -> Any:
    """``block(x)`` with activation checkpointing (only ``x`` is kept; backward recomputes the
    inside).  The recomputation runs in the training mode of this call: Gluon's BatchNorm and
    Dropout read autograd's mode, and backward may run outside ``autograd.record()`` (in predict
    mode BatchNorm would recompute with its running statistics and save other tensors than the
    forward did); torch restores the random state, so Dropout draws the same mask."""
    training = autograd.is_training()

    def contexts() -> tuple[Any, Any]:
        return contextlib.nullcontext(), (autograd.train_mode() if training else autograd.predict_mode())

    return checkpoint(block, x, use_reentrant=False, context_fn=contexts)
