"""Horovod's process sets: collectives on a subset of the ranks, each set a torch.distributed group.

``hvd.ProcessSet([0, 2])`` names ranks; ``hvd.init(process_sets=[...])`` or
``hvd.add_process_set(...)`` makes it usable, and ``process_set=`` on a collective runs it among
those ranks only.  As in Horovod, ``root_rank`` stays a global rank, and only the members call
collectives on a set.  Adding and removing sets is collective over the *whole* job (every rank
calls it, in the same order), because torch.distributed creates a group on every rank; Horovod's
``HOROVOD_DYNAMIC_PROCESS_SETS=1`` is therefore not needed.  MPI communicators are not supported.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch.distributed as dist

from . import _basics
from ._scope import Scope

__all__ = ["ProcessSet", "global_process_set", "add_process_set", "remove_process_set", "Scope", "scope",
           "init"]


class ProcessSet:
    """A set of ranks that run collectives together (Horovod's ``ProcessSet``).

    ``process_set_id`` is None until the set is added (by ``hvd.init(process_sets=...)`` or
    :func:`add_process_set`); then ``size()``, ``rank()`` and ``included()`` answer for it.
    """

    def __init__(self, ranks_or_comm: Iterable[int]) -> None:
        if isinstance(ranks_or_comm, (str, bytes)) or not isinstance(ranks_or_comm, Iterable):
            raise ValueError(f"ProcessSet takes a list of ranks (MPI communicators are not supported here), "
                             f"got {ranks_or_comm!r}")
        ranks = list(ranks_or_comm)
        if any(isinstance(r, bool) or not isinstance(r, (int, np.integer)) for r in ranks):
            raise ValueError(f"ProcessSet takes a list of integer ranks, got {ranks!r}")
        self.ranks: list[int] | None = sorted(int(r) for r in ranks)
        self.process_set_id: int | None = None
        self.mpi_comm: Any = None
        self._group: Any = None

    def _invalidate(self) -> None:
        self.process_set_id = None
        self._group = None

    def size(self) -> int | None:
        """The number of ranks in the set, or None before it is added."""
        if self.process_set_id is None or self.ranks is None:
            return None
        return len(self.ranks)

    def rank(self) -> int | None:
        """This process's index within the set (None before it is added, -1 when not a member).

        Collectives still take global ranks (``root_rank``); this is for reading results such as
        :func:`allgather`'s, which come in set order."""
        if self.process_set_id is None or self.ranks is None:
            return None
        me = _basics.rank()
        return self.ranks.index(me) if me in self.ranks else -1

    def included(self) -> bool | None:
        """Whether this process is a member (None while the ranks are unknown)."""
        if self.ranks is None or not _basics.is_initialized():
            return None
        return _basics.rank() in self.ranks

    def __str__(self) -> str:
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks}, mpi_comm=None)"

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0
_sets: dict[int, ProcessSet] = {}
_ids = itertools.count(1)


def reset(world_size: int) -> None:
    """Forget every added set (``init``/``shutdown``); the global set covers ``world_size`` ranks."""
    for ps in _sets.values():
        ps._invalidate()
    _sets.clear()
    global_process_set.ranks = list(range(world_size))


def scope(process_set: Any) -> Scope:
    """The :class:`Scope` of ``process_set`` (None: the global set) for this process.

    Raises a one-line ``ValueError`` for a set that was not added or that this rank is not in.
    """
    if process_set is not None and not isinstance(process_set, ProcessSet):
        raise TypeError(f"process_set must be an hvd.ProcessSet, got {type(process_set).__name__}")
    layout = _basics.require_init()
    if process_set is None or process_set is global_process_set:
        return Scope(None, layout.size, layout.rank, tuple(range(layout.size)), 0)
    if process_set.process_set_id is None or process_set.ranks is None:
        raise ValueError(f"{process_set} has not been added: pass it to hvd.init(process_sets=[...]) or "
                         "hvd.add_process_set() first")
    ranks = tuple(process_set.ranks)
    if layout.rank not in ranks:
        raise ValueError(f"rank {layout.rank} is not in {process_set}: only its members run collectives "
                         "on it (check ps.included() first)")
    return Scope(process_set._group, len(ranks), ranks.index(layout.rank), ranks, process_set.process_set_id)


def _check_ranks(ranks: Sequence[int], world: int) -> None:
    if not ranks:
        raise ValueError("a process set needs at least one rank")
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"a process set lists each rank once, got {list(ranks)}")
    bad = [r for r in ranks if not 0 <= r < world]
    if bad:
        raise ValueError(f"process set ranks {bad} are out of range: there are {world} ranks "
                         f"(0..{world - 1})")


def _create(ps: ProcessSet) -> None:
    """Make ``ps`` usable: a torch group over its ranks (every rank of the job runs this)."""
    assert ps.ranks is not None
    layout = _basics.require_init()
    group = None
    if layout.backend != "none" and ps.ranks != list(range(layout.size)):
        group = dist.new_group(ranks=list(ps.ranks))
    ps._group = group
    ps.process_set_id = next(_ids)
    _sets[ps.process_set_id] = ps


def _agree_on(what: str, ranks: Sequence[int], problem: BaseException | None) -> None:
    from ._control import agree

    # Collective over the whole job: a rank that skipped the call fails clearly instead of hanging.
    agree(what, what, f"ranks={list(ranks)}", problem, scope=scope(None))


def add_process_set(process_set: ProcessSet | Sequence[int]) -> ProcessSet:
    """Add a process set after ``hvd.init()`` and return it; every rank of the job calls this.

    A set with the same ranks as one already added is a ``ValueError`` (as in Horovod).
    """
    layout = _basics.require_init()
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    assert ps.ranks is not None
    problem: BaseException | None = None
    try:
        _check_ranks(ps.ranks, layout.size)
        if ps.process_set_id is not None:
            raise ValueError(f"{ps} has already been added")
        if any(other.ranks == ps.ranks for other in _sets.values()) or ps.ranks == list(range(layout.size)):
            raise ValueError(f"Attempted to add a duplicate process set: {ps} (one with these ranks "
                             "exists)")
    except ValueError as err:
        problem = err
    _agree_on("add_process_set", ps.ranks, problem)
    _create(ps)
    return ps


def remove_process_set(process_set: ProcessSet) -> bool:
    """Remove an added set (every rank of the job calls this); True when it was removed.

    The global set and sets that were never added are not removed (False).
    """
    _basics.require_init()
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"remove_process_set takes an hvd.ProcessSet, got {type(process_set).__name__}")
    known = process_set.process_set_id in _sets and process_set is not global_process_set
    _agree_on("remove_process_set", process_set.ranks or [], None)
    if not known:
        return False
    assert process_set.process_set_id is not None
    del _sets[process_set.process_set_id]
    group = process_set._group
    process_set._invalidate()
    if group is not None and _basics.rank() in (process_set.ranks or []):
        dist.destroy_process_group(group)
    return True


def init(comm: Sequence[int] | None = None, process_sets: Any = None) -> None:
    """Join the job's process group (idempotent), as Horovod's ``hvd.init``.

    ``comm`` is accepted only when it names every rank (``None`` or ``range(world_size)``); MPI
    communicators and sub-communicators are not supported.  ``process_sets``: ProcessSet objects
    to add now (every rank passes the same list), or ``"dynamic"`` (accepted; sets can always be
    added later).  A process not started by a launcher (no ``RANK``/``WORLD_SIZE`` or the like)
    runs as a one-process job, without a process group.
    """
    _basics.init(comm)
    reset(_basics.size())
    init_sets(process_sets)


def init_sets(process_sets: Any) -> None:
    """``hvd.init(process_sets=...)``: add each listed set, in order (a duplicate is left invalid)."""
    if process_sets is None or process_sets == "dynamic":
        return
    if isinstance(process_sets, ProcessSet) or not isinstance(process_sets, Sequence):
        raise TypeError(f"process_sets must be a list of hvd.ProcessSet (or 'dynamic'), got {process_sets!r}")
    layout = _basics.require_init()
    for ps in process_sets:
        if not isinstance(ps, ProcessSet):
            raise TypeError(f"process_sets must hold hvd.ProcessSet objects, got {type(ps).__name__}")
        assert ps.ranks is not None
        _check_ranks(ps.ranks, layout.size)
    for ps in process_sets:
        if ps.ranks == list(range(layout.size)) or any(o.ranks == ps.ranks for o in _sets.values()):
            ps._invalidate()  # Horovod keeps one id per distinct set; the copy stays unusable
            continue
        _create(ps)


def _forget_sets_after_reform() -> None:
    """An in-process elastic job re-formed its group: the sets' torch groups are gone and the ranks
    renumbered, so (as in Horovod's elastic mode) every added set is invalid and is added again."""
    if _basics.is_initialized():
        reset(_basics.size())


def _follow_elastic_jobs() -> None:
    from ..elastic.inprocess import on_reform

    on_reform(_forget_sets_after_reform)  # after hvd's own hook, which reads the new ranks first


_follow_elastic_jobs()
