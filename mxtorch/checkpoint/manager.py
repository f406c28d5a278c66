""":class:`CheckpointManager`: numbered checkpoints of a training job on any fsspec file system."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import warnings
from collections.abc import Callable, Collection, Mapping
from typing import Any

import torch

from .. import bounded_json
from .._closing import Closing
from ..base import MXNetError
from ..profiler import span
from ..stateful import Stateful, plain_state_problem
from . import _state
from ._rng import RNGState
from ._storage import Storage

__all__ = ["CheckpointManager", "CheckpointError", "MANIFEST"]

MANIFEST = "manifest.json"
FORMAT = "mxtorch.checkpoint"
VERSION = 1
PARAMS = "params.safetensors"
STATE = "state.json"  # rank 0: the extra values and the lr scheduler's settings
_STEP_DIR = re.compile(r"^step-(\d+)$")
_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}\Z")  # what _write names: no '/', no '..'
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
MAX_MANIFEST_BYTES = 16 << 20
"""Largest manifest read (one entry per file: a few hundred bytes per rank)."""
_IntList = list[int]  # the method CheckpointManager.list shadows the builtin in the class body


class CheckpointError(MXNetError):
    """A checkpoint that cannot be used: missing, partial, or failing its checksums."""


def _trainer_file(rank: int) -> str:
    return f"trainer.rank{rank}.states"


def _rng_file(rank: int) -> str:
    return f"rng.rank{rank}.json"


def _loader_file(rank: int) -> str:
    return f"loader.rank{rank}.json"


_STATEFUL_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}\Z")


def _stateful_file(name: str, rank: int) -> str:
    if not isinstance(name, str) or not _STATEFUL_NAME.match(name):
        raise ValueError(f"CheckpointManager: a stateful name is 1-64 letters, digits or '_': {name!r:.80}")
    return f"state.{name}.rank{rank}.pt"


def _stateful_state(name: str, obj: Any) -> Any:
    _require_stateful(**{f"stateful[{name!r}]": obj})
    sd = obj.state_dict()
    problem = plain_state_problem(sd, f"stateful[{name!r}].state_dict()")
    if problem is not None:
        raise TypeError(f"CheckpointManager.save: {problem}")
    return sd


def _done_file(rank: int) -> str:
    return f"done.rank{rank}.json"


def _dist() -> Any:
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def _join_job() -> Any:
    """torch.distributed, joined first when this process was launched as a rank of a job of
    several (as the Trainer's store would join it); None in a single-process job."""
    from ..distributed import env as dist_env

    info = dist_env.world_info_from_env()
    if _dist() is None and info is not None and info.world_size > 1:
        from .. import distributed as mxdist

        mxdist.init()
    return _dist()


def _require_stateful(**objects: Any) -> None:
    for name, obj in objects.items():
        if obj is not None and not isinstance(obj, Stateful):
            raise TypeError(f"CheckpointManager: {name}= must have state_dict() and load_state_dict() (the "
                            f"mxtorch.stateful.Stateful protocol), got a {type(obj).__name__}")


def _load_from_file(obj: Any, state: Any, source: str, **kwargs: Any) -> None:
    """``obj.load_state_dict(state)``; its error, an :class:`MXNetError`, names the file ``source``."""
    try:
        obj.load_state_dict(state, **kwargs)
    except MXNetError as err:
        raise CheckpointError(f"{source}: {err}") from err


def _collective_device(dist: Any) -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class CheckpointManager(Closing):
    """Save and restore numbered checkpoints of a training job under ``uri``.

    ``uri`` is a folder on any file system fsspec reaches: a plain path, ``file://...``,
    ``memory://...`` (in-process, for tests), or another protocol whose fsspec package is
    installed.  Checkpoint ``N`` is the folder ``step-N/``:

    * ``params.safetensors``: ``net.state_dict()`` (a Gluon block's parameters under the names
      ``net.save_parameters`` gives them);
    * ``trainer.rank<r>.states``: ``trainer.state_dict()``, the file ``Trainer.save_states`` writes
      (optimizer states incl. multi-precision copies and update counts, this worker's compression
      residuals, AMP's loss scale); ``trainer.load_states`` reads the file by hand too;
    * ``rng.rank<r>.json``: :class:`RNGState` (Python's, numpy's, torch's CPU and CUDA generators);
    * ``loader.rank<r>.json``: the data loader's position (``loader.state_dict()``);
    * ``state.json``: the ``extra`` values given to :meth:`save` and the lr scheduler's settings;
    * ``manifest.json``, written last: step, world size, versions, and each file's size and
      sha256.  A checkpoint exists once its manifest does: files are written first, the
      manifest replaces a temporary file (local disks: fsync and rename; other file systems:
      written under ``manifest.json.tmp`` then moved), so a crash in the middle of a save
      leaves no manifest and the previous checkpoint stays the latest.

    ``keep_last`` (None: all) checkpoints are kept; older ones are deleted after each commit.
    :meth:`should_save` says when ``every_n_steps`` / ``every_n_seconds`` call for a save
    (:meth:`maybe_save` combines both).  With ``async_save`` a save copies the state to CPU
    memory and returns; a background thread writes it, a second save first waits for the one
    in flight, and :meth:`wait` waits (and raises what the writer raised).  Nothing is ever
    unpickled: tensors are safetensors, the trainer states the ``weights_only`` container
    ``Trainer.save_states`` writes, the rest JSON.

    ``net``, ``trainer`` and ``loader`` are used through the :class:`~mxtorch.stateful.Stateful`
    protocol alone (``state_dict()`` / ``load_state_dict()``).

    In a job of several processes (``torch.distributed`` initialized) every rank creates the
    manager and calls :meth:`save` with the same steps: each rank writes its own ``*.rank<r>``
    files, rank 0 the parameters and ``state.json``, and rank 0 writes the manifest once every
    rank's files are there (each rank announces its files in ``done.rank<r>.json``; no
    collective runs in the writer threads).
    """

    def __init__(self, uri: Any, keep_last: int | None = 3, every_n_steps: int | None = None,
                 every_n_seconds: float | None = None, async_save: bool = True,
                 commit_timeout: float = 600.0) -> None:
        for name, v in (("keep_last", keep_last), ("every_n_steps", every_n_steps)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be an int >= 1 or None, got {v!r}")
        if every_n_seconds is not None and not (isinstance(every_n_seconds, (int, float))
                                                and every_n_seconds > 0):
            raise ValueError(f"every_n_seconds must be a number > 0 or None, got {every_n_seconds!r}")
        self.storage = Storage(uri)
        self.uri = self.storage.uri
        self.keep_last = keep_last
        self.every_n_steps = every_n_steps
        self.every_n_seconds = every_n_seconds
        self.async_save = bool(async_save)
        self.commit_timeout = float(commit_timeout)
        dist = _join_job()
        self.rank = dist.get_rank() if dist is not None else 0
        self.world_size = dist.get_world_size() if dist is not None else 1
        self._token = self._agree_token(dist)
        self._seq = 0  # saves started by this manager: the same on every rank
        self._last_save = time.monotonic()
        self._thread: threading.Thread | None = None
        self._error: tuple[int, BaseException] | None = None
        self.extra: dict[str, Any] = {}
        """The ``extra`` values of the checkpoint the last :meth:`restore` loaded."""
        self.restored_stateful: list[str] = []
        """The names of ``stateful`` the last :meth:`restore` loaded."""
        self.last_save: dict[str, Any] = {}
        """Of the last finished save: ``step``, ``blocking_s`` (time save() held the caller),
        ``write_s`` (serializing, hashing and writing) and ``bytes`` (this rank's files)."""

    # ---- policy ----------------------------------------------------------------------
    def should_save(self, step: int) -> bool:
        """Whether ``step`` is a save point: a multiple of ``every_n_steps``, or at least
        ``every_n_seconds`` after the last save (decided by rank 0 in a distributed job, so call
        it on every rank); without either setting every step is one."""
        if self.every_n_steps is None and self.every_n_seconds is None:
            return True
        due = self.every_n_steps is not None and step % self.every_n_steps == 0
        if self.every_n_seconds is not None:
            due = due or time.monotonic() - self._last_save >= self.every_n_seconds
            dist = _dist()
            if dist is not None and self.world_size > 1:
                flag = torch.tensor([int(due)], device=_collective_device(dist))
                dist.broadcast(flag, src=0)
                due = bool(flag.item())
        return due

    def maybe_save(self, step: int, **kwargs: Any) -> bool:
        """:meth:`save` if :meth:`should_save`; returns whether it saved."""
        if not self.should_save(step):
            return False
        self.save(step, **kwargs)
        return True

    # ---- saving ----------------------------------------------------------------------
    def save(self, step: int, net: Any = None, trainer: Any = None, loader: Any = None, *,
             stateful: Mapping[str, Any] | None = None, **extra: Any) -> None:
        """Checkpoint ``step``: ``net``'s parameters, ``trainer``'s states, ``loader``'s
        position, every RNG, each object of ``stateful`` (name -> any
        :class:`~mxtorch.stateful.Stateful`: a Pruner, a LossScaler, ...; this rank's, in
        ``state.<name>.rank<r>``) and ``extra`` (JSON-able values, given back as :attr:`extra`).

        The state is copied now; with ``async_save`` the files are written in the background
        (:meth:`wait` waits).  Saving a step that exists replaces it."""
        with span("checkpoint.save", step=step, rank=self.rank, async_save=self.async_save):
            self._save(step, net, trainer, loader, dict(stateful or {}), extra)

    def _save(self, step: int, net: Any, trainer: Any, loader: Any, stateful: dict[str, Any],
              extra: dict[str, Any]) -> None:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be an int >= 0, got {step!r}")
        started = time.perf_counter()
        files: dict[str, Callable[[], bytes]] = {}
        _require_stateful(net=net, trainer=trainer)
        if net is not None and self.rank == 0:
            tensors = _state.snapshot_tensors(net.state_dict(), "net")
            files[PARAMS] = lambda: _state.encode_params(tensors)
        if trainer is not None:
            blob = _state.encode_tensor_state(trainer.state_dict())  # now: residuals change at the next step
            files[_trainer_file(self.rank)] = lambda: blob
        if loader is not None:
            if isinstance(loader, Stateful):
                loader_json = json.dumps(loader.state_dict()).encode()
                files[_loader_file(self.rank)] = lambda: loader_json
            else:
                warnings.warn(f"the loader {type(loader).__name__} has no state_dict(): its position is not "
                              "saved", stacklevel=2)
        for name, obj in stateful.items():
            blob_of = _state.encode_tensor_state(_stateful_state(name, obj))  # now: training changes it
            files[_stateful_file(name, self.rank)] = lambda b=blob_of: b  # type: ignore[misc]
        rng_json = json.dumps(RNGState().state_dict()).encode()
        files[_rng_file(self.rank)] = lambda: rng_json
        if self.rank == 0:
            state_json = json.dumps({"extra": json.loads(_state.check_json(extra)),
                                     "lr_scheduler": _state.scheduler_state(trainer)}).encode()
            files[STATE] = lambda: state_json
        contents = {"net": net is not None, "trainer": trainer is not None,
                    "loader": loader is not None and isinstance(loader, Stateful),
                    "stateful": sorted(stateful)}
        self.wait()  # one save at a time; raises what the previous one raised
        self._seq += 1
        self._last_save = time.monotonic()
        args = (step, self._seq, files, contents, started)
        if self.async_save:
            self._thread = threading.Thread(target=self._write_guarded, args=args,
                                            name=f"mxtorch-checkpoint-{step}")
            self._thread.start()
        else:
            self._write(*args)

    def wait(self) -> None:
        """Wait for the save in flight; raise :class:`CheckpointError` if it failed."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            (step, err), self._error = self._error, None
            raise CheckpointError(f"saving checkpoint step {step} to {self.uri!r} failed: "
                                  f"{type(err).__name__}: {err}") from err

    def close(self) -> None:
        """Wait for the checkpoint being written (``with CheckpointManager(...)`` does on exit)."""
        self.wait()

    def _write_guarded(self, *args: Any) -> None:
        try:
            self._write(*args)
        except BaseException as err:  # kept for wait(): a thread has no caller to raise to
            self._error = (args[0], err)

    def _write(self, step: int, seq: int, files: dict[str, Callable[[], bytes]], contents: dict[str, Any],
               started: float) -> None:
        blocking = time.perf_counter() - started
        t0 = time.perf_counter()
        folder = f"step-{step}"
        st = self.storage
        if self.rank == 0 and st.exists(f"{folder}/{MANIFEST}"):
            st.remove(f"{folder}/{MANIFEST}")  # saved again: not a checkpoint until the new manifest
        records: dict[str, dict[str, Any]] = {}
        for name, produce in files.items():
            data = produce()
            st.write(f"{folder}/{name}", data)
            records[name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        nbytes = sum(r["size"] for r in records.values())
        if self.world_size > 1:
            st.write(f"{folder}/{_done_file(self.rank)}", json.dumps(
                {"token": self._token, "seq": seq, "step": step, "files": records}).encode())
            if self.rank != 0:
                self.last_save = {"step": step, "blocking_s": blocking, "write_s": time.perf_counter() - t0,
                                  "bytes": nbytes}
                return
            records = self._gather_done(folder, step, seq, records)
        from .. import __version__

        manifest = {"format": FORMAT, "version": VERSION, "step": step, "world_size": self.world_size,
                    "mxtorch_version": __version__, "torch_version": torch.__version__,
                    "time": time.time(), "contents": contents, "files": records}
        st.commit(f"{folder}/{MANIFEST}", json.dumps(manifest, indent=1, sort_keys=True).encode())
        self._cleanup(step)
        self.last_save = {"step": step, "blocking_s": blocking, "write_s": time.perf_counter() - t0,
                          "bytes": nbytes}

    def _gather_done(self, folder: str, step: int, seq: int,
                     records: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Rank 0: wait until every rank announced its files for this save; all files' records."""
        merged = dict(records)
        waiting = set(range(1, self.world_size))
        deadline = time.monotonic() + self.commit_timeout
        pause = 0.01
        while waiting:
            for r in sorted(waiting):
                name = f"{folder}/{_done_file(r)}"
                if not self.storage.exists(name):
                    continue
                try:
                    done = bounded_json.loads(self.storage.read(name, max_bytes=MAX_MANIFEST_BYTES), name,
                                              ValueError, max_bytes=MAX_MANIFEST_BYTES, expect=dict)
                except (ValueError, FileNotFoundError):
                    continue  # being written (non-atomic file systems): read it next round
                if done.get("token") == self._token and done.get("seq") == seq and done.get("step") == step:
                    if not isinstance(done.get("files"), dict):
                        raise CheckpointError(f"step {step}: {self.storage.describe(name)} has no file list")
                    merged.update(done["files"])
                    waiting.discard(r)
            if waiting:
                if time.monotonic() > deadline:
                    raise CheckpointError(f"step {step}: rank(s) {sorted(waiting)} did not finish writing "
                                          f"their files within {self.commit_timeout:g} s; the checkpoint is "
                                          "not committed")
                time.sleep(pause)
                pause = min(pause * 2, 0.5)
        return merged

    def _cleanup(self, step: int) -> None:
        """After committing ``step``: delete checkpoints beyond ``keep_last``, partial folders of
        earlier steps (crashed saves) and committed ones numbered above ``step`` (left over from
        before the job was rolled back to an earlier step)."""
        st = self.storage
        committed: list[int] = []
        for name in st.listdir():
            m = _STEP_DIR.match(name)
            if m is None or int(m.group(1)) == step:
                continue
            s = int(m.group(1))
            if st.exists(f"{name}/{MANIFEST}"):
                if s > step:
                    warnings.warn(f"checkpoint step {s} under {self.uri!r} is newer than the step {step} "
                                  "just saved (left from before a rollback): deleting it", stacklevel=2)
                    self._delete(s)
                else:
                    committed.append(s)
            elif s < step:
                st.remove(name)
        if self.keep_last is not None:
            for s in sorted(committed)[: max(0, len(committed) + 1 - self.keep_last)]:
                self._delete(s)

    def _delete(self, step: int) -> None:
        self.storage.remove(f"step-{step}/{MANIFEST}")  # first: never a committed, partial checkpoint
        self.storage.remove(f"step-{step}")

    # ---- reading ---------------------------------------------------------------------
    def list(self) -> _IntList:
        """The committed steps (their manifest exists), oldest first; not verified."""
        steps = []
        for name in self.storage.listdir():
            m = _STEP_DIR.match(name)
            if m is not None and self.storage.exists(f"{name}/{MANIFEST}"):
                steps.append(int(m.group(1)))
        return sorted(steps)

    def verify(self, step: int) -> dict[str, Any]:
        """Check checkpoint ``step`` (manifest, every file's size and sha256); its manifest, or
        :class:`CheckpointError` naming what is wrong."""
        return self._read(step, keep=False)[0]

    def latest(self) -> int | None:
        """The newest step whose checkpoint verifies (a warning names each one that does not), or None."""
        for s in reversed(self.list()):
            try:
                self.verify(s)
                return s
            except CheckpointError as err:
                warnings.warn(f"{err}; skipping it", stacklevel=2)
        return None

    def _read(self, step: int, keep: bool = True) -> tuple[dict[str, Any], dict[str, bytes]]:
        folder = f"step-{step}"
        st = self.storage
        manifest = self._read_manifest(step)
        out: dict[str, bytes] = {}
        for name, rec in sorted(manifest["files"].items()):
            rel = f"{folder}/{name}"
            path = st.describe(rel)
            why = st.escapes(rel)
            if why is not None:
                raise CheckpointError(f"checkpoint step {step} is corrupt: {path} cannot be in it: {why}")
            size = rec["size"]
            try:
                found = st.size(rel)
                data = st.read(rel, max_bytes=size) if found == size else b""
            except FileNotFoundError as err:
                raise CheckpointError(f"checkpoint step {step} is incomplete: {path} is missing") from err
            except OSError as err:
                raise CheckpointError(f"checkpoint step {step}: cannot read {path}: {err}") from err
            if found != size or len(data) != size:
                got = found if found != size else len(data)
                raise CheckpointError(f"checkpoint step {step} is corrupt: {path} has {got} bytes, the "
                                      f"manifest says {size} (truncated?)")
            if hashlib.sha256(data).hexdigest() != rec["sha256"]:
                raise CheckpointError(f"checkpoint step {step} is corrupt: {path} fails its sha256 checksum")
            if keep:
                out[name] = data
        return manifest, out

    def _read_manifest(self, step: int) -> dict[str, Any]:
        """The manifest of checkpoint ``step``, checked: CheckpointError naming the file for one that
        is missing, larger than :data:`MAX_MANIFEST_BYTES`, not JSON (or nested too deep), of
        another format or step, or whose file entries are not plain names of files in the step's
        folder with a size (int >= 0) and a sha256 (64 hex digits)."""
        rel = f"step-{step}/{MANIFEST}"
        st = self.storage
        where = st.describe(rel)
        why = st.escapes(rel)
        if why is not None:
            raise CheckpointError(f"checkpoint step {step}: {where} cannot be its manifest: {why}")
        try:
            raw = st.read(rel, max_bytes=MAX_MANIFEST_BYTES)
        except FileNotFoundError as err:
            raise CheckpointError(f"checkpoint step {step} has no manifest ({where}): it was never "
                                  "committed") from err
        except OSError as err:
            raise CheckpointError(f"checkpoint step {step}: cannot read {where}: {err}") from err
        manifest = bounded_json.loads(raw, f"checkpoint step {step}: {where}", CheckpointError,
                                      max_bytes=MAX_MANIFEST_BYTES)
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise CheckpointError(f"checkpoint step {step}: {where} is not a manifest of {FORMAT}")
        version = manifest.get("version")
        if isinstance(version, bool) or not isinstance(version, int) or version > VERSION:
            raise CheckpointError(f"checkpoint step {step}: {where} has version {version!r:.40}; "
                                  f"this mxtorch reads up to {VERSION} (upgrade mxtorch)")
        files = manifest.get("files")
        if not isinstance(files, dict) or manifest.get("step") != step:
            raise CheckpointError(f"checkpoint step {step}: {where} is malformed (no file list, or another "
                                  "step)")
        for name, rec in files.items():
            if not _FILE_NAME.match(name):
                raise CheckpointError(f"checkpoint step {step}: {where} lists the file {name!r:.100}, which "
                                      "is not a plain file name inside the checkpoint's folder")
            if not isinstance(rec, dict) or isinstance(rec.get("size"), bool) or \
                    not isinstance(rec.get("size"), int) or rec["size"] < 0 or \
                    not isinstance(rec.get("sha256"), str) or not _SHA256.match(rec["sha256"]):
                raise CheckpointError(f"checkpoint step {step}: {where} has a malformed entry for {name!r} "
                                      f"({rec!r:.100}; expected {{'size': bytes, 'sha256': hex digest}})")
        return manifest

    # ---- restoring -------------------------------------------------------------------
    def restore(self, net: Any = None, trainer: Any = None, loader: Any = None,
                step: int | None = None, *, stateful: Mapping[str, Any] | None = None,
                missing_ok: Collection[str] = ()) -> int:
        """Load the newest good checkpoint (or ``step``) into ``net``, ``trainer``, ``loader``
        and the RNGs; returns its step, 0 when there is none.

        A checkpoint that fails verification (missing file, size or checksum mismatch; a
        manifest that is unreadable, malformed, nested too deep, or lists a file that is not a
        plain name inside its folder) is skipped with a warning naming the file, and the previous
        one is used; when none is good,
        :class:`CheckpointError` lists why.  In a distributed job every rank must call it; the
        ranks check that they restored the same step.  A name of ``stateful`` also in ``missing_ok``
        may be missing from the checkpoint (one written before that object was saved this way): the
        object is left as it is; :attr:`restored_stateful` names those loaded."""
        _require_stateful(net=net, trainer=trainer, loader=loader)
        self.wait()
        candidates = [step] if step is not None else list(reversed(self.list()))
        problems: list[str] = []
        chosen: tuple[int, dict[str, Any], dict[str, bytes]] | None = None
        for s in candidates:
            try:
                manifest, data = self._read(s)
            except CheckpointError as err:
                problems.append(str(err))
                continue
            chosen = (s, manifest, data)
            break
        if chosen is None and problems:
            raise CheckpointError(f"no usable checkpoint under {self.uri!r}: " + "; ".join(problems))
        got = chosen[0] if chosen is not None else 0
        dist = _dist()
        if dist is not None and self.world_size > 1:
            both = torch.tensor([got, -got], dtype=torch.int64, device=_collective_device(dist))
            dist.all_reduce(both, op=dist.ReduceOp.MAX)
            if int(both[0]) != got or int(-both[1]) != got:
                raise CheckpointError(f"rank {self.rank} found checkpoint step {got} under {self.uri!r}, "
                                      f"other ranks found steps between {int(-both[1])} and "
                                      f"{int(both[0])}: the ranks do not see the same files")
        if chosen is None:
            self.extra, self.restored_stateful = {}, []
            return 0
        if problems:
            warnings.warn("; ".join(problems) + f". Falling back to checkpoint step {got}, the newest "
                          "good one", stacklevel=2)
        self._apply(*chosen, net=net, trainer=trainer, loader=loader, stateful=dict(stateful or {}),
                    missing_ok=set(missing_ok))
        return got

    def _apply(self, step: int, manifest: dict[str, Any], data: dict[str, bytes], net: Any, trainer: Any,
               loader: Any, stateful: dict[str, Any], missing_ok: set[str]) -> None:
        st, folder, r = self.storage, f"step-{step}", self.rank
        saved_world = manifest.get("world_size")
        same_world = saved_world == self.world_size

        def source(name: str) -> str:
            return st.describe(f"{folder}/{name}")

        def load_json(name: str) -> Any:
            return bounded_json.loads(data[name], source(name), CheckpointError)

        # decode everything first: a bad file changes nothing
        arrays = None
        if net is not None:
            if PARAMS not in data:
                raise CheckpointError(f"checkpoint step {step} has no parameters ({source(PARAMS)}): it was "
                                      "saved without net=")
            arrays = _state.decode_params(data[PARAMS], source(PARAMS))
        state = load_json(STATE) if STATE in data else {}
        if not isinstance(state, dict) or not isinstance(state.get("extra") or {}, dict):
            raise CheckpointError(f"{source(STATE)} is not a state file of this mxtorch (an object whose "
                                  "'extra' is an object)")
        trainer_name = _trainer_file(r)
        if trainer is not None:
            if not same_world:
                if trainer_name not in data:
                    trainer_name = _trainer_file(0)
                warnings.warn(f"checkpoint step {step} was saved by {saved_world} worker(s), this job has "
                              f"{self.world_size}: rank {r} loads the trainer states of "
                              f"{source(trainer_name)} without the parts that belong to another worker "
                              "(compression residuals start empty)", stacklevel=3)
            if trainer_name not in data:
                raise CheckpointError(f"checkpoint step {step} has no trainer states "
                                      f"({source(trainer_name)}): it was saved without trainer=")
            trainer_state = _state.decode_tensor_state(data[trainer_name], source(trainer_name))
        loader_state = None
        if loader is not None:
            if not same_world:
                warnings.warn(f"checkpoint step {step} was saved by {saved_world} worker(s), this job has "
                              f"{self.world_size}: the data position is not carried over (re-sharding it is "
                              "not supported); the loader starts as it was built", stacklevel=3)
            elif _loader_file(r) not in data:
                warnings.warn(f"checkpoint step {step} holds no data position ({source(_loader_file(r))}): "
                              "the loader starts as it was built", stacklevel=3)
            else:
                loader_state = load_json(_loader_file(r))
        states = {}
        for name, obj in stateful.items():
            _require_stateful(**{f"stateful[{name!r}]": obj})
            fname = _stateful_file(name, r)
            if fname not in data and name in missing_ok:
                continue
            if fname not in data:
                raise CheckpointError(f"checkpoint step {step} holds no state {name!r} for rank {r} "
                                      f"({source(fname)}): it was saved without stateful={{{name!r}: ...}}")
            states[name] = _state.decode_tensor_state(data[fname], source(fname))
        rng = load_json(_rng_file(r)) if _rng_file(r) in data else None
        if rng is not None and not isinstance(rng, dict):
            raise CheckpointError(f"{source(_rng_file(r))} is not an RNG state file (not a JSON object)")
        # then apply; the RNGs last, so that nothing after them draws
        if arrays is not None:
            _load_from_file(net, arrays, source(PARAMS))
        if trainer is not None:
            if same_world:
                _load_from_file(trainer, trainer_state, source(trainer_name))
            else:  # residuals belong to a worker of the old split: they start empty
                _load_from_file(trainer, trainer_state, source(trainer_name), strict=False,
                                 worker_local=False)
            _state.restore_scheduler(trainer, state.get("lr_scheduler"), source(STATE))
        for name, sd in states.items():
            _load_from_file(stateful[name], sd, source(_stateful_file(name, r)))
        if loader_state is not None:
            loader.load_state_dict(loader_state)
        if rng is not None:
            RNGState(source(_rng_file(r))).load_state_dict(rng)
        else:
            warnings.warn(f"checkpoint step {step} holds no RNG state for rank {r} (saved by {saved_world} "
                          "worker(s)): this rank's generators are left as they are", stacklevel=3)
        self.extra = dict(state.get("extra") or {})
        self.restored_stateful = sorted(states)

    # ---- distributed -----------------------------------------------------------------
    def _agree_token(self, dist: Any) -> int:
        """A number every rank shares and no earlier job had: marks this job's done-files."""
        token = int.from_bytes(hashlib.sha256(f"{time.time_ns()}-{id(self)}".encode()).digest()[:7], "big")
        if dist is None or self.world_size == 1:
            return token
        t = torch.tensor([token], dtype=torch.int64, device=_collective_device(dist))
        dist.broadcast(t, src=0)
        return int(t.item())
