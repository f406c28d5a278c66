"""mx.contrib.text: token counts, Vocabulary indexing, embeddings from files (hand-made examples)."""

from collections import Counter

import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError
from mxtorch.contrib import text
from mxtorch.contrib.text import embedding as emb


def test_count_tokens_splits_at_either_delimiter_regex() -> None:
    src = "|The|cat|;|the|dog|;"
    counts = text.utils.count_tokens_from_str(src, r"\|", ";")
    assert counts == Counter({"The": 1, "cat": 1, "the": 1, "dog": 1})
    seed = Counter({"the": 5})
    out = text.utils.count_tokens_from_str(src, r"\|", ";", to_lower=True, counter_to_update=seed)
    assert out is seed and seed == Counter({"the": 7, "cat": 1, "dog": 1})


def test_vocabulary_orders_unknown_reserved_then_by_falling_count() -> None:
    counts = Counter({"x": 3, "b": 2, "a": 2, "z": 1})
    v = text.vocab.Vocabulary(counts, reserved_tokens=["<pad>"])
    assert v.idx_to_token == ["<unk>", "<pad>", "x", "a", "b", "z"]  # a before b: equal counts sort
    assert v.to_indices(["b", "nope"]) == [4, 0] and v.to_indices("x") == 2
    assert v.to_tokens([2, 0]) == ["x", "<unk>"] and v.to_tokens(-1) == "z"
    assert text.vocab.Vocabulary(counts, min_freq=2).idx_to_token == ["<unk>", "x", "a", "b"]
    assert text.vocab.Vocabulary(counts, most_freq_count=2).idx_to_token == ["<unk>", "x", "a"]
    with pytest.raises(ValueError, match="invalid"):
        v.to_tokens(6)
    with pytest.raises(AssertionError, match="duplicates"):  # MXNet asserted: AssertionError still catches it
        text.vocab.Vocabulary(counts, reserved_tokens=["<pad>", "<pad>"])
    with pytest.raises(MXNetError, match="unknown token"):
        text.vocab.Vocabulary(counts, reserved_tokens=["<unk>"])


def _write(path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def test_custom_embedding_reads_vectors_and_maps_a_vocabulary(tmp_path) -> None:
    f = _write(tmp_path / "e.txt", ["3,2", "cat,1,2", "dog,3,4", "cat,9,9"])  # a header, then a duplicate
    with pytest.warns(UserWarning):
        e = emb.CustomEmbedding(f, ",", init_unknown_vec=mx.nd.ones)
    assert e.idx_to_token == ["<unk>", "cat", "dog"] and e.vec_len == 2
    torch.testing.assert_close(e.idx_to_vec, torch.tensor([[1.0, 1.0], [1, 2], [3, 4]]))
    torch.testing.assert_close(e.get_vecs_by_tokens("DOG", lower_case_backup=True), torch.tensor([3.0, 4]))
    torch.testing.assert_close(e.get_vecs_by_tokens(["DOG"]), torch.tensor([[1.0, 1]]))

    vocab = text.vocab.Vocabulary(Counter(["dog", "dog", "emu"]))
    with pytest.warns(UserWarning):
        e2 = emb.CustomEmbedding(f, ",", vocabulary=vocab)  # init: zeros
    assert e2.idx_to_token == ["<unk>", "dog", "emu"]
    torch.testing.assert_close(e2.idx_to_vec, torch.tensor([[0.0, 0], [3, 4], [0, 0]]))
    e2.update_token_vectors(["emu", "<unk>"], mx.nd.array([[5, 6], [7, 8]]))
    torch.testing.assert_close(e2.idx_to_vec, torch.tensor([[7.0, 8], [3, 4], [5, 6]]))
    with pytest.raises(ValueError, match="unknown"):
        e2.update_token_vectors("cat", mx.nd.array([0, 0]))
    with pytest.raises(AssertionError, match="shape"):
        e2.update_token_vectors("dog", mx.nd.array([0, 0, 0]))


def test_an_unknown_token_line_gives_the_unknown_vector(tmp_path) -> None:
    f = _write(tmp_path / "e.txt", ["a 1 2", "<u> 5 6"])
    e = emb.CustomEmbedding(f, unknown_token="<u>")
    torch.testing.assert_close(e.get_vecs_by_tokens("zzz"), torch.tensor([5.0, 6]))
    assert len(e) == 2


def test_composite_embedding_concatenates_in_order(tmp_path) -> None:
    e1 = emb.CustomEmbedding(_write(tmp_path / "1.txt", ["a 1 1", "b 2 2"]))
    e2 = emb.CustomEmbedding(_write(tmp_path / "2.txt", ["b 9 9 9"]), init_unknown_vec=mx.nd.ones)
    c = emb.CompositeEmbedding(text.vocab.Vocabulary(Counter(["b", "a", "b"])), [e1, e2])
    assert c.idx_to_token == ["<unk>", "b", "a"] and c.vec_len == 5
    expected = torch.tensor([[0.0, 0, 1, 1, 1], [2, 2, 9, 9, 9], [1, 1, 1, 1, 1]])
    torch.testing.assert_close(c.idx_to_vec, expected)


def test_bad_embedding_files_are_refused_naming_file_and_line(tmp_path) -> None:
    with pytest.raises(AssertionError, match=r"bad.txt' line 2.*length 3, the tokens before it 2"):
        emb.CustomEmbedding(_write(tmp_path / "bad.txt", ["a 1 2", "c 1 2 3"]))
    with pytest.raises(AssertionError, match=r"line 1.*without a vector"):
        emb.CustomEmbedding(_write(tmp_path / "t.txt", ["lonely"]))
    with pytest.raises(AssertionError, match=r"line 1.*not a number"):
        emb.CustomEmbedding(_write(tmp_path / "n.txt", ["a 1 x"]))
    (tmp_path / "long.txt").write_text("a" + " 1" * (emb.MAX_LINE_CHARS // 2 + 1))
    with pytest.raises(AssertionError, match="longer than"):
        emb.CustomEmbedding(str(tmp_path / "long.txt"))


def test_pretrained_catalogue_and_missing_files(tmp_path) -> None:
    assert len(emb.get_pretrained_file_names("glove")) == 10
    names = emb.get_pretrained_file_names()
    assert "wiki.simple.vec" in names["fasttext"] and "glove.6B.50d.txt" in names["glove"]
    with pytest.raises(KeyError):
        emb.get_pretrained_file_names("word2vec")
    with pytest.raises(KeyError, match="no pre-trained file"):
        emb.GloVe("glove.7B.txt", embedding_root=str(tmp_path))
    with pytest.raises(MXNetError, match=r"glove.6B.50d.txt does not exist; mxtorch does not download"):
        emb.create("GloVe", pretrained_file_name="glove.6B.50d.txt", embedding_root=str(tmp_path))
    (tmp_path / "fasttext").mkdir()
    _write(tmp_path / "fasttext" / "wiki.simple.vec", ["2 3", "hi 1 2 3"])  # fastText's header line
    with pytest.warns(UserWarning, match="header"):
        ft = emb.FastText(embedding_root=str(tmp_path))
    torch.testing.assert_close(ft.get_vecs_by_tokens("hi"), torch.tensor([1.0, 2, 3]))
