"""What the workers of the hostile-peer and stopped-process jobs run (importable by spawned
processes), and the hostile client that attacks a live job from the test process."""

from __future__ import annotations

import os
import secrets
import struct
import time
from typing import Any

import torch
import zmq

from mxtorch.kvstore.ps import protocol as P
from mxtorch.kvstore.ps.protocol import Command, Flag, Message

_STOP_LIMIT_S = 240.0  # a worker that never learns when to stop gives up (the test fails on its values)


def push_until_told(folder: str) -> dict[str, Any]:
    """dist_sync push/pull of two keys every step until the test names the last step (file 'stop');
    rank 0 reports its progress (file 'progress').  Returns every pulled value and its true sum."""
    import mxtorch as mx

    kv = mx.kv.create("dist_sync")
    rank, n = kv.rank, kv.num_workers
    kv.init("w", torch.zeros(4))
    kv.init(7, torch.zeros(3, 5))
    out_w, out_7 = torch.zeros(4), torch.zeros(3, 5)
    wrong: list[tuple[int, str, list[float], float]] = []
    step, last, start = 0, None, time.monotonic()
    while last is None or step < last:
        step += 1
        kv.push("w", torch.full((4,), float((rank + 1) * step)))
        kv.pushpull(7, torch.full((3, 5), float(rank + 10)), out=out_7)
        kv.pull("w", out=out_w)
        want_w = float(sum((r + 1) * step for r in range(n)))
        want_7 = float(sum(r + 10 for r in range(n)))
        if not torch.equal(out_w, torch.full((4,), want_w)):
            wrong.append((step, "w", out_w.tolist(), want_w))
        if not torch.equal(out_7, torch.full((3, 5), want_7)):
            wrong.append((step, "7", out_7.flatten().tolist(), want_7))
        if rank == 0:
            _write(os.path.join(folder, "progress"), str(step))
        if last is None and os.path.exists(os.path.join(folder, "stop")):
            last = max(step, int(open(os.path.join(folder, "stop")).read()))
        if last is None and time.monotonic() - start > _STOP_LIMIT_S:
            last = step  # the workers may now disagree: the job fails, and the test with it
        time.sleep(0.01)
    return {"steps": step, "wrong": wrong[:5]}


def _write(path: str, text: str) -> None:
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


# ---- the hostile client -----------------------------------------------------------------------
def _header(command: int, flags: int = 0, tensors: tuple[tuple[int, tuple[int, ...]], ...] = (),
            sender: int = 9, shard: int = 0) -> bytes:
    head = struct.pack("<4sBBHQiIqB", P.MAGIC, P.PROTOCOL_VERSION, command, flags, 1, sender, shard, 0,
                       len(tensors))
    for code, shape in tensors:
        head += struct.pack("<BB", code, len(shape)) + struct.pack(f"<{len(shape)}q", *shape)
    return head


def random_bytes() -> list[list[bytes]]:
    junk = [os.urandom(n) for n in (1, 7, 33, 200, 5000)]
    return [[j] for j in junk] + [junk[:3], [b"MXPS" + os.urandom(40), b"", b"{"],
                                  [_header(int(Command.PUSH))[:-3]], [b"", b""]]


def nested_json() -> list[list[bytes]]:
    meta = int(Flag.META)
    out = []
    for command in (Command.REGISTER, Command.HELLO, Command.KEY_CHECK, Command.BARRIER, Command.PUSH):
        for body in (b"[" * 100_000, b'{"a":' * 50_000, b'{"role": [' * 20_000, b"\xff\xfe",
                     b'{"role":"worker","worker_id":[[[[1]]]],"mode":"sync"}',
                     b'{"role":"server","server_id":1e308}', b'{"rank":{"a":[]},"staleness":-1}',
                     b'{"keys":[[1,2,3]],"group":[[0]]}', b'{"node_id":"x","timeout":NaN}'):
            out.append([_header(int(command), meta), b"sw", body])
    return out


def huge_shapes() -> list[list[bytes]]:
    out = []
    for command in (Command.PUSH, Command.INIT, Command.PUSHPULL, Command.ROW_PULL, Command.KEY_CHECK,
                    Command.REGISTER):
        for shape in ((0, 2**62, 2**62), (2**62, 2**62), (-1, 4), (2**63 - 1,), (3,) * 200, (1 << 40, 0)):
            head = _header(int(command), tensors=((0, shape),))
            out.append([head, b"sw", b"\0" * 16])
        out.append([_header(int(command), tensors=((200, (4,)),)), b"sw", b"\0" * 16])  # unknown dtype
        out.append([_header(int(command), tensors=((0, (4,)),) * 255), b"sw"])  # frames missing
    return out


def big_frame() -> list[list[bytes]]:
    return [[_header(int(Command.PUSH), tensors=((0, (64 << 20,)),)), b"sw", bytes(256 << 20)]]


def forged_claims(server_nonce: str | None = None) -> list[list[bytes]]:
    """REGISTERs claiming live ranks (scheduler), a HELLO claiming worker 0 and PUSHes (server)."""
    frames = []
    for meta in ({"role": "worker", "worker_id": 0, "mode": "sync", "host": "h", "pid": 1, "nonce": "n"},
                 {"role": "server", "server_id": 0, "host": "h", "pid": 1, "nonce": "n"},
                 {"role": "worker", "mode": "async", "host": "h", "pid": 1, "nonce": "n"}):
        frames.append(P.encode(Message(Command.REGISTER, meta=meta)))
    frames.append(P.encode(Message(Command.READY, sender=P.server_node(0),
                                   meta={"address": "tcp://127.0.0.1:9", "nonce": "n"})))
    frames.append(P.encode(Message(Command.HELLO, sender=P.worker_node(0), meta={"rank": 0, "hmac": "00"})))
    frames.append(P.encode(Message(Command.HELLO, sender=P.worker_node(0), meta={"rank": 0})))
    for key, value in (("w", torch.full((4,), 1000.0)), (7, torch.full((3, 5), 1000.0))):
        push = Message(Command.PUSH, sender=P.worker_node(0), key=key, tensors=[value])
        frames.append([bytes(f) for f in P.encode(push)])
        pull = Message(Command.PUSHPULL, sender=P.worker_node(0), key=key, tensors=[value])
        frames.append([bytes(f) for f in P.encode(pull)])
    return [[bytes(f) for f in m] for m in frames]


ATTACKS = {"random_bytes": random_bytes, "nested_json": nested_json, "huge_shapes": huge_shapes,
           "big_frame": big_frame, "forged_claims": forged_claims}


def attack(address: str, messages: list[list[bytes]], connections: int = 2, wait_s: float = 0.5) -> int:
    """Send ``messages`` to ``address`` over ``connections`` fresh DEALER connections (each with a
    random identity); return how many replies came back (ERRORs, a CHALLENGE) within ``wait_s``."""
    ctx = zmq.Context()
    socks = []
    try:
        for _ in range(connections):
            s = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 2000)
            s.setsockopt(zmq.IDENTITY, b"evil-" + secrets.token_hex(4).encode())
            s.connect(address)
            socks.append(s)
        for s in socks:
            for frames in messages:
                s.send_multipart(frames, copy=len(frames[-1]) < (1 << 20))
        replies, deadline = 0, time.monotonic() + wait_s
        while time.monotonic() < deadline:
            for s in socks:
                while s.poll(10):
                    s.recv_multipart()
                    replies += 1
        return replies
    finally:
        for s in socks:
            s.close()
        ctx.term()


def init_over_the_message_limit() -> dict[str, str]:
    """kv.init of a key slice, and of a key list, larger than MXTORCH_PS_MAX_MESSAGE_BYTES (set to
    4096 by the test): both refused at once, naming the variable; the store still works."""
    import mxtorch as mx
    from mxtorch.kvstore import KVStoreError

    kv = mx.kv.create("dist_sync")
    errors = {}
    for what, keys, values in (("slice", "big", torch.zeros(2048)),
                               ("keys", [f"k{i}" for i in range(300)], [torch.zeros(1)] * 300)):
        try:
            kv.init(keys, values)
            errors[what] = "no error"
        except KVStoreError as e:
            errors[what] = str(e)
    kv.init("small", torch.zeros(4))
    kv.push("small", torch.ones(4))
    out = torch.zeros(4)
    kv.pull("small", out=out)
    errors["value"] = str(out.tolist())
    return errors
