"""A Module job for ``mxtorch launch -n 2 python launch_module_job.py OUT_DIR``
(tests/test_module_distributed.py).

Each rank trains the test MLP on its half of every global batch through the 'horovod' store and
writes ``OUT_DIR/rank<R>.pt`` with its parameters.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS))

import test_module_distributed as tmd  # noqa: E402


def main() -> None:
    out = Path(sys.argv[1])
    res = tmd.train_half("horovod", False)
    import mxtorch as mx

    world = mx.kv.create("horovod").num_workers
    torch.save({"params": res["params"], "rank": res["rank"], "world": world}, out / f"rank{res['rank']}.pt")


if __name__ == "__main__":
    main()
