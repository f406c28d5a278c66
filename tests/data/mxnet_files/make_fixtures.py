"""Writes the MXNet-format fixture files in this folder.  NEEDS REAL MXNet 1.9.1 (not mxtorch):

    /tmp/conformance-venv-mxnet/bin/python tests/data/mxnet_files/make_fixtures.py

Every value is computed from ``np.arange`` by the ``expected_*`` functions below, which
tests/test_mxnet_format.py imports and recomputes (this module imports mxnet only when run).
"""

from __future__ import annotations

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _a(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float64)


def expected_dtypes() -> dict[str, np.ndarray]:
    """dtypes.nd: one (3, 4) array per dtype MXNet 1.9.1 saves from Python."""
    a = _a(12).reshape(3, 4)
    return {
        "float32": (a * 0.25 - 1.0).astype(np.float32),
        "float64": (a / 3.0 - 2.0).astype(np.float64),
        "float16": (a * 0.5 - 2.0).astype(np.float16),
        "uint8": (a * 20).astype(np.uint8),
        "int32": (a * 100000 - 500000).astype(np.int32),
        "int8": (a * 10 - 60).astype(np.int8),
        "int64": (a.astype(np.int64) * 2**40 - 3),
        "bool": (a.astype(np.int64) % 3 == 0),
    }


def expected_bfloat16() -> np.ndarray:
    """The 'bfloat16' entry of dtypes.nd, as float32 (every value is exact in bfloat16)."""
    return (_a(12).reshape(3, 4) * 0.5 - 2.0).astype(np.float32)


def expected_list() -> list[np.ndarray]:
    """list.nd: a list (no keys)."""
    return [(_a(24).reshape(2, 3, 4) * 0.5).astype(np.float32), np.arange(5, dtype=np.int64) - 2,
            np.array([7.5], dtype=np.float64)]


def expected_sparse() -> dict[str, tuple]:
    """sparse.nd: 'csr' as (data, indices, indptr, shape), 'rsp' as (rows, row_ids, shape)."""
    csr = (np.array([1.5, -2.0, 3.25, 4.0], dtype=np.float32), np.array([1, 3, 0, 2]),
           np.array([0, 2, 2, 4]), (3, 4))
    rsp = ((_a(6).reshape(2, 3) - 1.5).astype(np.float32), np.array([1, 4]), (5, 3))
    return {"csr": csr, "rsp": rsp}


def expected_np() -> dict[str, np.ndarray]:
    """np_v3.nd (written with NumPy shape semantics, V3): a 0-d array and an empty one."""
    return {"scalar": np.array(3.5, dtype=np.float32), "empty": np.zeros((0, 3), dtype=np.float32)}


def expected_net() -> dict[str, np.ndarray]:
    """gluon_net.params: save_parameters of Conv2D(2, 3, in_channels=1), Flatten, Dense(3, in_units=18)."""
    shapes = {"0.weight": (2, 1, 3, 3), "0.bias": (2,), "2.weight": (3, 18), "2.bias": (3,)}
    out = {}
    for i, (k, s) in enumerate(shapes.items()):
        n = int(np.prod(s))
        out[k] = ((_a(n) - n / 2) * 0.03125 + i).astype(np.float32).reshape(s)
    return out


def net_input() -> np.ndarray:
    """The input whose MXNet output is stored in gluon_net_out.nd."""
    return ((_a(2 * 25) % 7) * 0.125 - 0.25).astype(np.float32).reshape(2, 1, 5, 5)


def expected_module() -> dict[str, np.ndarray]:
    """module-0000.params (``export`` of Dense(3, in_units=4) + BatchNorm(in_channels=3), prefix 'model_')."""
    return {
        "arg:model_dense0_weight": ((_a(12) - 6) * 0.125).astype(np.float32).reshape(3, 4),
        "arg:model_dense0_bias": np.array([0.5, -0.5, 1.0], dtype=np.float32),
        "arg:model_batchnorm0_gamma": np.array([1.0, 2.0, 0.5], dtype=np.float32),
        "arg:model_batchnorm0_beta": np.array([0.0, 0.25, -0.25], dtype=np.float32),
        "aux:model_batchnorm0_running_mean": np.array([0.1, 0.2, 0.3], dtype=np.float32),
        "aux:model_batchnorm0_running_var": np.array([1.0, 4.0, 0.25], dtype=np.float32),
    }


def main() -> None:
    import mxnet as mx
    from mxnet import gluon

    assert mx.__version__ == "1.9.1", mx.__version__
    path = lambda name: os.path.join(HERE, name)  # noqa: E731
    dtypes = {k: mx.nd.array(v, dtype=str(v.dtype)) for k, v in expected_dtypes().items()}
    dtypes["bfloat16"] = mx.nd.array(expected_bfloat16()).astype(np.dtype([("bfloat16", np.uint16)]))
    mx.nd.save(path("dtypes.nd"), dtypes)
    mx.nd.save(path("list.nd"), [mx.nd.array(v, dtype=str(v.dtype)) for v in expected_list()])
    sp = expected_sparse()
    d, i, p, s = sp["csr"]
    rows, ids, rs = sp["rsp"]
    mx.nd.save(path("sparse.nd"), {"csr": mx.nd.sparse.csr_matrix((d, i, p), shape=s),
                                   "rsp": mx.nd.sparse.row_sparse_array((rows, ids), shape=rs)})

    net = gluon.nn.HybridSequential()
    with net.name_scope():
        net.add(gluon.nn.Conv2D(2, 3, in_channels=1), gluon.nn.Flatten(), gluon.nn.Dense(3, in_units=18))
    net.initialize()
    for k, p in net._collect_params_with_prefix().items():
        p.set_data(mx.nd.array(expected_net()[k]))
    net.save_parameters(path("gluon_net.params"))
    mx.nd.save(path("gluon_net_out.nd"), [net(mx.nd.array(net_input()))])

    mod = gluon.nn.HybridSequential(prefix="model_")
    with mod.name_scope():
        mod.add(gluon.nn.Dense(3, in_units=4), gluon.nn.BatchNorm(in_channels=3))
    mod.initialize()
    for k, v in expected_module().items():
        mod.collect_params()[k[4:]].set_data(mx.nd.array(v))
    mod.hybridize()
    mod(mx.nd.ones((1, 4)))
    mod.export(path("module"), epoch=0)
    os.remove(path("module-symbol.json"))

    mx.npx.set_np()  # V3 files: NumPy shape semantics (0-d and empty arrays)
    mx.npx.save(path("np_v3.nd"), {k: mx.np.array(v, dtype=str(v.dtype)) for k, v in expected_np().items()})


if __name__ == "__main__":
    main()
