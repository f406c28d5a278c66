"""Worker for tests/test_ps_elastic.py's `mxtorch launch --elastic 2:3 -n 2 -s 1` job (dist_sync, no
optimizer: a round stores the sum of its pushes).  Each step pushes rank + 1 to 'w' and, from rank 0
at step STEPS, 1 to 'stop'; every worker stops at the round whose 'stop' is 1.  Rank 1 dies after
step 2 (the launcher starts a replacement, rank 2); rank 0 waits until the job is ranks 0 and 2, and
after step 4 kills the server (the launcher starts it again from its snapshot)."""

import os
import signal
import sys
import time

import torch

import mxtorch as mx

STEPS = 6


def server_pids(port: str) -> list[int]:
    """This job's server processes (Linux: their environment names the job's scheduler port)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        except OSError:
            continue
        if env.get(b"DMLC_ROLE") == b"server" and env.get(b"DMLC_PS_ROOT_PORT") == port.encode():
            found.append(int(pid))
    return found


def wait_for_replacement(kv) -> None:
    """Until rank 1 is gone and its replacement has joined (the job is two workers again)."""
    deadline = time.monotonic() + 120
    while kv.num_workers != 2 or 1 in kv._client.members:
        if time.monotonic() > deadline:
            sys.exit("the replacement worker did not join")
        time.sleep(0.05)


def main() -> None:
    kv = mx.kv.create("dist_sync")
    w, stop = torch.zeros(4), torch.zeros(1)
    kv.init(["w", "stop"], [w, stop])
    step = 0
    while True:
        step += 1
        if kv.rank == 0 and step == 3:
            wait_for_replacement(kv)
        last = float(kv.rank == 0 and step == STEPS)
        kv.push(["w", "stop"], [torch.full((4,), kv.rank + 1.0), torch.tensor([last])])
        kv.pull(["w", "stop"], out=[w, stop])
        print(f"rank={kv.rank} step={step} w={w[0].item():g} workers={kv.num_workers}", flush=True)
        if stop[0] > 0:
            break
        if kv.rank == 1 and step == 2:
            os._exit(3)
        if kv.rank == 0 and step == 4:
            for pid in server_pids(os.environ["DMLC_PS_ROOT_PORT"]):
                os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
