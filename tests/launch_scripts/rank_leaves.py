"""Worker for tests/test_worker_failure.py: rank 1 leaves the job while rank 0 waits for it.

``python rank_leaves.py STORE HOW WHERE``: STORE is the KVStore ('allreduce', 'dist_sync', ...);
HOW is how rank 1 leaves: ``exit3`` (``sys.exit(3)``), ``raise`` (an uncaught exception),
``kill`` (SIGKILL to itself) or ``early`` (rank 0 finishes first and rank 1 exits normally a
moment later, after which the job must still succeed); WHERE is what rank 0 waits in: ``pushpull``
(an all-reduce or a parameter-server round) or ``barrier``.
"""

import os
import signal
import sys
import time

import torch

import mxtorch as mx


def main() -> None:
    store, how, where = sys.argv[1:4]
    kv = mx.kv.create(store)
    t = torch.ones(2)
    kv.init(0, t)
    kv.pushpull(0, t, out=t)  # everyone is up
    print(f"rank {kv.rank} ready", flush=True)
    if kv.rank == 1:
        time.sleep(1)  # rank 0 is waiting by now
        print(f"rank 1 leaves at {time.time():.3f}", flush=True)  # the test times the job's end from here
        if how == "exit3":
            sys.exit(3)
        if how == "raise":
            raise ValueError("rank 1 gives up")
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(1)  # how == "early": rank 0 already waits at exit
        print("rank 1 done", flush=True)
        return
    if how == "early":
        print("rank 0 done", flush=True)
        return
    if where == "barrier":
        kv.barrier()
    else:
        kv.pushpull(0, t, out=t)
    print("rank 0 should not get here", flush=True)


if __name__ == "__main__":
    main()
