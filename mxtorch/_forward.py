"""``Forward``: a typed read-only property that returns an attribute of the object or of an inner one.

Stores and clusters describe themselves through many properties that only hand on a value
held elsewhere (``rank`` is the client's rank, ``type`` the name given at creation)::

    class DistKVStore(KVStoreBase):
        type = Forward[str]("_type")
        rank = Forward[int]("_client.rank")

is ``@property def rank(self) -> int: return self._client.rank`` written once.  It is a
``property`` (read-only: assigning raises ``AttributeError``; ``help()`` lists it) whose getter
is an ``operator.attrgetter``, so reading it costs no more than a hand-written property.  The
type argument is what type checkers see on an instance.
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Generic, TypeVar, overload

__all__ = ["Forward"]

T = TypeVar("T")


class Forward(property, Generic[T]):
    """A read-only property returning ``obj.<path>``; ``path`` may be dotted (``"_client.rank"``)."""

    def __init__(self, path: str, doc: str | None = None) -> None:
        super().__init__(attrgetter(path))
        self.path = path
        self.__doc__ = doc  # a property takes its getter's doc otherwise: attrgetter's

    if TYPE_CHECKING:
        @overload
        def __get__(self, obj: None, owner: type | None = None) -> Forward[T]: ...
        @overload
        def __get__(self, obj: object, owner: type | None = None) -> T: ...
        def __get__(self, obj: object | None, owner: type | None = None) -> T | Forward[T]: ...
