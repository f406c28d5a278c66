"""Network probes the cluster tests run inside namespace hosts (an iperf-like transfer, a reachability check).

  python net_probe.py sink ADDR PORT            # accept one connection, read to EOF, print JSON
  python net_probe.py source ADDR PORT NBYTES   # connect and send NBYTES
  python net_probe.py connect ADDR PORT SECONDS # exit 0 if a TCP connection opens within SECONDS
  python net_probe.py listen ADDR PORT SECONDS  # accept connections for SECONDS (for `connect`)

Every probe ends by itself: sockets carry timeouts, loops are bounded.
"""

from __future__ import annotations

import json
import socket
import sys
import time

_IO_TIMEOUT_S = 60.0


def sink(addr: str, port: int) -> None:
    with socket.create_server((addr, port)) as srv:
        srv.settimeout(_IO_TIMEOUT_S)
        print("listening", flush=True)
        conn, _ = srv.accept()
        conn.settimeout(_IO_TIMEOUT_S)
        buf = bytearray(1 << 20)
        total, first, last = 0, 0.0, 0.0
        with conn:
            while True:
                n = conn.recv_into(buf)
                if not n:
                    break
                last = time.perf_counter()
                if total == 0:
                    first = last
                total += n
    print(json.dumps({"bytes": total, "seconds": last - first}), flush=True)


def source(addr: str, port: int, nbytes: int) -> None:
    chunk = b"\0" * (1 << 16)
    with socket.create_connection((addr, port), timeout=_IO_TIMEOUT_S) as conn:
        sent = 0
        while sent < nbytes:
            part = chunk[:min(len(chunk), nbytes - sent)]
            conn.sendall(part)
            sent += len(part)


def connect(addr: str, port: int, seconds: float) -> int:
    try:
        with socket.create_connection((addr, port), timeout=seconds):
            return 0
    except OSError as e:
        print(f"no connection: {e}", file=sys.stderr)
        return 1


def listen(addr: str, port: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    with socket.create_server((addr, port)) as srv:
        print("listening", flush=True)
        while time.monotonic() < deadline:
            srv.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                break
            conn.close()


def main(argv: list[str]) -> int:
    mode, addr, port = argv[0], argv[1], int(argv[2])
    if mode == "sink":
        sink(addr, port)
    elif mode == "source":
        source(addr, port, int(argv[3]))
    elif mode == "connect":
        return connect(addr, port, float(argv[3]))
    elif mode == "listen":
        listen(addr, port, float(argv[3]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
