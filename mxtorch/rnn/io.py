"""Text helpers of ``mx.rnn``: ``encode_sentences`` (words to integer ids) and
``BucketSentenceIter`` (batches of equal-length padded sentences, one bucket length each, for
``BucketingModule``)."""

from __future__ import annotations

import bisect
import logging
import random
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from .. import nd
from ..io.base import DataBatch, DataDesc, DataIter

__all__ = ["encode_sentences", "BucketSentenceIter"]

_log = logging.getLogger(__name__)


def encode_sentences(sentences: Sequence[Sequence[Hashable]], vocab: dict[Hashable, int] | None = None,
                     invalid_label: int = -1, invalid_key: Hashable = "\n", start_label: int = 0,
                     unknown_token: Hashable | None = None) -> tuple[list[list[int]], dict[Hashable, int]]:
    """Each sentence (a list of words) as a list of ids, and the vocabulary used.

    Without ``vocab`` one is built: ``invalid_key`` maps to ``invalid_label`` and new words get
    ids from ``start_label`` up (skipping ``invalid_label``).  With ``vocab``, a word outside it
    maps to ``unknown_token``'s id (added to the vocabulary if missing), or is an error when no
    ``unknown_token`` is given.
    """
    new_vocab = vocab is None
    if vocab is None:
        vocab = {invalid_key: invalid_label}
    idx = start_label
    out = []
    for sent in sentences:
        coded = []
        for word in sent:
            if word not in vocab:
                if not new_vocab and unknown_token is None:
                    raise ValueError(f"encode_sentences: unknown token {word!r} (pass unknown_token= "
                                     "to map words outside vocab to one id)")
                if unknown_token is not None:
                    word = unknown_token
                if word not in vocab:
                    if idx == invalid_label:
                        idx += 1
                    vocab[word] = idx
                    idx += 1
            coded.append(vocab[word])
        out.append(coded)
    return out, vocab


class BucketSentenceIter(DataIter):
    """Batches of encoded sentences padded with ``invalid_label`` to the smallest bucket length
    that holds them (longer sentences are dropped, with a warning); the label is the sentence
    shifted by one step.  ``buckets`` defaults to every length with at least ``batch_size``
    sentences; ``layout`` 'NT' (batch major) or 'TN'.  Each batch carries its ``bucket_key``."""

    def __init__(self, sentences: Sequence[Sequence[int]], batch_size: int, buckets: list[int] | None = None,
                 invalid_label: int = -1, data_name: str = "data", label_name: str = "softmax_label",
                 dtype: Any = "float32", layout: str = "NT") -> None:
        super().__init__(batch_size)
        if layout not in ("NT", "TN"):
            raise ValueError(f"BucketSentenceIter: layout must be 'NT' (batch major) or 'TN' (time major), "
                             f"got {layout!r}")
        if not buckets:
            counts = np.bincount([len(s) for s in sentences])
            buckets = [i for i, n in enumerate(counts) if n >= batch_size]
        buckets = sorted(buckets)
        if not buckets:
            raise ValueError("BucketSentenceIter: no bucket (no sentence length has batch_size sentences)")
        rows: list[list[np.ndarray]] = [[] for _ in buckets]
        discarded = 0
        for sent in sentences:
            b = bisect.bisect_left(buckets, len(sent))
            if b == len(buckets):
                discarded += 1
                continue
            row = np.full((buckets[b],), invalid_label, dtype=dtype)
            row[:len(sent)] = sent
            rows[b].append(row)
        if discarded:
            _log.warning("BucketSentenceIter: discarded %d sentences longer than the largest bucket",
                         discarded)
        self.data = [np.asarray(r, dtype=dtype).reshape(len(r), n) for r, n in zip(rows, buckets)]
        self.batch_size, self.buckets, self.dtype = batch_size, buckets, dtype
        self.data_name, self.label_name, self.invalid_label = data_name, label_name, invalid_label
        self.layout, self.major_axis = layout, layout.find("N")
        self.default_bucket_key = max(buckets)
        shape = ((batch_size, self.default_bucket_key) if self.major_axis == 0
                 else (self.default_bucket_key, batch_size))
        self.provide_data = [DataDesc(data_name, shape, layout=layout)]
        self.provide_label = [DataDesc(label_name, shape, layout=layout)]
        self.idx = [(i, j) for i, b in enumerate(self.data)
                    for j in range(0, len(b) - batch_size + 1, batch_size)]
        self.curr_idx = 0
        self.nddata: list[Any] = []
        self.ndlabel: list[Any] = []
        self.reset()

    def reset(self) -> None:
        """Shuffle the batches and the sentences within each bucket."""
        self.curr_idx = 0
        random.shuffle(self.idx)
        for b in self.data:
            np.random.shuffle(b)
        self.nddata, self.ndlabel = [], []
        for b in self.data:
            label = np.empty_like(b)
            label[:, :-1] = b[:, 1:]
            label[:, -1] = self.invalid_label
            self.nddata.append(nd.array(b, dtype=self.dtype))
            self.ndlabel.append(nd.array(label, dtype=self.dtype))

    def next(self) -> DataBatch:
        if self.curr_idx == len(self.idx):
            raise StopIteration
        i, j = self.idx[self.curr_idx]
        self.curr_idx += 1
        data = self.nddata[i][j:j + self.batch_size]
        label = self.ndlabel[i][j:j + self.batch_size]
        if self.major_axis == 1:
            data, label = data.T, label.T
        return DataBatch([data], [label], pad=0, bucket_key=self.buckets[i],
                         provide_data=[DataDesc(self.data_name, tuple(data.shape), layout=self.layout)],
                         provide_label=[DataDesc(self.label_name, tuple(label.shape), layout=self.layout)])
