"""Worker for tests/test_ps_elastic.py's `mxtorch launch --elastic 2:3 -n 2 -s 1` dist_async job (SGD
with learning rate 1 on the servers: every push of ones moves 'w' by -1, applied as it arrives).
Rank 1 pushes twice and dies (the launcher starts a replacement, rank 2, which pushes 4 times); rank 0
pushes 6 times, waiting after its second push until the job is ranks 0 and 2, and kills the server
after its third (the launcher starts it again from its snapshot and log).  Every push is followed by a
pull, so it has been applied before the next step.  The live workers then meet at a barrier and
print the value: -(6 + 2 + 4) = -12 when every push counted once."""

import os
import signal

import torch
from ps_elastic_job import server_pids, wait_for_replacement

import mxtorch as mx


def main() -> None:
    kv = mx.kv.create("dist_async")
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=1.0))
    w = torch.zeros(4)
    kv.init("w", w)
    steps = {0: 6, 1: 2}.get(kv.rank, 4)
    for step in range(1, steps + 1):
        kv.push("w", torch.ones(4))
        kv.pull("w", out=w)
        print(f"rank={kv.rank} step={step} w={w[0].item():g}", flush=True)
        if kv.rank == 1 and step == 2:
            os._exit(3)
        if kv.rank == 0 and step == 2:
            wait_for_replacement(kv)
        if kv.rank == 0 and step == 3:
            for pid in server_pids(os.environ["DMLC_PS_ROOT_PORT"]):
                os.kill(pid, signal.SIGKILL)
    kv.barrier()
    kv.pull("w", out=w)
    print(f"rank={kv.rank} final={w[0].item():g}", flush=True)


if __name__ == "__main__":
    main()
