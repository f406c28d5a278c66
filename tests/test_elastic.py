"""Elastic jobs: `mxtorch launch --elastic MIN:MAX -n N mxtorch train ...` on 127.0.0.1.

One torch elastic agent per worker; a worker's host is lost with the test-only hook
MXTORCH_TEST_KILL_HOST_AT_STEP (the worker SIGKILLs its agent and itself after a step, once an
earlier checkpoint is committed); a worker joins with `mxtorch launch --join HOST:PORT` while the
job waits at MXTORCH_TEST_PAUSE_AT_STEP, and the workers, stopped by their agents, commit that
step before they restart.  The fast test shrinks and grows one tiny job (an MLP on
the embedded Fashion-MNIST subset, 41 steps); the slow ones compare the held-out accuracy of the
default job (lenet_bn, 2 epochs) that loses or gains a worker with the undisturbed run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import train_test_hooks  # tests/ is on sys.path

import mxtorch as mx
from mxtorch.cli.main import main
from mxtorch.elastic import ElasticBatchSampler, describe_change, parse_range
from mxtorch.elastic.env import JOB_KEY, ElasticJob
from mxtorch.launcher import JobSpec, LaunchError
from mxtorch.launcher.elastic import check_elastic, host_store

ROOT = mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT
PY = sys.executable
TINY = ["--model", "mlp", "--epochs", "1", "--batch-size", "240", "--checkpoint-every", "5", "--threads", "1"]


# ---- checks that start no job -----------------------------------------------------------------
@pytest.mark.parametrize("text", ["3", "a:b", "2-4", "", ":3", "0:2", "3:2"])
def test_a_malformed_elastic_range_is_refused(text):
    with pytest.raises(LaunchError, match="MIN:MAX"):
        parse_range(text)


def test_min_above_the_starting_workers_and_servers_are_refused():
    with pytest.raises(LaunchError, match=r"needs at least MIN=3.*-n 3"):
        check_elastic("3:4", JobSpec(command=["x"], num_workers=2))
    with pytest.raises(LaunchError, match="more workers than MAX=2"):
        check_elastic("1:2", JobSpec(command=["x"], num_workers=3))
    with pytest.raises(LaunchError, match="allreduce jobs"):
        check_elastic("1:2", JobSpec(command=["x"], num_workers=2, num_servers=1))
    assert check_elastic("2:4", JobSpec(command=["x"], num_workers=3)).max_workers == 4


def test_the_cli_reports_elastic_errors(capsys):
    assert main(["launch", "--elastic", "3", "-n", "2", "echo"]) == 2
    assert "--elastic '3': expected MIN:MAX" in capsys.readouterr().err
    assert main(["launch", "--elastic", "3:3", "-n", "2", "echo"]) == 2
    assert "needs at least MIN=3" in capsys.readouterr().err
    assert main(["launch", "--join", "127.0.0.1:5", "echo"]) == 2
    assert "leave out" in capsys.readouterr().err
    assert main(["launch", "--local-addr", "10.0.0.2", "-n", "2", "echo"]) == 2
    assert "--local-addr applies to the worker that --join adds" in capsys.readouterr().err
    assert main(["launch", "--elastic", "2:3", "-n", "3", "--dry-run", "python", "train.py"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert '"min_workers": 2, "max_workers": 3' in printed[0]
    assert [line.split()[-1] for line in printed[1:]] == ["a0", "a1", "a2"]
    assert all("-m mxtorch.launcher.elastic_agent --endpoint 127.0.0.1:29400" in line for line in printed[1:])


def test_an_agent_advertises_its_address_on_the_route_to_the_rendezvous():
    # torch's default (this machine's hostname) does not resolve on every network
    from mxtorch.launcher.elastic_agent import address_towards

    assert address_towards("127.0.0.1") == "127.0.0.1"
    assert address_towards("localhost") == "127.0.0.1"


@pytest.mark.parametrize("length,batch", [(1000, 120), (997, 128)])
def test_the_elastic_sampler_gives_the_same_global_batches_for_any_world_size(length, batch):
    def global_batches(n: int, start: int = 0) -> list[list[int]]:
        parts = []
        for r in range(n):
            s = ElasticBatchSampler(length, batch, n, r, seed=7)
            s.set_epoch(3)
            s.set_start(start)
            parts.append(list(s))
        assert len({len(p) for p in parts}) == 1
        return [sum((p[k] for p in parts), []) for k in range(len(parts[0]))]

    one = global_batches(1)
    assert len(one) == length // batch and all(len(b) == batch for b in one)
    assert len({i for b in one for i in b}) == len(one) * batch  # no sample twice in an epoch
    for n in (2, 3, 4):
        assert global_batches(n) == one
        assert global_batches(n, start=5) == one[5:]


def test_the_membership_line_names_who_left_and_who_joined():
    kw = {"step": 40, "epoch": 0, "batch": 40, "batches": 78}
    line = describe_change(["a0", "a1", "a2"], ["a0", "a2"], restart=1, **kw)
    assert line.startswith("membership: 3 -> 2 workers (left: a1, was rank 1); ranks now a0=rank0, a2=rank1")
    assert "step 40 (epoch 1, batch 40 of 78)" in line
    line = describe_change(["a0", "a1"], ["a0", "a1", "b7"], **kw)
    assert line.startswith("membership: 2 -> 3 workers (joined: b7)")
    assert describe_change(None, ["a0"], **kw).startswith("membership: 1 workers (a0=rank0); starting")


@pytest.mark.timeout(600)
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_a_rendezvous_that_never_completes_says_what_is_missing():
    store = host_store("127.0.0.1", None)
    job = ElasticJob(run_id="lonely-run", min_workers=2, max_workers=3, command=[PY, "-c", "pass"],
                     rendezvous_timeout=3)
    store.set(JOB_KEY, job.to_json())
    r = subprocess.run([PY, "-m", "mxtorch.elastic.agent", "--endpoint", f"127.0.0.1:{store.port}",
                        "--name", "lonely"], capture_output=True, text=True, timeout=100)
    assert r.returncode == 3, r.stderr[-3000:]
    assert "did not complete within 3 s" in r.stderr
    assert "needs at least 2 worker(s) (--elastic 2:3)" in r.stderr
    assert "agents that ever registered: 1 (lonely)" in r.stderr
    assert f"mxtorch launch --join 127.0.0.1:{store.port}" in r.stderr


# ---- real jobs --------------------------------------------------------------------------------
class Job:
    """A process whose merged output is collected by a thread, to wait for lines while it runs."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        full = {k: v for k, v in os.environ.items() if not k.startswith("MXTORCH_TEST_")}
        full.update(env or {})
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=full)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = re.search(pattern, self.text)
            if m:
                return m
            if self.proc.poll() is not None:
                self._reader.join(5)
                m = re.search(pattern, self.text)
                if m:
                    return m
                break
            time.sleep(0.1)
        raise AssertionError(f"no {pattern!r} in the output:\n{self.text[-5000:]}")

    def wait(self, timeout: float) -> int:
        try:
            rc = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        return rc


def launch_train(out: Path, n: int, elastic: str, args: list[str], env: dict[str, str] | None = None) -> Job:
    return Job([PY, "-m", "mxtorch.cli.main", "launch", "--elastic", elastic, "-n", str(n),
                "--rendezvous-timeout", "120", "mxtorch", "train", "--data-root", ROOT, "--kvstore",
                "horovod", "--no-progress", "--output", str(out), *args],
               train_test_hooks.env(**env) if env else None)  # the kill/pause hooks, loaded by the workers


def join(job: Job, name: str) -> Job:
    endpoint = job.wait_for(r"mxtorch launch --join (\S+)", 60).group(1)
    return Job([PY, "-m", "mxtorch.cli.main", "launch", "--join", endpoint, "--name", name])


def metrics(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())


@pytest.mark.timeout(400)
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_an_elastic_job_loses_a_worker_then_gains_one_and_finishes(tmp_path):
    out = tmp_path / "run"
    # a1 is lost after step 12 (checkpoints every 5 steps); the 2 survivors wait at step 30 until a3 joins
    job = launch_train(out, 3, "2:3", TINY, {"MXTORCH_TEST_KILL_HOST_AT_STEP": "a1:12",
                                             "MXTORCH_TEST_PAUSE_AT_STEP": "30:3"})
    try:
        job.wait_for(r"membership: 3 -> 2 workers \(left: a1, was rank \d\)", 200)
        joined = join(job, "a3")
        assert job.wait(300) == 0, job.text[-5000:]
        assert joined.wait(60) == 0, joined.text[-3000:]
    finally:
        job.proc.kill()
    text = job.text
    assert "membership: 3 workers (a0=rank0, a1=rank1, a2=rank2); starting at step 0" in text
    # the survivors resume from the last committed checkpoint: step 10, or step 5 when the background
    # writer had not committed step 10 yet when a1 was killed at step 12 (a loaded machine)
    m = re.search(r"membership: 3 -> 2 workers \(left: a1, was rank \d\); ranks now a0=rank0, a2=rank1; "
                  r"resuming from the checkpoint of step (\d+) \(epoch 1, batch (\d+) of 41\)", text)
    assert m and m.group(1) == m.group(2) and int(m.group(1)) in (5, 10), text[-5000:]
    # the join stops the workers at a step boundary (30 at the latest): they commit that step and lose nothing
    m = re.search(r"membership change: the workers restart; saved checkpoint step (\d+)", text)
    assert m, text[-5000:]
    saved = int(m.group(1))
    assert 10 < saved <= 30 and saved % 5 == 0  # restarts are agreed on every 5th step
    assert re.search(r"membership: 2 -> 3 workers \(joined: a3\); ranks now .*a3=rank\d; resuming from the "
                     rf"checkpoint of step {saved} \(epoch 1, batch {saved} of 41\)", text), text[-5000:]
    assert "agent a1 (pid" in text and "ended (killed by SIGKILL); the job goes on" in text
    assert "elastic job finished on agent(s) a0, a2; lost on the way: a1 (killed by SIGKILL)" in text
    m = metrics(out)
    assert m["workers"] == 3 and len(m["epochs"]) == 1 and m["final_test_acc"] > 0.5
    assert m["checkpoint"]["resumed_from_step"] >= 10


def _accuracy(out: Path) -> float:
    return float(metrics(out)["final_test_acc"])


def _show_membership(job: Job) -> None:
    for line in job.lines:
        if "membership:" in line:
            print(line.rstrip())


@pytest.mark.slow  # two runs of the default job on 3 processes: ~2 minutes on the shared 2-core machine
@pytest.mark.timeout(900)
def test_losing_a_worker_mid_epoch_keeps_the_accuracy_of_the_undisturbed_run(tmp_path):
    args = ["--checkpoint-every", "10", "--threads", "1"]
    plain = launch_train(tmp_path / "plain", 3, "2:3", args)
    assert plain.wait(400) == 0, plain.text[-5000:]
    job = launch_train(tmp_path / "lost", 3, "2:3", args, {"MXTORCH_TEST_KILL_HOST_AT_STEP": "a1:45"})
    assert job.wait(400) == 0, job.text[-5000:]
    assert re.search(r"membership: 3 -> 2 workers \(left: a1, was rank \d\).*"
                     r"step 40 \(epoch 1, batch 40 of 78\)", job.text), job.text[-5000:]
    assert metrics(tmp_path / "lost")["workers"] == 2
    _show_membership(job)
    a, b = _accuracy(tmp_path / "plain"), _accuracy(tmp_path / "lost")
    print(f"held-out accuracy: undisturbed 3 workers {a:.4f}, a1 lost at step 45 {b:.4f}")
    assert abs(a - b) <= 0.01


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gaining_a_worker_keeps_the_accuracy_of_the_undisturbed_run(tmp_path):
    args = ["--checkpoint-every", "10", "--threads", "1"]
    plain = launch_train(tmp_path / "plain", 2, "2:3", args)
    assert plain.wait(400) == 0, plain.text[-5000:]
    job = launch_train(tmp_path / "grown", 2, "2:3", args, {"MXTORCH_TEST_PAUSE_AT_STEP": "100:3"})
    try:
        job.wait_for(r"membership: 2 workers", 200)
        joined = join(job, "a2")
        assert job.wait(400) == 0, job.text[-5000:]
        assert joined.wait(60) == 0, joined.text[-3000:]
    finally:
        job.proc.kill()
    saved = re.search(r"membership change: the workers restart; saved checkpoint step (\d+)", job.text)
    assert saved, job.text[-5000:]
    assert re.search(rf"membership: 2 -> 3 workers \(joined: a2\).*checkpoint of step {saved.group(1)} ",
                     job.text), job.text[-5000:]
    assert metrics(tmp_path / "grown")["workers"] == 3
    _show_membership(job)
    a, b = _accuracy(tmp_path / "plain"), _accuracy(tmp_path / "grown")
    print(f"held-out accuracy: undisturbed 2 workers {a:.4f}, a2 joined {b:.4f}")
    assert abs(a - b) <= 0.01


def test_the_final_report_names_agents_in_their_order_not_the_order_they_ended():
    import io

    from mxtorch.launcher.elastic import supervise

    def agent(delay: float, rc: int) -> subprocess.Popen:
        code = f"import sys, time; time.sleep({delay}); sys.exit({rc})"
        return subprocess.Popen([sys.executable, "-c", code])

    # a2 ends first, a1 fails, a0 ends last
    procs = {"a0": agent(1.0, 0), "a1": agent(0.3, 3), "a2": agent(0.0, 0)}
    out = io.StringIO()
    assert supervise(procs, timeout=60, out=out) == 0
    last = out.getvalue().splitlines()[-1]
    assert last == ("mxtorch launch: elastic job finished on agent(s) a0, a2; "
                    "lost on the way: a1 (exit code 3)")
