"""Token embeddings: a :class:`~.vocab.Vocabulary` whose tokens each have a vector (``idx_to_vec``).

A pre-trained file has one token per line followed by its vector, the fields split by
``elem_delim``.  The first vector of a token wins (later ones are skipped with a warning), a
line with a one-element vector is taken for a header and skipped, every other vector must have
the first one's length.  Index 0 holds the unknown token's vector: the file's, when it has a
line for ``unknown_token``, else ``init_unknown_vec(shape=vec_len)``.  Given a ``vocabulary``,
the embedding indexes that vocabulary's tokens instead, each with its vector from the file (the
unknown vector for tokens the file lacks).

mxtorch never downloads: :class:`GloVe` and :class:`FastText` read
``<embedding_root>/<glove|fasttext>/<pretrained_file_name>`` and say where to put a missing file.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ... import nd
from ...base import MXNetError, data_dir
from ...registry import Registry
from ._catalogue import FASTTEXT_FILES, GLOVE_FILES
from .vocab import UNKNOWN_IDX, TextError, Vocabulary

__all__ = ["register", "create", "get_pretrained_file_names", "GloVe", "FastText", "CustomEmbedding",
           "CompositeEmbedding"]

_log = logging.getLogger(__name__)

MAX_LINE_CHARS = 1 << 20
"""Longest line read from an embedding file (a 300-d float vector takes ~3 kB)."""

_REGISTRY: Registry[type[_TokenEmbedding]] = Registry("token embedding")


def register(embedding_cls: type) -> type:
    """Register a token embedding class (a ``_TokenEmbedding`` subclass) under its lower-cased
    name, for :func:`create` and :func:`get_pretrained_file_names`."""
    if not (isinstance(embedding_cls, type) and issubclass(embedding_cls, _TokenEmbedding)):
        raise TypeError(f"register: {embedding_cls!r} is not a subclass of _TokenEmbedding")
    return _REGISTRY.register(embedding_cls)


def create(embedding_name: str, **kwargs: Any) -> _TokenEmbedding:
    """An instance of the registered embedding ``embedding_name`` (case-insensitive)."""
    return _REGISTRY[embedding_name](**kwargs)


def _file_names(cls: type[_TokenEmbedding]) -> list[str]:
    by_hash = getattr(cls, "pretrained_file_name_sha1", None)  # MXNet's attribute, in user classes
    return list(by_hash) if isinstance(by_hash, dict) else list(cls.pretrained_file_names)


def get_pretrained_file_names(embedding_name: str | None = None) -> list[str] | dict[str, list[str]]:
    """The pre-trained file names of one embedding, or of every one (a dict by embedding name);
    an unknown name is a ``KeyError`` listing the known ones."""
    if embedding_name is not None:
        return _file_names(_REGISTRY[embedding_name])
    return {name: _file_names(cls) for name, cls in _REGISTRY.items()}


def _vector(fields: list[str], path: str, line_num: int) -> list[float]:
    try:
        return [float(v) for v in fields]
    except ValueError:
        raise TextError(f"{path!r} line {line_num}: the vector has a field that is not a number") from None


class _TokenEmbedding(Vocabulary):
    """The base of every token embedding: a vocabulary with ``idx_to_vec`` and ``vec_len``.

    Keyword arguments (``unknown_token``, ``reserved_tokens``) go to :class:`Vocabulary`.
    A registered subclass lists its files in ``pretrained_file_names`` (or MXNet's
    ``pretrained_file_name_sha1`` dict) and finds them with :meth:`_get_pretrained_file`.
    """

    pretrained_file_names: tuple[str, ...] = ()
    source_url = "its publisher"
    _idx_to_vec: torch.Tensor | None = None
    _vec_len: int | None = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    @classmethod
    def _check_pretrained_file_names(cls, pretrained_file_name: str) -> None:
        """A KeyError unless ``pretrained_file_name`` is one of this embedding's files."""
        if pretrained_file_name not in _file_names(cls):
            name = cls.__name__.lower()
            raise KeyError(f"{name} has no pre-trained file {pretrained_file_name!r}: use one of "
                           f"mxtorch.contrib.text.embedding.get_pretrained_file_names({name!r})")

    @classmethod
    def _get_pretrained_file(cls, embedding_root: str, pretrained_file_name: str) -> str:
        """``<embedding_root>/<class name lower-cased>/<pretrained_file_name>``, which must exist:
        mxtorch does not download (MXNet fetched it here)."""
        path = os.path.join(os.path.expanduser(embedding_root), cls.__name__.lower(), pretrained_file_name)
        if not os.path.isfile(path):
            raise MXNetError(f"{cls.__name__}: {path} does not exist; mxtorch does not download: get "
                             f"{pretrained_file_name} from {cls.source_url} and put it there")
        return path

    @property
    def vec_len(self) -> int | None:
        """The length of each token's vector."""
        return self._vec_len

    @property
    def idx_to_vec(self) -> torch.Tensor | None:
        """Row ``i`` is the vector of the token with index ``i`` (shape ``(len(self), vec_len)``)."""
        return self._idx_to_vec

    def _load_embedding(self, path: str, elem_delim: str, init_unknown_vec: Callable[..., Any],
                        encoding: str = "utf8") -> None:
        path = os.path.expanduser(os.fspath(path))
        if not os.path.isfile(path):
            raise ValueError(f"pretrained_file_path {path!r} is not a file: give the path of a pre-trained "
                             "token embedding file")
        _log.info("loading pre-trained token embedding vectors from %s", path)
        rows: list[list[float]] = []
        unknown_vec: list[float] | None = None
        seen: set[Any] = set()
        with open(path, encoding=encoding) as f:
            for line_num, line in enumerate(iter(lambda: f.readline(MAX_LINE_CHARS + 1), ""), 1):
                if len(line) > MAX_LINE_CHARS:
                    raise TextError(f"{path!r} line {line_num}: longer than {MAX_LINE_CHARS} characters")
                token, *fields = line.rstrip().split(elem_delim)
                if not fields:
                    raise TextError(f"{path!r} line {line_num}: a token without a vector; each line must be "
                                    f"a token and its vector split by {elem_delim!r}")
                vec = _vector(fields, path, line_num)
                if token == self._unknown_token and unknown_vec is None:
                    unknown_vec = vec
                    seen.add(token)
                elif token in seen:
                    warnings.warn(f"{path!r} line {line_num}: a second vector for token {token!r} is skipped",
                                  stacklevel=3)
                elif len(vec) == 1:
                    warnings.warn(f"{path!r} line {line_num}: token {token!r} with a 1-element vector is "
                                  "taken for a header and skipped", stacklevel=3)
                else:
                    if rows and len(vec) != len(rows[0]):
                        raise TextError(f"{path!r} line {line_num}: token {token!r} has a vector of length "
                                        f"{len(vec)}, the tokens before it {len(rows[0])}")
                    rows.append(vec)
                    seen.add(token)
                    self._token_to_idx[token] = len(self._idx_to_token)
                    self._idx_to_token.append(token)
        if not rows:
            raise TextError(f"{path!r}: no token vectors found")
        self._vec_len = len(rows[0])
        vecs = nd.array([[0.0] * self._vec_len, *rows])
        vecs[UNKNOWN_IDX] = nd.array(unknown_vec) if unknown_vec is not None \
            else init_unknown_vec(shape=self._vec_len)
        self._idx_to_vec = vecs

    def _index_tokens_from_vocabulary(self, vocabulary: Vocabulary) -> None:
        self._token_to_idx = dict(vocabulary.token_to_idx)
        self._idx_to_token = list(vocabulary.idx_to_token)
        self._unknown_token = vocabulary.unknown_token
        reserved = vocabulary.reserved_tokens
        self._reserved_tokens = None if reserved is None else list(reserved)

    def _set_idx_to_vec_by_embeddings(self, embeddings: Sequence[_TokenEmbedding], vocab_len: int,
                                      idx_to_token: list[Any]) -> None:
        """Row ``i``: the vectors of ``idx_to_token[i]`` in each of ``embeddings``, concatenated
        (row 0: their unknown vectors)."""
        rest = list(idx_to_token[1:])
        parts = [torch.cat([e._vecs()[UNKNOWN_IDX:UNKNOWN_IDX + 1], e.get_vecs_by_tokens(rest)])
                 for e in embeddings]
        self._idx_to_vec = torch.cat(parts, dim=1)
        self._vec_len = int(self._idx_to_vec.shape[1])

    def _build_embedding_for_vocabulary(self, vocabulary: Vocabulary | None) -> None:
        if vocabulary is None:
            return
        if not isinstance(vocabulary, Vocabulary):
            raise TextError(f"vocabulary must be a mxtorch.contrib.text.vocab.Vocabulary, got "
                            f"{type(vocabulary).__name__}")
        self._set_idx_to_vec_by_embeddings([self], len(vocabulary), vocabulary.idx_to_token)
        self._index_tokens_from_vocabulary(vocabulary)

    def _vecs(self) -> torch.Tensor:
        if self._idx_to_vec is None:
            raise TextError(f"{type(self).__name__}: idx_to_vec is not set (no vectors were loaded)")
        return self._idx_to_vec

    def get_vecs_by_tokens(self, tokens: Any, lower_case_backup: bool = False) -> torch.Tensor:
        """The vector of a token (1-D), or of each token in a list (2-D); unknown tokens get the
        unknown vector.  ``lower_case_backup`` looks a token up lower-cased when it is not found."""
        many = isinstance(tokens, list)
        idx = self._token_to_idx

        def index(t: Any) -> int:
            if t in idx or not lower_case_backup:
                return idx.get(t, UNKNOWN_IDX)
            return idx.get(t.lower(), UNKNOWN_IDX)

        vecs = self._vecs()
        rows = torch.tensor([index(t) for t in (tokens if many else [tokens])], dtype=torch.long,
                            device=vecs.device)
        out = vecs.index_select(0, rows)
        return out if many else out[0]

    def update_token_vectors(self, tokens: Any, new_vectors: torch.Tensor) -> None:
        """Set the vectors of indexed tokens: ``new_vectors`` has one row per token (a single
        token may take a 1-D vector).  The unknown vector changes only when ``unknown_token``
        itself is named; any other unknown token is a ValueError."""
        vecs = self._vecs()
        single = not isinstance(tokens, list) or len(tokens) == 1
        if not isinstance(new_vectors, torch.Tensor) or new_vectors.dim() not in ((1, 2) if single else (2,)):
            raise TextError("update_token_vectors: new_vectors must be a 2-D NDArray (1-D or 2-D: one token)")
        tokens = tokens if isinstance(tokens, list) else [tokens]
        if new_vectors.dim() == 1:
            new_vectors = new_vectors.unsqueeze(0)
        if tuple(new_vectors.shape) != (len(tokens), self._vec_len):
            raise TextError(f"update_token_vectors: new_vectors has shape {tuple(new_vectors.shape)}, "
                            f"expected ({len(tokens)}, {self._vec_len}): one vector per token")
        rows = []
        for t in tokens:
            if t not in self._token_to_idx:
                raise ValueError(f"token {t!r} is unknown: to update the unknown vector, name the unknown "
                                 f"token {self._idx_to_token[UNKNOWN_IDX]!r} in tokens")
            rows.append(self._token_to_idx[t])
        vecs[torch.tensor(rows, dtype=torch.long, device=vecs.device)] = new_vectors.to(vecs)


class _PretrainedEmbedding(_TokenEmbedding):
    """GloVe and fastText: a file named in the embedding's catalogue (default: ``default_file``),
    read from ``<embedding_root>/<class name>/`` (``embedding_root``: ``$MXNET_HOME/embeddings``)."""

    default_file = ""

    def __init__(self, pretrained_file_name: str | None = None, embedding_root: str | None = None,
                 init_unknown_vec: Callable[..., Any] = nd.zeros, vocabulary: Vocabulary | None = None,
                 **kwargs: Any) -> None:
        name = self.default_file if pretrained_file_name is None else pretrained_file_name
        type(self)._check_pretrained_file_names(name)
        super().__init__(**kwargs)
        root = os.path.join(data_dir(), "embeddings") if embedding_root is None else embedding_root
        self._load_embedding(type(self)._get_pretrained_file(root, name), " ", init_unknown_vec)
        self._build_embedding_for_vocabulary(vocabulary)


@register
class GloVe(_PretrainedEmbedding):
    """The GloVe word vectors (Pennington, Socher and Manning, 2014); default file
    ``glove.840B.300d.txt``, read from ``<embedding_root>/glove/``."""

    pretrained_file_names = GLOVE_FILES
    default_file = "glove.840B.300d.txt"
    source_url = "https://nlp.stanford.edu/projects/glove/"


@register
class FastText(_PretrainedEmbedding):
    """The fastText word vectors (Bojanowski et al., 2017); default file ``wiki.simple.vec``, read
    from ``<embedding_root>/fasttext/``."""

    pretrained_file_names = FASTTEXT_FILES
    default_file = "wiki.simple.vec"
    source_url = "https://fasttext.cc/docs/en/pretrained-vectors.html"


class CustomEmbedding(_TokenEmbedding):
    """Vectors from a pre-trained file of your own: ``token<elem_delim>v1<elem_delim>v2...`` per line."""

    def __init__(self, pretrained_file_path: str, elem_delim: str = " ", encoding: str = "utf8",
                 init_unknown_vec: Callable[..., Any] = nd.zeros, vocabulary: Vocabulary | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._load_embedding(pretrained_file_path, elem_delim, init_unknown_vec, encoding)
        self._build_embedding_for_vocabulary(vocabulary)


class CompositeEmbedding(_TokenEmbedding):
    """The tokens of ``vocabulary``, each with the vectors of ``token_embeddings`` (one embedding
    or a list) concatenated in order."""

    def __init__(self, vocabulary: Vocabulary,
                 token_embeddings: _TokenEmbedding | list[_TokenEmbedding]) -> None:
        if not isinstance(vocabulary, Vocabulary):
            raise TextError(f"vocabulary must be a mxtorch.contrib.text.vocab.Vocabulary, got "
                            f"{type(vocabulary).__name__}")
        embeds = token_embeddings if isinstance(token_embeddings, list) else [token_embeddings]
        for e in embeds:
            if not isinstance(e, _TokenEmbedding):
                raise TextError(f"token_embeddings must be token embeddings, got {type(e).__name__}")
        self._index_tokens_from_vocabulary(vocabulary)
        self._set_idx_to_vec_by_embeddings(embeds, len(self), self._idx_to_token)
