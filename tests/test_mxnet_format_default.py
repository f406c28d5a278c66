"""MXNet's API writes MXNet's file format by default (``mx.nd.save``, ``save_parameters``,
``mx.model.save_checkpoint``, ``Module.save_checkpoint``, ``export``), so real MXNet 1.9.1 reads
what MXNet code saved through mxtorch.

Two checks: (1) the files our API writes with default arguments are byte-for-byte the files real
MXNet 1.9.1 wrote for the same arrays (tests/data/mxnet_files, see its make_fixtures.py), so a
format break shows without MXNet; (2) when a real MXNet 1.9.1 is at hand (``MXTORCH_MXNET_PYTHON``,
or the venvs ``/tmp/mxref`` / ``/tmp/conformance-venv-mxnet``), it loads our default-written
files and gives back equal values.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.gluon import nn

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_files")
_spec = importlib.util.spec_from_file_location("mxnet_fixtures_default",
                                               os.path.join(HERE, "make_fixtures.py"))
assert _spec is not None and _spec.loader is not None
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)


def _fixture(name: str) -> bytes:
    with open(os.path.join(HERE, name), "rb") as f:
        return f.read()


def _written(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(a, copy=True, order="C"))  # ascontiguousarray would make 0-d 1-d


def _net(values: dict[str, np.ndarray] | None = None) -> nn.HybridSequential:
    """The network of gluon_net.params: Conv2D(2, 3, in_channels=1), Flatten, Dense(3, in_units=18)."""
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(2, 3, in_channels=1), nn.Flatten(), nn.Dense(3, in_units=18))
    net.initialize()
    for k, p in net._collect_params_with_prefix().items():
        p.set_data(_t((values or fx.expected_net())[k]))
    return net


# ---- (1) default-written bytes == the bytes real MXNet 1.9.1 wrote ----------------------------


def test_nd_save_default_writes_mxnets_bytes(tmp_path: Any) -> None:
    arrays = {k: _t(v) for k, v in fx.expected_dtypes().items()}
    arrays["bfloat16"] = _t(fx.expected_bfloat16()).to(torch.bfloat16)
    mx.nd.save(str(tmp_path / "dtypes.nd"), arrays)
    assert _written(str(tmp_path / "dtypes.nd")) == _fixture("dtypes.nd")
    mx.nd.save(str(tmp_path / "list.nd"), [_t(v) for v in fx.expected_list()])
    assert _written(str(tmp_path / "list.nd")) == _fixture("list.nd")
    # 0-d and empty arrays under NumPy shape semantics: MXNet's V3 file, as mx.npx.save writes it
    with mx.util.np_shape(True):
        mx.nd.save(str(tmp_path / "np.nd"), {k: _t(v) for k, v in fx.expected_np().items()})
    assert _written(str(tmp_path / "np.nd")) == _fixture("np_v3.nd")


def test_save_parameters_default_writes_mxnets_bytes(tmp_path: Any) -> None:
    net = _net()
    net.save_parameters(str(tmp_path / "net.params"))
    assert _written(str(tmp_path / "net.params")) == _fixture("gluon_net.params")
    # and the reader loads MXNet's file into the same values
    other = _net({k: np.zeros_like(v) for k, v in fx.expected_net().items()})
    other.load_parameters(os.path.join(HERE, "gluon_net.params"))
    for k, p in other._collect_params_with_prefix().items():
        assert torch.equal(p.data(), _t(fx.expected_net()[k]))


def test_save_checkpoint_default_writes_mxnets_bytes(tmp_path: Any) -> None:
    exp = fx.expected_module()
    arg = {k[4:]: _t(v) for k, v in exp.items() if k.startswith("arg:")}
    aux = {k[4:]: _t(v) for k, v in exp.items() if k.startswith("aux:")}
    mx.model.save_checkpoint(str(tmp_path / "module"), 0, None, arg, aux)
    assert _written(str(tmp_path / "module-0000.params")) == _fixture("module-0000.params")
    got_arg, got_aux = mx.model.load_params(os.path.join(HERE, "module"), 0)
    assert sorted(got_arg) == sorted(arg) and sorted(got_aux) == sorted(aux)
    assert all(torch.equal(got_arg[k], arg[k]) for k in arg)


def test_init_load_reads_a_default_written_checkpoint(tmp_path: Any) -> None:
    arg = {"w": torch.arange(6.0).reshape(2, 3)}
    mx.model.save_checkpoint(str(tmp_path / "ck"), 1, None, arg, {"m": torch.ones(3)})
    init = mx.init.Load(str(tmp_path / "ck-0001.params"))  # 'arg:'/'aux:' dropped, as in MXNet
    assert sorted(init.param) == ["m", "w"] and torch.equal(init.param["w"], arg["w"])


def test_safetensors_only_on_request(tmp_path: Any) -> None:
    net = _net()
    net.save_parameters(str(tmp_path / "a.safetensors"))
    net.save_parameters(str(tmp_path / "b.params"), format="safetensors")
    for name in ("a.safetensors", "b.params"):
        assert _written(str(tmp_path / name))[:8] != (0x112).to_bytes(8, "little")
        other = _net({k: np.zeros_like(v) for k, v in fx.expected_net().items()})
        other.load_parameters(str(tmp_path / name))
        assert torch.equal(other[0].weight.data(), net[0].weight.data())
    with pytest.raises(ValueError, match="format must be one of"):
        net.save_parameters(str(tmp_path / "c.params"), format="hdf5")


# ---- (2) real MXNet 1.9.1 reads our default-written files ------------------------------------

_REFERENCE_CANDIDATES = ("/tmp/mxref/bin/python", "/tmp/conformance-venv-mxnet/bin/python")


def _reference_python() -> str | None:
    env = os.environ.get("MXTORCH_MXNET_PYTHON")
    if env:
        return env
    return next((p for p in _REFERENCE_CANDIDATES if os.access(p, os.X_OK)), None)


# Runs under real MXNet: loads every file the test wrote and saves what it read as plain .npy
# files (numpy only, no pickle) for the test to compare.
_READER = r"""
import json, os, sys
import numpy as np
import mxnet as mx
from mxnet import gluon
assert mx.__version__ == "1.9.1", mx.__version__
d = sys.argv[1]
out = os.path.join(d, "back")
os.makedirs(out)
def put(name, a):
    a = a.asnumpy() if hasattr(a, "asnumpy") else a
    np.save(os.path.join(out, name + ".npy"), a, allow_pickle=False)
report = {}
got = mx.nd.load(os.path.join(d, "dense.nd"))
report["dense"] = sorted(got)
for k, v in got.items():
    put("dense." + k, v.astype("float32") if k == "bfloat16" else v)
    report["dtype." + k] = str(v.dtype)
got = mx.nd.load(os.path.join(d, "list.nd"))
report["list"] = len(got)
for i, v in enumerate(got):
    put("list.%d" % i, v)
with mx.util.np_shape(True):
    got = mx.nd.load(os.path.join(d, "scalar.nd"))
    for k, v in got.items():
        put("scalar." + k, v)
        report["shape.scalar." + k] = list(v.shape)
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Conv2D(2, 3, in_channels=1), gluon.nn.Flatten(), gluon.nn.Dense(3, in_units=18))
net.load_parameters(os.path.join(d, "net.params"))
for k, p in net._collect_params_with_prefix().items():
    put("net." + k, p.data())
put("net.out", net(mx.nd.array(np.load(os.path.join(d, "x.npy")))))
sym, arg, aux = mx.model.load_checkpoint(os.path.join(d, "ck"), 3)
report["ck"] = sorted(arg) + sorted(aux)
for k, v in list(arg.items()) + list(aux.items()):
    put("ck." + k, v)
mod = mx.mod.Module.load(os.path.join(d, "mod"), 1, data_names=["data"], label_names=None)
mod.bind(data_shapes=[("data", (2, 4))], for_training=False)
mod.forward(mx.io.DataBatch([mx.nd.array(np.load(os.path.join(d, "modx.npy")))]), is_train=False)
put("mod.out", mod.get_outputs()[0])
blk = gluon.SymbolBlock.imports(os.path.join(d, "exp-symbol.json"), ["data"],
                                os.path.join(d, "exp-0000.params"))
put("exp.out", blk(mx.nd.array(np.load(os.path.join(d, "x.npy")))))
with open(os.path.join(d, "report.json"), "w") as f:
    json.dump(report, f)
"""

_DENSE = {
    "float32": torch.tensor([[1.5, -2.25], [1e-30, 3.0e38]], dtype=torch.float32),
    "float16": torch.tensor([0.5, -65504.0, 6.1e-5], dtype=torch.float16),
    "float64": torch.tensor([[1.0 / 3.0]], dtype=torch.float64),
    "bfloat16": torch.tensor([1.0, -2.5, 256.0], dtype=torch.bfloat16),
    "uint8": torch.tensor([0, 7, 255], dtype=torch.uint8),
    "int8": torch.tensor([-128, 0, 127], dtype=torch.int8),
    "int32": torch.arange(-6, 6, dtype=torch.int32).reshape(2, 3, 2),
    "int64": torch.tensor([-(2**62), 2**40 + 1], dtype=torch.int64),
    "bool": torch.tensor([True, False, True]),
    "noncontig": torch.arange(12, dtype=torch.float32).reshape(3, 4).t(),
}


@pytest.fixture(scope="module")
def mxnet_read_back(tmp_path_factory: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    ref = _reference_python()
    if ref is None:
        pytest.skip("no real MXNet 1.9.1 to read our files: build one with `python3 -m venv /tmp/mxref && "
                    "/tmp/mxref/bin/pip install mxnet==1.9.1 'numpy<1.24'` or set MXTORCH_MXNET_PYTHON")
    d = tmp_path_factory.mktemp("mxnet_reads_ours")
    ours: dict[str, Any] = {}
    mx.nd.save(str(d / "dense.nd"), _DENSE)
    lst = [torch.ones(2, 3), torch.arange(4, dtype=torch.int64), torch.tensor([2.5], dtype=torch.float64)]
    mx.nd.save(str(d / "list.nd"), lst)
    ours["list"] = lst
    with mx.util.np_shape(True):  # MXNet's rule: 0-d arrays are saved (and loaded) with NumPy shapes on
        mx.nd.save(str(d / "scalar.nd"), {"s": torch.tensor(4.25), "i": torch.tensor(-3, dtype=torch.int32),
                                          "empty": torch.zeros(0, 2)})
    torch.manual_seed(0)
    net = nn.HybridSequential()
    net.add(nn.Conv2D(2, 3, in_channels=1), nn.Flatten(), nn.Dense(3, in_units=18))
    net.initialize(mx.init.Xavier())
    net.save_parameters(str(d / "net.params"))
    x = np.linspace(-1, 1, 50, dtype=np.float32).reshape(2, 1, 5, 5)
    np.save(str(d / "x.npy"), x)
    ours["net"] = {k: p.data().detach().clone() for k, p in net._collect_params_with_prefix().items()}
    ours["net.out"] = net(_t(x)).detach()
    net.hybridize()
    net(_t(x))
    net.export(str(d / "exp"))
    # mx.model.save_checkpoint and Module.save_checkpoint of a small symbolic MLP with BatchNorm
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    sym = mx.sym.BatchNorm(fc, name="bn", fix_gamma=False)
    arg = {"fc_weight": torch.linspace(-1, 1, 12).reshape(3, 4), "fc_bias": torch.tensor([0.5, -0.5, 0.0]),
           "bn_gamma": torch.tensor([1.0, 2.0, 0.5]), "bn_beta": torch.tensor([0.0, 0.1, -0.1])}
    aux = {"bn_moving_mean": torch.tensor([0.1, 0.2, 0.3]), "bn_moving_var": torch.tensor([1.0, 4.0, 0.25])}
    mx.model.save_checkpoint(str(d / "ck"), 3, sym, arg, aux)
    ours["ck"] = {**arg, **aux}
    mod = mx.mod.Module(sym, data_names=["data"], label_names=None)
    mod.bind(data_shapes=[("data", (2, 4))], for_training=False)
    mod.set_params(arg, aux)
    mod.save_checkpoint(str(d / "mod"), 1)
    modx = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    np.save(str(d / "modx.npy"), modx)
    mod.forward(mx.io.DataBatch([_t(modx)]), is_train=False)
    ours["mod.out"] = mod.get_outputs()[0].detach().clone()
    with open(d / "reader.py", "w") as f:
        f.write(_READER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run([ref, str(d / "reader.py"), str(d)], capture_output=True, text=True, timeout=300,
                          env=env, check=False)
    assert proc.returncode == 0, f"real MXNet could not read our files:\n{proc.stderr[-3000:]}"
    with open(d / "report.json") as f:
        report = json.load(f)
    return str(d / "back"), report, ours


def _back(folder: str, name: str) -> np.ndarray:
    return np.load(os.path.join(folder, name + ".npy"), allow_pickle=False)


def test_mxnet_reads_nd_save_dense_dtypes(mxnet_read_back: Any) -> None:
    back, report, _ = mxnet_read_back
    assert report["dense"] == sorted(_DENSE)
    for k, t in _DENSE.items():
        got = _back(back, f"dense.{k}")
        want = t.float().numpy() if k == "bfloat16" else t.numpy()
        assert got.shape == want.shape, k
        assert got.dtype == want.dtype, (k, got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want, err_msg=k)


def test_mxnet_reads_nd_save_list_and_scalars(mxnet_read_back: Any) -> None:
    back, report, ours = mxnet_read_back
    assert report["list"] == len(ours["list"])
    for i, t in enumerate(ours["list"]):
        got = _back(back, f"list.{i}")
        assert got.dtype == t.numpy().dtype
        np.testing.assert_array_equal(got, t.numpy())
    # 0-d and empty arrays: MXNet reads them under NumPy shape semantics (they have no legacy shape)
    assert report["shape.scalar.s"] == [] and report["shape.scalar.empty"] == [0, 2]
    assert float(_back(back, "scalar.s")) == 4.25 and int(_back(back, "scalar.i")) == -3


def test_mxnet_load_parameters_of_our_save_parameters(mxnet_read_back: Any) -> None:
    back, _, ours = mxnet_read_back
    for k, t in ours["net"].items():
        np.testing.assert_array_equal(_back(back, f"net.{k}"), t.numpy(), err_msg=k)
    np.testing.assert_allclose(_back(back, "net.out"), ours["net.out"].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_back(back, "exp.out"), ours["net.out"].numpy(), rtol=1e-5, atol=1e-6)


def test_mxnet_loads_our_checkpoints(mxnet_read_back: Any) -> None:
    back, report, ours = mxnet_read_back
    assert report["ck"] == sorted(k for k in ours["ck"] if not k.startswith("bn_moving")) + [
        "bn_moving_mean", "bn_moving_var"]
    for k, t in ours["ck"].items():
        np.testing.assert_array_equal(_back(back, f"ck.{k}"), t.numpy(), err_msg=k)
    np.testing.assert_allclose(_back(back, "mod.out"), ours["mod.out"].numpy(), rtol=1e-5, atol=1e-5)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
