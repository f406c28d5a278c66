"""The hostile inputs of issue 28, one test each: every decoder refuses them with its own error.

Each case failed before the decoders were bounded (a RecursionError, torch's RuntimeError,
UnicodeDecodeError, or memory running out).  The two that ran out of memory (a 197-byte graph
file splitting into 10**9 outputs, a checkpoint manifest naming ``/dev/zero``) run in a child
process under an address-space limit, so that a regression fails the test instead of the machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import struct
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import mxtorch as mx
from mxtorch import bounded_json, compression
from mxtorch.base import MXNetError
from mxtorch.checkpoint import CheckpointError, CheckpointManager
from mxtorch.kvstore.ps import protocol as P
from mxtorch.kvstore.ps.codec import decode_push
from mxtorch.nd import mxnet_format as F

ROOT = Path(__file__).resolve().parent.parent


def _push_header(*descs: tuple[int, tuple[int, ...]], flags: int = 0, command: int = P.Command.PUSH) -> bytes:
    head = P._FIXED.pack(P.MAGIC, P.PROTOCOL_VERSION, command, flags, 0, 9, 0, 0, len(descs))
    for code, shape in descs:
        head += struct.pack(f"<BB{len(shape)}q", code, len(shape), *shape)
    return head


# ---- the wire protocol ------------------------------------------------------------------------
def test_a_deeply_nested_json_frame_is_a_protocol_error() -> None:
    frames = [P._FIXED.pack(P.MAGIC, 2, 1, 1, 0, 0, 0, 0, 0), b"", b"[" * 100000]
    with pytest.raises(P.ProtocolError, match="REGISTER message: JSON nested .* levels deep"):
        P.decode(frames)


def test_an_empty_tensor_whose_strides_overflow_is_a_protocol_error() -> None:
    frames = [_push_header((0, (0, 2**62, 2**62))), b"sw", b""]
    with pytest.raises(P.ProtocolError, match="overflow int64 strides"):
        P.decode(frames)
    # within int64 an empty tensor of a wide shape is fine (it owns no memory)
    assert P.decode([_push_header((0, (0, 2**30, 2**30))), b"sw", b""]).tensors[0].shape == (0, 2**30, 2**30)


def test_a_tensor_of_too_many_dims_is_a_protocol_error() -> None:
    frames = [_push_header((0, (1,) * 200)), b"sw", b"\0" * 4]
    with pytest.raises(P.ProtocolError, match="200 dims"):
        P.decode(frames)


def test_a_json_frame_that_is_not_utf8_or_an_object_is_a_protocol_error() -> None:
    head = P._FIXED.pack(P.MAGIC, 2, 1, 1, 0, 0, 0, 0, 0)
    with pytest.raises(P.ProtocolError, match="not UTF-8"):
        P.decode([head, b"", b'{"a": "\xff"}'])
    with pytest.raises(P.ProtocolError, match="holds an array, expected an object"):
        P.decode([head, b"", b"[1]"])
    with pytest.raises(P.ProtocolError, match="not valid JSON"):
        P.decode([head, b"", b"1" * 5000])  # more digits than Python converts


def test_a_state_structure_nested_past_the_stack_is_a_protocol_error() -> None:
    tree: Any = {"v": 1}
    for _ in range(5000):
        tree = {"tuple": [tree]}
    with pytest.raises(P.ProtocolError, match="nested too deep"):
        P.unpack_tree(tree, [])


# ---- the push codec ---------------------------------------------------------------------------
@pytest.mark.parametrize("params,tensors,shape", [
    # float indices with a NaN: int(nan) raised ValueError
    ({"type": "topk", "ratio": 0.5}, [torch.ones(2), torch.tensor([0.0, float("nan")])], (4,)),
    # low-rank factors for a scalar key: ctx.shape[0] raised IndexError
    ({"type": "powersgd", "rank": 1}, [torch.ones(1, 1), torch.ones(1, 1)], ()),
    # integer factors: torch's matmul raised RuntimeError
    ({"type": "powersgd", "rank": 1}, [torch.ones(4, 1, dtype=torch.int64)] * 2, (4, 4)),
    # more columns than the declared rank: (rows x cols x rank) work a worker should not set
    ({"type": "powersgd", "rank": 1}, [torch.ones(4, 3), torch.ones(4, 3)], (4, 4)),
])
def test_hostile_push_payloads_are_compression_errors(params: dict[str, Any], tensors: list[torch.Tensor],
                                                      shape: tuple[int, ...]) -> None:
    with pytest.raises(compression.CompressionError):
        decode_push(compression.create(params), tensors, shape, torch.float32)


# ---- MXNet's NDArray files --------------------------------------------------------------------
def test_an_ndarray_file_with_an_overflowing_empty_shape_names_the_file(tmp_path: Path) -> None:
    blob = (struct.pack("<QQQ", F.LIST_MAGIC, 0, 1) + struct.pack("<Ii", F.V3_MAGIC, 0)
            + struct.pack("<i3q", 3, 0, 2**62, 2**62) + struct.pack("<iii", 1, 0, 0) + struct.pack("<Q", 0))
    path = tmp_path / "hostile.params"
    path.write_bytes(blob)
    # a V3 array: MXNet reads it only with NumPy shape semantics on
    with mx.util.np_shape(True), pytest.raises(MXNetError, match=r"hostile\.params.*more than 2\*\*62"):
        mx.nd.load(str(path))


# ---- symbol JSON ------------------------------------------------------------------------------
def test_nested_json_symbol_files_are_mxnet_errors(tmp_path: Path) -> None:
    (tmp_path / "m-symbol.json").write_text("[" * 100000)
    with pytest.raises(MXNetError, match="m-symbol.json.*nested"):
        mx.sym.load(str(tmp_path / "m-symbol.json"))
    with pytest.raises(MXNetError, match="m-symbol.json.*nested"):
        mx.model.load_checkpoint(str(tmp_path / "m"), 1)
    with pytest.raises(MXNetError, match="load_json.*nested"):
        mx.sym.load_json("[" * 100000)
    with pytest.raises(MXNetError, match="m-symbol.json.*nested"):
        mx.gluon.SymbolBlock.imports(str(tmp_path / "m-symbol.json"), ["data"])


def test_a_binary_file_given_as_a_symbol_is_an_mxnet_error(tmp_path: Path) -> None:
    path = tmp_path / "weights.params"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(MXNetError, match=r"weights\.params.*not UTF-8"):
        mx.sym.load(str(path))


# ---- checkpoint manifests ---------------------------------------------------------------------
def _two_checkpoints(root: Path) -> CheckpointManager:
    mgr = CheckpointManager(str(root), keep_last=None, async_save=False)
    mgr.save(1, marker="one")
    mgr.save(2, marker="two")
    return mgr


def _edit_manifest(root: Path, step: int, edit: Any) -> None:
    path = root / f"step-{step}" / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def test_a_nested_manifest_makes_restore_fall_back(tmp_path: Path) -> None:
    mgr = _two_checkpoints(tmp_path)
    (tmp_path / "step-2" / "manifest.json").write_text("[" * 100000)
    with pytest.warns(UserWarning, match="step 2.*nested.*Falling back to checkpoint step 1"):
        assert mgr.restore() == 1
    assert mgr.extra == {"marker": "one"}


@pytest.mark.parametrize("name", ["../step-1/state.json", "/etc/hostname", "sub/state.json", "..", ""])
def test_manifest_entries_must_be_plain_names_in_the_folder(tmp_path: Path, name: str) -> None:
    mgr = _two_checkpoints(tmp_path)
    _edit_manifest(tmp_path, 2, lambda m: m["files"].update({name: {"size": 1, "sha256": "0" * 64}}))
    with pytest.raises(CheckpointError, match="not a plain file name inside"):
        mgr.verify(2)


def test_a_file_linked_out_of_the_checkpoint_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "ck"
    mgr = _two_checkpoints(root)
    outside = tmp_path / "outside.json"
    state = root / "step-2" / "state.json"
    outside.write_bytes(state.read_bytes())  # same bytes: size and checksum still match
    state.unlink()
    state.symlink_to(outside)
    with pytest.raises(CheckpointError, match="state.json cannot be in it: it leads to .*outside"):
        mgr.verify(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert mgr.restore() == 1


def test_a_malformed_manifest_entry_is_a_checkpoint_error(tmp_path: Path) -> None:
    mgr = _two_checkpoints(tmp_path)
    _edit_manifest(tmp_path, 2, lambda m: m["files"].update({"state.json": "big"}))
    with pytest.raises(CheckpointError, match="malformed entry for 'state.json'"):
        mgr.verify(2)


def _replace_file(root: Path, step: int, name: str, data: bytes) -> None:
    """Write ``data`` as checkpoint ``step``'s file ``name`` with a matching manifest entry (a
    writer that means harm passes the checksums)."""
    (root / f"step-{step}" / name).write_bytes(data)
    record = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    _edit_manifest(root, step, lambda m: m["files"].update({name: record}))


@pytest.mark.parametrize("name,doc,match", [
    ("state.json", [1, 2], "state.json is not a state file"),
    ("state.json", {"extra": [1]}, "state.json is not a state file"),
    ("rng.rank0.json", [], "rng.rank0.json is not an RNG state file"),
])
def test_checksummed_json_files_of_the_wrong_shape_are_checkpoint_errors(tmp_path: Path, name: str, doc: Any,
                                                                          match: str) -> None:
    mgr = _two_checkpoints(tmp_path)
    _replace_file(tmp_path, 2, name, json.dumps(doc).encode())
    with pytest.raises(CheckpointError, match=match):
        mgr.restore(step=2)


def test_a_malformed_rng_state_changes_no_generator(tmp_path: Path) -> None:
    mgr = _two_checkpoints(tmp_path)
    state = json.loads((tmp_path / "step-2" / "rng.rank0.json").read_text())
    state["numpy"]["key"] = [1, 2, 3]  # numpy's generator needs 624 words
    _replace_file(tmp_path, 2, "rng.rank0.json", json.dumps(state).encode())
    random.seed(5)
    before = random.getstate(), torch.get_rng_state()
    with pytest.raises(MXNetError, match="rng.rank0.json: malformed RNG state"):
        mgr.restore(step=2)
    assert random.getstate() == before[0] and torch.equal(torch.get_rng_state(), before[1])


# ---- out of memory before: in a child process under an address-space limit ---------------------
_CHILD = r"""
import json, os, resource, sys, warnings
import torch
torch.set_num_threads(1)
import mxtorch as mx
from mxtorch.checkpoint import CheckpointManager
work = sys.argv[1]
graph = {"nodes": [{"op": "null", "name": "data", "inputs": []},
                   {"op": "SliceChannel", "name": "s", "attrs": {"num_outputs": "1000000000"},
                    "inputs": [[0, 0, 0]]}], "arg_nodes": [0], "heads": [[1, 0, 0]]}
sym_file = os.path.join(work, "split-symbol.json")
with open(sym_file, "w") as f:
    json.dump(graph, f)
mgr = CheckpointManager(os.path.join(work, "ck"), keep_last=None, async_save=False)
mgr.save(1)
mgr.save(2)
man = os.path.join(work, "ck", "step-2", "manifest.json")
m = json.load(open(man))
m["files"]["../" * 40 + "dev/zero"] = {"size": 2**40, "sha256": "0" * 64}
json.dump(m, open(man, "w"))
vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (1 << 30), vm + (1 << 30)))
out = {"size": os.path.getsize(sym_file)}
def attempt(name, fn):
    try:
        out[name] = ["ok", repr(fn())]
    except BaseException as e:
        out[name] = [type(e).__name__, str(e)[:300]]
attempt("split", lambda: mx.sym.load(sym_file))
attempt("split_in_python", lambda: mx.sym.SliceChannel(mx.sym.var("data"), num_outputs=10**9).list_outputs())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    attempt("restore", mgr.restore)
out["warnings"] = [str(w.message)[:4000] for w in caught]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("hostile")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", _CHILD, str(work)], capture_output=True, text=True,
                         timeout=240, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_small_graph_file_splitting_into_a_billion_outputs_is_refused(limited: dict[str, Any]) -> None:
    assert limited["size"] < 300
    kind, message = limited["split"]
    assert kind == "MXNetError", message
    assert "split-symbol.json" in message and "num_outputs must be an int from 1 to 65536" in message


def test_split_counts_are_bounded_when_built_in_python_too(limited: dict[str, Any]) -> None:
    kind, message = limited["split_in_python"]
    assert kind == "MXNetError" and "num_outputs must be an int from 1 to 65536" in message, message
    assert len(mx.sym.SliceChannel(mx.sym.var("data"), num_outputs=3).list_outputs()) == 3


def test_a_manifest_naming_dev_zero_is_refused_and_restore_falls_back(limited: dict[str, Any]) -> None:
    kind, result = limited["restore"]
    assert (kind, result) == ("ok", "1")
    assert any("not a plain file name" in w and "Falling back to checkpoint step 1" in w
               for w in limited["warnings"]), limited["warnings"]


# ---- the shared reader ------------------------------------------------------------------------
def test_bounded_json_refuses_before_parsing() -> None:
    with pytest.raises(ValueError, match="larger than the limit of 10 bytes"):
        bounded_json.loads(b"[" + b"0," * 10 + b"0]", "doc", ValueError, max_bytes=10)
    with pytest.raises(ValueError, match="nested at least 4 levels deep; at most 3"):
        bounded_json.loads("[[[[1]]]]", "doc", ValueError, max_depth=3)
    assert bounded_json.loads('["[[[[", {"a": "\\"[["}]', "doc", max_depth=2) == ["[[[[", {"a": '"[['}]
    with pytest.raises(ValueError, match="expected JSON text or bytes, got int"):
        bounded_json.loads(10**9, "doc", ValueError)  # type: ignore[arg-type]
