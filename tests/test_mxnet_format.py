"""MXNet's binary NDArray format: files real MXNet 1.9.1 wrote (tests/data/mxnet_files, made by
make_fixtures.py there), bit-exact round trips, and every way a corrupt file is refused."""

from __future__ import annotations

import importlib.util
import os
import re
import struct

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import mxtorch as mx
from mxtorch.base import MXNetError
from mxtorch.gluon import nn
from mxtorch.gluon.serialization import load_tensors, save_tensors
from mxtorch.nd import sparse
from mxtorch.nd.mxnet_format import is_mxnet_file, read_mxnet, write_mxnet

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_files")
_spec = importlib.util.spec_from_file_location("mxnet_fixtures", os.path.join(HERE, "make_fixtures.py"))
assert _spec is not None and _spec.loader is not None
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)

LIST_HEAD = struct.pack("<QQ", 0x112, 0)
V2 = 0xF993FAC9


def _file(name: str) -> str:
    return os.path.join(HERE, name)


def _read(name: str) -> bytes:
    with open(_file(name), "rb") as f:
        return f.read()


def _bits(t: torch.Tensor) -> bytes:
    """The raw bytes of a dense tensor (compares NaN payloads and -0.0 too)."""
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _dense_v2(shape: tuple[int, ...], flag: int, payload: bytes) -> bytes:
    """One V2 dense array, encoded here independently of mxtorch's writer."""
    return (struct.pack("<Ii", V2, 0) + struct.pack("<i", len(shape)) + struct.pack(f"<{len(shape)}q", *shape)
            + struct.pack("<iii", 1, 0, flag) + payload)


def _listfile(arrays: list[bytes], keys: list[str] | None = None) -> bytes:
    out = LIST_HEAD + struct.pack("<Q", len(arrays)) + b"".join(arrays)
    keys = keys or []
    out += struct.pack("<Q", len(keys)) + b"".join(struct.pack("<Q", len(k)) + k.encode() for k in keys)
    return out


# ---- files written by real MXNet 1.9.1 -------------------------------------------------------


def test_mxnet_dtypes_file_reads_exact_values() -> None:
    got = mx.nd.load(_file("dtypes.nd"))
    assert isinstance(got, dict)
    want = fx.expected_dtypes()
    assert set(got) == set(want) | {"bfloat16"}
    for k, v in want.items():
        assert got[k].dtype == getattr(torch, k), k
        assert got[k].shape == v.shape
        np.testing.assert_array_equal(got[k].numpy(), v)
    assert got["bfloat16"].dtype == torch.bfloat16
    np.testing.assert_array_equal(got["bfloat16"].float().numpy(), fx.expected_bfloat16())


def test_mxnet_list_file_reads_as_list() -> None:
    got = mx.nd.load(_file("list.nd"))
    assert isinstance(got, list) and len(got) == 3
    for t, v in zip(got, fx.expected_list(), strict=True):
        assert t.numpy().dtype == v.dtype
        np.testing.assert_array_equal(t.numpy(), v)


def test_mxnet_sparse_file_reads_as_mxtorch_sparse() -> None:
    got = mx.nd.load(_file("sparse.nd"))
    assert isinstance(got, dict)
    want = fx.expected_sparse()
    d, i, p, shape = want["csr"]
    csr = got["csr"]
    assert sparse.stype(csr) == "csr" and tuple(csr.shape) == shape
    np.testing.assert_array_equal(sparse.data(csr).numpy(), d)
    np.testing.assert_array_equal(sparse.indices(csr).numpy(), i)
    np.testing.assert_array_equal(sparse.indptr(csr).numpy(), p)
    dense = np.zeros(shape, np.float32)
    for r in range(shape[0]):
        dense[r, i[p[r]:p[r + 1]]] = d[p[r]:p[r + 1]]
    np.testing.assert_array_equal(csr.to_dense().numpy(), dense)
    rows, ids, rshape = want["rsp"]
    rsp = got["rsp"]
    assert sparse.stype(rsp) == "row_sparse" and tuple(rsp.shape) == rshape
    np.testing.assert_array_equal(sparse.indices(rsp).numpy(), ids)
    np.testing.assert_array_equal(sparse.data(rsp).numpy(), rows)
    dense = np.zeros(rshape, np.float32)
    dense[ids] = rows
    np.testing.assert_array_equal(rsp.to_dense().numpy(), dense)


def test_mxnet_numpy_semantics_file_has_scalar_and_empty() -> None:
    data = _read("np_v3.nd")
    assert struct.unpack_from("<I", data, 24)[0] == 0xF993FACA  # MXNet wrote V3 here
    with mx.util.np_shape(True):  # MXNet loads a V3 file only with NumPy shape semantics on
        got = mx.nd.load(_file("np_v3.nd"))
    assert isinstance(got, dict)
    assert got["scalar"].shape == () and got["scalar"].item() == 3.5
    assert got["scalar"].asnumpy().shape == ()  # MXNet's own 0-d array stays 0-d in numpy too
    assert got["empty"].shape == (0, 3) and got["empty"].dtype == torch.float32


@pytest.mark.parametrize("name", ["dtypes.nd", "list.nd", "sparse.nd", "np_v3.nd", "gluon_net.params",
                                  "module-0000.params", "gluon_net_out.nd"])
def test_writer_reproduces_mxnet_files_byte_for_byte(name: str) -> None:
    data = _read(name)
    assert is_mxnet_file(data[:16])
    assert write_mxnet(read_mxnet(data, name)) == data


def _mxtorch_net() -> nn.HybridSequential:
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(2, 3, in_channels=1), nn.Flatten(), nn.Dense(3, in_units=18))
    net.initialize()
    return net


def test_gluon_params_from_mxnet_load_into_mxtorch_net() -> None:
    net = _mxtorch_net()
    net.load_parameters(_file("gluon_net.params"))
    want = fx.expected_net()
    got = {k: p.data() for k, p in net._collect_params_with_prefix().items()}
    assert set(got) == set(want)
    for k, v in want.items():
        np.testing.assert_array_equal(got[k].detach().numpy(), v)
    x = torch.from_numpy(fx.net_input())
    out = net(x).detach()
    w = {k: torch.from_numpy(v) for k, v in want.items()}
    by_hand = F.linear(F.conv2d(x, w["0.weight"], w["0.bias"]).flatten(1), w["2.weight"], w["2.bias"])
    torch.testing.assert_close(out, by_hand)
    mx_outs = mx.nd.load(_file("gluon_net_out.nd"))  # what MXNet computed with these parameters
    assert isinstance(mx_outs, list)
    mx_out = mx_outs[0]
    torch.testing.assert_close(out, mx_out, rtol=1e-5, atol=1e-5)


def test_gluon_params_from_mxnet_into_wrong_net_names_the_file() -> None:
    loaded = load_tensors(_file("gluon_net.params"))
    assert set(loaded) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(2, 3, in_channels=1), nn.Flatten(), nn.Dense(4, in_units=18))
    net.initialize()
    with pytest.raises(MXNetError, match="gluon_net.params"):
        net.load_parameters(_file("gluon_net.params"))


def _module_net() -> nn.HybridSequential:
    net = nn.HybridSequential(prefix="model_")
    with net.name_scope():
        net.add(nn.Dense(3, in_units=4), nn.BatchNorm(in_channels=3))
    net.initialize()
    return net


def test_module_checkpoint_arg_aux_keys_load_through_parameter_dict() -> None:
    raw = load_tensors(_file("module-0000.params"))
    want = fx.expected_module()
    assert set(raw) == set(want)  # load_tensors keeps MXNet's names; ParameterDict.load drops arg:/aux:
    net = _module_net()
    net.collect_params().load(_file("module-0000.params"))
    params = net.collect_params()
    for k, v in want.items():
        np.testing.assert_array_equal(params[k[4:]].data().detach().numpy(), v)


def test_module_checkpoint_wrong_names_say_what_is_missing() -> None:
    net = nn.HybridSequential(prefix="other_")
    with net.name_scope():
        net.add(nn.Dense(3, in_units=4))
    net.initialize()
    with pytest.raises(MXNetError, match="module-0000.params.*other_dense0_weight"):
        net.collect_params().load(_file("module-0000.params"))


# ---- round trips -------------------------------------------------------------------------------

_ROUND_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.uint8, torch.int32,
                 torch.int8, torch.int64, torch.bool]


def _sample(dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.tensor([[True, False, True], [False, False, True]])
    if dtype.is_floating_point:
        vals = [0.0, -0.0, 1.5, -2.25, float("inf"), float("-inf"), float("nan"), 1e-3, 65504.0 / 4]
        return torch.tensor(vals, dtype=torch.float64).to(dtype).reshape(3, 3)
    info = torch.iinfo(dtype)
    return torch.tensor([info.min, -1 if info.min < 0 else 0, 0, 1, 77, info.max], dtype=dtype).reshape(2, 3)


@pytest.mark.parametrize("dtype", _ROUND_DTYPES, ids=str)
def test_round_trip_every_dtype_bit_exact(dtype: torch.dtype, tmp_path: object) -> None:
    t = _sample(dtype)
    path = os.path.join(str(tmp_path), "x.nd")
    mx.nd.save(path, {"a": t, "b": t[1:]}, format="mxnet")
    with open(path, "rb") as f:
        assert is_mxnet_file(f.read(16))
    got = mx.nd.load(path)
    assert isinstance(got, dict) and list(got) == ["a", "b"]
    for k, v in (("a", t), ("b", t[1:])):
        assert got[k].dtype == dtype and got[k].shape == v.shape
        assert _bits(got[k]) == _bits(v)


def test_round_trip_list_scalar_empty_and_frombuffer() -> None:
    arrays = [torch.tensor(2.5), torch.zeros(0, 4, dtype=torch.int64), torch.arange(6.0).reshape(1, 2, 3),
              torch.tensor(True)]
    data = write_mxnet(arrays)
    assert struct.unpack_from("<I", data, 24)[0] == 0xF993FACA  # 0-d/empty need V3 (np shape semantics)
    with mx.util.np_shape(True):  # MXNet loads V3 arrays only with NumPy shape semantics on
        got = mx.nd.load_frombuffer(data)
    assert isinstance(got, list) and len(got) == 4
    for g, a in zip(got, arrays, strict=True):
        assert g.shape == a.shape and g.dtype == a.dtype and _bits(g) == _bits(a)
    assert read_mxnet(write_mxnet([]), "e") == [] and read_mxnet(write_mxnet({}), "e") == []


def test_plain_arrays_are_written_as_v2() -> None:
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    want = _listfile([_dense_v2((2, 3), 0, t.numpy().tobytes())], ["w"])
    assert write_mxnet({"w": t}) == want


def test_round_trip_sparse_including_empty(tmp_path: object) -> None:
    rsp = sparse.row_sparse_array((torch.arange(6.0).reshape(2, 3), [4, 1]), shape=(6, 3))
    csr = sparse.csr_matrix(([1.0, 2.0, 3.0], [2, 0, 1], [0, 1, 1, 3]), shape=(3, 3), dtype="float64")
    empty_rsp = sparse.zeros("row_sparse", (4, 2))
    empty_csr = sparse.zeros("csr", (2, 5))
    path = os.path.join(str(tmp_path), "s.nd")
    mx.nd.save(path, [rsp, csr, empty_rsp, empty_csr], format="mxnet")
    got = mx.nd.load(path)
    assert isinstance(got, list)
    for g, a in zip(got, [rsp, csr, empty_rsp, empty_csr], strict=True):
        assert sparse.stype(g) == sparse.stype(a) and g.shape == a.shape and g.dtype == a.dtype
        assert torch.equal(g.to_dense(), a.to_dense())
        assert torch.equal(sparse.indices(g), sparse.indices(a))
    assert sparse.indices(got[0]).tolist() == [1, 4]
    assert sparse.indptr(got[1]).tolist() == [0, 1, 1, 3]


def test_default_save_is_mxnet_format_safetensors_on_request(tmp_path: object) -> None:
    folder = str(tmp_path)

    def head(name: str) -> bytes:
        with open(os.path.join(folder, name), "rb") as f:
            return f.read(16)

    mx.nd.save(os.path.join(folder, "x.nd"), [torch.ones(2)])
    assert head("x.nd") == LIST_HEAD  # MXNet's format: what mx.nd.save of MXNet 1.x writes
    mx.nd.save(os.path.join(folder, "x.safetensors"), [torch.ones(2)])
    mx.nd.save(os.path.join(folder, "y.nd"), [torch.ones(2)], format="safetensors")
    mx.nd.save(os.path.join(folder, "z.safetensors"), [torch.ones(2)], format="mxnet")  # explicit wins
    assert not is_mxnet_file(head("x.safetensors")) and not is_mxnet_file(head("y.nd"))
    assert head("z.safetensors") == LIST_HEAD
    for name in ("x.nd", "x.safetensors", "y.nd", "z.safetensors"):  # loading tells them apart
        got = mx.nd.load(os.path.join(folder, name))
        assert isinstance(got, list) and torch.equal(got[0], torch.ones(2))
    with pytest.raises(ValueError, match=r"format must be one of \('mxnet', 'safetensors'\)"):
        mx.nd.save(os.path.join(folder, "w.nd"), [torch.ones(2)], format="pickle")
    assert not os.path.exists(os.path.join(folder, "w.nd"))
    # a dtype MXNet's format lacks: the error says how to keep it
    with pytest.raises(TypeError, match="MXNet's format cannot hold"):
        mx.nd.save(os.path.join(folder, "i16.nd"), [torch.ones(2, dtype=torch.int16)])
    mx.nd.save(os.path.join(folder, "i16.safetensors"), [torch.ones(2, dtype=torch.int16)])


def test_save_tensors_mxnet_format_loads_into_block(tmp_path: object) -> None:
    src = _mxtorch_net()
    path = os.path.join(str(tmp_path), "net.params")
    save_tensors(path, {k: p.data() for k, p in src._collect_params_with_prefix().items()}, format="mxnet")
    with open(path, "rb") as f:
        assert is_mxnet_file(f.read(16))
    dst = _mxtorch_net()
    dst.load_parameters(path)
    for (k, a), (_, b) in zip(src._collect_params_with_prefix().items(),
                              dst._collect_params_with_prefix().items(), strict=True):
        assert torch.equal(a.data(), b.data()), k


def test_is_mxnet_file_tells_safetensors_with_same_first_word_apart() -> None:
    assert is_mxnet_file(LIST_HEAD) and is_mxnet_file(LIST_HEAD[:8])
    assert not is_mxnet_file(struct.pack("<Q", 0x112) + b'{"__metadata__"')
    assert not is_mxnet_file(b"\x12\x01") and not is_mxnet_file(struct.pack("<QQ", 0x113, 0))


def test_legacy_v1_and_pre_v1_arrays() -> None:
    vals = np.array([1.0, -2.0, 3.0, 4.5, 0.0, 6.0], np.float32)
    v1 = (struct.pack("<I", 0xF993FAC8) + struct.pack("<i2q", 2, 2, 3) + struct.pack("<iii", 1, 0, 0)
          + vals.tobytes())
    # before V1 an array began with its ndim (3 here) and uint32 dims
    pre = struct.pack("<I3I", 3, 1, 3, 2) + struct.pack("<iii", 2, 1, 0) + vals.tobytes()
    none = struct.pack("<Ii", V2, 0) + struct.pack("<i", 0)  # V2 array saved without a shape
    got = read_mxnet(_listfile([v1, pre, none]), "legacy")
    assert isinstance(got, list)
    np.testing.assert_array_equal(got[0].numpy(), vals.reshape(2, 3))
    np.testing.assert_array_equal(got[1].numpy(), vals.reshape(1, 3, 2))
    assert got[2].shape == (0,)


# ---- corrupt files -----------------------------------------------------------------------------


def _offset(e: pytest.ExceptionInfo[MXNetError]) -> int:
    m = re.search(r"at byte offset (\d+)", str(e.value))
    assert m, str(e.value)
    return int(m.group(1))


def test_truncated_at_every_offset_names_file_and_offset(tmp_path: object) -> None:
    data = _read("sparse.nd")
    path = os.path.join(str(tmp_path), "cut.nd")
    for cut in list(range(16, len(data))):
        with open(path, "wb") as f:
            f.write(data[:cut])
        with pytest.raises(MXNetError, match="cut.nd") as e:
            mx.nd.load(path)
        assert "truncated" in str(e.value), (cut, str(e.value))
        assert _offset(e) <= cut


def test_truncated_offsets_are_where_the_data_stops() -> None:
    arr = _dense_v2((2, 2), 0, b"\0" * 16)
    data = _listfile([arr])
    # cut inside the values: the values begin after header(24) + magic/stype(8) + shape(4+16) + ctx/flag(12)
    start = 24 + 8 + 20 + 12
    with pytest.raises(MXNetError, match=r"truncated: the 4 float32 values of array 0 needs 16 bytes") as e:
        read_mxnet(data[:start + 5], "f.nd")
    assert _offset(e) == start
    with pytest.raises(MXNetError, match="the number of keys") as e:
        read_mxnet(data[:-8], "f.nd")
    assert _offset(e) == len(data) - 8


def test_bad_list_magic(tmp_path: object) -> None:
    with pytest.raises(MXNetError, match=r"f.nd.*not MXNet's NDArray list magic 0x112.*offset 0"):
        read_mxnet(struct.pack("<QQQ", 0x999, 0, 0), "f.nd")
    path = os.path.join(str(tmp_path), "junk.bin")
    with open(path, "wb") as f:
        f.write(b"\x13" + b"\0" * 40)
    with pytest.raises(MXNetError, match="junk.bin"):  # neither format: the safetensors reader says so
        mx.nd.load(path)


def test_bad_array_magic_names_offset() -> None:
    data = _listfile([struct.pack("<I", 0xDEADBEEF) + b"\0" * 16])
    with pytest.raises(MXNetError, match=r"array 0 starts with 0xDEADBEEF, which is no NDArray magic") as e:
        read_mxnet(data, "f.nd")
    assert _offset(e) == 24


def test_unknown_and_unsupported_dtype_flags() -> None:
    for flag, what in ((42, "not one of MXNet's dtypes"), (8, "int16, which mxtorch does not read")):
        data = _listfile([_dense_v2((2,), flag, b"\0" * 8)])
        with pytest.raises(MXNetError, match=f"array 0 has dtype flag {flag} \\({what}\\)") as e:
            read_mxnet(data, "f.nd")
        assert _offset(e) == 24 + 8 + 12 + 8  # the flag follows magic/stype, shape (4+8), context


def test_absurd_ndim_negative_dim_and_sizes() -> None:
    bad_ndim = struct.pack("<Ii", V2, 0) + struct.pack("<i", 1000) + b"\0" * 64
    with pytest.raises(MXNetError, match="array 0 has ndim 1000; expected 0 to 32") as e:
        read_mxnet(_listfile([bad_ndim]), "f.nd")
    assert _offset(e) == 32
    neg = struct.pack("<Ii", V2, 0) + struct.pack("<i2q", 2, 3, -5) + b"\0" * 16
    with pytest.raises(MXNetError, match=r"negative dimension: \(3, -5\)"):
        read_mxnet(_listfile([neg]), "f.nd")
    huge = _dense_v2((2**40, 2**20), 0, b"")  # would need 2**62 bytes: refused before allocating
    with pytest.raises(MXNetError, match="truncated: the 1152921504606846976 float32 values"):
        read_mxnet(_listfile([huge]), "f.nd")
    with pytest.raises(MXNetError, match=r"claims 18446744073709551615 arrays") as e:
        read_mxnet(LIST_HEAD + struct.pack("<Q", 2**64 - 1) + b"\0" * 32, "f.nd")
    assert _offset(e) == 16


def test_bad_keys_storage_types_and_trailing_bytes() -> None:
    arr = _dense_v2((1,), 0, b"\0" * 4)
    with pytest.raises(MXNetError, match="1 arrays but 2 keys"):
        read_mxnet(_listfile([arr])[:-8] + struct.pack("<Q", 2), "f.nd")
    two = _listfile([arr, arr], ["k", "k"])
    with pytest.raises(MXNetError, match="key 'k' appears twice"):
        read_mxnet(two, "f.nd")
    bad_utf8 = _listfile([arr])[:-8] + struct.pack("<QQ", 1, 1) + b"\xff"
    with pytest.raises(MXNetError, match="key 0 is not valid UTF-8"):
        read_mxnet(bad_utf8, "f.nd")
    with pytest.raises(MXNetError, match="3 unexpected bytes after the keys"):
        read_mxnet(_listfile([arr]) + b"abc", "f.nd")
    stype9 = struct.pack("<Ii", V2, 9) + b"\0" * 32
    with pytest.raises(MXNetError, match="storage type 9") as e:
        read_mxnet(_listfile([stype9]), "f.nd")
    assert _offset(e) == 28


def _rsp_bytes(row_ids: list[int], shape: tuple[int, int], aux_flag: int = 6,
               sshape: tuple[int, int] | None = None) -> bytes:
    n = len(row_ids)
    sshape = sshape or (n, shape[1])
    vals = np.ones(sshape, np.float32)
    return (struct.pack("<Ii", V2, 1) + struct.pack("<i2q", 2, *sshape) + struct.pack("<i2q", 2, *shape)
            + struct.pack("<iii", 1, 0, 0) + struct.pack("<i", aux_flag) + struct.pack("<iq", 1, n)
            + vals.tobytes() + np.array(row_ids, np.int64 if aux_flag == 6 else np.float32).tobytes())


def test_sparse_with_bad_indices_or_shapes() -> None:
    ok = read_mxnet(_listfile([_rsp_bytes([0, 2], (3, 2))]), "s.nd")
    assert isinstance(ok, list) and ok[0].to_dense().tolist() == [[1, 1], [0, 0], [1, 1]]
    with pytest.raises(MXNetError, match=r"s.nd.*row_sparse\) has inconsistent indices.*row id 7 is out of"):
        read_mxnet(_listfile([_rsp_bytes([0, 7], (3, 2))]), "s.nd")
    with pytest.raises(MXNetError, match=r"auxiliary array 0 of array 0 \(indices\) has dtype torch.float32"):
        read_mxnet(_listfile([_rsp_bytes([0, 1], (3, 2), aux_flag=0)]), "s.nd")
    with pytest.raises(MXNetError, match=r"storage shape \(2, 5\).*expected storage shape \(nnz, \*\(2,\)\)"):
        read_mxnet(_listfile([_rsp_bytes([0, 1], (3, 2), sshape=(2, 5))]), "s.nd")


def test_write_errors() -> None:
    with pytest.raises(TypeError, match="'z' has dtype torch.complex64, which MXNet's format cannot hold"):
        write_mxnet({"z": torch.zeros(2, dtype=torch.complex64)})
    with pytest.raises(ValueError, match="only dense arrays"):
        write_mxnet([torch.tensor(1.0), sparse.zeros("csr", (2, 2))])
    with pytest.raises(TypeError, match="entry 'a' is a list"):
        write_mxnet({"a": [1, 2]})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="dict keys must be str"):
        write_mxnet({1: torch.ones(1)})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="format must be one of"):
        mx.nd.save("never-written.nd", [torch.ones(1)], format="pickle")
    with pytest.raises(ValueError, match="no place for metadata"):
        save_tensors("never-written.params", {"a": torch.ones(1)}, {"k": "v"}, format="mxnet")
    assert not os.path.exists("never-written.nd") and not os.path.exists("never-written.params")


def test_load_tensors_refuses_unnamed_list(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "list.params")
    mx.nd.save(path, [torch.ones(2)], format="mxnet")
    with pytest.raises(MXNetError, match="list.params' is an MXNet file of 1 unnamed arrays"):
        load_tensors(path)
    mx.nd.save(path, [], format="mxnet")
    assert load_tensors(path) == {}
