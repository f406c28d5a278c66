import warnings

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.context import context_of
from mxtorch.gluon import utils


def test_split_data_even_and_uneven():
    x = torch.arange(10.0).reshape(5, 2)
    with pytest.raises(ValueError, match="cannot be evenly split into 2"):  # MXNet's error type
        utils.split_data(x, 2)
    parts = utils.split_data(x, 2, even_split=False)
    assert [p.shape[0] for p in parts] == [3, 2]
    torch.testing.assert_close(torch.cat(parts), x)
    parts = utils.split_data(torch.arange(12.0).reshape(2, 6), 3, batch_axis=1)
    assert all(p.shape == (2, 2) for p in parts)


def test_split_and_load_tags_contexts():
    ctx = [mx.cpu(0), mx.cpu(1)]
    parts = utils.split_and_load(torch.arange(8.0), ctx)
    assert [context_of(p) for p in parts] == ctx
    torch.testing.assert_close(parts[1], torch.tensor([4.0, 5.0, 6.0, 7.0]))
    single = utils.split_and_load(torch.ones(3), mx.cpu())
    assert len(single) == 1


def test_split_and_load_too_few_samples():
    with pytest.raises(ValueError, match="cannot be evenly split into 3 slices"):
        utils.split_and_load(torch.ones(2, 4), [mx.cpu(0), mx.cpu(1), mx.cpu(2)])
    # uneven: MXNet (like numpy.array_split) gives the last context an empty part
    parts = utils.split_and_load(torch.ones(2, 4), [mx.cpu(0), mx.cpu(1), mx.cpu(2)], even_split=False)
    assert [p.shape[0] for p in parts] == [1, 1, 0]


def test_clip_global_norm():
    a, b = torch.tensor([3.0, 0.0]), torch.tensor([0.0, 4.0])
    norm = utils.clip_global_norm([a, b], 1.0)
    assert norm == pytest.approx(5.0)
    total = torch.sqrt((a ** 2).sum() + (b ** 2).sum())
    assert float(total) == pytest.approx(1.0, rel=1e-5)
    c = torch.tensor([0.3])
    utils.clip_global_norm([c], 1.0)
    torch.testing.assert_close(c, torch.tensor([0.3]))
    with pytest.warns(RuntimeWarning, match="not finite"):
        utils.clip_global_norm([torch.tensor([float("nan")])], 1.0)


def test_split_data_matches_numpy_array_split():
    x = torch.arange(33.0 * 2).reshape(2, 33)
    for n in (4, 15):
        parts = utils.split_data(x, n, batch_axis=1, even_split=False)
        want = np.array_split(x.numpy(), n, axis=1)
        assert [p.shape[1] for p in parts] == [w.shape[1] for w in want]
        for p, w in zip(parts, want):
            np.testing.assert_array_equal(p.numpy(), w)
    with pytest.raises(ValueError, match="positive int"):
        utils.split_data(x, 0)


def test_split_and_load_sparse_parts_stay_sparse():
    from mxtorch.nd import sparse

    dense = torch.zeros(6, 4)
    dense[1, 2], dense[4, 0], dense[5, 3] = 1.0, 2.0, 3.0
    for stype, cls in (("csr", sparse.CSRNDArray), ("row_sparse", sparse.RowSparseNDArray)):
        x = sparse.tostype(dense.clone(), stype)
        parts = utils.split_and_load(x, [mx.cpu(0), mx.cpu(0)])
        assert all(isinstance(p, cls) for p in parts), stype
        torch.testing.assert_close(torch.cat([p.to_dense() for p in parts]), dense)
        uneven = utils.split_data(x, 4, even_split=False)
        assert [p.shape[0] for p in uneven] == [2, 2, 1, 1]
        torch.testing.assert_close(torch.cat([p.to_dense() for p in uneven]), dense)
        with pytest.raises(ValueError, match="only be split along axis 0"):
            utils.split_data(x, 2, batch_axis=1)


def test_split_and_load_one_context_moves_the_whole_batch():
    parts = utils.split_and_load([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [mx.cpu(0)])
    assert len(parts) == 1 and parts[0].shape == (3, 2)


def test_clip_global_norm_without_isfinite_check_returns_a_tensor():
    a, b = torch.ones(3, 3), torch.ones(4, 4)
    norm = utils.clip_global_norm([a, b], 1.0, check_isfinite=False)
    assert isinstance(norm, torch.Tensor) and norm.shape == (1,) and float(norm) == pytest.approx(5.0)
    torch.testing.assert_close(a, torch.full((3, 3), 0.2))
    c = torch.tensor([1.0, float("nan")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no host check, so no warning: the nan spreads, as in MXNet
        utils.clip_global_norm([c], 1.0, check_isfinite=False)
    assert torch.isnan(c).all()


def test_clip_global_norm_sparse_arrays():
    from mxtorch.nd import sparse

    x = sparse.tostype(torch.ones(3, 3), "row_sparse")
    assert utils.clip_global_norm([x, torch.ones(4, 4)], 1.0) == pytest.approx(5.0)
    torch.testing.assert_close(x.to_dense(), torch.full((3, 3), 0.2))
