"""mx.profiler in real jobs: a 2-worker horovod job and a dist_sync job (2 workers, 1 server).

Every rank's trace holds the mxtorch spans with their arguments; the servers' traces hold
ps.handle / ps.update; ``mxtorch trace merge`` puts every rank and server in one trace.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import profiler_workers as w  # noqa: I001  (tests/ is on sys.path)
import pytest

from mxtorch.distributed.testing import run_workers
from mxtorch.kvstore.ps.testing import run_ps_job

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _spans(path: str) -> dict[str, list[dict]]:
    with open(path) as f:
        trace = json.load(f)
    out: dict[str, list[dict]] = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("mxtorch/"):
            out.setdefault(e["name"], []).append(e)
    return out


def _merge(folder: str, out: str) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "mxtorch.cli.main", "trace", "merge", folder, "-o", out],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    with open(out) as f:
        return json.load(f)


def _rows(merged: dict) -> set[str]:
    return {e["args"]["name"] for e in merged["traceEvents"]
            if e.get("ph") == "M" and e.get("name") == "process_name" and "(" not in e["args"]["name"]}


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_horovod_job_traces_per_rank_and_merged(tmp_path):
    folder = str(tmp_path / "traces")
    os.makedirs(folder)
    results = run_workers(w.horovod_job, 2, folder, 3, timeout=240)
    for r in range(2):
        spans = _spans(os.path.join(folder, f"profile.rank{r}.json"))
        assert len(spans.get("mxtorch/trainer.step", [])) == 3, sorted(spans)
        forwards = [e["args"].get("block") for e in spans.get("mxtorch/forward", [])]
        assert forwards.count("Sequential") == 3 and forwards.count("SoftmaxCrossEntropyLoss") == 3
        allreduces = spans["mxtorch/allreduce"]
        assert allreduces and all(e["args"].get("bytes", 0) > 0 and e["args"].get("worker") == r
                                  for e in allreduces), allreduces[:2]
        assert "Profile Statistics:" in results[r]["table"] and "mxtorch/trainer.step" in results[r]["table"]
        assert "operator" in results[r]["table"]
    merged = _merge(folder, str(tmp_path / "job.json"))
    assert _rows(merged) == {"rank 0", "rank 1"}
    procs = merged["mxtorch"]["processes"]
    assert [p["aligned_by"] for p in procs] == ["reference", "measured at job start"]
    steps = [e for e in merged["traceEvents"] if e.get("name") == "mxtorch/trainer.step"]
    assert {e["pid"] for e in steps} == {p["pid"] for p in procs}


def _timeline(path: str) -> tuple[dict[int, str], list[dict]]:
    with open(path) as f:
        events = json.load(f)  # valid JSON once stopped: Horovod's list of events
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name" and e["pid"]}
    for pid in names:  # every phase that began ended
        phases = [e["ph"] for e in events if e.get("pid") == pid and e.get("ph") in ("B", "E")]
        assert phases.count("B") == phases.count("E") > 0, (names[pid], phases)
    return names, events


def test_horovod_timeline_holds_the_jobs_tensors(tmp_path):
    folder = str(tmp_path)
    path = os.path.join(folder, "timeline.json")
    results = run_workers(w.horovod_timeline_job, 2, folder, 2, timeout=240, env={"HOROVOD_TIMELINE": path})
    names, events = _timeline(path)
    assert set(results[0]["params"]) <= set(names.values()), (results[0]["params"], names)
    assert "loss_sum" in names.values()
    loss_pid = next(p for p, n in names.items() if n == "loss_sum")
    ops = [e.get("name") for e in events if e.get("pid") == loss_pid and e["ph"] in ("B", "X")]
    assert ops == ["NEGOTIATE_ALLREDUCE", "0", "1", "ALLREDUCE", "GLOO_ALLREDUCE"]
    ends = [e for e in events if e.get("pid") == loss_pid and e["ph"] == "E" and "args" in e]
    assert ends[-1]["args"] == {"dtype": "float32", "shape": "[3]"}
    assert "start_time_since_epoch_in_micros" in events[0]["args"]
    names2, events2 = _timeline(os.path.join(folder, "cycles.json"))
    assert sorted(names2.values()) == ["pair.0", "pair.1"]
    assert any(e.get("name") == "CYCLE_START" for e in events2)
    assert not [n for n in os.listdir(folder) if n.startswith("timeline") and n != "timeline.json"]


def test_dist_sync_job_profiles_workers_and_server(tmp_path):
    folder = str(tmp_path / "traces")
    os.makedirs(folder)
    results = run_ps_job(w.ps_job, 2, 1, folder, 3, timeout=240, env={"MXTORCH_PROFILE_DIR": folder})
    for r in range(2):
        spans = _spans(os.path.join(folder, f"profile.rank{r}.json"))
        assert len(spans.get("mxtorch/trainer.step", [])) == 3, sorted(spans)
        moves = spans.get("mxtorch/pushpull", []) + spans.get("mxtorch/ps.push", [])
        assert moves and all(e["args"].get("worker") == r and e["args"].get("bytes", 0) > 0 for e in moves)
        assert "mxtorch/trainer.step" in results[r]["table"]
    server = _spans(os.path.join(folder, "profile.server0.json"))
    handled = server.get("mxtorch/ps.handle", [])
    assert {e["args"].get("worker") for e in handled} >= {0, 1}, handled[:3]
    assert any(e["args"].get("bytes", 0) > 0 for e in handled)
    assert server.get("mxtorch/ps.update"), sorted(server)
    merged = _merge(folder, str(tmp_path / "job.json"))
    assert _rows(merged) == {"rank 0", "rank 1", "server 0"}
    how = {(p["role"], p["rank"]): p["aligned_by"] for p in merged["mxtorch"]["processes"]}
    assert how[("server", 0)] == "rank 0's round trips" and how[("worker", 1)] == "round trips to server0"


def test_pipeline_sends_and_receives_are_spanned_per_stage_and_micro_batch(tmp_path):
    """pp=2 over gloo: under every schedule each rank's trace holds a pipeline.send / pipeline.recv
    span (and its .wait) for every micro-batch its stages exchange, with stage, micro-batch, kind,
    peer and bytes; a SpanClock counts them as communication wait without a profiler."""
    res = run_workers(w.pipeline_job, 2, str(tmp_path), timeout=240)
    for schedule in ("gpipe", "1f1b", "interleaved", "zero_bubble"):
        stages = {r: res[r][schedule]["stages"] for r in (0, 1)}
        last = max(stages[0] + stages[1])
        for r in (0, 1):
            got = res[r][schedule]
            # no update between the steps: spanned or not, each step computes the same loss
            assert got["losses"] == [res[0][schedule]["losses"][0]] * 3, (schedule, r)
            spans = _spans(got["trace"])
            seen = {}
            for name in ("mxtorch/pipeline.send", "mxtorch/pipeline.recv", "mxtorch/pipeline.send.wait",
                        "mxtorch/pipeline.recv.wait"):
                events = spans.get(name, [])
                assert all(e["args"]["peer"] == 1 - r and e["args"]["bytes"] > 0 for e in events), events[:2]
                seen[name] = sorted((e["args"]["kind"], e["args"]["stage"], e["args"]["micro_batch"])
                                    for e in events)
            # every stage sends its activations on unless it is the last, its gradients back unless first
            sends = sorted([("activation", s, m) for s in stages[r] if s < last for m in (0, 1)]
                           + [("gradient", s, m) for s in stages[r] if s > 0 for m in (0, 1)])
            recvs = sorted([("activation", s, m) for s in stages[r] if s > 0 for m in (0, 1)]
                           + [("gradient", s, m) for s in stages[r] if s < last for m in (0, 1)])
            assert seen["mxtorch/pipeline.send"] == seen["mxtorch/pipeline.send.wait"] == sends, (schedule, r)
            assert seen["mxtorch/pipeline.recv"] == seen["mxtorch/pipeline.recv.wait"] == recvs, (schedule, r)
            assert got["comm_s"] > 0, (schedule, r)
