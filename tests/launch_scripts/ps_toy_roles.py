"""Stand-in for a same-command parameter-server job (tests/test_launch_ps.py): every process prints
the variables it got; ``TOY_FAIL`` makes the process whose label (``scheduler``, ``server0``,
``worker1``) it names fail, ``TOY_HANG`` makes scheduler and servers run until killed, and workers
wait ``TOY_WORKER_SLEEP`` seconds before they end."""

import os
import sys
import time

NAMES = ("DMLC_ROLE", "DMLC_NUM_WORKER", "DMLC_NUM_SERVER", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT",
         "DMLC_SERVER_ID", "DMLC_WORKER_ID", "RANK", "EXTRA", "ONLY_SERVERS")


def main() -> None:
    role = os.environ["DMLC_ROLE"]
    label = {"scheduler": "scheduler", "server": "server" + os.environ.get("DMLC_SERVER_ID", "?"),
             "worker": "worker" + os.environ.get("RANK", "?")}[role]
    print(" ".join(f"{k}={os.environ.get(k)}" for k in NAMES), flush=True)
    if os.environ.get("TOY_FAIL") == label:
        print(f"{label}: cannot open the shard map: /nonexistent/shards", file=sys.stderr, flush=True)
        sys.exit(3)
    if role == "worker":
        time.sleep(float(os.environ.get("TOY_WORKER_SLEEP", "0")))
    elif os.environ.get("TOY_HANG"):
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main()
