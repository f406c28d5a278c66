"""mx.profiler in one process: MXNet's API on torch.profiler, our spans and their arguments,
the aggregate table, the profiling objects, the merge of per-process traces."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError
from mxtorch.profiler import _process, _remote, _session, _spans, span
from mxtorch.profiler.merge import TraceMergeError, merge_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def fresh_profiler():
    """Each test gets a stopped profiler with MXNet's defaults and a one-process identity."""
    saved = _process._identity
    _process._identity = _process.Identity()
    _session.PROFILER.__init__()
    yield
    if _session.PROFILER.session is not None:
        _session.PROFILER.session.stop()
    _session.PROFILER.__init__()
    _process._identity = saved
    _spans.set_paused(False)


def _trace(path):
    with open(path) as f:
        return json.load(f)


def _named(trace, name):
    return [e for e in trace["traceEvents"] if e.get("name") == name and e.get("ph") == "X"]


def test_spans_are_off_until_a_profiler_records():
    sp = span("allreduce", keys=[1])
    assert not sp and not _spans.recording()
    with sp as inner:
        inner.note(bytes=4)  # a no-op, accepted
    assert _spans.take_records() == ([], 0)


def test_run_stop_dump_writes_a_chrome_trace_with_span_arguments(tmp_path):
    path = str(tmp_path / "profile.json")
    mx.profiler.set_config(profile_all=True, filename=path)
    mx.profiler.set_state("run")
    for i in range(3):
        with span("allreduce", keys=[3, 4], bytes=32) as sp:
            if sp:
                sp.note(bucket=i)
            torch.ones(8).add_(1)
    mx.profiler.set_state("stop")
    mx.profiler.dump()
    trace = _trace(path)  # one process: the file keeps its name
    spans = _named(trace, "mxtorch/allreduce")
    assert [e["args"] for e in spans] == [{"keys": "3,4", "bytes": 32, "bucket": i} for i in range(3)]
    assert any(e.get("cat") == "cpu_op" and e["name"] == "aten::add_" for e in trace["traceEvents"])
    assert trace["mxtorch"]["role"] == "worker" and trace["mxtorch"]["rank"] == 0


def test_a_torch_profiler_started_directly_records_our_spans():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with span("ps.push"):
            torch.ones(2) * 2
    assert any(e.name == "mxtorch/ps.push" for e in prof.events())
    _spans.take_records()


def test_pause_leaves_out_what_runs_meanwhile(tmp_path):
    path = str(tmp_path / "p.json")
    mx.profiler.set_config(filename=path)
    mx.profiler.set_state("run")
    with span("before"):
        pass
    mx.profiler.pause()
    with span("paused"):
        pass
    mx.profiler.resume()
    with span("after"):
        pass
    mx.profiler.dump()  # dump stops a running profiler
    assert not _session.PROFILER.running
    names = {e.get("name") for e in _trace(path)["traceEvents"]}
    assert {"mxtorch/before", "mxtorch/after"} <= names and "mxtorch/paused" not in names


def test_dumps_prints_mxnet_aggregate_table_sorted_as_asked(tmp_path):
    mx.profiler.set_config(filename=str(tmp_path / "p.json"), aggregate_stats=True)
    mx.profiler.set_state("run")
    for name, times in (("once", 1), ("thrice", 3), ("twice", 2)):
        for _ in range(times):
            with span(name):
                pass
    mx.profiler.set_state("stop")
    table = mx.profiler.dumps(sort_by="count", ascending=True)
    assert table.startswith("\nProfile Statistics:\n\tNote the difference in units for different entries.\n")
    lines = table.splitlines()
    header = lines.index("mxtorch")
    assert lines[header + 1] == "================="
    assert lines[header + 2].split() == ["Name", "Total", "Count", "Time", "(ms)", "Min", "Time", "(ms)",
                                         "Max", "Time", "(ms)", "Avg", "Time", "(ms)"]
    rows = [ln.split() for ln in lines[header + 4: header + 7]]
    assert [(r[0], r[1]) for r in rows] == [("mxtorch/once", "1"), ("mxtorch/twice", "2"),
                                            ("mxtorch/thrice", "3")]
    for r in rows:  # total = count x average, min <= avg <= max
        count, total, lo, hi, avg = int(r[1]), *map(float, r[2:6])
        assert lo <= avg <= hi and total == pytest.approx(count * avg, abs=2e-4 * count)
    by_count_desc = [ln.split()[0] for ln in mx.profiler.dumps(sort_by="count").splitlines()
                     if ln.startswith("mxtorch/")]
    assert by_count_desc == ["mxtorch/thrice", "mxtorch/twice", "mxtorch/once"]
    as_json = json.loads(mx.profiler.dumps(format="json", reset=True))
    assert as_json["Time"]["mxtorch"]["mxtorch/thrice"]["Count"] == 3 and as_json["Unit"]["Time"] == "ms"
    assert "mxtorch/" not in mx.profiler.dumps()  # reset cleared it


def test_bad_arguments_are_refused_before_anything_runs():
    with pytest.raises(MXNetError, match="unknown argument 'profile_everything'"):
        mx.profiler.set_config(profile_everything=True)
    with pytest.raises(MXNetError, match="not a boolean"):
        mx.profiler.set_config(profile_all="maybe")
    with pytest.raises(MXNetError, match="state='go'"):
        mx.profiler.set_state("go")
    with pytest.raises(MXNetError, match="sort_by='speed'"):
        mx.profiler.dumps(sort_by="speed")
    with pytest.raises(MXNetError, match="profile_process='client'"):
        mx.profiler.set_state("run", profile_process="client")
    with pytest.raises(MXNetError, match="create the job's store"):  # no parameter-server store here
        mx.profiler.set_state("run", profile_process="server")
    assert not _session.PROFILER.running


def test_domain_objects_record_tasks_counters_and_markers(tmp_path):
    path = str(tmp_path / "p.json")
    mx.profiler.set_config(filename=path, aggregate_stats=True)
    domain = mx.profiler.Domain("data")
    task = domain.new_task("decode")
    counter = domain.new_counter("queue", 5)  # before run: not recorded, but the value is kept
    mx.profiler.set_state("run")
    task.start()
    torch.zeros(4)
    task.stop()
    with mx.profiler.Event("load"):
        pass
    counter += 3
    counter -= 1
    domain.new_marker("epoch").mark("global")
    with mx.profiler.scope("outer"), mx.profiler.scope("inner") as name:
        assert name == "outer:inner:"
    mx.profiler.set_state("stop")
    table = mx.profiler.dumps()
    mx.profiler.dump()
    trace = _trace(path)
    assert [e["args"] for e in _named(trace, "decode")] == [{"domain": "data"}]
    assert [e["args"]["queue"] for e in trace["traceEvents"] if e.get("ph") == "C"] == [8, 7]
    assert [e["s"] for e in trace["traceEvents"] if e.get("name") == "epoch"] == ["g"]
    assert _named(trace, "outer:inner:") and _named(trace, "outer:")
    assert "data\n=================" in table and "decode" in table and "scope" in table


def test_files_are_named_by_rank_in_a_job(tmp_path):
    _process.set_identity("worker", 1, 2)
    assert _session.output_path(str(tmp_path / "profile.json")) == str(tmp_path / "profile.rank1.json")
    _process.set_identity("server", 0, 2)
    assert _session.output_path("t.json") == "t.server0.json"


def test_a_server_writes_only_a_bare_name_into_its_own_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("MXTORCH_PROFILE_DIR", str(tmp_path))
    _process.set_identity("server", 3, 2)
    _remote.serve({"op": "config", "config": {"filename": "../../etc/x.json", "aggregate_stats": True}}, 3)
    assert _session.PROFILER.config["filename"] == os.path.join(str(tmp_path), "x.json")
    _remote.serve({"op": "state", "state": "run"}, 3)
    reply = _remote.serve({"op": "dump", "finished": True}, 3)
    assert reply["path"] == os.path.join(str(tmp_path), "x.server3.json") and os.path.exists(reply["path"])
    assert isinstance(_remote.serve({"op": "clock"}, 3)["time_ns"], int)
    for hostile, match in (([1], "JSON object"), ({"op": "format_disk"}, "no known operation"),
                           ({"op": "config", "config": {str(i): 1 for i in range(17)}}, "at most 16"),
                           ({"op": "config", "config": {"filename": ".."}}, "names no file"),
                           ({"op": "config", "config": {"filename": "a" * 5000}}, "4096"),
                           ({"op": "state", "state": "walk"}, "'run' or 'stop'")):
        with pytest.raises(MXNetError, match=match):
            _remote.serve(hostile, 3)


def _write(path, role, rank, base_ns, offset_ns, peers, ts):
    push = {"ph": "X", "name": "mxtorch/ps.push", "pid": 77, "tid": 77, "ts": ts, "dur": 5.0}
    trace = {"traceEvents": [push],
             "baseTimeNanoseconds": base_ns,
             "mxtorch": {"role": role, "rank": rank, "pid": 77, "clock_offset_ns": offset_ns,
                         "peer_clock_offsets_ns": peers}}
    with open(path, "w") as f:
        json.dump(trace, f)


def test_merge_puts_every_process_on_rank0s_clock(tmp_path):
    # the same instant, 1000 us after rank 0's base, recorded on three clocks: the server's runs
    # 3 ms ahead of rank 0's, rank 1's 1 ms ahead (both seen through round trips to the server)
    base = 1_790_000_000_000_000_000
    _write(tmp_path / "p.rank0.json", "worker", 0, base, 0, {"server0": 3_000_000}, 1000.0)
    _write(tmp_path / "p.rank1.json", "worker", 1, base, None, {"server0": 2_000_000}, 2000.0)
    _write(tmp_path / "p.server0.json", "server", 0, base, None, {}, 4000.0)
    (tmp_path / "other.json").write_text("{\"traceEvents\": []}")  # not ours: skipped
    merged = merge_dir(str(tmp_path))
    pushes = {e["pid"]: e["ts"] for e in merged["traceEvents"] if e.get("name") == "mxtorch/ps.push"}
    assert sorted(pushes) == [0, 100, 1_000_000]
    assert len(set(pushes.values())) == 1
    how = [(p["role"], p["rank"], p["aligned_by"]) for p in merged["mxtorch"]["processes"]]
    assert how == [("worker", 0, "reference"), ("worker", 1, "round trips to server0"),
                   ("server", 0, "rank 0's round trips")]


def test_merge_refuses_two_traces_of_one_rank_and_an_empty_folder(tmp_path):
    _write(tmp_path / "a.json", "worker", 0, 0, 0, {}, 1.0)
    _write(tmp_path / "b.json", "worker", 0, 0, 0, {}, 1.0)
    with pytest.raises(TraceMergeError, match="are both rank 0"):
        merge_dir(str(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "mxtorch.cli.main", "trace", "merge", str(empty), "-o",
                           str(tmp_path / "job.json")], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("mxtorch trace: error: ") and "holds no trace" in done.stderr
    assert "Traceback" not in done.stderr


def test_autograd_backward_is_a_span(tmp_path):
    path = str(tmp_path / "profile.json")
    x = mx.nd.array([1.0, 2.0, 3.0])
    x.attach_grad()
    mx.profiler.set_config(profile_all=True, filename=path)
    mx.profiler.set_state("run")
    with mx.autograd.record():
        y = (x * x).sum()
    mx.autograd.backward(y)
    mx.profiler.set_state("stop")
    mx.profiler.dump()
    assert len(_named(_trace(path), "mxtorch/backward")) == 1
    assert x.grad.tolist() == [2.0, 4.0, 6.0]


def test_the_training_loop_spans_forward_backward_step_and_data(tmp_path):
    """mxtorch train's loop, profiled: every step has its forward, backward, trainer.step and
    data.wait span (backward nests torch's autograd work)."""
    from mxtorch.cli.train_loop import TrainConfig, train

    path = str(tmp_path / "profile.json")
    cfg = TrainConfig(model="mlp", data_root=mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT, epochs=1,
                      batch_size=2048, output=str(tmp_path / "run"), progress=False, hybridize=False)
    mx.profiler.set_config(profile_all=False, filename=path)
    mx.profiler.set_state("run")
    train(cfg)
    mx.profiler.set_state("stop")
    mx.profiler.dump()
    trace = _trace(path)
    steps = len(_named(trace, "mxtorch/trainer.step"))
    assert steps >= 2
    assert len(_named(trace, "mxtorch/backward")) == steps
    assert len([e for e in _named(trace, "mxtorch/forward") if e["args"].get("block") == "MLP"]) >= steps
    # the test set's batches are waited for too (evaluation)
    assert len(_named(trace, "mxtorch/data.wait")) > steps
