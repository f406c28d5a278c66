"""This process's place in an in-process elastic job: the job's store, its generation, the group.

In-process mode (``MXTORCH_ELASTIC_MODE=inprocess`` and ``MXTORCH_ELASTIC_ENDPOINT=HOST:PORT``,
set by ``mxtorch launch --elastic`` or by hand) keeps the worker processes when the membership
changes: :func:`init` joins the job (generation 0 when it starts, else as a joiner that waits
for admission in :func:`admit`), :func:`reform` forms the next generation with the survivors
and joiners (:mod:`.rendezvous`) and re-creates the process group in place
(:func:`mxtorch.distributed.rejoin`).  Outside that mode nothing here is active: :func:`current`
is None and ``@elastic.run`` only runs the function (a failure ends the process; the restart
mode's agents restart the workers from a checkpoint).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import timedelta

from ..distributed import group
from ..distributed.env import DistributedConfigError, DistributedError
from ..profiler import span
from .env import JOB_KEY, MXTORCH_ELASTIC_ENDPOINT, MXTORCH_ELASTIC_MODE, ElasticJob, parse_endpoint
from .rendezvous import Membership, Rendezvous, describe, world_info

__all__ = ["ElasticContext", "MembershipChanged", "init", "current", "in_process_mode", "on_reform",
           "is_peer_failure"]

_log = logging.getLogger("mxtorch.elastic")
_STORE_CONNECT_S = 60.0


class MembershipChanged(Exception):  # noqa: N818 - not an error: workers wait to join
    """Raised by :meth:`State.commit` on every rank when a worker waits to join (Horovod's
    ``HostsUpdatedInterrupt``): ``@elastic.run`` re-forms the group and calls the function again
    from the commit just made."""


def in_process_mode(environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get(MXTORCH_ELASTIC_MODE, "") == "inprocess" and bool(env.get(MXTORCH_ELASTIC_ENDPOINT))


_reform_hooks: list[Callable[[], None]] = []


def on_reform(hook: Callable[[], None]) -> None:
    """Run ``hook()`` after every re-formed group (e.g. :mod:`mxtorch.horovod` reads its ranks again)."""
    if hook not in _reform_hooks:
        _reform_hooks.append(hook)


class ElasticContext:
    """The job's store and rendezvous, and this process's current membership (None: a joiner not
    yet admitted, running alone in a group of one)."""

    def __init__(self, endpoint: str) -> None:
        from torch.distributed import TCPStore

        host, port = parse_endpoint(endpoint, MXTORCH_ELASTIC_ENDPOINT)
        try:
            self.store = TCPStore(host, port, is_master=False, timeout=timedelta(seconds=_STORE_CONNECT_S))
        except (RuntimeError, OSError) as e:
            raise DistributedError(f"elastic: no job store answers at {endpoint} "
                                   f"({MXTORCH_ELASTIC_ENDPOINT}): {e}; is its launcher running?") from None
        if not self.store.check([JOB_KEY]):
            raise DistributedError(f"elastic: the store at {endpoint} holds no elastic job "
                                   f"({JOB_KEY!r} is missing)")
        self.job = ElasticJob.from_json(self.store.get(JOB_KEY), f"the store at {endpoint}")
        self.endpoint, self.host, self.port = endpoint, host, port
        self.rendezvous = Rendezvous(self.store, self.job.min_workers, self.job.max_workers,
                                     self.job.rendezvous_timeout, start_workers=self.job.start_workers)
        self.membership: Membership | None = None
        self.pending = 0  # the generation a joiner waits for

    def start(self) -> None:
        """Join the job: generation 0 with the others when it starts; else, a joiner, run alone until
        :meth:`admit` (the running workers admit it at their next commit)."""
        with span("mxtorch/elastic.rendezvous"):
            found, self.pending = self.rendezvous.join(None, admit_late=False)
        if found is None:
            _log.info("elastic: the job runs already; waiting to join it at the workers' next commit "
                      "(generation %d)", self.pending)
            from torch.distributed import HashStore

            from ..distributed.env import WorldInfo

            alone = WorldInfo(0, 1, 0, 1, 0, 1, "", None, "mxtorch elastic (waiting to join)")
            group.rejoin(HashStore(), alone)
            return
        self._form(found)

    def admit(self) -> bool:
        """For a joiner: wait until the running workers admit it, then form the group with them.
        False when this process is a member already."""
        if self.membership is not None:
            return False
        with span("mxtorch/elastic.rendezvous"):
            found, _ = self.rendezvous.join(None, first_generation=self.pending)
        assert found is not None
        self._form(found)
        return True

    def reform(self) -> None:
        """Leave the current generation (a peer failed or a worker waits to join) and form the next."""
        _drop_group()
        with span("mxtorch/elastic.rendezvous"):
            found, _ = self.rendezvous.join(self.membership)
        assert found is not None
        self._form(found)

    def _form(self, found: Membership) -> None:
        before = self.membership.members if self.membership is not None else None
        with span("mxtorch/elastic.form_group"):
            meet = self.rendezvous.group_store(found.generation)
            group.rejoin(meet, world_info(found, self.host, self.port))
        self.membership = found
        _log.info("elastic: %s", describe(before, found))
        for hook in _reform_hooks:
            hook()

    def joiners_waiting(self) -> bool:
        """Whether any rank sees a worker waiting to join (one all-reduce: every rank calls it)."""
        import torch
        import torch.distributed as dist

        if self.membership is None:
            return False
        flag = torch.tensor([int(self.rendezvous.joiners_waiting(self.membership))], dtype=torch.int32)
        if dist.get_world_size() > 1:
            if dist.get_backend() == "nccl":
                flag = flag.cuda()
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())


def _drop_group() -> None:
    """Close this rank's connections of the current group before the rendezvous: a survivor still
    waiting in a collective on this rank (not on the dead peer) then fails at once and comes to the
    rendezvous, instead of after its collective timeout (which outlasts the rendezvous's wait)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    world = dist.group.WORLD
    try:
        if world is not None:
            world.abort()  # gloo closes its pairs: the peers' pending sends and receives end
        dist.destroy_process_group()
    except (RuntimeError, ValueError) as e:  # broken by the peer that left
        _log.debug("elastic: dropping the failed group: %s", e)


_context: ElasticContext | None = None


def current() -> ElasticContext | None:
    """The in-process elastic job this process runs in (after :func:`init`), or None."""
    return _context


def init() -> ElasticContext | None:
    """Join the in-process elastic job the environment names (idempotent); None outside that mode.

    Call it before anything that joins the process group (a Trainer with a distributed store,
    ``hvd.init()`` does it for you)."""
    global _context
    if _context is None and in_process_mode():
        context = ElasticContext(os.environ[MXTORCH_ELASTIC_ENDPOINT])
        context.start()
        _context = context
    return _context


_FAILURE_TEXT = ("connection closed by peer", "connection reset by peer", "broken pipe", "timed out",
                 "timeout", "connection refused", "gloo", "nccl")


def is_peer_failure(error: BaseException) -> bool:
    """Whether ``error`` (or an error it was raised from) is a failed collective or store request:
    a peer died or hangs.  A user's own exception is not one (it ends the process)."""
    import torch.distributed as dist

    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, DistributedConfigError):
            return False
        if isinstance(e, (DistributedError, dist.DistError)):
            return True
        if isinstance(e, RuntimeError) and any(t in str(e).lower() for t in _FAILURE_TEXT):
            return True
        e = e.__cause__ or e.__context__
    return False
