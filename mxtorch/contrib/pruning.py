"""Pruning of Gluon networks: magnitude, random and structured masks, a gradual schedule, and
:func:`compact`, which turns structured masks into a physically smaller network.

::

    from mxtorch.contrib import pruning
    pruner = pruning.Pruner(method="l1")                # "l1" | "l2" | "random" | "structured"
    net = pruner.apply(net, sparsity=0.7)               # one shot: the same net, masked
    pruner = pruning.Pruner(method="l1", schedule="polynomial", sparsity=0.8, begin_step=100,
                            end_epoch=3, steps_per_epoch=len(loader), frequency=50)
    net = pruner.apply(net)                             # nothing is pruned before begin_step
    pruner.attach(trainer)                              # each trainer.step(batch_size) steps it too
    ... trainer.step(batch_size)                        # (or, unattached: pruner.step() after each)
    pruning.sparsity(net)                               # {parameter name: fraction of zeros, "total": ...}
    small = pruning.compact(net, sample_input)          # structured masks: fewer channels

What is pruned: the weights of ``nn.Dense`` and ``nn.Conv*D`` layers (``select``, a regular
expression on the parameters' full names, narrows it).  ``l1``/``l2``/``random`` zero single
weights, per layer (``scope="layer"``: every layer reaches the sparsity) or over all of them at
once (``scope="global"``); for single weights L1 and L2 rank alike (|w| and w² have the same
order).  ``structured`` zeros whole output channels -- filters of a convolution, rows of a Dense
-- ranked by their L1 or L2 norm (``norm=``), in every such layer but the network's last (its
outputs are the network's); the channel's bias and the BatchNorm that follows it in a
``Sequential`` (gamma, beta and running mean) are masked with it, so that the channel's output
is exactly zero and :func:`compact` can remove it.  In graphs with residual adds or
concatenations a channel can only go where the layer's output reaches the next layer alone;
:func:`compact` keeps the other layers whole (``strict=True``: an error naming the layer), and
``select`` with :func:`compactable`'s names limits structured pruning to the removable layers.

How masks stay applied.  Each masked parameter copy gets a gradient hook that zeroes the masked
entries of its gradient as backward produces it, i.e. before any reduction: every store
(``local``, ``horovod`` with its backward-time reduction, ``dist_sync``) sums masked gradients.
The masks belong to the network, not to the Pruner: the hooks hold them, so they stay enforced
for as long as the parameters live, whether or not the Pruner object is kept
(``Pruner("l1").apply(net, sparsity=0.7)`` alone prunes for good); a later Pruner on the same
network takes them over, and :meth:`Pruner.remove` ends them.  (Copies made after the Pruner is
gone, by ``reset_ctx`` or ``cast``, are hooked by the next ``pruner.step()``: keep the Pruner
for those.)
When masks change, the masked entries of the weights and of the Trainer's optimizer states
(momentum, Adam's moments, multi-precision master weights) are set to zero.  A zero weight with
a zero gradient and zero optimizer state stays exactly zero through SGD (momentum, weight decay
``wd * w = 0``), NAG, Adam and the other updates, so a pruned weight is zero after every
``trainer.step`` -- ``pruner.step()`` advances the schedule and writes the masks again (values
loaded by ``load_parameters`` included).  A Trainer whose local store updates the weights
(several contexts) gets the masked values through ``Parameter.set_data`` (the store restarts,
its optimizer states with it).  Parameter servers that run the optimizer
(``dist_sync``/``dist_async`` with ``update_on_kvstore``) receive masked gradients; the entries
pruned after the Trainer was made may still be non-zero on the servers (their momentum and
weight decay are the servers'), so the workers' copies are masked again after every pull, in
``pruner.step()``: call it right after ``trainer.step`` and the weights the network computes
with, and saves, are zero where pruned.  (Entries masked before the Trainer is made stay
exactly zero on the servers too: they start from masked weights.)

Distributed training: under synchronous stores (``horovod``, ``dist_sync``) masks are decided
from the weights, which every worker holds identically, with deterministic ranking (a stable
sort; ``random`` draws from its own generator seeded by ``seed``), so every worker decides the
same masks without communication.  Under ``dist_async`` the workers' weights differ: rank 0's
masks are sent to every worker through the servers (``kv.broadcast`` on fresh uint8 keys, a
collective at every mask change; Pruners must be made in the same order on every worker).
Masks decided before the Trainer exists (one-shot ``apply``) come from each worker's own
initial weights: give every worker the same seed, or start the schedule after the first step.
Tested on 2 workers under ``horovod``, ``dist_sync`` (servers or workers updating) and
``dist_async``.

Attached (:meth:`Pruner.attach`), the Pruner is an update hook of the Trainer
(``Trainer.add_update_hook``, named ``"pruning"``, beside AMP's): ``trainer.step`` and
``trainer.update`` call its step when they are done, skipped updates included, so that the
schedule counts training steps.

Checkpoints: ``save_parameters`` writes the zeros; :meth:`Pruner.state_dict` (plain tensors,
numbers and strings, loadable with ``torch.load(..., weights_only=True)``; :func:`state_to_json`
makes JSON values of it) holds the masks, the step and the settings, and
:meth:`Pruner.load_state_dict` restores them in a new process -- before ``apply`` (which then
takes the saved masks instead of pruning) or after it -- so that, with the parameters and the
Trainer's states restored too, the resumed run continues the schedule exactly as an
uninterrupted one.
"""

from __future__ import annotations

import itertools
import math
import re
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ..base import MXNetError
from ..gluon import nn
from ..gluon.block import Block
from ..gluon.parameter import Parameter
from ._pruning_compact import _channel_layer, _is_layer, compact, compactable  # the tracing half

__all__ = ["Pruner", "PruningUpdateHook", "sparsity", "compact", "compactable", "state_to_json",
           "state_from_json", "METHODS", "SCHEDULES"]

METHODS = ("l1", "l2", "random", "structured")
SCHEDULES = (None, "polynomial")
_STATE_FORMAT = "mxtorch.contrib.pruning.Pruner/1"
_INSTANCES = itertools.count()


def _layers(net: Block) -> list[tuple[str, Any]]:
    """(attribute path, block) of every Dense/Conv layer, in registration order, once each."""
    out: list[tuple[str, Any]] = []
    seen: set[int] = set()
    for path, m in net.named_modules():
        if _is_layer(m) and id(m) not in seen:
            seen.add(id(m))
            out.append((path, m))
    return out


def _weight(layer: Any) -> Parameter:
    w = layer.weight
    if not w.is_initialized:
        raise MXNetError(f"pruning: the weight {w.name!r} is not initialized yet (its shape is inferred at "
                         "the first forward pass): run one forward pass before pruning")
    return w  # type: ignore[no-any-return]


def sparsity(net: Block) -> dict[str, float]:
    """{weight name: fraction of its entries that are exactly zero} for every Dense/Conv layer of
    ``net`` (initialized ones), and ``"total"``: zeros over all those entries."""
    out: dict[str, float] = {}
    zeros = total = 0
    for _, layer in _layers(net):
        w = layer.weight
        if not w.is_initialized:
            continue
        d = w.list_data()[0].detach()
        z = int((d == 0).sum())
        out[w.name] = z / max(d.numel(), 1)
        zeros += z
        total += d.numel()
    out["total"] = zeros / total if total else 0.0
    return out


def _smallest(score: torch.Tensor, k: int) -> torch.Tensor:
    """A bool keep-mask of ``score``'s shape with its ``k`` smallest entries False (stable order)."""
    flat = score.reshape(-1)
    keep = torch.ones(flat.numel(), dtype=torch.bool)
    if k > 0:
        keep[torch.sort(flat, stable=True).indices[:k]] = False
    return keep.reshape(score.shape)


def _mask_tensors(state: Any, mask: torch.Tensor) -> None:
    """Zero the masked entries of every tensor of ``mask``'s shape inside an optimizer state."""
    if isinstance(state, torch.Tensor):
        if tuple(state.shape) == tuple(mask.shape) and state.layout == torch.strided:
            with torch.no_grad():
                state.masked_fill_(~mask.to(state.device), 0)
    elif isinstance(state, (tuple, list)):
        for s in state:
            _mask_tensors(s, mask)


class _MaskCell:
    """A parameter's mask as its gradient hooks read it (bool, CPU, plus per-device copies), and the
    hooks themselves.  The hooks hold the cell strongly and the cell holds nothing of the network (a
    weak reference to each hooked tensor, and hook handles, which are weak too): the mask guards the
    gradients for as long as the tensors live, whether or not a Pruner is kept, without a cycle."""

    def __init__(self, mask: torch.Tensor) -> None:
        self.mask = mask
        self._on: dict[torch.device, torch.Tensor] = {}
        self.hooked: list[tuple[weakref.ref[torch.Tensor], Any]] = []

    def on(self, device: torch.device) -> torch.Tensor:
        m = self._on.get(device)
        if m is None:
            m = self._on[device] = self.mask.to(device)
        return m

    def set_mask(self, mask: torch.Tensor) -> None:
        self.mask = mask
        self._on = {}

    def grad_hook(self) -> Callable[[torch.Tensor], torch.Tensor]:
        def hook(g: torch.Tensor) -> torch.Tensor:
            if g.layout != torch.strided:
                return g
            return g.masked_fill(~self.on(g.device), 0)

        return hook

    def remove_hooks(self) -> None:
        for _, h in self.hooked:
            h.remove()
        self.hooked = []


# The masks belong to the network: each masked Parameter's cell, found again by a later Pruner (which
# takes it over instead of stacking a second set of hooks).  Weak keys: a dropped net takes its masks.
_CELLS: weakref.WeakKeyDictionary[Parameter, _MaskCell] = weakref.WeakKeyDictionary()


class _Masked:
    """One parameter a Pruner masks: the parameter and its (shared, registered) mask cell."""

    def __init__(self, param: Parameter, mask: torch.Tensor) -> None:
        self.param = param
        cell = _CELLS.get(param)
        if cell is None:
            cell = _CELLS[param] = _MaskCell(mask)
        else:
            cell.set_mask(mask)
        self.cell = cell

    @property
    def mask(self) -> torch.Tensor:
        return self.cell.mask

    @property
    def hooked(self) -> list[tuple[weakref.ref[torch.Tensor], Any]]:
        return self.cell.hooked

    @hooked.setter
    def hooked(self, value: list[tuple[weakref.ref[torch.Tensor], Any]]) -> None:
        self.cell.hooked = value

    def on(self, device: torch.device) -> torch.Tensor:
        return self.cell.on(device)

    def set_mask(self, mask: torch.Tensor) -> None:
        self.cell.set_mask(mask)

    def remove_hooks(self) -> None:
        """Stop masking this parameter's gradients (its cell leaves the network)."""
        self.cell.remove_hooks()
        if _CELLS.get(self.param) is self.cell:
            del _CELLS[self.param]


class Pruner:
    """Decides and keeps pruning masks for one network (see the module docstring).

    ``method``: ``"l1"``/``"l2"`` (magnitude), ``"random"`` or ``"structured"`` (channels ranked by
    ``norm``, ``"l1"`` or ``"l2"``).  ``schedule=None`` prunes once in :meth:`apply` to
    ``sparsity``; ``schedule="polynomial"`` is Zhu & Gupta's gradual schedule
    ``s_t = s_f + (s_i - s_f) * (1 - (t - t0) / (n dt))**3``: nothing is pruned before
    ``t0 = begin_step``, ``s_i = initial_sparsity`` at ``t0``, the final ``s_f = sparsity`` at step
    ``end_epoch * steps_per_epoch``, masks updated every ``frequency`` steps in between (the step
    ``t`` counts :meth:`step` calls).  ``scope``: ``"layer"`` or ``"global"`` (unstructured
    methods).  ``select``: a regular expression the pruned weights' names must match
    (``re.match``).  ``seed``: the ``random`` method's generator (the same on every worker).
    """

    def __init__(self, method: str = "l1", schedule: str | None = None, sparsity: float | None = None,
                 begin_step: int = 0, end_epoch: int | None = None, steps_per_epoch: int | None = None,
                 frequency: int = 1, initial_sparsity: float = 0.0, scope: str = "layer", norm: str = "l1",
                 select: str | None = None, seed: int = 0) -> None:
        if method not in METHODS:
            raise MXNetError(f"pruning: unknown method {method!r}; use one of {METHODS}")
        if schedule not in SCHEDULES:
            raise MXNetError(f"pruning: unknown schedule {schedule!r}; use one of {SCHEDULES}")
        if scope not in ("layer", "global"):
            raise MXNetError(f"pruning: scope must be 'layer' or 'global', got {scope!r}")
        if method == "structured" and scope != "layer":
            raise MXNetError("pruning: structured pruning ranks channels within each layer (scope='layer')")
        if norm not in ("l1", "l2"):
            raise MXNetError(f"pruning: norm must be 'l1' or 'l2', got {norm!r}")
        for what, v in (("sparsity", sparsity), ("initial_sparsity", initial_sparsity)):
            if v is not None and not 0.0 <= float(v) < 1.0:
                raise MXNetError(f"pruning: {what} must be in [0, 1), got {v!r}")
        if int(frequency) < 1 or int(begin_step) < 0:
            raise MXNetError(f"pruning: frequency must be >= 1 and begin_step >= 0, got {frequency!r}, "
                             f"{begin_step!r}")
        self.method, self.schedule, self.scope, self.norm = method, schedule, scope, norm
        self.sparsity = None if sparsity is None else float(sparsity)
        self.initial_sparsity = float(initial_sparsity)
        self.begin_step, self.frequency = int(begin_step), int(frequency)
        self.end_step: int | None = None
        if schedule == "polynomial":
            if end_epoch is None or steps_per_epoch is None:
                raise MXNetError("pruning: schedule='polynomial' needs end_epoch and steps_per_epoch "
                                 "(the final sparsity is reached at step end_epoch * steps_per_epoch)")
            self.end_step = int(end_epoch) * int(steps_per_epoch)
            if self.end_step <= self.begin_step:
                raise MXNetError(f"pruning: end_epoch * steps_per_epoch = {self.end_step} must be after "
                                 f"begin_step = {self.begin_step}")
        self._select = re.compile(select) if select else None
        self.seed = int(seed)
        self.num_update = 0
        self._net: Block | None = None
        self._masked: dict[str, _Masked] = {}  # structural key ('features.0.weight') -> mask
        self._random: dict[str, torch.Tensor] = {}
        self._instance = next(_INSTANCES)  # Pruners are made in the same order on every worker
        self._broadcasts = 0
        self._pending: tuple[Mapping[str, Any], bool] | None = None  # a state given before apply
        self._attached: tuple[Any, PruningUpdateHook] | None = None  # (trainer, its hook of this Pruner)

    # ---- the schedule ------------------------------------------------------------------
    def target_sparsity(self, step: int | None = None) -> float:
        """The schedule's sparsity at ``step`` (default: now), by the formula (see the class)."""
        s_f = self.sparsity if self.sparsity is not None else 0.0
        if self.schedule is None:
            return s_f
        assert self.end_step is not None
        t = self.num_update if step is None else int(step)
        if t < self.begin_step:
            return 0.0
        if t >= self.end_step:
            return s_f
        frac = (t - self.begin_step) / (self.end_step - self.begin_step)
        return s_f + (self.initial_sparsity - s_f) * (1.0 - frac) ** 3

    def _due(self, t: int) -> bool:
        assert self.end_step is not None
        return self.begin_step <= t <= self.end_step and (
            (t - self.begin_step) % self.frequency == 0 or t == self.end_step)

    # ---- attaching -----------------------------------------------------------------------
    def apply(self, net: Block, sparsity: float | None = None) -> Block:
        """Attach to ``net`` and return it: one-shot pruning to ``sparsity`` (or the constructor's)
        now; with a schedule, ``sparsity`` is the final one and pruning starts at ``begin_step``."""
        if self._net is not None and self._net is not net:
            raise MXNetError("pruning: this Pruner is attached to another network; make one Pruner per net")
        if sparsity is not None:
            if not 0.0 <= float(sparsity) < 1.0:
                raise MXNetError(f"pruning: sparsity must be in [0, 1), got {sparsity!r}")
            self.sparsity = float(sparsity)
        if self.sparsity is None:
            raise MXNetError("pruning: give the sparsity (Pruner(sparsity=...) or apply(net, sparsity=...))")
        self._net = net
        pending, self._pending = self._pending, None
        if pending is not None:
            self.load_state_dict(*pending)
        elif self.schedule is None:
            self._prune(self.sparsity)
        elif self._due(self.num_update):
            self._prune(self.target_sparsity())
        return net

    def attach(self, trainer: Any) -> None:
        """Step with ``trainer``: its update hook ``"pruning"`` runs :meth:`step` at the end of every
        ``trainer.step``/``trainer.update`` (do not call :meth:`step` as well)."""
        if self._net is None:
            raise MXNetError("pruning: call pruner.apply(net) before pruner.attach(trainer)")
        if self._attached is not None:
            raise MXNetError("pruning: this Pruner is attached to a Trainer already")
        hook = PruningUpdateHook(self)
        trainer.add_update_hook(hook)
        self._attached = (trainer, hook)

    def detach(self) -> None:
        """Stop stepping with the Trainer of :meth:`attach` (call :meth:`step` again yourself)."""
        if self._attached is not None:
            trainer, hook = self._attached
            self._attached = None
            trainer.remove_update_hook(hook)

    def step(self) -> None:
        """Count one training step (call it after every ``trainer.step``, unless :meth:`attach`
        made the Trainer do it): update the masks when the schedule says so, and write them into
        the weights again."""
        if self._attached is not None:
            raise MXNetError("pruning: this Pruner is attached to a Trainer, whose step() steps it; "
                             "call pruner.detach() to step it yourself")
        self._advance()

    def _advance(self) -> None:
        if self._net is None:
            raise MXNetError("pruning: call pruner.apply(net) before pruner.step()")
        self.num_update += 1
        if self.schedule is not None and self._due(self.num_update):
            self._prune(self.target_sparsity())
        else:
            self._enforce(changed=False)

    def remove(self) -> None:
        """Detach from the network (and the Trainer): gradient hooks are removed, the weights keep
        their zeros."""
        self.detach()
        for m in self._masked.values():
            m.remove_hooks()
        self._masked = {}
        self._net = None

    @property
    def masks(self) -> dict[str, torch.Tensor]:
        """{parameter attribute path ('features.0.weight'): bool mask, True = kept} (copies)."""
        return {k: m.mask.clone() for k, m in self._masked.items()}

    # ---- deciding masks ------------------------------------------------------------------
    def _keys(self) -> dict[int, str]:
        assert self._net is not None
        out: dict[int, str] = {}
        for k, p in self._net._collect_params_with_prefix().items():
            out.setdefault(id(p), k)
        return out

    def _targets(self) -> list[tuple[str, Any]]:
        assert self._net is not None
        sel = self._select
        return [(path, layer) for path, layer in _layers(self._net)
                if sel is None or sel.match(layer.weight.name)]

    def _prune(self, s: float) -> None:
        if s <= 0.0 and not self._masked:
            return
        keys = self._keys()
        if self.method == "structured":
            new = self._structured(s, keys)
        else:
            new = self._unstructured(s, keys)
        store = self._async_store(p for p, _ in new.values())
        if store is not None:
            new = self._broadcast(store, new)
        for key, (param, mask) in new.items():
            m = self._masked.get(key)
            if m is None:
                self._masked[key] = _Masked(param, mask)
            else:
                m.set_mask(mask)
        self._enforce(changed=True)

    @staticmethod
    def _async_store(params: Any) -> Any:
        """The asynchronous parameter-server store a Trainer of ``params`` uses, or None."""
        from ..kvstore import base as kvbase

        for p in params:
            kv = p.trainer.kvstore if p.trainer is not None else None
            if kv is not None and kvbase.capable(kv, kvbase.Capability.DISTRIBUTED) \
                    and kvbase.capable(kv, kvbase.Capability.ASYNC):
                return kv
        return None

    def _broadcast(self, kv: Any, new: dict[str, tuple[Parameter, torch.Tensor]]
                   ) -> dict[str, tuple[Parameter, torch.Tensor]]:
        """Rank 0's masks on every worker: under an asynchronous store the workers' weights differ,
        so the masks each decided would too.  Fresh keys (this Pruner, this step) carry them through
        the servers as uint8 (``kv.broadcast``: initialized with rank 0's value, pulled by all)."""
        self._broadcasts += 1
        tag = f"mxtorch.pruning/{self._instance}/{self.num_update}.{self._broadcasts}"
        keys = [f"{tag}/{k}" for k in new]
        values = [mask.to(torch.uint8) for _, mask in new.values()]
        outs = [torch.empty_like(v) for v in values]
        kv.broadcast(keys, values, out=outs)
        return {k: (param, out.to(torch.bool).reshape(mask.shape))
                for (k, (param, mask)), out in zip(new.items(), outs)}

    def _score(self, key: str, w: torch.Tensor) -> torch.Tensor:
        if self.method == "random":
            r = self._random.get(key)
            if r is None:
                gen = torch.Generator().manual_seed(self.seed + len(self._random))
                r = self._random[key] = torch.rand(w.shape, generator=gen, dtype=torch.float64)
            score = r.clone()
        else:
            score = w.detach().to("cpu", torch.float64).abs()
        prev = self._masked.get(key)
        if prev is not None:  # what is pruned stays pruned: the schedule only grows
            score[~prev.mask] = -math.inf
        return score

    def _unstructured(self, s: float, keys: dict[int, str]) -> dict[str, tuple[Parameter, torch.Tensor]]:
        items = []
        for _, layer in self._targets():
            p = _weight(layer)
            key = keys[id(p)]
            items.append((key, p, self._score(key, p.list_data()[0])))
        out: dict[str, tuple[Parameter, torch.Tensor]] = {}
        if self.scope == "global":
            flat = torch.cat([sc.reshape(-1) for _, _, sc in items]) if items else torch.zeros(0)
            keep = _smallest(flat, int(round(s * flat.numel())))
            start = 0
            for key, p, sc in items:
                out[key] = (p, keep[start:start + sc.numel()].reshape(sc.shape))
                start += sc.numel()
        else:
            for key, p, sc in items:
                out[key] = (p, _smallest(sc, int(round(s * sc.numel()))))
        return out

    def _structured(self, s: float, keys: dict[int, str]) -> dict[str, tuple[Parameter, torch.Tensor]]:
        assert self._net is not None
        targets = self._targets()
        last = _layers(self._net)[-1][1] if _layers(self._net) else None
        following = _following_batchnorm(self._net)
        out: dict[str, tuple[Parameter, torch.Tensor]] = {}
        for _, layer in targets:
            if layer is last or not _channel_layer(layer):
                continue  # the network's outputs, or a layer whose channels are not dim 0
            p = _weight(layer)
            key = keys[id(p)]
            w = p.list_data()[0].detach().to("cpu", torch.float64)
            flat = w.reshape(w.shape[0], -1)
            score = flat.abs().sum(1) if self.norm == "l1" else flat.pow(2).sum(1).sqrt()
            prev = self._masked.get(key)
            if prev is not None:
                score[~prev.mask.reshape(w.shape[0], -1).any(1)] = -math.inf
            k = min(int(round(s * w.shape[0])), w.shape[0] - 1)  # one channel always stays
            keep_ch = _smallest(score, k)
            out[key] = (p, keep_ch.reshape((-1,) + (1,) * (w.dim() - 1)).expand(w.shape).clone())
            vectors: list[Any] = [layer.bias] if layer.bias is not None else []
            bn = following.get(id(layer))
            if bn is not None:
                vectors += [bn.gamma, bn.beta, bn.running_mean]
            for v in vectors:
                if v.is_initialized and tuple(v.shape) == (w.shape[0],):
                    out[keys[id(v)]] = (v, keep_ch.clone())
        return out

    # ---- keeping masks applied -------------------------------------------------------------
    def _enforce(self, changed: bool) -> None:
        """Write the masks into the weights (and, when they changed, the optimizer states), and make
        sure every copy of a masked parameter carries the gradient hook."""
        from ..kvstore import base as kvbase

        for m in self._masked.values():
            p = m.param
            data = p.list_data()
            live = [(r, h) for r, h in m.hooked if r() is not None and any(r() is d for d in data)]
            if len(live) != len(m.hooked):  # copies were replaced (reset_ctx, cast): hook the new ones
                for r, h in m.hooked:
                    if (r, h) not in live:
                        h.remove()
                m.hooked = live
            for d in data:
                if d.requires_grad and not any(r() is d for r, _ in m.hooked):
                    m.hooked.append((weakref.ref(d), d.register_hook(m.cell.grad_hook())))
            trainer = p.trainer
            store_updates = trainer is not None and trainer.updated_in_store(p)
            local_store = store_updates and not kvbase.capable(trainer.kvstore, kvbase.Capability.DISTRIBUTED)
            if local_store and changed:
                p.set_data(data[0].detach().masked_fill(~m.on(data[0].device), 0))
                continue
            # (parameter servers that update the weights: the local copies are masked here and again
            # after every pull, in step(); the servers' optimizer states are theirs)
            with torch.no_grad():
                for d in data:
                    d.masked_fill_(~m.on(d.device), 0)
            if changed and trainer is not None and not store_updates:
                for state in trainer.optimizer_state(p):
                    _mask_tensors(state, m.mask)

    # ---- checkpoints -------------------------------------------------------------------------
    def _config(self) -> dict[str, Any]:
        """What decides the masks and the schedule: a resumed run must use the same."""
        return {"method": self.method, "schedule": self.schedule, "sparsity": self.sparsity,
                "initial_sparsity": self.initial_sparsity, "begin_step": self.begin_step,
                "end_step": self.end_step, "frequency": self.frequency, "scope": self.scope,
                "norm": self.norm, "select": None if self._select is None else self._select.pattern,
                "seed": self.seed}

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed job needs to continue exactly: the schedule position (the step
        count), the masks (uint8 tensors by parameter attribute path) and the settings that decide
        them (checked on load).  Plain tensors, numbers and strings:
        ``torch.save``/``torch.load(weights_only=True)`` round-trip it, and :func:`state_to_json`
        turns it into JSON values (a checkpoint's ``extra``)."""
        return {"format": _STATE_FORMAT, "num_update": self.num_update, "broadcasts": self._broadcasts,
                "config": self._config(),
                "masks": {k: m.mask.to(torch.uint8) for k, m in self._masked.items()}}

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> None:
        """Restore :meth:`state_dict`.  Before :meth:`apply` (the resume order: load, then apply),
        ``apply`` takes the state's masks instead of pruning; after it, the masks are written into
        the weights (and the optimizer states) at once.  ``strict``: the state's settings (method,
        sparsity, schedule steps, scope, ...) must equal this Pruner's, else an error names them
        (checked in ``apply`` when given before it)."""
        if not isinstance(state, Mapping) or state.get("format") != _STATE_FORMAT:
            raise MXNetError(f"pruning: not a Pruner state (format {_STATE_FORMAT!r} expected)")
        if self._net is None:
            self._pending = (state, strict)
            return
        saved = state.get("config")
        if strict and isinstance(saved, Mapping):
            mine = self._config()
            differ = {k: (saved.get(k), mine[k]) for k in mine if saved.get(k) != mine[k]}
            if differ:
                raise MXNetError("pruning: the state was saved with other pruning settings ("
                                 + ", ".join(f"{k}: saved {a!r}, here {b!r}" for k, (a, b) in differ.items())
                                 + "); make the same Pruner, or pass strict=False")
        params = self._net._collect_params_with_prefix()
        masks = state["masks"]
        for k, mask in masks.items():
            p = params.get(k)
            if p is None or not p.is_initialized or tuple(p.shape or ()) != tuple(mask.shape):
                raise MXNetError(f"pruning: the state's mask {k!r} {tuple(mask.shape)} does not fit this "
                                 "network")
        for m in self._masked.values():
            m.remove_hooks()
        self._masked = {k: _Masked(params[k], mask.to(torch.bool).cpu()) for k, mask in masks.items()}
        self.num_update = int(state["num_update"])
        self._broadcasts = int(state.get("broadcasts", 0))
        self._enforce(changed=True)


class PruningUpdateHook:
    """The Trainer update hook of an attached :class:`Pruner`: its step after every Trainer step.
    It saves nothing in the Trainer's states: the Pruner is a Stateful of its own (a checkpoint's
    ``stateful={"pruner": pruner}``)."""

    name = "pruning"

    def __init__(self, pruner: Pruner) -> None:
        self.pruner = pruner

    def before_reduce(self, trainer: Any, grads: list[torch.Tensor]) -> bool:
        return True  # the gradient hooks masked the gradients already, as backward made them

    def before_update(self, trainer: Any, grads: list[torch.Tensor]) -> float | None:
        return 1.0

    def after_step(self, trainer: Any, updated: bool) -> None:
        self.pruner._advance()  # a skipped update (an AMP overflow) is a step of the schedule too

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass


def state_to_json(state: Mapping[str, Any]) -> dict[str, Any]:
    """:meth:`Pruner.state_dict` as JSON values: each mask as its shape and its bits packed
    (``numpy.packbits``) in base64 text; :func:`state_from_json` reverses it."""
    import base64

    import numpy as np

    masks = {k: {"shape": list(m.shape),
                 "bits": base64.b64encode(np.packbits(m.reshape(-1).to(torch.bool).numpy()).tobytes())
                 .decode("ascii")}
             for k, m in state["masks"].items()}
    return {**{k: v for k, v in state.items() if k != "masks"}, "config": dict(state.get("config") or {}),
            "masks": masks}


def state_from_json(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The :meth:`Pruner.state_dict` that :func:`state_to_json` wrote (uint8 mask tensors)."""
    import base64

    import numpy as np

    if not isinstance(obj, Mapping) or obj.get("format") != _STATE_FORMAT:
        raise MXNetError(f"pruning: not a Pruner state (format {_STATE_FORMAT!r} expected)")
    masks: dict[str, torch.Tensor] = {}
    for k, m in obj["masks"].items():
        shape = tuple(int(d) for d in m["shape"])
        n = math.prod(shape)
        bits = np.unpackbits(np.frombuffer(base64.b64decode(m["bits"], validate=True), dtype=np.uint8))
        if bits.size < n or bits.size > n + 7:
            raise MXNetError(f"pruning: the mask {k!r} holds {bits.size} bits for shape {shape}")
        masks[k] = torch.from_numpy(bits[:n].copy()).reshape(shape)
    return {**{k: v for k, v in obj.items() if k != "masks"}, "masks": masks}


def _following_batchnorm(net: Block) -> dict[int, Any]:
    """{id(layer): the BatchNorm right after it in a Sequential}: the normalisation of its outputs."""
    out: dict[int, Any] = {}
    for m in net.modules():
        if not isinstance(m, nn.Sequential):
            continue
        children = list(m.children())
        for a, b in zip(children, children[1:]):
            if _is_layer(a) and isinstance(b, nn.BatchNorm):
                out[id(a)] = b
    return out
