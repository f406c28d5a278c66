"""What ZeroMQ's CURVE encryption costs against plain ZeroMQ: part ``curve`` of bench/ps.py.

One echo process holds two ROUTER sockets on 127.0.0.1, a plain one and a CURVE server
(``zmq.curve_keypair``; its secret key reaches it on stdin, not on its command line); this
process sends messages of each size through a DEALER to each and waits for them to come back
(zero-copy both ways, as the parameter server sends tensors).  Rounds interleave the two (the
order alternates); each figure is the median over rounds.  GB/s counts the bytes sent plus the
bytes received.  The hand-written HMAC handshake of the parameter server costs nothing per
message (one proof per connection), so plain ZeroMQ is also its cost.

The libsodium in pyzmq's wheel may be built without the optimized code paths, so where the
operating system has its own libsodium the part runs a second time with that one preloaded
(``LD_PRELOAD``): the cost of CURVE depends on the build more than on ZeroMQ.

    python bench/_curve.py                      # the part alone; bench/ps.py --parts curve runs it too
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

MiB = 1 << 20
DEFAULT_SIZES_KIB = (4, 1024, 16 * 1024, 64 * 1024)
_BYTES_PER_TIMING = 32 * MiB  # each timing moves about this much one way (at least 2, at most 300 messages)


def _echo() -> None:
    """The echo process: secret key on stdin, ``{"plain": port, "curve": port}`` on stdout."""
    import zmq

    keys = json.loads(sys.stdin.readline())
    ctx = zmq.Context()
    plain, curve = ctx.socket(zmq.ROUTER), ctx.socket(zmq.ROUTER)
    curve.curve_server = True
    curve.curve_secretkey = keys["secret"].encode()
    ports = {"plain": plain.bind_to_random_port("tcp://127.0.0.1"),
             "curve": curve.bind_to_random_port("tcp://127.0.0.1")}
    print(json.dumps(ports), flush=True)
    poller = zmq.Poller()
    poller.register(plain, zmq.POLLIN)
    poller.register(curve, zmq.POLLIN)
    while True:  # until the bench kills it
        for sock, _ in poller.poll():
            sock.send_multipart(sock.recv_multipart(copy=False), copy=False)


def _round_trips(sock: Any, payload: Any, count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        sock.send(payload, copy=False)
        sock.recv(copy=False)
    return time.perf_counter() - start


def measure(sizes_kib: tuple[int, ...] = DEFAULT_SIZES_KIB, rounds: int = 5,
            timeout: float = 600.0) -> list[dict[str, float]]:
    """Per size: plain and CURVE GB/s (medians) and their ratio; raises if CURVE is missing."""
    import zmq

    if not zmq.has("curve"):
        raise RuntimeError("this libzmq has no CURVE support (zmq.has('curve') is False)")
    server_public, server_secret = zmq.curve_keypair()
    client_public, client_secret = zmq.curve_keypair()
    echo = subprocess.Popen([sys.executable, __file__, "--echo"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    ctx = zmq.Context()
    try:
        assert echo.stdin is not None and echo.stdout is not None
        echo.stdin.write(json.dumps({"secret": server_secret.decode()}) + "\n")
        echo.stdin.flush()
        ports = json.loads(echo.stdout.readline())
        plain, curve = ctx.socket(zmq.DEALER), ctx.socket(zmq.DEALER)
        curve.curve_serverkey, curve.curve_publickey, curve.curve_secretkey = (server_public, client_public,
                                                                               client_secret)
        for s in (plain, curve):
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.RCVTIMEO, int(timeout * 1000))
        plain.connect(f"tcp://127.0.0.1:{ports['plain']}")
        curve.connect(f"tcp://127.0.0.1:{ports['curve']}")
        socks = {"plain": plain, "curve": curve}
        rows = []
        for kib in sizes_kib:
            size = kib * 1024
            payload = zmq.Frame(bytes(size))
            count = max(2, min(300, _BYTES_PER_TIMING // size))
            for s in socks.values():  # connect, handshake, warm up
                _round_trips(s, payload, 2)
            times: dict[str, list[float]] = {"plain": [], "curve": []}
            for r in range(rounds):
                for name in (("plain", "curve") if r % 2 == 0 else ("curve", "plain")):
                    times[name].append(_round_trips(socks[name], payload, count))
            gbs = {n: 2 * size * count / statistics.median(t) / 1e9 for n, t in times.items()}
            rows.append({"size": size, "messages": count, "plain": gbs["plain"], "curve": gbs["curve"],
                         "ratio": statistics.median(p / c for p, c in zip(times["plain"], times["curve"])),
                         "plain_us": statistics.median(times["plain"]) / count * 1e6,
                         "curve_us": statistics.median(times["curve"]) / count * 1e6})
        return rows
    finally:
        ctx.destroy(linger=0)
        echo.kill()
        echo.wait()


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n // 1024} KiB"


def _sodium_maps() -> list[str]:
    """The libsodium files this process has mapped (which one CURVE runs on)."""
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f if "sodium" in line})


def _system_sodium() -> str | None:
    """A libsodium of the operating system, to preload in place of the one in pyzmq's wheel."""
    import ctypes.util

    name = ctypes.util.find_library("sodium")
    if name is None:
        return None
    for folder in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib"):
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    return None


def run(sizes_kib: tuple[int, ...] = DEFAULT_SIZES_KIB, rounds: int = 5, timeout: float = 600.0) -> None:
    """Measure and print: with the libsodium pyzmq ships, then (where the system has one) with the
    system's libsodium preloaded in its place; each in a fresh process with its own plain figures."""
    variants: list[tuple[str, dict[str, str]]] = [("pyzmq's own libsodium", {})]
    system = _system_sodium()
    if system is not None:
        variants.append((f"system libsodium ({system}, LD_PRELOAD)", {"LD_PRELOAD": system}))
    print("\n(d) ZeroMQ CURVE encryption against plain ZeroMQ: round trips on 127.0.0.1, one echo process")
    for title, extra in variants:
        sizes = ",".join(map(str, sizes_kib))
        args = [sys.executable, __file__, "--measure", sizes, str(rounds), str(timeout)]
        r = subprocess.run(args, env={**os.environ, **extra}, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            print(f"CURVE with {title}: failed: {r.stderr.strip()[-500:]}")
            continue
        result = json.loads(r.stdout)
        print(f"CURVE with {title}; mapped: {', '.join(result['sodium']) or 'none'}")
        print(f"{'size':>8} {'msgs':>5} {'plain GB/s':>11} {'CURVE GB/s':>11} {'CURVE/plain':>12} "
              f"{'plain us':>10} {'CURVE us':>10}")
        for row in result["rows"]:
            print(f"{_size(int(row['size'])):>8} {int(row['messages']):>5} {row['plain']:>11.3f} "
                  f"{row['curve']:>11.3f} {row['ratio']:>12.2f} {row['plain_us']:>10.0f} "
                  f"{row['curve_us']:>10.0f}")
    print("GB/s: bytes sent + received per second (medians over interleaved rounds); CURVE/plain: the median "
          "of plain time / CURVE time per round (1.0: free).  The parameter server's HMAC handshake costs "
          "one proof per connection, nothing per message: its data path runs at the plain figures.")


if __name__ == "__main__":
    if sys.argv[1:] == ["--echo"]:
        _echo()
    elif sys.argv[1:2] == ["--measure"]:
        sizes, rounds_, limit = sys.argv[2:5]
        rows_ = measure(tuple(int(x) for x in sizes.split(",")), int(rounds_), float(limit))
        print(json.dumps({"rows": rows_, "sodium": _sodium_maps()}))
    else:
        run()
