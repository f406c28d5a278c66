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
