"""Hostile packets for bench/soak.py: what a stranger on the network sends a parameter server.

:func:`packets` draws the messages (from a seed) and :func:`send_all` sends them to a job's
scheduler and servers, from inside a cluster host (``python bench/soak.py --hostile SPEC``):

* ``random``: multipart messages of random bytes;
* ``malformed``: headers that break the wire format one field at a time (magic, version,
  command, truncated tensor descriptions, absurd shapes and dtypes, a key frame that is not a
  key, JSON nested 100,000 deep, a META frame that is not JSON);
* ``forged``: well-formed messages from a node that never joined (a REGISTER claiming server
  0's rank with no proof of the job's secret, a PUSH of a plausible gradient, a SHUTDOWN);
* ``oversize``: a 64 MiB frame of junk, a header declaring a 1 GiB tensor with 8 bytes of data,
  and, on a raw TCP connection, a ZMTP frame header declaring 2**40 bytes;
* ``raw``: bytes that are not ZMTP at all, on a plain TCP connection.

Nothing here may stop a job: a server must refuse each message with its own error (or ignore
it) and keep serving; whether it did is what the soak checks afterwards.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "Packet", "packets", "send_all"]

KINDS = ("random", "malformed", "forged", "oversize", "raw")
_FIXED = struct.Struct("<4sBBHQiIqB")  # the parameter server's fixed header (protocol.py)
_OVERSIZE_BYTES = 64 << 20


@dataclass(frozen=True)
class Packet:
    """One hostile message: ZeroMQ ``frames`` (sent by a DEALER), or ``raw`` bytes over plain TCP."""

    kind: str
    what: str
    frames: tuple[bytes, ...] = ()
    raw: bytes = b""


def _header(command: int, *, magic: bytes = b"MXPS", version: int | None = None, flags: int = 0,
            sender: int = 99, arg: int = 0, tensors: tuple[tuple[int, tuple[int, ...]], ...] = ()) -> bytes:
    from mxtorch.kvstore.ps.protocol import PROTOCOL_VERSION

    v = PROTOCOL_VERSION if version is None else version
    head = _FIXED.pack(magic, v, command, flags, 1, sender, 0, arg, len(tensors))
    for code, shape in tensors:
        head += struct.pack("<BB", code, len(shape)) + struct.pack(f"<{len(shape)}q", *shape)
    return head


def _malformed(rng: random.Random) -> list[Packet]:
    from mxtorch.kvstore.ps.protocol import Command, Flag

    push, meta = int(Command.PUSH), Flag.META
    good = _header(push, tensors=((0, (4,)),))
    register = _header(int(Command.REGISTER), flags=meta)
    return [
        Packet("malformed", "wrong magic", (_header(push, magic=b"XXXX"), b"i0")),
        Packet("malformed", "other protocol version", (_header(push, version=250), b"i0")),
        Packet("malformed", "unknown command 250", (_header(250), b"")),
        Packet("malformed", "truncated header", (good[:7], b"i0")),
        Packet("malformed", "one frame only", (good,)),
        Packet("malformed", "255 tensors announced, none described",
               (_FIXED.pack(b"MXPS", 2, push, 0, 1, 99, 0, 0, 255), b"i0")),
        Packet("malformed", "shape 2**62 x 2**62", (_header(push, tensors=((0, (2**62, 2**62)),)), b"i0",
                                                    bytes(16))),
        Packet("malformed", "negative dimension", (_header(push, tensors=((0, (-5, 3)),)), b"i0", bytes(60))),
        Packet("malformed", "dtype code 200", (_header(push, tensors=((200, (4,)),)), b"i0", bytes(16))),
        Packet("malformed", "255 dimensions of 1",
               (_header(push, tensors=((0, (1,) * 255),)), b"i0", bytes(4))),
        Packet("malformed", "data frame shorter than its shape", (good, b"i0", bytes(3))),
        Packet("malformed", "key frame not a key", (good, b"z" + rng.randbytes(30), bytes(16))),
        Packet("malformed", "str key of invalid utf-8", (good, b"s\xff\xfe\xfd", bytes(16))),
        Packet("malformed", "int key of 5000 digits", (good, b"i" + b"9" * 5000, bytes(16))),
        Packet("malformed", "META of JSON nested 100,000 deep", (register, b"", b"[" * 100_000)),
        Packet("malformed", "META not JSON", (register, b"", rng.randbytes(64))),
        Packet("malformed", "META a JSON list", (register, b"", b"[1,2,3]")),
    ]


def _forged(rng: random.Random) -> list[Packet]:
    import json

    from mxtorch.kvstore.ps.protocol import Command, Flag

    register = json.dumps({"role": "server", "server_id": 0, "host": "intruder", "pid": 1,
                           "nonce": rng.randbytes(16).hex()}).encode()
    return [
        Packet("forged", "REGISTER as server 0 without the secret",
               (_header(int(Command.REGISTER), flags=Flag.META), b"", register)),
        Packet("forged", "HEARTBEAT from a stranger", (_header(int(Command.HEARTBEAT)), b"")),
        Packet("forged", "BARRIER from a stranger", (_header(int(Command.BARRIER), sender=9), b"")),
        Packet("forged", "PUSH of a gradient without HELLO",
               (_header(int(Command.PUSH), sender=9, tensors=((0, (10,)),)), b"i0",
                struct.pack("<10f", *(1e6 for _ in range(10))))),
        Packet("forged", "PULL without HELLO", (_header(int(Command.PULL), sender=9), b"i0")),
        Packet("forged", "SHUTDOWN from a stranger", (_header(int(Command.SHUTDOWN), sender=1), b"")),
    ]


def _zmtp_long_frame(declared: int) -> bytes:
    """A ZMTP 3.0 NULL-mechanism greeting, a READY for a DEALER, then a frame header declaring
    ``declared`` bytes (and a few of them)."""
    greeting = b"\xff" + bytes(8) + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00") + b"\x00" + bytes(31)
    prop = b"\x0bSocket-Type" + struct.pack(">I", 6) + b"DEALER"
    ready_body = b"\x05READY" + prop
    ready = b"\x04" + bytes([len(ready_body)]) + ready_body
    return greeting + ready + b"\x02" + struct.pack(">Q", declared) + bytes(64)


def packets(seed: int) -> list[Packet]:
    """Every hostile packet of one burst, drawn from ``seed``."""
    from mxtorch.kvstore.ps.protocol import Command

    rng = random.Random(seed)
    counts = [rng.randint(1, 4) for _ in range(8)]
    out = [Packet("random", f"{n} random frame(s)",
                  tuple(rng.randbytes(rng.randint(0, 2048)) for _ in range(n)))
           for n in counts]
    out += _malformed(rng) + _forged(rng)
    out += [
        Packet("oversize", "one 64 MiB frame of junk", (rng.randbytes(1024) * (_OVERSIZE_BYTES // 1024),)),
        Packet("oversize", "1 GiB tensor declared, 8 bytes sent",
               (_header(int(Command.PUSH), tensors=((0, (1 << 28,)),)), b"i0", bytes(8))),
        Packet("oversize", "ZMTP frame of 2**40 bytes declared", raw=_zmtp_long_frame(1 << 40)),
        Packet("raw", "4 KiB of random bytes over TCP", raw=rng.randbytes(4096)),
        Packet("raw", "an HTTP request", raw=b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
    ]
    return out


def _send_raw(host: str, port: int, data: bytes) -> str:
    try:
        with socket.create_connection((host, port), timeout=3) as s:
            s.sendall(data)
            time.sleep(0.05)
    except OSError as e:
        return f"tcp: {e}"
    return "sent"


def send_all(targets: list[tuple[str, str, int]], seed: int, reply_wait_s: float = 0.5) -> dict[str, Any]:
    """Send every packet of :func:`packets` to each ``(name, host, port)``; returns counts per target."""
    import zmq

    ctx = zmq.Context()
    report: dict[str, Any] = {}
    try:
        for name, host, port in targets:
            sent = replies = 0
            errors: list[str] = []
            sock = ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 2000)
            sock.setsockopt(zmq.IDENTITY, b"intruder-" + random.Random(seed).randbytes(4).hex().encode())
            sock.connect(f"tcp://{host}:{port}")
            for p in packets(seed):
                if p.raw:
                    status = _send_raw(host, port, p.raw)
                    if status != "sent":
                        errors.append(f"{p.what}: {status}")
                    else:
                        sent += 1
                    continue
                try:
                    sock.send_multipart(list(p.frames), copy=len(p.frames[0]) < 65536)
                    sent += 1
                except zmq.ZMQError as e:
                    errors.append(f"{p.what}: {e}")
            deadline = time.monotonic() + reply_wait_s
            while time.monotonic() < deadline:  # answers (errors) are counted, never parsed
                if sock.poll(50):
                    sock.recv_multipart()
                    replies += 1
            sock.close()
            report[name] = {"sent": sent, "replies": replies, "errors": errors}
    finally:
        ctx.term()
    return report
