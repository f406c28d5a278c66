"""``Vocabulary``: indices for text tokens, the unknown token at 0, reserved tokens next, then the
counted tokens by falling frequency (ties in token order)."""

from __future__ import annotations

import collections
from collections.abc import Hashable, Sequence
from typing import Any

from ...base import MXNetError

__all__ = ["Vocabulary", "TextError", "UNKNOWN_IDX"]

UNKNOWN_IDX = 0
"""The index of the unknown token in every vocabulary and embedding."""


class TextError(MXNetError, AssertionError):
    """Bad arguments or a bad embedding file in :mod:`mxtorch.contrib.text` (MXNet asserted these,
    so MXNet code catches them as ``AssertionError``)."""


class Vocabulary:
    """Index the keys of ``counter`` (a ``collections.Counter``) by frequency.

    Index 0 is ``unknown_token`` (what every token outside the vocabulary maps to), then the
    ``reserved_tokens`` in order (e.g. padding; they may not repeat or contain the unknown
    token), then the counter's keys seen at least ``min_freq`` times, most frequent first, equal
    counts in sorted token order, at most ``most_freq_count`` of them (``None``: no limit).
    Tokens are any hashable values of one type (str, int, tuple).
    """

    _token_to_idx: dict[Any, int]
    _idx_to_token: list[Any]
    _unknown_token: Any
    _reserved_tokens: list[Any] | None

    def __init__(self, counter: collections.Counter | None = None, most_freq_count: int | None = None,
                 min_freq: int = 1, unknown_token: Hashable = "<unk>",
                 reserved_tokens: Sequence[Hashable] | None = None) -> None:
        if min_freq < 1:
            raise TextError(f"Vocabulary: min_freq must be a positive integer, got {min_freq!r}")
        if reserved_tokens is not None:
            if unknown_token in set(reserved_tokens):
                raise TextError(f"Vocabulary: reserved_tokens must not contain the unknown token "
                                f"{unknown_token!r}")
            if len(set(reserved_tokens)) != len(reserved_tokens):
                raise TextError(f"Vocabulary: reserved_tokens has duplicates: {list(reserved_tokens)!r}")
        self._unknown_token = unknown_token
        self._reserved_tokens = None if reserved_tokens is None else list(reserved_tokens)
        self._idx_to_token = [unknown_token, *(self._reserved_tokens or [])]
        self._token_to_idx = {t: i for i, t in enumerate(self._idx_to_token)}
        if counter is not None:
            self._index_counter(counter, most_freq_count, min_freq)

    def _index_counter(self, counter: collections.Counter, most_freq_count: int | None,
                       min_freq: int) -> None:
        if not isinstance(counter, collections.Counter):
            raise TextError(f"Vocabulary: counter must be a collections.Counter, got "
                            f"{type(counter).__name__}")
        special = set(self._idx_to_token)
        by_freq = sorted(sorted(counter.items(), key=lambda kv: kv[0]), key=lambda kv: kv[1], reverse=True)
        cap = len(special) + (len(counter) if most_freq_count is None else most_freq_count)
        for token, freq in by_freq:
            if freq < min_freq or len(self._idx_to_token) >= cap:
                break
            if token not in special:
                self._token_to_idx[token] = len(self._idx_to_token)
                self._idx_to_token.append(token)

    def __len__(self) -> int:
        return len(self._idx_to_token)

    def __contains__(self, token: object) -> bool:
        return token in self._token_to_idx

    @property
    def token_to_idx(self) -> dict[Any, int]:
        """Each indexed token's index."""
        return self._token_to_idx

    @property
    def idx_to_token(self) -> list[Any]:
        """The indexed tokens, in index order."""
        return self._idx_to_token

    @property
    def unknown_token(self) -> Any:
        """What every token outside the vocabulary stands for (index 0)."""
        return self._unknown_token

    @property
    def reserved_tokens(self) -> list[Any] | None:
        """The reserved tokens (indices 1..), or None."""
        return self._reserved_tokens

    def to_indices(self, tokens: Any) -> int | list[int]:
        """The index of a token (0 when unknown), or a list of them for a list of tokens."""
        if not isinstance(tokens, list):
            return self._token_to_idx.get(tokens, UNKNOWN_IDX)
        return [self._token_to_idx.get(t, UNKNOWN_IDX) for t in tokens]

    def to_tokens(self, indices: int | list[int]) -> Any:
        """The token at an index, or a list of them for a list of indices; a ValueError for an
        index that is not an int below ``len(self)`` (negative ones count from the end, as in MXNet)."""
        many = isinstance(indices, list)
        out = []
        for idx in indices if many else [indices]:  # type: ignore[union-attr]
            if isinstance(idx, bool) or not isinstance(idx, int) or not -len(self) <= idx < len(self):
                raise ValueError(f"to_tokens: token index {idx!r} is invalid: this vocabulary has "
                                 f"{len(self)} tokens")
            out.append(self._idx_to_token[idx])
        return out if many else out[0]
