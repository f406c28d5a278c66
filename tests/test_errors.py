"""The wrong inputs the Gluon issue lists, each with a message that says what to do."""

import pytest
import torch

import mxtorch as mx
from mxtorch import gluon
from mxtorch.base import MXNetError
from mxtorch.gluon import nn


def test_unknown_optimizer_lists_known():
    with pytest.raises(ValueError, match=r"'adamx'.*adam.*sgd"):
        mx.optimizer.create("adamx")


def test_unknown_kvstore_lists_known():
    with pytest.raises(MXNetError, match=r"'dist_sycn'.*device.*local"):
        mx.kv.create("dist_sycn")


def test_unknown_initializer_lists_known():
    with pytest.raises(ValueError, match=r"'xavierr'.*xavier"):
        mx.init.create("xavierr")
    net = nn.Dense(2, in_units=2)
    with pytest.raises(ValueError, match=r"'xavierr'.*xavier"):
        net.initialize("xavierr")


def test_load_parameters_shape_mismatch_names_parameter(tmp_path):
    a = nn.Dense(3, in_units=4)
    a.initialize()
    a.save_parameters(str(tmp_path / "a.params"))
    b = nn.Dense(3, in_units=5)
    b.initialize()
    with pytest.raises(MXNetError, match=r"parameter 'weight'.*\(3, 5\).*\(3, 4\)"):
        b.load_parameters(str(tmp_path / "a.params"))


def test_split_and_load_fewer_samples_than_contexts():
    # MXNet's rule: a ValueError naming the shape and the number of slices (even_split=False gives
    # empty parts instead, as numpy.array_split)
    with pytest.raises(ValueError, match=r"shape \(2, 3\) cannot be evenly split into 3 slices"):
        gluon.utils.split_and_load(torch.ones(2, 3), [mx.cpu(0), mx.cpu(1), mx.cpu(2)])


def test_parameter_used_before_initialize():
    net = nn.Dense(3, in_units=2)
    with pytest.raises(MXNetError, match=r"'dense\d+_weight' has not been initialized.*initialize\(\)"):
        net(torch.ones(1, 2))
    with pytest.raises(MXNetError, match="has not been initialized"):
        net.weight.data()
