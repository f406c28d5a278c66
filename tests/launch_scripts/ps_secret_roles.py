"""Every process of a same-command job (tests/test_launch_secret.py) reports what it knows of the job's
secret, without printing it: ``role=LABEL secret=<sha256 prefix> in_argv=<bool>``.

Worker rank 0 also looks through /proc for every process whose environment holds the same secret
(the job's scheduler, servers and workers) and prints ``found=N leaked=M`` (M: how many of them
carry it on their command line), then writes ``SECRET_TEST_DONE``, which lets the scheduler and
the servers end.  No torch: the processes start fast.
"""

import hashlib
import os
import time

NAME = "MXTORCH_PS_SECRET"


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:  # the process ended meanwhile, or is not ours
        return b""


def holders(secret: bytes) -> dict[int, bytes]:
    """pid -> command line of each process whose initial environment holds ``NAME=secret``."""
    entry = NAME.encode() + b"=" + secret
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if entry in _read(f"/proc/{pid}/environ").split(b"\0"):
            out[int(pid)] = _read(f"/proc/{pid}/cmdline")
    return out


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())  # one write: lines of processes sharing stdout never mix


def main() -> None:
    role = os.environ["DMLC_ROLE"]
    label = {"scheduler": "scheduler", "server": "server" + os.environ.get("DMLC_SERVER_ID", "?"),
             "worker": "worker" + os.environ.get("RANK", "?")}[role]
    secret = os.environ.get(NAME, "").encode()
    digest = hashlib.sha256(secret).hexdigest()[:16] if secret else "none"
    own = _read("/proc/self/cmdline") + _read(f"/proc/{os.getppid()}/cmdline")
    say(f"role={label} secret={digest} in_argv={bool(secret) and secret in own}")
    done = os.environ["SECRET_TEST_DONE"]
    if role != "worker" or (os.environ.get("RANK") != "0" and secret):
        # stay until worker 0 has scanned /proc (it writes SECRET_TEST_DONE); generous, because the
        # workers' torchrun may start long after the scheduler and servers on a busy machine; the
        # other workers stay too (a CI run's scan missed worker 1, which had already ended)
        deadline = time.monotonic() + 300
        while not os.path.exists(done) and time.monotonic() < deadline:
            time.sleep(0.05)
        return
    if os.environ.get("RANK") != "0" or not secret:
        return
    expected = int(os.environ["DMLC_NUM_SERVER"]) + int(os.environ["DMLC_NUM_WORKER"]) + 1
    deadline = time.monotonic() + 60
    found = holders(secret)
    while len(found) < expected and time.monotonic() < deadline:  # the others may still be starting
        time.sleep(0.1)
        found = holders(secret)
    leaked = [pid for pid, argv in found.items() if secret in argv]
    say(f"found={len(found)} leaked={len(leaked)}")
    with open(done, "w") as f:
        f.write("done")


if __name__ == "__main__":
    main()
