"""In-process elastic recovery: ``elastic.State`` and ``@elastic.run`` (issue 32).

Unit checks run in this process; the job tests start real worker processes
(tests/elastic_inprocess_workers.py) that meet through a TCPStore this test hosts, as
``mxtorch launch`` hosts it, and form their gloo groups on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

import mxtorch as mx
from mxtorch import autograd, elastic, gluon
from mxtorch.distributed.env import DistributedConfigError, DistributedError
from mxtorch.elastic.broadcast import _specs
from mxtorch.elastic.env import JOB_KEY, MXTORCH_ELASTIC_ENDPOINT, MXTORCH_ELASTIC_MODE, ElasticJob
from mxtorch.elastic.rendezvous import Rendezvous
from mxtorch.gluon import nn
from mxtorch.launcher.elastic import host_store

ROOT = Path(__file__).resolve().parent.parent
WORKER = str(Path(__file__).resolve().parent / "elastic_inprocess_workers.py")
TRAINER_WORKER = str(Path(__file__).resolve().parent / "hvd_elastic_trainer_worker.py")


# ---- one process ----------------------------------------------------------------------------------
def _model() -> tuple[nn.Sequential, gluon.Trainer, torch.Tensor, torch.Tensor]:
    mx.random.seed(0)
    net = nn.Sequential()
    net.add(nn.Dense(8, activation="relu"), nn.Dense(3))
    net.initialize()
    x, y = torch.randn(20, 5), torch.randint(0, 3, (20,))
    net(x)
    return net, gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9}), x, y


def _step(net: nn.Sequential, trainer: gluon.Trainer, x: torch.Tensor, y: torch.Tensor) -> None:
    with autograd.record():
        loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
    loss.backward()
    trainer.step(len(x))


def _weights(net: nn.Sequential) -> list[torch.Tensor]:
    return [p.data().detach().clone() for p in net.collect_params().values()]


def test_restore_goes_back_to_the_commit_and_replays_the_same_steps():
    net, trainer, x, y = _model()
    state = elastic.State(net=net, trainer=trainer, epoch=0, batch=0)
    _step(net, trainer, x, y)
    state.epoch, state.batch = 1, 7
    state.commit()
    committed = _weights(net)
    for _ in range(2):  # momentum makes the second step depend on the trainer's state
        _step(net, trainer, x, y)
    undisturbed = _weights(net)
    state.epoch, state.batch = 3, 0
    state.restore()
    assert (state.epoch, state.batch) == (1, 7)
    assert all(torch.equal(a, b) for a, b in zip(committed, _weights(net)))
    for _ in range(2):
        _step(net, trainer, x, y)
    assert all(torch.equal(a, b) for a, b in zip(undisturbed, _weights(net)))


def test_restore_drops_the_gradients_of_a_step_that_failed_half_way():
    net, trainer, x, y = _model()
    state = elastic.State(net=net, trainer=trainer)
    state.commit()
    _step(net, trainer, x, y)
    expected = _weights(net)
    state.restore()
    with autograd.record():  # backward ran, the step's all-reduce failed: the gradients stay
        gluon.loss.SoftmaxCrossEntropyLoss()(net(x[:7]), y[:7]).backward()
    state.restore()
    _step(net, trainer, x, y)
    assert all(torch.equal(a, b) for a, b in zip(expected, _weights(net)))


def test_commits_go_to_a_checkpoint_manager_and_a_restarted_worker_resumes_from_them(tmp_path):
    from mxtorch.checkpoint import CheckpointManager

    net, trainer, x, y = _model()
    state = elastic.State(checkpoint_manager=CheckpointManager(str(tmp_path), async_save=False), net=net,
                          trainer=trainer, epoch=0, batch=0)
    _step(net, trainer, x, y)
    state.epoch, state.batch = 2, 30
    state.commit()
    committed = _weights(net)
    _step(net, trainer, x, y)
    after = _weights(net)
    # a fresh process of the restart mode: other weights, then the newest commit
    net2, trainer2, _, _ = _model()
    fresh = elastic.State(checkpoint_manager=CheckpointManager(str(tmp_path), async_save=False), net=net2,
                          trainer=trainer2, epoch=0, batch=0)
    assert fresh.resume() == 1 and (fresh.epoch, fresh.batch) == (2, 30)
    assert all(torch.equal(a, b) for a, b in zip(committed, _weights(net2)))
    _step(net2, trainer2, x, y)  # the optimizer's momentum came back too
    assert all(torch.allclose(a, b) for a, b in zip(after, _weights(net2)))
    empty = elastic.State(checkpoint_manager=CheckpointManager(str(tmp_path / "none")), epoch=0)
    assert empty.resume() == 0
    with pytest.raises(ValueError, match="no checkpoint_manager"):
        elastic.State(epoch=0).resume()


def test_horovods_elastic_names_are_the_same_objects():
    import mxtorch.horovod as hvd

    assert hvd.elastic.run is elastic.run and hvd.elastic.State is elastic.State
    assert hvd.elastic.ObjectState is elastic.State
    assert hvd.elastic.HostsUpdatedInterrupt is elastic.MembershipChanged
    net, trainer, _, _ = _model()
    state = hvd.elastic.TorchState(model=net, optimizer=trainer, epoch=1)
    assert state.model is net and state.optimizer is trainer and state.epoch == 1
    assert sorted(state.names()) == ["epoch", "model", "optimizer"]


def test_the_state_holds_stateful_objects_and_plain_values_only():
    net, trainer, _, _ = _model()
    state = elastic.State(net=net, trainer=trainer, epoch=0, note="a", sizes=[1, 2])
    assert state.net is net and state.trainer is trainer and state.note == "a"
    with pytest.raises(TypeError, match="JSON values"):
        elastic.State(net=net, when=object())
    with pytest.raises(ValueError, match="'_'"):
        elastic.State(_own=1)
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = state.missing


def test_the_default_reset_rule_reshards_the_sampler_then_the_callbacks_run_in_order():
    sampler = elastic.ElasticBatchSampler(100, 10, num_parts=3, part_index=2)
    calls: list[tuple[str, int, int]] = []
    state = elastic.State(sampler=sampler, epoch=0)
    state.register_reset_callbacks([lambda: calls.append(("a", sampler.num_parts, sampler.part_index)),
                                    lambda: calls.append(("b", sampler.num_parts, sampler.part_index))])
    state.on_reset()  # no process group: a job of one
    assert calls == [("a", 1, 0), ("b", 1, 0)]
    assert sampler.share() == (0, 10)  # the whole global batch: the global batch is kept
    with pytest.raises(TypeError, match="not callable"):
        state.register_reset_callbacks([3])


def test_run_outside_an_elastic_job_calls_the_function_once_and_lets_errors_through():
    state = elastic.State(epoch=0)
    calls = []

    @elastic.run
    def train(s: elastic.State, extra: int) -> int:
        calls.append(extra)
        if extra == 2:
            raise RuntimeError("Connection closed by peer")  # no elastic job: nothing to recover
        return extra + 1

    assert train(state, 1) == 2 and calls == [1]
    with pytest.raises(RuntimeError, match="closed by peer"):
        train(state, 2)
    with pytest.raises(TypeError, match="elastic.State"):
        train(3, 1)


class _FakeJob:
    """What ``@elastic.run`` needs of an in-process job, with the re-formations counted."""

    def __init__(self, fail_reform: BaseException | None = None, fail_times: int = 1000) -> None:
        self.reforms, self.finished, self.fail_reform, self.fail_times = 0, 0, fail_reform, fail_times
        self.rendezvous = self

    def admit(self) -> bool:
        return False

    def reform(self) -> None:
        self.reforms += 1
        if self.fail_reform is not None and self.reforms <= self.fail_times:
            raise self.fail_reform

    def finish(self) -> None:
        self.finished += 1


@pytest.fixture
def fake_job(monkeypatch):
    def make(**kw):
        job = _FakeJob(**kw)
        monkeypatch.setattr(sys.modules["mxtorch.elastic.run"], "init", lambda: job)
        return job
    return make


def test_run_restores_the_commit_after_a_peer_failure_and_keeps_it_for_a_joiner(fake_job):
    job = fake_job()
    state = elastic.State(step=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(state.step)])
    seen = []

    @elastic.run
    def train(s: elastic.State) -> str:
        seen.append(s.step)
        if len(seen) == 1:
            s.step = 10
            s.commit()
            s.step = 13  # lost: not committed
            raise RuntimeError("[pair.cc:553] Connection closed by peer")
        if len(seen) == 2:
            s.step = 20
            s.save()
            raise elastic.MembershipChanged("a worker waits")  # as commit() raises it, after its save
        return "done"

    assert train(state) == "done"
    assert seen == [0, 10, 20] and resets == [10, 20]  # back to the commit, then kept the new one
    assert job.reforms == 2 and job.finished == 1


def test_a_peer_lost_while_the_group_re_forms_makes_the_survivors_try_again(fake_job):
    job = fake_job(fail_reform=DistributedError("rank 0 of 2 could not form the new group"), fail_times=1)
    calls = []

    @elastic.run
    def train(s: elastic.State) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("Connection closed by peer")
        return len(calls)

    assert train(elastic.State()) == 2 and job.reforms == 2


def test_run_lets_the_users_own_errors_and_a_failed_rendezvous_through(fake_job):
    job = fake_job(fail_reform=elastic.rendezvous.RendezvousTimeout("generation 1 has 1 worker(s)"))

    @elastic.run
    def broken(s: elastic.State) -> None:
        raise RuntimeError("Connection reset by peer")

    with pytest.raises(elastic.rendezvous.RendezvousTimeout):
        broken(elastic.State())
    assert job.reforms == 1

    @elastic.run
    def buggy(s: elastic.State) -> None:
        raise KeyError("a bug in the script")

    with pytest.raises(KeyError):
        buggy(elastic.State())
    assert job.reforms == 1


def test_peer_failures_are_told_from_the_users_own_errors():
    assert elastic.is_peer_failure(RuntimeError("[pair.cc:553] Connection closed by peer [127.0.0.1]:80"))
    try:
        try:
            raise RuntimeError("Read error: Connection reset by peer")
        except RuntimeError as e:
            raise mx.base.MXNetError("all-reduce of bucket 0 failed") from e
    except mx.base.MXNetError as wrapped:
        assert elastic.is_peer_failure(wrapped)
    assert elastic.is_peer_failure(DistributedError("rank 1 is gone"))
    assert not elastic.is_peer_failure(DistributedConfigError("not started as part of a job"))
    assert not elastic.is_peer_failure(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not elastic.is_peer_failure(ValueError("bad"))


@pytest.mark.parametrize("entry", [
    {"__mxtorch_tensor__": 0, "dtype": "torch.float32", "shape": [-1]},
    {"__mxtorch_tensor__": 0, "dtype": "torch.float32", "shape": [1 << 40]},
    {"__mxtorch_tensor__": 0, "dtype": "object", "shape": [2]},
    {"__mxtorch_tensor__": 5, "dtype": "torch.float32", "shape": [2]},
    {"__mxtorch_tensor__": 0, "dtype": "torch.float32", "shape": "2"},
])
def test_a_malformed_state_outline_is_refused_before_allocating(entry):
    with pytest.raises(DistributedError, match="malformed"):
        _specs({"w": entry}, [], "rank 1: the state broadcast from rank 0")


def _job_store(min_workers: int, max_workers: int, start: int = 0):
    store = host_store("127.0.0.1", None)
    store.set(JOB_KEY, ElasticJob("test", min_workers, max_workers, [], rendezvous_timeout=60,
                                  start_workers=start).to_json())
    return store


def test_the_rendezvous_keeps_the_old_order_and_puts_joiners_last():
    store = _job_store(2, 3)
    rdzv = Rendezvous(store, 2, 3, timeout=30, last_call=0.5, start_workers=3)
    first = [None] * 3

    def join(i: int, previous=None, out=first) -> None:
        out[i] = rdzv.join(previous)[0]

    threads = [threading.Thread(target=join, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(m.rank for m in first) == [0, 1, 2] and {m.generation for m in first} == {0}
    assert rdzv.latest() == 0
    by_rank = {m.rank: m for m in first}
    # rank 1 is lost; a new process comes too late for generation 0 and is seen as waiting
    late, nxt = rdzv.join(None, admit_late=False)
    assert late is None and nxt == 1 and rdzv.joiners_waiting(by_rank[0])
    second = [None] * 3
    threads = [threading.Thread(target=join, args=(0, by_rank[2], second)),
               threading.Thread(target=join, args=(1, by_rank[0], second)),
               threading.Thread(target=lambda: second.__setitem__(2, rdzv.join(None, first_generation=1)[0]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [m.rank for m in second] == [1, 0, 2]  # old rank 2 -> 1, old rank 0 -> 0, the joiner last
    assert all(m.generation == 1 and m.world_size == 3 for m in second)


def test_the_rendezvous_refuses_what_is_not_a_count_or_a_member_in_the_store():
    store = _job_store(1, 1)
    rdzv = Rendezvous(store, 1, 1, timeout=5)
    rdzv.store.set("latest", "1" * 5000)
    with pytest.raises(DistributedError, match="latest is not a count"):
        rdzv.latest()
    rdzv.store.set("g0/closed", "-3")
    with pytest.raises(DistributedError, match="closed is not a count"):
        rdzv.join(None, first_generation=0)
    rdzv.store.set("g1/m1", "x" * 300)
    rdzv.store.add("g1/n", 1)
    with pytest.raises(DistributedError, match="not 'RANK HOST PID'"):
        rdzv._member(1, 1)


def test_a_joiner_never_forms_a_group_of_its_own_beside_the_running_one():
    store = _job_store(1, 3)
    rdzv = Rendezvous(store, 1, 3, timeout=1.5, last_call=0.2)
    assert rdzv.join(None)[0].world_size == 1  # the job: one worker
    with pytest.raises(elastic.rendezvous.RendezvousTimeout, match="one from the running group"):
        rdzv.join(None, first_generation=1)  # no worker of generation 0 comes to generation 1


# ---- jobs of real processes -------------------------------------------------------------------------
class Job:
    """Worker processes of one in-process elastic job, meeting at a store this test hosts."""

    def __init__(self, out: Path, n: int, min_workers: int, max_workers: int, worker: str = WORKER,
                 **env: str) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.out, self.worker = out, worker
        self.store = _job_store(min_workers, max_workers, start=n)
        path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
        self.env = {**os.environ, "PYTHONPATH": path, MXTORCH_ELASTIC_MODE: "inprocess",
                    MXTORCH_ELASTIC_ENDPOINT: f"127.0.0.1:{self.store.port}", "OMP_NUM_THREADS": "1",
                    "MXTORCH_DIST_TIMEOUT": "120", **env}
        self.procs: list[subprocess.Popen[bytes]] = []
        for _ in range(n):
            self.start()

    def start(self, drop: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in self.env.items() if k not in drop}
        log = open(self.out / f"log.{len(self.procs)}", "wb")
        p = subprocess.Popen([sys.executable, self.worker, str(self.out)], env=env, stdout=log,
                             stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(p)
        return p

    def wait_for(self, prefix: str, count: int, timeout: float) -> list[int]:
        """The pids of the first ``count`` files ``prefix.<pid>`` the workers write."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            found = sorted(int(f.name.rsplit(".", 1)[1]) for f in self.out.glob(f"{prefix}.*"))
            if len(found) >= count:
                return found
            if any(p.poll() not in (None, 0) for p in self.procs):
                break
            time.sleep(0.2)
        raise AssertionError(f"no {count} {prefix}.* files: {self.logs()}")

    def finish(self, timeout: float) -> dict[int, int]:
        try:
            return {p.pid: p.wait(timeout) for p in self.procs}
        finally:
            for p in self.procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()

    def grow(self, hold: str) -> tuple[int, dict[int, dict]]:
        """Once every worker waits for a joiner (``held.*``), start one without the variable ``hold``;
        after all finished with status 0, the joiner's pid and every worker's result."""
        try:
            self.wait_for("held", len(self.procs), 300)
            joiner = self.start(drop=(hold,))
            codes = self.finish(300)
        finally:
            self.finish(10)
        assert set(codes.values()) == {0}, self.logs()
        results = self.results()
        assert sorted(results) == sorted(p.pid for p in self.procs), self.logs()
        return joiner.pid, results

    def results(self) -> dict[int, dict]:
        return {int(f.name.split(".")[1]): json.loads(f.read_text()) for f in self.out.glob("result.*.json")}

    def logs(self) -> str:
        return "\n".join(f"--- {f.name}\n{f.read_text(errors='replace')[-3000:]}"
                         for f in sorted(self.out.glob("log.*")))


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@pytest.mark.timeout(600)
def test_a_worker_lost_mid_epoch_the_survivors_finish_in_the_same_processes(tmp_path):
    # the undisturbed run and the one that loses rank 1 before step 125 (epoch 2, batch 25) run side by side
    plain = Job(tmp_path / "plain", 3, 2, 3)
    lost = Job(tmp_path / "lost", 3, 2, 3, H16_VICTIM="1:125")
    try:
        victim, = lost.wait_for("victim", 1, 300)
        os.kill(victim, signal.SIGKILL)
        codes, plain_codes = lost.finish(300), plain.finish(300)
    finally:
        plain.finish(10)
    assert plain_codes == {p.pid: 0 for p in plain.procs}, plain.logs()
    survivors = [p.pid for p in lost.procs if p.pid != victim]
    assert codes == {**{pid: 0 for pid in survivors}, victim: -signal.SIGKILL}, lost.logs()
    results = lost.results()
    # pids unchanged: the processes the test started finished the job, at the new size
    assert sorted(results) == sorted(survivors), lost.logs()
    assert sorted(r["rank"] for r in results.values()) == [0, 1]
    assert all(r["size"] == 2 and r["reset_sizes"] == [2] for r in results.values())
    assert len({r["checksum"] for r in results.values()}) == 1  # one model on both survivors
    reference = plain.results()
    assert len(reference) == 3 and all(r["reset_sizes"] == [] for r in reference.values())
    a = next(iter(reference.values()))["accuracy"]
    b = next(iter(results.values()))["accuracy"]
    print(f"held-out accuracy: undisturbed 3 workers {a:.4f}, rank 1 killed at step 125 {b:.4f}")
    assert abs(a - b) <= 0.01
    # the steps since the commit are done again from exactly the committed state: the model differs
    # from the undisturbed one by the order of float sums only (the half-done step's gradients
    # left in place made it -376.7 against -389.2)
    ours, theirs = next(iter(results.values()))["checksum"], next(iter(reference.values()))["checksum"]
    assert abs(ours - theirs) <= 1e-4 * abs(theirs)


@pytest.mark.timeout(600)
def test_hvd_distributed_trainer_averages_over_the_re_formed_group(tmp_path):
    """3 workers, rank r's gradient r + 1 (tests/hvd_elastic_trainer_worker.py): a step moves the
    weight by -0.25 * mean gradient, -0.5 on 3 workers; rank 1 is killed before step 8, the two
    survivors go back to the commit of step 5 and must move it by -0.25 * (1 + 2) / 2 = -0.375 a
    step (a trainer still dividing by 3 moves it by -0.25), through the 'horovod' store and the
    trainer's own reduction alike."""
    job = Job(tmp_path / "hvd", 3, 2, 3, worker=TRAINER_WORKER, H25_VICTIM="1:8")
    try:
        victim, = job.wait_for("victim", 1, 300)
        os.kill(victim, signal.SIGKILL)
        codes = job.finish(300)
    finally:
        job.finish(10)
    survivors = [p.pid for p in job.procs if p.pid != victim]
    assert codes == {**{pid: 0 for pid in survivors}, victim: -signal.SIGKILL}, job.logs()
    results = job.results()
    assert sorted(results) == sorted(survivors), job.logs()  # the same processes finished the job
    assert sorted((r["rank"], r["size"]) for r in results.values()) == [(0, 2), (1, 2)]
    for r in results.values():
        assert r["moves"] == [[2, -0.375, -0.375]] * 15, r["moves"]  # steps 5..19 after the change
        assert r["w"] == [5 * -0.5 + 15 * -0.375] * 2  # -8.125 on both survivors, both trainers


@pytest.mark.timeout(600)
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_hvd_distributed_trainer_of_a_joiner_averages_with_the_job(tmp_path):
    """2 workers move the weight by -0.25 * (1 + 2) / 2 = -0.375 a step; they wait before step 7
    for a third, admitted at the commit of step 10 (its trainers were made in a group of one);
    then all three move it by -0.25 * (1 + 2 + 3) / 3 = -0.5 a step."""
    job = Job(tmp_path / "hvd-join", 2, 2, 3, worker=TRAINER_WORKER, H25_HOLD="7")
    joiner, results = job.grow("H25_HOLD")
    assert results[joiner]["rank"] == 2
    for r in results.values():
        assert r["size"] == 3 and r["moves"] == [[3, -0.5, -0.5]] * 10, r["moves"]
        assert r["w"] == [10 * -0.375 + 10 * -0.5] * 2  # -8.75 on every worker, both trainers


@pytest.mark.timeout(600)
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_a_worker_joins_a_running_job_and_receives_its_state(tmp_path):
    # both workers wait before step 50 for a joiner
    joiner, results = Job(tmp_path / "grow", 2, 2, 3, H16_HOLD="50").grow("H16_HOLD")
    assert all(r["size"] == 3 and r["reset_sizes"] == [3] for r in results.values())
    assert results[joiner]["rank"] == 2  # the old ranks keep their order, the joiner comes last
    # it started from the job's commit of step 60 (the first commit after it came), not from its own start
    assert results[joiner]["first_call"] == [0, 60]
    assert len({r["checksum"] for r in results.values()}) == 1


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@pytest.mark.timeout(600)
def test_under_mxtorch_launch_the_agent_replaces_only_the_lost_worker(tmp_path):
    """Horovod's names under `mxtorch launch --elastic` in-process mode: rank 1 is killed, the two
    survivors go on in their processes, its agent starts a replacement that joins them."""
    out = tmp_path / "launch"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "H16_VICTIM": "1:125", "H16_FILL": "150", "H16_HVD": "1", "MXTORCH_DIST_TIMEOUT": "120"}
    env.pop(MXTORCH_ELASTIC_MODE, None)
    cmd = [sys.executable, "-m", "mxtorch.cli.main", "launch", "--elastic", "2:3", "-n", "3",
           "--rendezvous-timeout", "120", "--env", f"{MXTORCH_ELASTIC_MODE}:inprocess",
           "python", WORKER, str(out)]
    with open(tmp_path / "launch.log", "wb") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT))
    try:
        end = time.monotonic() + 300
        while not list(out.glob("victim.*")) and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.2)
        victims = [int(f.name.split(".")[1]) for f in out.glob("victim.*")]
        text = (tmp_path / "launch.log").read_text(errors="replace")
        assert len(victims) == 1, text[-5000:]
        started = {int(f.name.split(".")[1]) for f in out.glob("start.*")}
        os.kill(victims[0], signal.SIGKILL)
        rc = proc.wait(400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = (tmp_path / "launch.log").read_text(errors="replace")
    assert rc == 0, text[-5000:]
    assert "starting a replacement that joins the running job (1 of" in text, text[-5000:]
    results = {int(f.name.split(".")[1]): json.loads(f.read_text()) for f in out.glob("result.*.json")}
    survivors = started - set(victims)
    assert len(started) == 3 and survivors <= set(results), text[-5000:]  # the same processes finished
    new, = set(results) - survivors
    assert all(r["size"] == 3 and r["hvd_size"] == 3 for r in results.values())
    assert all(results[pid]["reset_sizes"][-1] == 3 for pid in survivors)
    assert results[new]["first_call"] != [0, 0]  # the replacement started from the job's commit
    assert len({r["checksum"] for r in results.values()}) == 1


@pytest.mark.timeout(600)
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_mxtorch_launch_join_adds_a_worker_to_a_running_in_process_job(tmp_path):
    out = tmp_path / "join"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "MXTORCH_DIST_TIMEOUT": "120"}
    env.pop(MXTORCH_ELASTIC_MODE, None)
    launch = [sys.executable, "-m", "mxtorch.cli.main", "launch"]
    log, join_log = tmp_path / "launch.log", tmp_path / "join.log"
    with open(log, "wb") as f:
        cmd = [*launch, "--elastic", "2:3", "-n", "2", "--rendezvous-timeout", "120", "--env",
               f"{MXTORCH_ELASTIC_MODE}:inprocess", "--env", "H16_HOLD:50", "python", WORKER, str(out)]
        proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, cwd=str(ROOT))
    joiner = None
    try:
        end = time.monotonic() + 300
        while len(list(out.glob("held.*"))) < 2 and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.2)
        text = log.read_text(errors="replace")
        found = re.search(r"mxtorch launch --join (\S+)", text)
        assert found and len(list(out.glob("held.*"))) == 2, text[-5000:]
        with open(join_log, "wb") as f:
            joiner = subprocess.Popen([*launch, "--join", found.group(1), "--name", "extra"], env=env,
                                      stdout=f, stderr=subprocess.STDOUT, cwd=str(ROOT))
        rc, joined = proc.wait(400), joiner.wait(100)
    finally:
        for p in (proc, joiner):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    outputs = log.read_text(errors="replace")[-3000:] + join_log.read_text(errors="replace")[-3000:]
    assert rc == 0 and joined == 0, outputs
    results = {int(f.name.split(".")[1]): json.loads(f.read_text()) for f in out.glob("result.*.json")}
    assert len(results) == 3 and all(r["size"] == 3 and r["reset_sizes"] == [3] for r in results.values())
    assert sorted(r["first_call"] for r in results.values()) == [[0, 0], [0, 0], [0, 60]]
    assert len({r["checksum"] for r in results.values()}) == 1
