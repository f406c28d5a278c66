"""The file :meth:`gluon.Trainer.save_states` writes: a versioned container of the trainer's states.

One ``torch.save`` of plain containers, read back with ``torch.load(weights_only=True)`` (nothing
is unpickled)::

    {"format": "mxtorch.gluon.Trainer.states", "version": 1,
     "optimizer": uint8 tensor,     # the bytes of Updater.get_states(dump_optimizer=True)
     "compression": None | {        # the gradient compressor of this worker's KVStore
         "type": "2bit", "params": {"threshold": 0.5},
         "rank": 0, "num_workers": 2,             # who wrote it: residuals are per worker
         "state": Compressor.state_dict()},       # error-feedback residuals per key (PowerSGD: + Q)
     "hooks": {"amp": {"loss_scaler": LossScaler.state_dict()}}}   # update hooks, by name

Files written before the container existed (the bare Updater blob) load as an optimizer section
alone.  What loading does with each section is :func:`check_restorable`'s documentation.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from ..base import MXNetError

__all__ = ["FORMAT", "VERSION", "TrainerStates", "to_state_dict", "from_state_dict", "encode", "decode",
           "compression_section",
           "check_restorable"]

FORMAT = "mxtorch.gluon.Trainer.states"
VERSION = 1
"""The newest container version this mxtorch writes and reads."""
_UPDATER_FORMAT = "mxtorch.optimizer.Updater/1"  # what a bare, pre-container states file holds

_HOOK_HINTS = {"amp": "call mxtorch.amp.init_trainer(trainer) before load_states"}


@dataclass
class TrainerStates:
    """The sections of a states file (``compression``/``hooks`` empty when the file has none)."""

    optimizer: bytes
    compression: dict[str, Any] | None = None
    hooks: dict[str, dict[str, Any]] = field(default_factory=dict)
    version: int = VERSION


def to_state_dict(states: TrainerStates) -> dict[str, Any]:
    """The container as a state dict: tensors and plain values (what ``Trainer.state_dict`` returns)."""
    blob = bytearray(states.optimizer)
    # a tensor, not bytes: stored raw in the archive (pickled bytes grow and need _codecs)
    opt = torch.frombuffer(blob, dtype=torch.uint8) if blob else torch.empty(0, dtype=torch.uint8)
    return {"format": FORMAT, "version": VERSION, "optimizer": opt,
            "compression": states.compression, "hooks": dict(states.hooks)}


def encode(states: TrainerStates) -> bytes:
    buf = io.BytesIO()
    torch.save(to_state_dict(states), buf)
    return buf.getvalue()


def decode(raw: bytes, source: str) -> TrainerStates:
    """Read a states file's bytes (``source`` names it in errors); old bare Updater blobs too."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            payload = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as err:  # whatever torch raises for a file that is not its format
        detail = str(err).splitlines()[0][:200] if str(err) else ""
        raise MXNetError(f"cannot read trainer states from {source!r} ({len(raw)} bytes): not a file "
                         f"written by Trainer.save_states ({type(err).__name__}: {detail})") from err
    if isinstance(payload, dict) and payload.get("format") == _UPDATER_FORMAT:  # before the container
        return TrainerStates(optimizer=raw, version=0)
    return from_state_dict(payload, repr(source))


def from_state_dict(payload: Any, source: str) -> TrainerStates:
    """The sections of a state dict :func:`to_state_dict` made (or a bare Updater state, written
    before the container existed), checked; ``source`` names it in errors."""
    if not isinstance(payload, Mapping):
        raise MXNetError(f"{source} holds a {type(payload).__name__}, not the dict Trainer.save_states "
                         "writes")
    if payload.get("format") == _UPDATER_FORMAT:  # written before the container existed
        buf = io.BytesIO()
        torch.save(dict(payload), buf)
        return TrainerStates(optimizer=buf.getvalue(), version=0)
    if payload.get("format") != FORMAT:
        raise MXNetError(f"{source} has format {payload.get('format')!r}, expected {FORMAT!r} (a file "
                         "written by Trainer.save_states)")
    version = payload.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise MXNetError(f"{source}: bad trainer states version {version!r}")
    if version > VERSION:
        raise MXNetError(f"{source} was written by a newer mxtorch (trainer states version {version}); "
                         f"this one reads versions up to {VERSION}: upgrade mxtorch to load it")
    opt_blob = payload.get("optimizer")
    compression = payload.get("compression")
    hooks = payload.get("hooks", {})
    if not (isinstance(opt_blob, torch.Tensor) and opt_blob.dtype == torch.uint8 and opt_blob.dim() == 1):
        raise MXNetError(f"{source}: the 'optimizer' section is missing or not a 1-D uint8 tensor")
    if compression is not None and not (isinstance(compression, dict)
                                        and isinstance(compression.get("state"), dict)
                                        and isinstance(compression.get("type"), str)):
        raise MXNetError(f"{source}: the 'compression' section is malformed (needs 'type' and 'state')")
    if not isinstance(hooks, dict) or not all(isinstance(k, str) and isinstance(v, dict)
                                              for k, v in hooks.items()):
        raise MXNetError(f"{source}: the 'hooks' section must map hook names to dicts")
    return TrainerStates(optimizer=opt_blob.cpu().numpy().tobytes(), compression=compression, hooks=hooks,
                         version=version)


def compression_section(compressor: Any, rank: int, num_workers: int) -> dict[str, Any]:
    """The ``compression`` section for ``compressor`` as used by worker ``rank`` of ``num_workers``."""
    return {"type": compressor.name, "params": dict(compressor.params()), "rank": int(rank),
            "num_workers": int(num_workers), "state": compressor.state_dict()}


def _describe(section: Mapping[str, Any]) -> str:
    params = ", ".join(f"{k}={v!r}" for k, v in dict(section.get("params") or {}).items())
    return f"{section['type']!r}" + (f" ({params})" if params else "")


def check_restorable(states: TrainerStates, compressor: Any, hooks: Mapping[str, Any], rank: int,
                     strict: bool, source: str) -> tuple[bool, list[str]]:
    """Decide what of ``states`` a trainer can take; raise, with ``strict``, for what it cannot.

    Returns ``(restore_compression, hook names to restore)``.  The rules:

    * ``compression``: restored when the trainer's store compresses with the same type (other
      parameters, e.g. a new threshold, are fine: a residual is gradient not yet sent, whatever
      the threshold) and this worker has the rank that wrote the file, because residuals belong
      to one worker: resuming a job exactly needs every worker's own file.  A trainer without
      compression, another compressor type, or another rank cannot take the residuals: that is
      an error, or with ``strict=False`` this worker's residuals start empty (what is lost is
      at most one step's unsent part of the gradient).
    * ``hooks`` (AMP's loss scaler): restored into the trainer's hook of the same name; a file
      section without such a hook is an error (e.g. ``amp.init_trainer`` was not called before
      ``load_states``), ignored with ``strict=False``.
    * A section the file lacks (older files, runs without compression or AMP) leaves that part
      of the trainer as it is.
    """
    problems: list[str] = []
    restore_comp = False
    sec = states.compression
    if sec is not None:
        if compressor is None:
            problems.append(f"it holds the gradient-compression residuals of {_describe(sec)}, but this "
                            "Trainer does not compress (create it with the same compression_params and a "
                            "distributed kvstore)")
        elif compressor.name != sec["type"]:
            problems.append(f"it holds the residuals of compressor {_describe(sec)}, but this Trainer "
                            f"compresses with {compressor.name!r}")
        elif sec.get("rank") != rank:
            problems.append(f"it holds the compression residuals of worker rank {sec.get('rank')} (of "
                            f"{sec.get('num_workers')}), but this is rank {rank}: residuals belong to the "
                            "worker that wrote them; save states on every worker to its own file (e.g. "
                            "f'trainer.states.{kv.rank}') and load each worker's own")
        else:
            restore_comp = True
    restore_hooks: list[str] = []
    for name in states.hooks:
        if name in hooks:
            restore_hooks.append(name)
        else:
            hint = _HOOK_HINTS.get(name, f"set the {name!r} update hook on the Trainer before load_states")
            problems.append(f"it holds the state of the {name!r} update hook, which this Trainer does not "
                            f"have ({hint})")
    if problems and strict:
        raise MXNetError(f"cannot load trainer states from {source}: " + "; ".join(problems)
                         + ". Pass strict=False to load the rest and leave this state out")
    return restore_comp, restore_hooks
