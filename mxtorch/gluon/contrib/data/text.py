"""MXNet's ``gluon.contrib.data.text``: the WikiText-2 and WikiText-103 language-modelling sets
(Merity et al., 2016) read from ``<root>/wiki.{train,valid,test}.tokens``.

Every non-empty line is split at whitespace and ends with ``'<eos>'``; the whole segment becomes
one index stream (through the given vocabulary, or one built from this segment's counts with
``'<eos>'`` reserved), cut into samples of ``seq_len`` tokens whose labels are the next tokens
(the tail that fills no sample is dropped).  mxtorch never downloads: a missing file is an error
saying where to put it.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import torch

from ....base import MXNetError, data_dir
from ....contrib.text import utils as text_utils
from ....contrib.text.vocab import Vocabulary
from ...data.dataset import Dataset

__all__ = ["WikiText2", "WikiText103"]

EOS_TOKEN = "<eos>"
MAX_FILE_BYTES = 2 << 30
"""Largest token file read (WikiText-103's training file is about 0.5 GB)."""

_FILES = {"train": "wiki.train.tokens", "validation": "wiki.valid.tokens", "test": "wiki.test.tokens"}


class _WikiText(Dataset):
    """One segment of a WikiText set: ``(data, label)`` int32 rows of ``seq_len`` token indices."""

    _name = ""

    def __init__(self, root: str | None = None, segment: str = "train", vocab: Vocabulary | None = None,
                 seq_len: int = 35) -> None:
        if segment not in _FILES:
            raise ValueError(f"{type(self).__name__}: segment must be one of {sorted(_FILES)}, "
                             f"got {segment!r}")
        if int(seq_len) < 1:
            raise ValueError(f"{type(self).__name__}: seq_len must be a positive int, got {seq_len!r}")
        root = os.path.join(data_dir(), "datasets", self._name) if root is None else root
        path = os.path.join(os.path.expanduser(root), _FILES[segment])
        if not os.path.isfile(path):
            raise MXNetError(f"{type(self).__name__}: {path} does not exist; mxtorch does not download: "
                             f"unpack {self._name}-v1.zip (from the WikiText release) so that {path} exists")
        if os.path.getsize(path) > MAX_FILE_BYTES:
            raise MXNetError(f"{type(self).__name__}: {path} is larger than {MAX_FILE_BYTES} bytes")
        with open(path, encoding="utf8") as f:
            content = f.read()
        self._counter: Counter = text_utils.count_tokens_from_str(content)
        self._vocab = vocab if vocab is not None else Vocabulary(self._counter, reserved_tokens=[EOS_TOKEN])
        tokens = [t for line in content.splitlines() if line.split() for t in [*line.split(), EOS_TOKEN]]
        ids = torch.tensor(self._vocab.to_indices(tokens), dtype=torch.int32)
        usable = (len(ids) - 1) // int(seq_len) * int(seq_len)
        self._data = ids[:usable].reshape(-1, int(seq_len))
        self._label = ids[1:usable + 1].reshape(-1, int(seq_len))

    @property
    def vocabulary(self) -> Vocabulary:
        """The vocabulary the tokens were indexed with."""
        return self._vocab

    @property
    def frequencies(self) -> Counter:
        """Each token's count in this segment."""
        return self._counter

    def __getitem__(self, idx: int) -> Any:
        return self._data[idx], self._label[idx]

    def __len__(self) -> int:
        return len(self._label)


class WikiText2(_WikiText):
    """WikiText-2 (``root`` default ``$MXNET_HOME/datasets/wikitext-2``); ``segment`` is 'train',
    'validation' or 'test'."""

    _name = "wikitext-2"


class WikiText103(_WikiText):
    """WikiText-103 (``root`` default ``$MXNET_HOME/datasets/wikitext-103``); ``segment`` is
    'train', 'validation' or 'test'."""

    _name = "wikitext-103"
