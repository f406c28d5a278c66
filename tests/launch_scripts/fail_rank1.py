"""Worker for tests/test_launch.py: rank 1 raises while rank 0 waits for it in an all-reduce.

``--record`` wraps the entry point in torch's ``@record`` (the traceback then travels through
torch's error file); ``--first-attempt-only`` fails only before the first restart.
"""

import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


def load_shard(rank: int) -> None:
    raise ValueError(f"shard {rank} is corrupt")


def main() -> None:
    dist.init_process_group("gloo")
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if dist.get_rank() == 1 and not ("--first-attempt-only" in sys.argv and attempt > 0):
        load_shard(1)
    t = torch.ones(1)
    dist.all_reduce(t)  # rank 0 blocks here until the launcher stops it
    print(f"rank {os.environ['RANK']} finished attempt {attempt}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    (record(main) if "--record" in sys.argv else main)()
