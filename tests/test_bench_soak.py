"""bench/soak.py, the chaos soak: its pieces in-process (option checks, the fault schedule, the
hostile packets reaching a real ZeroMQ socket, step counting, the report's verdict).  The short
soak on a 3-host cluster is tests/cluster/test_cluster_soak.py.  No timings are checked."""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import re
import sys
import threading
from types import ModuleType

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_DIR = os.path.join(ROOT, "bench")
BENCH = os.path.join(BENCH_DIR, "soak.py")


def _load(name: str, path: str) -> ModuleType:
    if BENCH_DIR not in sys.path:
        sys.path.insert(0, BENCH_DIR)  # the soak imports its siblings (_soak_jobs, _soak_hostile) by name
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


soak = _load("bench_soak", BENCH)
hostile = _load("_soak_hostile", os.path.join(BENCH_DIR, "_soak_hostile.py"))
jobs = _load("_soak_jobs", os.path.join(BENCH_DIR, "_soak_jobs.py"))


@pytest.mark.parametrize("argv, message", [
    (["--minutes", "0"], "--minutes must be > 0"),
    (["--hosts", "2"], "at least 3 hosts"),
    (["--jobs", "horovod,allreduce"], "--jobs 'horovod,allreduce'"),
    (["--jobs", "dist_sync,dist_sync"], "each once"),
    (["--faults", "worker-kill,meteor"], "--faults 'worker-kill,meteor'"),
    (["--epochs", "0"], "--epochs must be >= 1"),
    (["--stall-timeout", "-1"], "must be > 0"),
])
def test_misuse_exits_2_naming_the_bench(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        soak.parse_args(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "bench/soak.py: error: " in err and message in err, err


def test_each_round_draws_every_fault_of_its_job_once_from_the_seed():
    hosts = ["h0", "h1", "h2"]
    a = soak.draw_round(random.Random(7), "dist_sync", hosts, 2, 40.0, 3)
    b = soak.draw_round(random.Random(7), "dist_sync", hosts, 2, 40.0, 3)
    assert [(o, f.kind, f.target) for o, f in a] == [(o, f.kind, f.target) for o, f in b]
    assert sorted(f.kind for _, f in a) == sorted(jobs.FAULTS_OF["dist_sync"])
    offsets = [o for o, _ in a]
    assert offsets == sorted(offsets) and all(0.05 * 40 <= o <= 0.7 * 40 for o in offsets)
    for _, f in a:
        assert f.round == 3 and f.job == "dist_sync"
        assert f.target in (["server0", "server1"] if f.kind == "server-kill" else hosts)
    h = soak.draw_round(random.Random(7), "horovod", hosts, 2, 40.0, 1, only=("worker-kill", "partition"))
    assert sorted(f.kind for _, f in h) == ["partition", "worker-kill"]


def test_the_hostile_burst_has_every_kind_and_reaches_a_router():
    import zmq

    packets = hostile.packets(3)
    assert {p.kind for p in packets} == set(hostile.KINDS)
    assert [p.what for p in packets] == [p.what for p in hostile.packets(3)]
    assert max(len(f) for p in packets for f in p.frames) >= 64 << 20  # an oversize frame
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    received: list[int] = []

    def serve() -> None:  # count what arrives, answer each message once (as a server's ERROR would)
        while router.poll(3000):
            frames = router.recv_multipart()
            received.append(len(frames))
            router.send_multipart([frames[0], b"refused"])

    t = threading.Thread(target=serve)
    t.start()
    try:
        report = hostile.send_all([("target", "127.0.0.1", port)], seed=3, reply_wait_s=1.0)
    finally:
        t.join()
        router.close(0)
        ctx.term()
    zmq_packets = [p for p in packets if not p.raw]
    assert report["target"]["sent"] == len(packets) and not report["target"]["errors"]
    # every ZeroMQ message arrived whole (libzmq may read raw bytes as ZMTP 1.0 frames: more messages)
    assert len(received) >= len(zmq_packets)
    assert report["target"]["replies"] == len(zmq_packets)


def test_steps_are_counted_per_host_over_every_process(tmp_path):
    (tmp_path / "h0-11.steps").write_text("s\n" * 5)
    (tmp_path / "h0-12.steps").write_text("s\n" * 3)  # the worker restarted on h0
    (tmp_path / "h1-13.steps").write_text("s\n" * 7)
    (tmp_path / "ignored.txt").write_text("x")
    assert jobs.count_steps(str(tmp_path)) == {"h0": 8, "h1": 7}
    assert jobs.count_steps(str(tmp_path / "missing")) == {}


def _ref(acc: float, steps: int = 100):
    return jobs.JobResult(True, "", acc, {"w": __import__("torch").zeros(2)}, steps)


def _round(index: int, job: str, kinds: list[str], **kw):
    faults = [soak.Fault(index, job, k, "h1", injected=True, recovered_s=1.0) for k in kinds]
    return soak.Round(index, job, faults, **kw)


def _args(**kw):
    base = {"minutes": 1.0, "seed": 0, "jobs": ["horovod", "dist_sync"], "epochs": 3}
    return argparse.Namespace(**{**base, **kw})


def test_the_verdict_holds_when_every_round_is_clean():
    refs = {"horovod": _ref(0.80), "dist_sync": _ref(0.82)}
    rounds = [_round(1, "horovod", ["worker-kill", "partition"], ok=True, accuracy=0.805, accuracy_ref=0.80,
                     steps=104),
              _round(2, "dist_sync", ["server-kill"], ok=True, accuracy=0.82, accuracy_ref=0.82, steps=100,
                     param_diff=0.0)]
    text = soak.report(rounds, refs, _args(), 60.0, "3 hosts")
    assert "every fault survived: yes (3 of 3)" in text
    assert "no data lost: yes" in text and "steps done again after restarts: 4" in text
    assert "accuracy within 1 point: yes (largest difference 0.50 points)" in text
    assert re.search(r"worker-kill \(horovod\)\s+1\s+1", text)


def test_the_verdict_names_a_failed_round_lost_updates_and_an_accuracy_drop():
    refs = {"horovod": _ref(0.80), "dist_sync": _ref(0.82)}
    rounds = [_round(1, "horovod", ["partition"], ok=False, error="the launcher exited with code 1",
                     steps=50, false_deaths=["membership lost h2"]),
              _round(2, "dist_sync", ["server-kill", "cpu-hog"], ok=True, accuracy=0.80, accuracy_ref=0.82,
                     steps=100, param_diff=0.05)]
    text = soak.report(rounds, refs, _args(), 60.0, "3 hosts")
    assert "every fault survived: NO (0 of 3)" in text
    assert "no data lost: NO" in text and "within 1e-05 in 0 of 1 rounds" in text
    assert ("accuracy within 1 point: NO (largest difference 2.00 points; rounds without an accuracy: 1)"
            in text)
    assert "round 1: the launcher exited with code 1; declared dead / dropped: membership lost h2" in text
    assert re.search(r"^1\s+horovod\s+1\s+FAILED", text, re.M)
