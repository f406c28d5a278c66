"""The rendezvous store of an elastic job as its own process: ``python -m mxtorch.elastic.store``.

Used where the launcher cannot host the store itself (the emulated cluster: the launcher's
namespace is not reachable from the hosts).  Hosts a TCPStore on ``--addr:--port``, writes the
job description read from stdin (JSON, :class:`.env.ElasticJob`), prints ``ready HOST:PORT`` and
serves until it receives SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from datetime import timedelta

from .env import JOB_KEY, ElasticJob


def main(argv: list[str] | None = None) -> int:
    from torch.distributed import TCPStore

    p = argparse.ArgumentParser(prog="python -m mxtorch.elastic.store", description=__doc__)
    p.add_argument("--addr", required=True)
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args(argv)
    job = ElasticJob.from_json(sys.stdin.buffer.read(), "stdin")
    store = TCPStore(args.addr, args.port, is_master=True, wait_for_workers=False,
                     timeout=timedelta(seconds=60))
    store.set(JOB_KEY, job.to_json().decode())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"ready {args.addr}:{store.port}", flush=True)
    while not stop.wait(0.5):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
