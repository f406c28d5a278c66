"""mxtorch._forward.Forward: the read-only properties stores and clusters hand on from inner objects."""

from __future__ import annotations

import pydoc

import pytest

from mxtorch._forward import Forward


class _Client:
    def __init__(self, rank: int) -> None:
        self.rank = rank


class _Store:
    type = Forward[str]("_type")
    rank = Forward[int]("_client.rank", "This worker's rank.")

    def __init__(self) -> None:
        self._type = "dist_sync"
        self._client = _Client(3)


def test_reads_the_attribute_and_follows_dotted_paths_each_time() -> None:
    s = _Store()
    assert (s.type, s.rank) == ("dist_sync", 3)
    s._client.rank = 5  # not cached: read at each access, as a hand-written property
    assert s.rank == 5


def test_is_read_only() -> None:
    s = _Store()
    with pytest.raises(AttributeError):
        s.rank = 1
    with pytest.raises(AttributeError):
        del s.type
    assert s.rank == 3


def test_is_a_documented_property() -> None:
    assert isinstance(_Store.rank, property)
    assert _Store.rank.__doc__ == "This worker's rank."
    assert _Store.type.__doc__ is None  # not attrgetter's docstring
    assert _Store.rank.path == "_client.rank"
    assert "This worker's rank." in pydoc.render_doc(_Store)


def test_missing_inner_attribute_raises_attribute_error() -> None:
    s = _Store()
    del s._client
    with pytest.raises(AttributeError, match="_client"):
        _ = s.rank
