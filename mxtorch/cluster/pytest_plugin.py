"""pytest fixtures for emulated-cluster tests: ``cluster`` and ``make_cluster``.

Import them into a ``conftest.py``::

    from mxtorch.cluster.pytest_plugin import cluster, cluster_support, make_cluster  # noqa: F401

and mark tests ``cluster``; the marker's keyword arguments are :meth:`Cluster.up`'s::

    @pytest.mark.cluster(hosts=4, bandwidth="1gbit")
    def test_x(cluster):
        ...

Where namespaces cannot be made (not root, no kernel support, no iproute2) every test using
the fixtures is skipped with the reason.  Clusters are removed after each test, when the
session is interrupted (Ctrl-C, SIGTERM) and at interpreter exit; a cluster whose test
session was killed outright is removed by the next session (or ``mxtorch cluster down --stale``).
"""

from __future__ import annotations

import atexit
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .cluster import Cluster, sweep_stale
from .netns import support_problem

__all__ = ["cluster", "cluster_support", "make_cluster"]

_live: list[Cluster] = []


def _down_all_live() -> None:
    while _live:
        _live.pop().down()


def _sigterm_as_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")  # pytest then runs the teardowns


@pytest.fixture(scope="session")
def cluster_support() -> Iterator[None]:
    """Skip unless this machine can make namespaces; sweep clusters of dead sessions first."""
    problem = support_problem()
    if problem is not None:
        pytest.skip(f"cluster tests need network namespaces: {problem}")
    sweep_stale()
    atexit.register(_down_all_live)
    previous = signal.getsignal(signal.SIGTERM)
    if previous in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        yield
    finally:
        _down_all_live()
        if previous in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture
def make_cluster(cluster_support: None) -> Iterator[Callable[..., Cluster]]:
    """A factory: ``make_cluster(hosts=2, bandwidth='1gbit', shaper='tbf')``; all removed after the test."""
    made: list[Cluster] = []

    def make(hosts: int = 2, bandwidth: str | int | None = None, **kwargs: Any) -> Cluster:
        c = Cluster.up(hosts, bandwidth, owned=True, **kwargs)
        made.append(c)
        _live.append(c)
        return c

    try:
        yield make
    finally:
        for c in made:
            c.down()
            if c in _live:
                _live.remove(c)


@pytest.fixture
def cluster(request: pytest.FixtureRequest, make_cluster: Callable[..., Cluster]) -> Cluster:
    """A cluster made with the keyword arguments of the test's ``cluster`` marker (default: 2 hosts)."""
    marker = request.node.get_closest_marker("cluster")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    return make_cluster(**kwargs)
