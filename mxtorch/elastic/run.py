"""``@elastic.run``: call a training function again, in the same process, after the group changed.

::

    state = elastic.State(net=net, trainer=trainer, epoch=0, batch=0)

    @elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()

    train(state)

In an in-process elastic job (:mod:`.inprocess`) the wrapper first lets a joining process wait for
admission, then gives every rank rank 0's state (:meth:`State.sync`) and calls the function.  When
a peer fails (a collective or store request fails: :func:`.inprocess.is_peer_failure`) the
survivors go back to the last commit (:meth:`State.restore`); when a worker waits to join
(:class:`.inprocess.MembershipChanged`, raised by :meth:`State.commit`) they keep the commit just
made.  Either way they form the next generation of the group inside the running processes,
apply the reset rule (:meth:`State.on_reset`), sync, and call the function again.  Any other
exception ends the process as usual (its peers then see it leave).

Outside that mode the function runs once after a sync: a failure ends the process and the
restart mode (``mxtorch launch --elastic``, torch's agents) restarts every worker, which resumes
from the newest checkpoint.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from .inprocess import MembershipChanged, init, is_peer_failure
from .rendezvous import JobFinished, RendezvousTimeout
from .state import State

__all__ = ["run", "MAX_RESETS"]

_log = logging.getLogger("mxtorch.elastic")
_R = TypeVar("_R")

MAX_RESETS = 100
"""Membership changes one call of a ``@run`` function survives before the failure is raised."""


def run(func: Callable[..., _R]) -> Callable[..., _R]:
    """Decorate ``func(state, *args, **kwargs)``; see the module docstring."""

    @functools.wraps(func)
    def wrapper(state: State, *args: Any, **kwargs: Any) -> _R:
        if not isinstance(state, State):
            raise TypeError(f"@elastic.run: the first argument must be an elastic.State, got "
                            f"{type(state).__name__}")
        context = init()
        if context is not None and context.admit():  # a joiner: the running workers admitted it
            state.on_reset()
        resets, reform = 0, False
        while True:
            try:  # a peer may also fail while the group re-forms or the state is synced
                if reform:
                    assert context is not None
                    resets += 1
                    context.reform()
                    state.on_reset()
                    reform = False
                state.sync()
                result = func(state, *args, **kwargs)
                if context is not None:
                    context.rendezvous.finish()
                return result
            except MembershipChanged:
                _log.info("elastic: a worker waits to join; re-forming the group from the commit just made")
                reform = True
            except Exception as e:
                final = isinstance(e, (RendezvousTimeout, JobFinished)) or resets >= MAX_RESETS
                if context is None or final or not is_peer_failure(e):
                    raise
                first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
                _log.warning("elastic: a peer failed (%s); back to the last commit, re-forming", first)
                state.restore()
                reform = True

    return wrapper

