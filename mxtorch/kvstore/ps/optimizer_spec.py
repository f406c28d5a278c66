"""Optimizers as JSON: what a worker sends so that the servers build the same optimizer.

MXNet pickles the optimizer object to its servers; here the worker sends a declaration
instead, and a server builds the optimizer from the registry, so nothing received is ever
unpickled::

    {"name": "sgd",                                  # registered mxtorch optimizer
     "params": {"lr": 0.1, "momentum": 0.9, ...},    # its scalar attributes
     "lr_mult": [[key, mult], ...], "wd_mult": [...], "idx2name": [...],
     "lr_scheduler": {"class": "FactorScheduler", "state": {...}} | null,
     "begin_num_update": 0}

Per-parameter multipliers of a gluon Trainer (``param_dict``) are resolved on the worker into
``lr_mult``/``wd_mult`` per index.  Only optimizers registered with
:func:`mxtorch.optimizer.register` and the schedulers of :mod:`mxtorch.lr_scheduler` can be
declared; anything else is a clear error that suggests ``update_on_kvstore=False``.  A
server builds a user's own registered class once it has imported the module that registers
it (``MXTORCH_PS_SERVER_IMPORTS``); the declaration names that module, for the error a server
gives when it has not (a server never imports what a message names).

Later changes travel as a *hyper* dict (``lr``, ``rescale_grad``, ``wd``, ``clip_gradient``,
and the resolved ``lr_mult``/``wd_mult`` pairs): :func:`hyper_of` reads it, :func:`apply_hyper`
sets it (the Trainer changes ``rescale_grad`` every step, ``set_learning_rate`` changes
``lr``, and ``param.lr_mult = 0.1`` or ``optimizer.set_lr_mult(...)`` the multipliers).
"""

from __future__ import annotations

import math
from typing import Any

from ... import lr_scheduler as _lrs
from ... import optimizer as _opt
from ...distributed import env as _env
from ..base import KVStoreError
from .protocol import ProtocolError, key_from_json, key_to_json

__all__ = ["describe_optimizer", "build_optimizer", "describe_scheduler", "build_scheduler", "hyper_of",
           "apply_hyper"]

_SCALARS = (bool, int, float, str, type(None))
_SPECIAL = {"num_update", "begin_num_update", "param_dict", "lr_scheduler", "lr_mult", "wd_mult", "idx2name"}


def _plain(value: Any) -> bool:
    if isinstance(value, _SCALARS):
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str)) for v in value)


def _describe_scheduler(sched: Any) -> dict[str, Any] | None:
    if sched is None:
        return None
    cls = type(sched)
    if getattr(_lrs, cls.__name__, None) is not cls:
        raise KVStoreError(
            f"the optimizer's lr_scheduler {cls.__name__} is not one of mxtorch.lr_scheduler's schedulers, "
            "so the parameter servers cannot run it: use one of "
            f"{[n for n in _lrs.__all__ if n != 'LRScheduler']}, or create the Trainer with "
            "update_on_kvstore=False (the workers then run the optimizer)")
    state = {}
    for k, v in vars(sched).items():
        if not _plain(v):
            raise KVStoreError(f"lr_scheduler {cls.__name__} has attribute {k!r} of type {type(v).__name__}, "
                               "which cannot be sent to the parameter servers")
        state[k] = list(v) if isinstance(v, tuple) else v
    return {"class": cls.__name__, "state": state}


def _build_scheduler(desc: Any) -> Any:
    if desc is None:
        return None
    if not isinstance(desc, dict) or not isinstance(desc.get("state"), dict):
        raise ProtocolError("malformed lr_scheduler description")
    name = desc.get("class")
    cls = getattr(_lrs, name, None) if isinstance(name, str) and name in _lrs.__all__ else None
    if not (isinstance(cls, type) and issubclass(cls, _lrs.LRScheduler)):
        raise ProtocolError(f"unknown lr_scheduler class {name!r}")
    obj = cls.__new__(cls)
    for k, v in desc["state"].items():
        if not isinstance(k, str) or k.startswith("__") or not _plain(v):
            raise ProtocolError(f"malformed lr_scheduler attribute {k!r}")
        setattr(obj, k, v)
    return obj


def describe_scheduler(sched: Any) -> dict[str, Any] | None:
    """The JSON of an lr scheduler (its class and attributes; None for None): a server's log
    records it with each update, since schedulers change their attributes as they run."""
    return _describe_scheduler(sched)


def build_scheduler(desc: Any) -> Any:
    """The scheduler :func:`describe_scheduler` described (:class:`ProtocolError` for anything else)."""
    return _build_scheduler(desc)


def _pairs(mapping: dict[Any, Any]) -> list[list[Any]]:
    return [[key_to_json(k), v] for k, v in mapping.items() if isinstance(k, (int, str))]


def _multipliers(optimizer: Any) -> tuple[list[list[Any]], list[list[Any]]]:
    """``(lr_mult, wd_mult)`` pairs, with gluon Parameters' own multipliers resolved per index."""
    lr_mult = dict(optimizer.lr_mult)
    wd_mult = dict(optimizer.wd_mult)
    for index, param in (optimizer.param_dict or {}).items():
        if isinstance(index, (int, str)):
            lr_mult[index] = float(getattr(param, "lr_mult", 1.0))
            wd_mult[index] = float(getattr(param, "wd_mult", 1.0))
    return _pairs(lr_mult), _pairs(wd_mult)


def describe_optimizer(optimizer: Any) -> dict[str, Any]:
    """The JSON declaration of ``optimizer`` (see the module docstring)."""
    if not isinstance(optimizer, _opt.Optimizer):
        raise KVStoreError(f"set_optimizer needs an mxtorch Optimizer, got {type(optimizer).__name__}")
    name = type(optimizer).__name__.lower()
    if _opt.Optimizer.opt_registry.get(name) is not type(optimizer):
        raise KVStoreError(
            f"optimizer class {type(optimizer).__qualname__} is not registered with "
            "mxtorch.optimizer.register, so the parameter servers cannot build it: decorate it with "
            "@mxtorch.optimizer.register in a module and start the servers with "
            f"{_env.MXTORCH_PS_SERVER_IMPORTS}=that.module (`mxtorch launch --server-import that.module`), "
            "or create the Trainer with update_on_kvstore=False (the workers then run the optimizer)")
    klass = type(optimizer)
    params = {k: v for k, v in vars(optimizer).items()
              if not k.startswith("_") and k not in _SPECIAL and isinstance(v, _SCALARS)}
    lr_mult, wd_mult = _multipliers(optimizer)
    return {
        "name": name, "module": klass.__module__, "class": klass.__qualname__,  # for errors only
        "params": params, "lr_mult": lr_mult, "wd_mult": wd_mult,
        "idx2name": _pairs(optimizer.idx2name), "lr_scheduler": _describe_scheduler(optimizer.lr_scheduler),
        "begin_num_update": int(optimizer.begin_num_update),
    }


def _unpairs(obj: Any, what: str, number: bool) -> dict[Any, Any]:
    if not isinstance(obj, list):
        raise ProtocolError(f"malformed {what} in an optimizer description")
    out: dict[Any, Any] = {}
    for item in obj:
        if not (isinstance(item, list) and len(item) == 2):
            raise ProtocolError(f"malformed {what} entry {item!r}")
        value = item[1]
        if number:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, str)
        if not ok:
            raise ProtocolError(f"malformed {what} value {value!r}")
        out[key_from_json(item[0])] = value
    return out


def _unregistered(name: Any, module: Any, qualname: Any) -> str:
    """What to do about an optimizer a server cannot build (never imports what a message names)."""
    fallback = "or create the Trainer with update_on_kvstore=False (the workers then run the optimizer)"
    if not isinstance(module, str) or not isinstance(qualname, str):
        return (f"optimizer {name!r} is not registered in this server process: name the module that "
                f"registers it in {_env.MXTORCH_PS_SERVER_IMPORTS} when starting the servers, {fallback}")
    if module == "__main__":
        return (f"optimizer {name!r} (class {qualname}) is defined in the workers' main script, which this "
                "server process does not run: move the class into a module and start the servers with "
                f"{_env.MXTORCH_PS_SERVER_IMPORTS}=that.module "
                "(`mxtorch launch --server-import that.module`), "
                f"launch with `--ps-roles same-command` so every role runs the script, {fallback}")
    return (f"optimizer {name!r} (class {qualname} of module {module!r} on the workers) is not registered "
            f"in this server process: start the servers with {_env.MXTORCH_PS_SERVER_IMPORTS}={module} "
            f"(`mxtorch launch --server-import {module}`, `mxtorch server --import {module}`), {fallback}")


def build_optimizer(desc: Any) -> Any:
    """An optimizer built from a declaration made by :func:`describe_optimizer`."""
    if not isinstance(desc, dict) or not isinstance(desc.get("params"), dict):
        raise ProtocolError("malformed optimizer description")
    name = desc.get("name")
    klass = _opt.Optimizer.opt_registry.get(name) if isinstance(name, str) else None
    if klass is None:
        raise KVStoreError(_unregistered(name, desc.get("module"), desc.get("class")))
    optimizer = klass()
    for k, v in desc["params"].items():
        if (isinstance(k, str) and not k.startswith("_") and k not in _SPECIAL and isinstance(v, _SCALARS)
                and isinstance(getattr(optimizer, k, None), _SCALARS) and hasattr(optimizer, k)):
            setattr(optimizer, k, v)
    optimizer.lr_mult = _unpairs(desc.get("lr_mult", []), "lr_mult", True)
    optimizer.wd_mult = _unpairs(desc.get("wd_mult", []), "wd_mult", True)
    optimizer.idx2name = _unpairs(desc.get("idx2name", []), "idx2name", False)
    optimizer.lr_scheduler = _build_scheduler(desc.get("lr_scheduler"))
    begin = desc.get("begin_num_update", 0)
    if not isinstance(begin, int) or begin < 0:
        raise ProtocolError(f"malformed begin_num_update {begin!r}")
    optimizer.begin_num_update = optimizer.num_update = begin
    return optimizer


def hyper_of(optimizer: Any) -> dict[str, Any]:
    """The hyper-parameters a worker may change between steps (lr is None under a scheduler)."""
    lr = None if optimizer.lr_scheduler is not None else float(optimizer.lr)
    clip = optimizer.clip_gradient
    lr_mult, wd_mult = _multipliers(optimizer)
    return {"lr": lr, "rescale_grad": float(optimizer.rescale_grad), "wd": float(optimizer.wd),
            "clip_gradient": None if clip is None else float(clip), "lr_mult": lr_mult, "wd_mult": wd_mult}


def apply_hyper(optimizer: Any, hyper: Any) -> None:
    """Set the values of a :func:`hyper_of` dict on ``optimizer``."""
    if not isinstance(hyper, dict):
        raise ProtocolError("malformed SET_HYPER message")
    if "lr_mult" in hyper:
        optimizer.lr_mult = _unpairs(hyper["lr_mult"], "lr_mult", True)
    if "wd_mult" in hyper:
        optimizer.wd_mult = _unpairs(hyper["wd_mult"], "wd_mult", True)
    for name, attr in (("lr", "lr"), ("rescale_grad", "rescale_grad"), ("wd", "wd"),
                       ("clip_gradient", "clip_gradient")):
        if name not in hyper:
            continue
        v = hyper[name]
        if v is None:
            if name == "clip_gradient":
                optimizer.clip_gradient = None
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ProtocolError(f"malformed {name} {v!r} in SET_HYPER")
        setattr(optimizer, attr, float(v))
