"""``mx.contrib.text``: MXNet 1.x's text indexing and token embeddings.

:mod:`.utils` counts tokens in a string, :mod:`.vocab` indexes them (:class:`~.vocab.Vocabulary`),
:mod:`.embedding` attaches vectors to indexed tokens -- from a pre-trained file of your own
(:class:`~.embedding.CustomEmbedding`), GloVe or fastText files already on disk, or several
embeddings concatenated (:class:`~.embedding.CompositeEmbedding`).  mxtorch never downloads:
GloVe and fastText read their files from ``embedding_root`` and say where to put them.
"""

from . import embedding, utils, vocab

__all__ = ["utils", "vocab", "embedding"]
