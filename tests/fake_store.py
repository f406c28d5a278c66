"""An in-memory KVStore for Trainer unit tests: it stores values per key, sums what is pushed,
runs an optimizer when it declares OPTIMIZER, and records every call the Trainer makes.

Importable on its own (``from fake_store import FakeStore`` with tests/ on the path, as pytest
puts it).  ``FakeStore(capabilities=...)`` declares exactly the capabilities given, so a test
can check what gluon.Trainer does with and without each; ``calls`` lists ``(method, keys)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from mxtorch.kvstore import Capability, KVStoreBase, KVStoreError
from mxtorch.optimizer import get_updater

__all__ = ["FakeStore"]


def _pairs(key: Any, value: Any) -> list[tuple[Any, Any]]:
    if isinstance(key, (int, str)):
        return [(key, value)]
    keys = list(key)
    values = list(value) if isinstance(value, (list, tuple)) else [value] * len(keys)
    if len(values) != len(keys):
        raise KVStoreError(f"{len(keys)} keys but {len(values)} values")
    return list(zip(keys, values))


def _tensors(v: Any) -> list[torch.Tensor]:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _summed(v: Any) -> torch.Tensor:
    vals = _tensors(v)
    total = vals[0].detach().clone()
    for other in vals[1:]:
        total.add_(other.detach().to(total.device))
    return total


class FakeStore(KVStoreBase):
    """Single-process store with MXNet's summing rule and a log of the calls made to it."""

    __test__ = False  # not a pytest test class

    def __init__(self, capabilities: Iterable[Capability | str] = (), name: str = "fakestore") -> None:
        self._type = name
        self._capabilities = {Capability(c) for c in capabilities}
        self.values: dict[Any, torch.Tensor] = {}
        self.calls: list[tuple[str, list[Any]]] = []
        self.optimizer: Any = None
        self._updater: Any = None

    @property
    def type(self) -> str:
        return self._type

    def is_capable(self, capability: str) -> bool:
        return Capability(capability) in self._capabilities

    def _log(self, method: str, key: Any) -> None:
        self.calls.append((method, [key] if isinstance(key, (int, str)) else list(key)))

    def called(self, method: str) -> int:
        """How many times ``method`` was called."""
        return sum(1 for m, _ in self.calls if m == method)

    def init(self, key: Any, value: Any) -> None:
        self._log("init", key)
        for k, v in _pairs(key, value):
            if k in self.values:
                raise KVStoreError(f"key {k!r} is already initialized")
            self.values[k] = _summed(_tensors(v)[:1])

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        self._log("push", key)
        with torch.no_grad():
            for k, v in _pairs(key, value):
                if k not in self.values:
                    raise KVStoreError(f"key {k!r} was never initialized")
                total = _summed(v).to(self.values[k].device)
                if self._updater is not None:
                    self._updater(k, total, self.values[k])
                else:
                    self.values[k] = total

    def pull(self, key: Any, out: Any = None, priority: int = 0, ignore_sparse: bool = True) -> None:
        self._log("pull", key)
        self._copy_out(key, out)

    def _copy_out(self, key: Any, out: Any) -> None:
        with torch.no_grad():
            for k, o in _pairs(key, out):
                for t in _tensors(o):
                    t.copy_(self.values[k].to(t.device))

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        self._log("pushpull", key)
        if self._updater is not None:
            KVStoreBase.pushpull(self, key, value, out, priority)
            return
        outs = dict(_pairs(key, value if out is None else out))
        with torch.no_grad():
            for k, v in _pairs(key, value):
                total = _summed(v)
                for t in _tensors(outs[k]):
                    t.copy_(total.to(t.device))

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        self._log("broadcast", key)
        for k, v in _pairs(key, value):
            if k not in self.values:
                self.values[k] = _summed(_tensors(v)[:1])
        self._copy_out(key, out)

    def set_optimizer(self, optimizer: Any) -> None:
        if Capability.OPTIMIZER not in self._capabilities:
            super().set_optimizer(optimizer)
        self._log("set_optimizer", [])
        self.optimizer = optimizer
        self._updater = get_updater(optimizer)

    def keys(self) -> Sequence[Any]:
        return list(self.values)


def train_on_two_contexts(store: Any, steps: int = 3,
                          **trainer_kwargs: Any) -> tuple[Any, list[list[torch.Tensor]]]:
    """A small net trained with a gluon.Trainer on ``store`` over cpu(0) and cpu(1), from fixed seeds;
    returns the Trainer and every parameter's copies (one per context)."""
    import mxtorch as mx
    from mxtorch import autograd, gluon

    ctxs = [mx.cpu(0), mx.cpu(1)]
    torch.manual_seed(0)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(5, activation="tanh", in_units=4), gluon.nn.Dense(2, in_units=5))
    net.initialize(mx.init.Xavier(), ctx=ctxs)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                            kvstore=store, **trainer_kwargs)
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(8, 4, generator=g), torch.randint(0, 2, (8,), generator=g)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(steps):
        with autograd.record():
            losses = [loss_fn(net(xs), ys) for xs, ys in zip(gluon.utils.split_and_load(x, ctxs),
                                                            gluon.utils.split_and_load(y, ctxs))]
        autograd.backward(losses)
        trainer.step(8)
    return trainer, [[d.detach().clone() for d in p.list_data()] for p in net.collect_params().values()]
