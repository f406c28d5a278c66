"""Token counting for :mod:`mxtorch.contrib.text`."""

from __future__ import annotations

import collections
import re
from collections import Counter

__all__ = ["count_tokens_from_str"]


def count_tokens_from_str(source_str: str, token_delim: str = " ", seq_delim: str = "\n",
                          to_lower: bool = False, counter_to_update: Counter | None = None) -> Counter:
    """Count the tokens of ``source_str``, split at ``token_delim`` or ``seq_delim`` (both regular
    expressions, as in MXNet: escape special characters); empty pieces are skipped.

    ``to_lower`` lower-cases every token first.  With ``counter_to_update`` the counts are added
    to that Counter, which is returned; otherwise a new Counter is.
    """
    tokens = [t for t in re.split(f"{token_delim}|{seq_delim}", source_str) if t]
    if to_lower:
        tokens = [t.lower() for t in tokens]
    if counter_to_update is None:
        return collections.Counter(tokens)
    counter_to_update.update(tokens)
    return counter_to_update
