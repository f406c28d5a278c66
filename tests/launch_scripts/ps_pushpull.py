"""Worker for tests/test_launch_ps.py: pushes rank + 1 to a small key and to a key large enough to
be split over the servers (with MXNET_KVSTORE_BIGARRAY_BOUND=5), pulls both and prints them."""

import os
import sys

import torch

import mxtorch as mx


def main() -> None:
    kv = mx.kv.create(sys.argv[1] if len(sys.argv) > 1 else "dist_sync")
    small, big = torch.zeros(3), torch.zeros(10)
    kv.init([0, "big"], [small, big])
    kv.push([0, "big"], [torch.full((3,), kv.rank + 1.0), torch.arange(10.0) * (kv.rank + 1)])
    kv.pull([0, "big"], out=[small, big])
    print(f"rank={kv.rank} workers={kv.num_workers} servers={kv.num_servers} type={kv.type} "
          f"id={os.environ.get('DMLC_WORKER_ID')} small={small.tolist()} big={big.tolist()}", flush=True)


if __name__ == "__main__":
    main()
