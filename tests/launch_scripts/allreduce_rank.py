"""Worker for tests/test_launch*.py: all-reduces rank + 1 over gloo and prints what it sees."""

import os

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    names = ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "DMLC_ROLE", "DMLC_NUM_WORKER", "DMLC_NUM_SERVER", "EXTRA")
    if os.environ.get("REPORT_VARS"):  # a test asks for other variables (tests/test_launch_flags.py)
        names = tuple(os.environ["REPORT_VARS"].split(","))
    seen = " ".join(f"{k}={os.environ.get(k)}" for k in names)
    print(f"rank={rank} world={world} sum={total.item():g} {seen}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
