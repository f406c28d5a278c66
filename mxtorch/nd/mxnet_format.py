"""MXNet's binary NDArray file format (``mx.nd.save``, gluon ``.params``, Module checkpoints).

Layout (all integers little-endian), as MXNet 1.x writes it:

* file: ``uint64`` list magic ``0x112``, ``uint64`` reserved (0), ``uint64`` number of arrays,
  the arrays, ``uint64`` number of keys (0 for a list, else one per array), then each key as
  ``uint64`` length and that many UTF-8 bytes.
* array (V2 ``0xF993FAC9``, V3 ``0xF993FACA`` with NumPy shape semantics): ``uint32`` magic,
  ``int32`` storage type (0 dense, 1 row_sparse, 2 csr), the storage shape when sparse, the
  shape, the context (``int32`` device type, ``int32`` device id), ``int32`` dtype flag, per
  auxiliary array (row ids of row_sparse; indptr then column ids of csr) its ``int32`` dtype
  flag and shape, the values (``storage shape`` elements), then the auxiliary arrays' data.
* shape: ``int32`` ndim, then ``ndim`` ``int64`` dims.  In V2 an ndim of 0 marks an array
  with no shape (``NDArray()``); in V3 that is ndim -1 and ndim 0 is a scalar.
* legacy arrays: V1 (``0xF993FAC8``: shape, context, dtype flag, data) and older files whose
  first ``uint32`` is the ndim itself, followed by ``uint32`` dims.

Reading parses bytes only (nothing is executed or unpickled) and checks every count against the
bytes left, so a corrupt file raises :class:`~mxtorch.base.MXNetError` naming the file and the
byte offset instead of allocating absurd amounts of memory.  Tensors come back on the CPU;
row_sparse and csr arrays come back as mxtorch's sparse tensors (see :mod:`mxtorch.nd.sparse`),
and an array saved without a shape as an empty float32 tensor of shape (0,).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence

import torch

from ..base import MXNetError
from ._common import mxnet_zero_dim
from ._sparse_storage import csr_matrix, row_sparse_array, row_sparse_parts, stype

__all__ = ["read_mxnet", "read_raw_array",
           "write_mxnet", "is_mxnet_file", "LIST_MAGIC", "V1_MAGIC", "V2_MAGIC", "V3_MAGIC"]

LIST_MAGIC = 0x112
V1_MAGIC = 0xF993FAC8
V2_MAGIC = 0xF993FAC9
V3_MAGIC = 0xF993FACA

MAX_NDIM = 32
"""Largest ndim accepted when reading (MXNet arrays have at most a handful of dimensions)."""
MAX_SPAN = 1 << 62
"""Largest product of a shape's dims (zeros counted as ones) accepted when reading: every shape
torch can index.  A dense array's bytes must also be in the file, which bounds it far lower."""

_DTYPES: dict[int, torch.dtype] = {
    0: torch.float32,
    1: torch.float64,
    2: torch.float16,
    3: torch.uint8,
    4: torch.int32,
    5: torch.int8,
    6: torch.int64,
    7: torch.bool,
    12: torch.bfloat16,
}
_FLAGS = {v: k for k, v in _DTYPES.items()}
_UNSUPPORTED = {8: "int16", 9: "uint16", 10: "uint32", 11: "uint64"}
_STYPES = {0: "default", 1: "row_sparse", 2: "csr"}
_CPU = 1  # MXNet's Context::kCPU

Arrays = list[torch.Tensor] | dict[str, torch.Tensor]


def is_mxnet_file(head: bytes) -> bool:
    """Whether ``head`` (the first 8 or more bytes of a file) starts an MXNet NDArray file.

    The first 8 bytes are the list magic; a safetensors file whose header happens to be 0x112
    bytes long has the same 8 bytes but a ``{`` next, where MXNet has its zero reserved word.
    """
    head = bytes(head)
    if len(head) < 8 or struct.unpack_from("<Q", head)[0] != LIST_MAGIC:
        return False
    return len(head) == 8 or head[8] != ord("{")


class _Reader:
    """A cursor over ``data`` whose errors name the source and the byte offset."""

    def __init__(self, data: bytes, source: str, np_shape: bool | None = None) -> None:
        self.data = memoryview(bytes(data))
        self.source = source
        self.pos = 0
        self.np_shape = np_shape  # None: any version; else MXNet's NDArray::Load rule (see _read_array)

    def fail(self, msg: str, at: int | None = None) -> MXNetError:
        where = self.pos if at is None else at
        return MXNetError(f"{self.source}: not a valid MXNet NDArray file: {msg} (at byte offset {where})")

    def take(self, n: int, what: str) -> memoryview:
        left = len(self.data) - self.pos
        if n > left:
            raise self.fail(f"truncated: {what} needs {n} bytes but only {left} are left "
                            f"(the file has {len(self.data)} bytes)")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, what: str) -> int:
        return int(struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0])

    def shape(self, what: str, dim_fmt: str = "<q", ndim: int | None = None) -> tuple[int, ...] | None:
        """A shape; None for 'no shape' (ndim -1 here; callers treat V2's ndim 0 themselves)."""
        at = self.pos
        if ndim is None:
            ndim = self.unpack("<i", f"the ndim of {what}")
        if ndim == -1:
            return None
        if not 0 <= ndim <= MAX_NDIM:
            raise self.fail(f"{what} has ndim {ndim}; expected 0 to {MAX_NDIM}", at)
        size = struct.calcsize(dim_fmt)
        dims = struct.unpack(f"<{ndim}{dim_fmt[-1]}", self.take(ndim * size, f"the {ndim} dims of {what}"))
        if any(d < 0 for d in dims):
            raise self.fail(f"{what} has a negative dimension: {dims}", at)
        span = 1
        for d in dims:
            span *= max(d, 1)
        if span > MAX_SPAN:  # checked before torch sees the shape: its strides are int64
            raise self.fail(f"{what} has shape {dims}, whose dims multiply to more than 2**62", at)
        return tuple(int(d) for d in dims)

    def dtype(self, what: str) -> tuple[int, torch.dtype]:
        at = self.pos
        flag = self.unpack("<i", f"the dtype flag of {what}")
        if flag not in _DTYPES:
            name = _UNSUPPORTED.get(flag)
            kind = f"({name}, which mxtorch does not read)" if name else "(not one of MXNet's dtypes)"
            raise self.fail(f"{what} has dtype flag {flag} {kind}; supported flags: "
                            f"{ {k: str(v).replace('torch.', '') for k, v in _DTYPES.items()} }", at)
        return flag, _DTYPES[flag]

    def tensor(self, shape: tuple[int, ...], dtype: torch.dtype, what: str) -> torch.Tensor:
        count = 1
        for d in shape:
            count *= d
        itemsize = torch.empty((), dtype=dtype).element_size()
        raw = self.take(count * itemsize, f"the {count} {str(dtype).replace('torch.', '')} values of {what}")
        if count == 0:
            return torch.empty(shape, dtype=dtype)
        if dtype == torch.bool:  # any non-zero byte is true; never reinterpret arbitrary bytes as bool
            return torch.frombuffer(bytearray(raw), dtype=torch.uint8).ne(0).reshape(shape)
        return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)


def _read_legacy(r: _Reader, magic: int, at: int, what: str) -> torch.Tensor:
    if magic == V1_MAGIC:
        shape = r.shape(what)
    elif magic <= MAX_NDIM:  # files older than V1 begin an array with its ndim and uint32 dims
        shape = r.shape(what, "<I", ndim=magic)
    else:
        raise r.fail(f"{what} starts with 0x{magic:08X}, which is no NDArray magic (V2 0x{V2_MAGIC:08X}, "
                     f"V3 0x{V3_MAGIC:08X}, V1 0x{V1_MAGIC:08X}) nor a legacy ndim <= {MAX_NDIM}", at)
    if not shape:
        return torch.empty(0)
    r.take(8, f"the context of {what}")
    _, dtype = r.dtype(what)
    return r.tensor(shape, dtype, what)


def _read_array(r: _Reader, index: int) -> torch.Tensor:
    what = f"array {index}"
    at = r.pos
    magic = r.unpack("<I", f"the magic number of {what}")
    if r.np_shape is not None and (magic == V3_MAGIC) != r.np_shape:
        # MXNet's rule: an array saved with NumPy shape semantics (V3) loads only with them on,
        # and any other only with them off
        raise MXNetError(
            f"{r.source}: {what} was saved with NumPy shape semantics, load it inside "
            "mx.util.np_shape(True)" if magic == V3_MAGIC else
            f"{r.source}: {what} was saved without NumPy shape semantics, load it outside "
            "mx.util.np_shape(True) (or inside np_shape(False))")
    if magic not in (V2_MAGIC, V3_MAGIC):
        return _read_legacy(r, magic, at, what)
    st_at = r.pos
    st = r.unpack("<i", f"the storage type of {what}")
    if st not in _STYPES:
        raise r.fail(f"{what} has storage type {st}; expected 0 (default), 1 (row_sparse) or 2 (csr)", st_at)
    kind = _STYPES[st]
    sshape = r.shape(f"the storage shape of {what}") if kind != "default" else None
    shape_at = r.pos
    shape = r.shape(what)
    if shape is None or (magic == V2_MAGIC and len(shape) == 0):
        return torch.empty(0)  # an array saved without a shape (MXNet's NDArray())
    r.take(8, f"the context of {what}")
    _, dtype = r.dtype(what)
    if kind == "default":
        return mxnet_zero_dim(r.tensor(shape, dtype, what))  # V3 scalars are MXNet's 0-d arrays
    naux = 1 if kind == "row_sparse" else 2
    aux: list[tuple[torch.dtype, tuple[int, ...]]] = []
    for i in range(naux):
        aux_what = f"auxiliary array {i} of {what}"
        aux_at = r.pos
        _, adt = r.dtype(aux_what)
        if adt not in (torch.int32, torch.int64):
            raise r.fail(f"{aux_what} (indices) has dtype {adt}; expected int32 or int64", aux_at)
        ashape = r.shape(aux_what)
        if ashape is None or len(ashape) != 1:
            raise r.fail(f"{aux_what} must be 1-D, got shape {ashape}", aux_at)
        aux.append((adt, ashape))
    sshape = _check_sparse_shapes(r, kind, shape, sshape, [a[1] for a in aux], what, shape_at)
    values = r.tensor(sshape, dtype, f"the stored values of {what}")
    parts = [r.tensor(ashape, adt, f"auxiliary array {i} of {what}") for i, (adt, ashape) in enumerate(aux)]
    try:
        if kind == "row_sparse":
            return row_sparse_array((values, parts[0]), shape=shape, ctx="cpu")
        return csr_matrix((values, parts[1], parts[0]), shape=shape, ctx="cpu")
    except (ValueError, TypeError, IndexError, RuntimeError) as e:  # RuntimeError: torch's and MXNetError
        raise r.fail(f"{what} ({kind}) has inconsistent indices: {e}", shape_at) from e


def _check_sparse_shapes(r: _Reader, kind: str, shape: tuple[int, ...], sshape: tuple[int, ...] | None,
                         ashapes: list[tuple[int, ...]], what: str, at: int) -> tuple[int, ...]:
    """``sshape`` once it fits ``shape`` and the index shapes (else MXNetError)."""
    if sshape is None or not sshape:
        raise r.fail(f"{what} ({kind}) has no storage shape", at)
    nnz = sshape[0]
    if kind == "row_sparse":
        ok = sshape[1:] == shape[1:] and len(shape) >= 1 and ashapes[0] == (nnz,)
        want = f"storage shape (nnz, *{shape[1:]}) and row ids (nnz,)"
    else:
        ok = len(shape) == 2 and len(sshape) == 1 and ashapes == [(shape[0] + 1,), (nnz,)]
        want = "a 2-D shape, storage shape (nnz,), indptr (rows + 1,) and column ids (nnz,)"
    if not ok:
        raise r.fail(f"{what} ({kind}) has shape {shape}, storage shape {sshape} and index shapes {ashapes}; "
                     f"expected {want}", at)
    return sshape


def read_mxnet_file(path: str, missing: str, np_shape: bool | None = None) -> Arrays | None:
    """The arrays of the MXNet NDArray file ``path``; None when it is in another format (safetensors).

    A file that does not exist raises MXNetError ``missing``; ``np_shape`` as for :func:`read_mxnet`.
    """
    if not os.path.isfile(path):
        raise MXNetError(missing)
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
            data = head + fh.read() if is_mxnet_file(head) else None
    except OSError as e:
        raise MXNetError(f"cannot read {path!r}: {e}") from e
    return None if data is None else read_mxnet(data, repr(path), np_shape)


def read_mxnet(data: bytes, source: str, np_shape: bool | None = None) -> Arrays:
    """Parse an MXNet NDArray file: a dict if it has keys, else a list (``source`` names it in errors).

    ``np_shape`` (what ``mx.nd.load`` passes: whether NumPy shape semantics are on) applies
    MXNet's rule that a V3 array loads only with them on and any other only with them off.

    Raises :class:`~mxtorch.base.MXNetError` naming ``source`` and the byte offset, and nothing
    else, for any bytes that are not such a file: every count, ndim (at most :data:`MAX_NDIM`),
    dim (>= 0, product at most :data:`MAX_SPAN`) and byte length is checked against the bytes
    left before anything is allocated.
    """
    r = _Reader(data, source, np_shape)
    magic = r.unpack("<Q", "the list magic")
    if magic != LIST_MAGIC:
        raise r.fail(f"the file starts with 0x{magic:X}, not MXNet's NDArray list magic 0x{LIST_MAGIC:X} "
                     "(is it a safetensors or other file?)", 0)
    r.take(8, "the reserved word")
    at = r.pos
    count = r.unpack("<Q", "the number of arrays")
    if count > (len(r.data) - r.pos) // 8:  # every array takes at least 8 bytes
        raise r.fail(f"the file claims {count} arrays but has only {len(r.data) - r.pos} bytes left", at)
    arrays = [_read_array(r, i) for i in range(count)]
    at = r.pos
    nkeys = r.unpack("<Q", "the number of keys")
    if nkeys not in (0, count):
        raise r.fail(f"the file has {count} arrays but {nkeys} keys; expected 0 (a list) or {count}", at)
    keys: list[str] = []
    for i in range(nkeys):
        at = r.pos
        n = r.unpack("<Q", f"the length of key {i}")
        raw = bytes(r.take(n, f"key {i}"))
        try:
            key = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise r.fail(f"key {i} is not valid UTF-8: {raw[:40]!r}", at) from e
        if key in keys:
            raise r.fail(f"key {key!r} appears twice", at)
        keys.append(key)
    if r.pos != len(r.data):
        raise r.fail(f"{len(r.data) - r.pos} unexpected bytes after the keys")
    return dict(zip(keys, arrays)) if nkeys else arrays


def read_raw_array(data: bytes, source: str) -> torch.Tensor:
    """One array in MXNet's raw single-array bytes (what ``NDArray.__getstate__`` pickles: an
    array record without the file's list header); every byte must belong to it."""
    r = _Reader(data, source)
    out = _read_array(r, 0)
    if r.pos != len(r.data):
        raise r.fail(f"{len(r.data) - r.pos} unexpected bytes after the array")
    return out


# ---- writing ---------------------------------------------------------------------------


def _shape_bytes(shape: Sequence[int]) -> bytes:
    return struct.pack(f"<i{len(shape)}q", len(shape), *shape)


def _raw(t: torch.Tensor) -> bytes:
    if t.numel() == 0:  # an empty array has no data bytes (torch cannot view its stride-0 form)
        return b""
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes()


def _flag(t: torch.Tensor, key: str) -> int:
    if t.dtype not in _FLAGS:
        raise TypeError(f"write_mxnet: array {key!r} has dtype {t.dtype}, which MXNet's format cannot hold; "
                        f"cast it to one of {[str(d).replace('torch.', '') for d in _FLAGS]}, or save as "
                        "safetensors (format='safetensors' or a file name ending in .safetensors)")
    return _FLAGS[t.dtype]


def _array_bytes(t: torch.Tensor, key: str, magic: int) -> bytes:
    kind = stype(t)
    head = struct.pack("<Ii", magic, {"default": 0, "row_sparse": 1, "csr": 2}[kind])
    ctx = struct.pack("<ii", _CPU, 0)
    flag = struct.pack("<i", _flag(t, key))
    if kind == "default":
        return head + _shape_bytes(t.shape) + ctx + flag + _raw(t)
    if kind == "row_sparse":
        ids, values = row_sparse_parts(t.detach())
        aux = [ids.to(torch.int64)]
    else:
        values = t.detach().values()
        aux = [t.crow_indices().to(torch.int64), t.col_indices().to(torch.int64)]
    out = [head, _shape_bytes(values.shape), _shape_bytes(t.shape), ctx, flag]
    for a in aux:
        out += [struct.pack("<i", _FLAGS[torch.int64]), _shape_bytes(a.shape)]
    out += [_raw(values)] + [_raw(a) for a in aux]
    return b"".join(out)


def _needs_v3(t: torch.Tensor) -> bool:
    return t.layout == torch.strided and (t.dim() == 0 or t.numel() == 0)


def write_mxnet(
    arrays: Sequence[torch.Tensor] | Mapping[str, torch.Tensor], np_shape: bool | None = None
) -> bytes:
    """The bytes of an MXNet NDArray file holding ``arrays`` (a list, or a dict of str -> tensor).

    Arrays are written as V2, which ``mx.nd.load`` of MXNet 1.9.1 reads, unless one is 0-d or has
    no elements: MXNet's legacy shapes cannot express those, so the whole file is then written as
    V3 (NumPy shape semantics), which MXNet reads with ``mx.npx.load`` or under
    ``mx.util.np_shape(True)``; V3 holds only dense arrays.  ``np_shape`` (what ``mx.nd.save``
    passes: whether NumPy shape semantics are on) follows MXNet's ``NDArray::Save`` instead: V3
    exactly when it is True; when False a 0-d tensor is written as the shape-(1,) array it stands
    for in MXNet's legacy semantics (as ``asnumpy`` gives it there).
    """
    if isinstance(arrays, Mapping):
        items = list(arrays.items())
        for k, _ in items:
            if not isinstance(k, str):
                raise TypeError(f"write_mxnet: dict keys must be str, got {type(k).__name__} {k!r}")
        keys = [k for k, _ in items]
    elif isinstance(arrays, (list, tuple)):
        items = [(str(i), v) for i, v in enumerate(arrays)]
        keys = []
    else:
        raise TypeError(f"write_mxnet: expected a list or dict of tensors, got {type(arrays).__name__}")
    for k, v in items:
        if not isinstance(v, torch.Tensor):
            raise TypeError(f"write_mxnet: entry {k!r} is a {type(v).__name__}, expected a torch.Tensor")
    if np_shape is False:
        items = [(k, v.reshape(1) if v.dim() == 0 else v) for k, v in items]
    v3 = any(_needs_v3(v) for _, v in items) if np_shape is None else np_shape
    if v3:
        sparse = [k for k, v in items if v.layout != torch.strided]
        if sparse:
            raise ValueError(f"write_mxnet: {sparse[:5]} are sparse, but a 0-d or empty array in the same "
                             "file needs MXNet's V3 (NumPy shape) format, which holds only dense arrays; "
                             "save them in separate files or convert them with tostype('default')")
    magic = V3_MAGIC if v3 else V2_MAGIC
    out = [struct.pack("<QQQ", LIST_MAGIC, 0, len(items))]
    out += [_array_bytes(v, k, magic) for k, v in items]
    out.append(struct.pack("<Q", len(keys)))
    for k in keys:
        b = k.encode("utf-8")
        out.append(struct.pack("<Q", len(b)) + b)
    return b"".join(out)
