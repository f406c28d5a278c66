"""MXNet 1.9.1's own dist_sync push+pull, run under MXNet's virtual environment for bench/ps.py.

bench/ps.py starts this script once per role with the MXNet venv's python (``--mxnet-python``,
default ``.venv-mxnet/bin/python``) and the DMLC_* variables of a job on 127.0.0.1, as MXNet's
"manually launching jobs" documentation describes: with ``DMLC_ROLE=server`` or ``scheduler``
``import mxnet`` serves that role until the job ends and exits the process; the worker
initializes every layout's keys, pushes and pulls them (``--reps`` times per round, waiting
for the pulled values) and prints one JSON object: layout index -> seconds per push+pull,
one value per round.  Make the venv with:

    python3 -m venv .venv-mxnet && .venv-mxnet/bin/pip install mxnet==1.9.1 "numpy<1.24"
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layouts", required=True, help="JSON: a list of layouts, each a list of key sizes")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    import mxnet as mx  # a server or the scheduler serves here and exits

    layouts = json.loads(args.layouts)
    kv = mx.kv.create("dist_sync")
    out = {}
    first_key = 0
    for li, numels in enumerate(layouts):
        keys = list(range(first_key, first_key + len(numels)))
        first_key += len(numels)
        vals = [mx.nd.random.uniform(shape=(n,)) for n in numels]
        outs = [mx.nd.zeros((n,)) for n in numels]
        kv.init(keys, [mx.nd.zeros((n,)) for n in numels])

        def push_pull(keys: list[int] = keys, vals: list = vals, outs: list = outs) -> None:  # type: ignore[type-arg]
            kv.push(keys, vals)
            kv.pull(keys, out=outs)
            mx.nd.waitall()

        push_pull()  # warm-up, and a check that the bytes really travel
        for v, o in zip(vals, outs):
            if not (v == o).asnumpy().all():
                raise SystemExit("MXNet dist_sync pulled values other than the pushed ones")
        push_pull()
        times = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            for _ in range(args.reps):
                push_pull()
            times.append((time.perf_counter() - t0) / args.reps)
        out[str(li)] = times
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
