"""``Closing``: the base of objects used as ``with obj:`` that release what they hold on exit."""

from __future__ import annotations

import abc
from typing import TypeVar

__all__ = ["Closing"]

_C = TypeVar("_C", bound="Closing")


class Closing(abc.ABC):
    """A context manager whose exit calls :meth:`close` (``with`` gives the object itself)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop what is running and release its resources."""

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
