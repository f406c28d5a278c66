"""A worker of ``mxtorch launch -n 1 -s 1`` (tests/test_launch_secret.py) that, once it has joined,
starts a process of its own without the job's secret, which tries to join the same job three
ways, then pushes and pulls to show that the job went on:

* as a worker without MXTORCH_PS_SECRET (the scheduler must challenge it; it cannot answer);
* as a worker with a wrong secret (it sees that the scheduler does not know its secret);
* by hand, answering the scheduler's challenge with a made-up proof (the scheduler must refuse).

Prints one line each: ``intruder ...: refused: <error>`` or ``intruder ...: JOINED``.
"""

import os
import subprocess
import sys

import torch

import mxtorch as mx

NAME = "MXTORCH_PS_SECRET"


def _try(variables: dict) -> str:
    from mxtorch.kvstore.ps.config import PSConfig
    from mxtorch.kvstore.ps.worker import DistKVStore

    try:
        DistKVStore("dist_sync", config=PSConfig.from_env(variables)).close()
    except Exception as e:  # noqa: BLE001 - the refusal is what is reported
        return f"refused: {type(e).__name__}: {e}"
    return "JOINED"


def _forged_proof(variables: dict) -> str:
    import zmq

    from mxtorch.kvstore.ps.config import PSConfig
    from mxtorch.kvstore.ps.protocol import Command, Message, recv, send

    cfg = PSConfig.from_env(variables)
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(cfg.root_address)
    meta = {"role": "worker", "mode": "sync", "host": "intruder", "pid": os.getpid(), "nonce": "00" * 16}
    send(sock, Message(Command.REGISTER, meta=meta))
    replies = []
    for answer in ({**meta, "hmac": "ab" * 32}, None):
        if not sock.poll(30_000):
            return "no answer from the scheduler"
        _, msg = recv(sock)
        replies.append(msg.command.name)
        if msg.command != Command.CHALLENGE or answer is None:
            break
        send(sock, Message(Command.REGISTER, meta=answer))
    sock.close(0)
    last = msg.meta.get("message", "") if msg.meta else ""
    return f"refused: {' then '.join(replies)}: {last}" if replies[-1] == "ERROR" else "JOINED"


def intrude() -> None:
    base = {k: v for k, v in os.environ.items() if k != NAME}
    base["MXTORCH_DIST_TIMEOUT"] = "30"
    print(f"intruder without a secret: {_try(base)}", flush=True)
    print(f"intruder with a wrong secret: {_try({**base, NAME: 'not-the-secret'})}", flush=True)
    print(f"intruder with a forged proof: {_forged_proof(base)}", flush=True)


def main() -> None:
    if sys.argv[1:] == ["--intrude"]:
        intrude()
        return
    kv = mx.kv.create("dist_sync")
    env = {k: v for k, v in os.environ.items() if k != NAME}
    r = subprocess.run([sys.executable, __file__, "--intrude"], env=env, capture_output=True, text=True,
                       timeout=120)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr[-2000:])
    x = torch.zeros(2)
    kv.init(0, x)
    kv.push(0, torch.ones(2))
    kv.pull(0, out=x)
    print(f"job: sum={x.tolist()}", flush=True)


if __name__ == "__main__":
    main()
