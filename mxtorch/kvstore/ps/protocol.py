"""The parameter server's wire format: ZeroMQ multipart messages, never pickle.

A message is::

    frame 0   header: struct '<4sBBHQiIqB' (little endian)
              magic b'MXPS', protocol version u8, command u8, flags u16, request id u64,
              sender node id i32, shard u32, arg i64, tensor count u8,
              then per tensor: dtype code u8, ndim u8, ndim x i64 shape
    frame 1   key: b'i' + decimal digits (int key), b's' + utf-8 (str key), b'' (no key)
    frame 2   JSON object, only when flags has META (control messages: registration,
              optimizer description, states structure, errors)
    then      one raw data frame per tensor (C-contiguous bytes of the tensor)

The data path (PUSH, PULL, PULL_REPLY, ACK) carries no JSON: what it needs (shard, version,
dtype, shape) is in the fixed header.  Data frames are sent with ``copy=False`` straight from
the tensor's memory and received with ``copy=False``; :func:`decode` wraps them with
``torch.frombuffer`` (no copy; the tensor keeps the ZeroMQ frame alive).  Nothing received
is unpickled or ``torch.load``-ed: optimizer states travel as a JSON structure whose leaves
point at tensor frames (:func:`pack_tree` / :func:`unpack_tree`).

``arg`` is command specific: the version of a PULL_REPLY, the round a PUSH belongs to in its
ACK, a count; in a PUSH or PUSHPULL, the worker's sequence number of that push to that key slice
(1, 2, ...; 0: not given) shifted left by 8 bits, the low byte being a PUSHPULL's narrow dtype
code (a server restored from a snapshot counts each push once by it, see :mod:`.shard`).
``sender`` is a node id in ps-lite's numbering: 1 the scheduler, ``8 + 2r``
server r, ``9 + 2r`` worker r (:func:`server_node`, :func:`worker_node`).

Extension points: a new message type is a new :class:`Command` code and a handler in the
server's dispatch table.  :class:`Flag` marks messages whose tensors are not the dense value
(the server decodes pushes in one place, ``ParameterServer._decode_push``):

* PUSH + ``ROW_SPARSE``: ``[row ids (int64, sorted, unique), rows (k, *row_shape)]``;
* PUSH + ``COMPRESSED``: the tensors of a compressor's payload (:mod:`.codec`);
* PULL + ``ROW_SPARSE``: the reply is ``[row ids, elements]``, the rows the value stores;
* PULL + ``COMPRESSED``: the reply carries the value cast to the dtype whose code is ``arg``;
* ROW_PULL ``[row ids]``: the reply carries those rows' elements (:mod:`.rows`);
* PUSHPULL: a dense (or, with ``COMPRESSED``, compressed) push whose PULL_REPLY comes once it
  is applied: one message each way per key slice instead of four (PUSH, its ACK, PULL, the
  reply); with ``NARROW`` the reply is cast to the dtype whose code is ``arg``'s low byte.

Hostile input: :func:`decode` raises only :class:`ProtocolError`, whatever the frames hold.  A
tensor description is bounded before anything is allocated (at most :data:`MAX_NDIM` dims, each
>= 0, and exactly as many bytes in its data frame as the shape and dtype need; an empty tensor's
shape must also fit in int64 strides); the JSON frame goes through :mod:`mxtorch.bounded_json`
(at most :data:`MAX_META_BYTES` bytes, :data:`~mxtorch.bounded_json.MAX_DEPTH` levels).  These
checks are a few integer operations per tensor: data messages carry no JSON.

Authentication (``MXTORCH_PS_SECRET``): a node's REGISTER is answered with a CHALLENGE
carrying a scheduler nonce and the scheduler's proof over the node's nonce; the node proves
itself with ``HMAC-SHA256(secret, 'node' | scheduler nonce)`` (:func:`sign`).  Every server
publishes a random nonce through the scheduler, and a worker's first message on each
connection (HELLO) carries ``HMAC(secret, 'hello' | server nonce | its identity)``; servers
answer nothing else from a connection that has not said a valid HELLO.  This keeps foreign
processes out of a job; it does not encrypt (run jobs on a trusted network).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import zmq

from ... import bounded_json
from ..base import Key, KVStoreError

__all__ = [
    "Command", "Flag", "Message", "ProtocolError", "encode", "decode", "send", "recv",
    "MAGIC", "PROTOCOL_VERSION", "SCHEDULER_NODE", "server_node", "worker_node", "describe_node",
    "node_group", "key_to_json", "key_from_json", "dtype_code", "dtype_from_code", "dtype_name",
    "dtype_from_name", "pack_tree", "unpack_tree", "sign", "verify",
]

MAGIC = b"MXPS"
PROTOCOL_VERSION = 2  # 2: PUSHPULL; optimizer states per key slice

_FIXED = struct.Struct("<4sBBHQiIqB")
_TDESC = struct.Struct("<BB")
MAX_NDIM = 32
"""Most dims a tensor in a message may have (MXNet's arrays have at most a handful)."""
MAX_META_BYTES = 16 << 20
"""Largest JSON frame accepted (control messages: registrations, key lists, state structures)."""
_SPAN_LIMIT = 1 << 62  # an empty tensor's shape, zeros counted as ones, must fit torch's int64 strides


class Command(enum.IntEnum):
    """One code per message type (new types append; codes never change meaning)."""

    REGISTER = 1  # node -> scheduler: role, ids, host, nonce
    CHALLENGE = 2  # scheduler -> node: nonce to sign (secret jobs)
    ASSIGN = 3  # scheduler -> server: rank, port, job shape
    READY = 4  # server -> scheduler: bound address, HELLO nonce
    LAYOUT = 5  # scheduler -> worker: rank, server addresses
    HELLO = 6  # worker -> server: first message of a connection
    BARRIER = 7
    BARRIER_DONE = 8
    HEARTBEAT = 9
    NODE_DEAD = 10  # scheduler -> nodes
    NODE_BACK = 11  # scheduler -> workers: a restarted server is back
    KEY_CHECK = 12  # worker -> scheduler: the keys, shapes, dtypes an init declares
    INIT = 13
    PUSH = 14
    PULL = 15
    PULL_REPLY = 16
    ROW_PULL = 17  # worker -> server: row_sparse_pull of some rows
    SET_OPTIMIZER = 18
    SET_HYPER = 19
    SET_COMPRESSION = 20  # worker -> server: how this worker compresses its pushes
    GET_STATES = 21
    STATES = 22
    SET_STATES = 23
    SNAPSHOT = 24
    NUM_DEAD = 25
    ERROR = 26
    SHUTDOWN = 27
    ACK = 28
    WORKER_DONE = 29  # scheduler -> servers: a worker closed its store (it pushes no more)
    PUSHPULL = 30  # worker -> server: a dense PUSH and the PULL after it, answered by one PULL_REPLY
    PROFILER = 31  # worker -> server: a profiler request (profile_process='server'), or the server's clock
    STATS = 32  # worker -> server: the server's load counters (kv.server_stats()), answered by an ACK
    MEMBERSHIP = 33  # scheduler -> nodes (elastic jobs): the live workers' ranks and the epoch number


class Flag:
    """Bits of a message's ``flags``: plain ints, because every data message tests them and
    ``enum.IntFlag`` arithmetic costs microseconds per operation."""

    NONE = 0
    META = 1  # a JSON frame follows the key frame
    COMPRESSED = 2  # the tensors are a compressor's payload (PUSH), a cast value is wanted (PULL)
    ROW_SPARSE = 4  # the tensors are (row ids, rows)
    NARROW = 8  # PUSHPULL: the reply carries the value cast to the dtype whose code is ``arg``


_COMMANDS = {int(c): c for c in Command}
_META = Flag.META
_SNDMORE = int(zmq.SNDMORE)
ZERO_COPY_BYTES = 65536
"""Data frames at least this large are sent without a copy (ZeroMQ's own copy threshold)."""


class ProtocolError(KVStoreError):
    """A message that does not follow this wire format (foreign peer, other version, corruption)."""


# ---- node ids (ps-lite numbering) --------------------------------------------------------------
SCHEDULER_NODE = 1


def server_node(rank: int) -> int:
    return 8 + 2 * rank


def worker_node(rank: int) -> int:
    return 9 + 2 * rank


def node_group(node_id: int) -> int:
    """MXNet's group bit of a node: 1 scheduler, 2 servers, 4 workers."""
    if node_id == SCHEDULER_NODE:
        return 1
    return 2 if node_id % 2 == 0 else 4


def describe_node(node_id: int) -> str:
    if node_id == SCHEDULER_NODE:
        return "the scheduler"
    if node_id >= 8:
        return f"server {(node_id - 8) // 2}" if node_id % 2 == 0 else f"worker {(node_id - 9) // 2}"
    return f"node {node_id}"


# ---- dtypes ------------------------------------------------------------------------------------
_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool,
)
_CODE = {d: i for i, d in enumerate(_DTYPES)}
_ITEMSIZE = {d: torch.empty((), dtype=d).element_size() for d in _DTYPES}
_NUMPY_OK = frozenset(d for d in _DTYPES if d is not torch.bfloat16)
_BY_NAME = {str(d).replace("torch.", ""): d for d in _DTYPES}


def dtype_code(dtype: torch.dtype) -> int:
    try:
        return _CODE[dtype]
    except KeyError:
        raise KVStoreError(f"dtype {dtype} cannot travel to a parameter server: use one of "
                           f"{sorted(_BY_NAME)}") from None


def dtype_from_code(code: int) -> torch.dtype:
    if not 0 <= code < len(_DTYPES):
        raise ProtocolError(f"unknown dtype code {code} in a message")
    return _DTYPES[code]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def dtype_from_name(name: Any) -> torch.dtype:
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ProtocolError(f"unknown dtype name {name!r} in a message") from None


# ---- keys --------------------------------------------------------------------------------------
def _key_bytes(key: Key | None) -> bytes:
    if key is None:
        return b""
    if isinstance(key, str):
        return b"s" + key.encode("utf-8")
    return b"i%d" % key


def _key_from_bytes(raw: bytes) -> Key | None:
    if not raw:
        return None
    kind, body = raw[:1], raw[1:]
    try:
        if kind == b"i":
            return int(body)
        if kind == b"s":
            return body.decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        pass
    raise ProtocolError(f"malformed key frame {raw[:40]!r}")


def key_to_json(key: Key) -> list[Any]:
    """A key as JSON that keeps int and str apart: ``['i', 3]`` or ``['s', 'w']``."""
    return ["s", key] if isinstance(key, str) else ["i", int(key)]


def key_from_json(obj: Any) -> Key:
    if isinstance(obj, list) and len(obj) == 2:
        kind, value = obj
        if kind == "i" and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind == "s" and isinstance(value, str):
            return value
    raise ProtocolError(f"malformed key {obj!r} in a message")


# ---- messages ----------------------------------------------------------------------------------
@dataclass
class Message:
    """One decoded message; ``tensors`` are views of the received frames (writable, owned)."""

    command: Command
    request_id: int = 0
    sender: int = 0
    flags: int = 0
    key: Key | None = None
    shard: int = 0
    arg: int = 0
    meta: dict[str, Any] | None = None
    tensors: list[torch.Tensor] = field(default_factory=list)
    frames: list[Any] = field(default_factory=list)
    """Received: the ZeroMQ frame whose memory each tensor is (None where it was copied).  To
    send: where not None, that received frame goes out instead of the tensor's memory (it must
    hold exactly those bytes); ZeroMQ shares the frame's content, with no copy and no tracking."""


def _tensor_frame(t: torch.Tensor) -> Any:
    if t.device.type != "cpu":
        t = t.cpu()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.numel() == 0:
        return b""
    if t.requires_grad:
        t = t.detach()
    if t.dim() != 1:
        t = t.view(-1)  # a flat buffer (0-dim numpy buffers do not report their size)
    if t.dtype in _NUMPY_OK:
        return t.numpy()  # zero-copy through the buffer protocol
    return t.view(torch.uint8).numpy()  # bfloat16: numpy has no such dtype


def encode(msg: Message) -> list[Any]:
    """The frames of ``msg`` (data frames reference the tensors' memory: keep them unchanged until sent)."""
    meta = msg.meta
    tensors = msg.tensors
    flags = msg.flags | _META if meta is not None else msg.flags
    n = len(tensors)
    head = _FIXED.pack(MAGIC, PROTOCOL_VERSION, msg.command, flags, msg.request_id, msg.sender, msg.shard,
                       msg.arg, n)
    if n:
        if n > 255:
            raise KVStoreError(f"a message carries at most 255 tensors, got {n}")
        parts = [head]
        for t in tensors:
            shape = t.shape
            parts.append(_TDESC.pack(dtype_code(t.dtype), len(shape)))
            if shape:
                parts.append(struct.pack(f"<{len(shape)}q", *shape))
        head = b"".join(parts)
    frames: list[Any] = [head, _key_bytes(msg.key)]
    if meta is not None:
        frames.append(json.dumps(meta, separators=(",", ":"), allow_nan=True).encode("utf-8"))
    own = msg.frames
    for i, t in enumerate(tensors):
        f = own[i] if i < len(own) else None
        frames.append(_tensor_frame(t) if f is None else f)
    return frames


def _frame_bytes(f: Any) -> bytes:
    return f.bytes if isinstance(f, zmq.Frame) else bytes(f)


def decode(frames: Sequence[Any]) -> Message:
    """Parse the frames of one message (ZeroMQ frames or bytes).

    Raises :class:`ProtocolError` (and nothing else) for any frames that do not follow the wire
    format: a short or foreign header, another protocol version, an unknown command or dtype, a
    tensor description with more than :data:`MAX_NDIM` dims, a negative dim, or a shape whose
    bytes differ from its data frame's, a malformed key frame, a JSON frame that is too large,
    too deep, not UTF-8 or not an object.
    """
    if len(frames) < 2:
        raise ProtocolError(f"a message needs at least 2 frames, got {len(frames)}")
    head = _frame_bytes(frames[0])
    if len(head) < _FIXED.size:
        raise ProtocolError(f"message header of {len(head)} bytes is too short")
    magic, version, command, flags, req, sender, shard, arg, ntensors = _FIXED.unpack_from(head)
    if magic != MAGIC:
        raise ProtocolError(f"not an mxtorch parameter-server message (magic {magic!r})")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"peer speaks protocol version {version}, this process {PROTOCOL_VERSION}: run "
                            "the same mxtorch version on every node")
    cmd = _COMMANDS.get(command)
    if cmd is None:
        raise ProtocolError(f"unknown command code {command}")
    descs: list[tuple[torch.dtype, tuple[int, ...]]] = []
    pos = _FIXED.size
    try:
        for _ in range(ntensors):
            code, ndim = _TDESC.unpack_from(head, pos)
            pos += _TDESC.size
            if ndim > MAX_NDIM:
                raise ProtocolError(f"a tensor of {ndim} dims in a message; at most {MAX_NDIM} are accepted")
            shape = struct.unpack_from(f"<{ndim}q", head, pos) if ndim else ()
            pos += 8 * ndim
            descs.append((dtype_from_code(code), tuple(shape)))
    except struct.error:
        raise ProtocolError("message header ends inside a tensor description") from None
    key = _key_from_bytes(_frame_bytes(frames[1]))
    idx = 2
    meta = None
    if flags & _META:
        if len(frames) < 3:
            raise ProtocolError("message flags a JSON frame that is missing")
        meta = bounded_json.loads(_frame_bytes(frames[2]), f"the JSON frame of a {cmd.name} message",
                                  ProtocolError, max_bytes=MAX_META_BYTES, expect=dict)
        idx = 3
    if len(frames) - idx != ntensors:
        raise ProtocolError(f"message announces {ntensors} tensors but has {len(frames) - idx} data frames")
    data = frames[idx:]
    tensors = [_tensor_from_frame(data[i], dt, shape) for i, (dt, shape) in enumerate(descs)]
    owners = [f if isinstance(f, zmq.Frame) and t.numel() else None for f, t in zip(data, tensors)]
    return Message(cmd, req, sender, flags, key, shard, arg, meta, tensors, owners)


def _tensor_from_frame(frame: Any, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    numel = 1
    for s in shape:
        if s < 0:
            raise ProtocolError(f"negative dimension in tensor shape {shape}")
        numel *= s
    itemsize = _ITEMSIZE[dtype]
    buf = frame.buffer if isinstance(frame, zmq.Frame) else memoryview(bytearray(frame))
    if len(buf) != numel * itemsize:
        raise ProtocolError(f"tensor frame of {len(buf)} bytes does not hold a {dtype_name(dtype)} tensor of "
                            f"shape {shape} ({numel * itemsize} bytes)")
    if numel == 0:
        span = 1
        for s in shape:
            span *= s or 1
        if span >= _SPAN_LIMIT:
            raise ProtocolError(f"empty tensor of shape {shape} in a message: dims overflow int64 strides")
        return torch.empty(shape, dtype=dtype)
    t = torch.frombuffer(buf, dtype=dtype)  # no copy: the tensor keeps the frame alive
    return t if len(shape) == 1 else t.view(shape)


def send(sock: zmq.Socket, msg: Message, identity: bytes | None = None, track: bool = False) -> list[Any]:
    """Send ``msg`` (to ``identity`` on a ROUTER); with ``track``, the data frames' MessageTrackers.

    Frames of at least :data:`ZERO_COPY_BYTES` leave from the tensors' memory (``copy=False``);
    smaller ones are copied, which is cheaper than tracking them.  Received frames passed in
    ``msg.frames`` are re-sent as they are (shared, untracked).
    """
    frames = encode(msg)
    if identity is not None:
        frames.insert(0, identity)
    trackers = []
    last = len(frames) - 1
    for i, f in enumerate(frames):
        flag = 0 if i == last else _SNDMORE  # plain ints: pyzmq's enum arithmetic costs microseconds
        if isinstance(f, zmq.Frame):
            sock.send(f, flag, copy=False)  # a received frame: its content is shared, not copied
        elif isinstance(f, bytes) or f.nbytes < ZERO_COPY_BYTES:
            sock.send(f, flag)
        else:
            tr = sock.send(f, flag, copy=False, track=track)
            if track and tr is not None:
                trackers.append(tr)
    return trackers


def recv(sock: zmq.Socket, router: bool = False, flags: int = 0) -> tuple[bytes | None, Message]:
    """Receive one message (``router``: the first frame is the peer's identity)."""
    frames = sock.recv_multipart(flags, copy=False)
    identity = None
    if router:
        identity = frames[0].bytes
        frames = frames[1:]
    return identity, decode(frames)


# ---- optimizer states and other tensor trees -----------------------------------------------------
def pack_tree(obj: Any, tensors: list[torch.Tensor]) -> Any:
    """JSON for ``obj`` (None, numbers, str, tensors, tuples/lists of those); tensors go to ``tensors``."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"v": obj}
    if isinstance(obj, torch.Tensor):
        tensors.append(obj.detach())
        return {"t": len(tensors) - 1}
    if isinstance(obj, (tuple, list)):
        return {"tuple": [pack_tree(o, tensors) for o in obj]}
    raise KVStoreError(f"cannot send a {type(obj).__name__} to a parameter server: only tensors, numbers, "
                       "strings, None and tuples of those")


def unpack_tree(obj: Any, tensors: Sequence[torch.Tensor]) -> Any:
    """The inverse of :func:`pack_tree` (tuples come back as tuples); :class:`ProtocolError` for a
    structure it did not write (unknown entries, tensor indices out of range, nesting too deep)."""
    try:
        return _unpack_tree(obj, tensors)
    except RecursionError:
        raise ProtocolError("a state structure in a message is nested too deep") from None


def _unpack_tree(obj: Any, tensors: Sequence[torch.Tensor]) -> Any:
    if isinstance(obj, dict):
        if "v" in obj and len(obj) == 1:
            v = obj["v"]
            if v is None or isinstance(v, (bool, int, float, str)):
                return v
        elif "t" in obj and len(obj) == 1:
            i = obj["t"]
            if isinstance(i, int) and 0 <= i < len(tensors):
                return tensors[i]
        elif "tuple" in obj and len(obj) == 1 and isinstance(obj["tuple"], list):
            return tuple(_unpack_tree(o, tensors) for o in obj["tuple"])
    raise ProtocolError(f"malformed state structure {str(obj)[:80]!r} in a message")


# ---- shared secret -----------------------------------------------------------------------------
def sign(secret: bytes, purpose: str, *parts: bytes | str) -> str:
    """Hex HMAC-SHA256 of ``purpose`` and ``parts`` (length-prefixed, so parts cannot be shifted)."""
    mac = hmac.new(secret, digestmod=hashlib.sha256)
    for p in (purpose, *parts):
        raw = p.encode("utf-8") if isinstance(p, str) else p
        mac.update(struct.pack("<I", len(raw)))
        mac.update(raw)
    return mac.hexdigest()


def verify(secret: bytes, proof: Any, purpose: str, *parts: bytes | str) -> bool:
    return isinstance(proof, str) and hmac.compare_digest(proof, sign(secret, purpose, *parts))
