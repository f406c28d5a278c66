"""The parameter server (dist_sync / dist_async): configuration, wire format, and real jobs
(a scheduler, 2 servers and 2 workers as processes on 127.0.0.1)."""

from __future__ import annotations

import os
import subprocess
import sys

import ps_workers as w  # noqa: I001  (tests/ is on sys.path)
import pytest
import torch
from torch.testing import assert_close

import mxtorch as mx
from mxtorch import kv
from mxtorch.distributed.env import DistributedConfigError
from mxtorch.kvstore import KVStoreError
from mxtorch.kvstore.ps import PSConfig, protocol
from mxtorch.kvstore.ps.optimizer_spec import apply_hyper, build_optimizer, describe_optimizer, hyper_of
from mxtorch.kvstore.ps.protocol import Command, Message
from mxtorch.kvstore.ps.testing import PSJobFailed, run_ps_job
from mxtorch.kvstore.ps.worker import place

BASE_ENV = {"DMLC_ROLE": "worker", "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": "9000",
            "DMLC_NUM_SERVER": "2", "DMLC_NUM_WORKER": "2"}


# ---- configuration -------------------------------------------------------------------------------
def test_config_reads_mxnet_variables():
    cfg = PSConfig.from_env({**BASE_ENV, "DMLC_WORKER_ID": "1", "MXTORCH_PS_HEARTBEAT_S": "0.5",
                             "MXNET_KVSTORE_BIGARRAY_BOUND": "77", "MXTORCH_PS_SECRET": "s3"})
    assert (cfg.role, cfg.worker_id, cfg.num_servers, cfg.num_workers) == ("worker", 1, 2, 2)
    assert cfg.root_address == "tcp://127.0.0.1:9000"
    assert (cfg.heartbeat_s, cfg.dead_s, cfg.bigarray_bound, cfg.secret) == (0.5, 5.0, 77, b"s3")
    assert "s3" not in repr(cfg)
    assert PSConfig.from_env({**BASE_ENV, "RANK": "0"}).worker_id == 0
    assert PSConfig.from_env({**BASE_ENV, "DMLC_NODE_HOST": "10.1.2.3"}).advertised_host() == "10.1.2.3"
    assert PSConfig.from_env(BASE_ENV).advertised_host() == "127.0.0.1"  # the route to the scheduler


@pytest.mark.parametrize("name, value, match", [
    ("DMLC_ROLE", "boss", "DMLC_ROLE='boss'.*one of worker, server, scheduler"),
    ("DMLC_PS_ROOT_PORT", "70000", "DMLC_PS_ROOT_PORT='70000'.*<= 65535"),
    ("DMLC_NUM_SERVER", "0", "DMLC_NUM_SERVER='0'.*>= 1"),
    ("DMLC_WORKER_ID", "2", "DMLC_WORKER_ID='2'.*<= 1"),
    ("MXTORCH_PS_HEARTBEAT_S", "-1", "MXTORCH_PS_HEARTBEAT_S='-1'.*positive number of seconds"),
    ("MXTORCH_PS_DEAD_S", "0.5", "MXTORCH_PS_DEAD_S='0.5'.*more seconds than"),
    ("MXNET_KVSTORE_BIGARRAY_BOUND", "big", "MXNET_KVSTORE_BIGARRAY_BOUND='big'.*integer"),
])
def test_config_errors_quote_the_variable_and_say_how_to_launch(name, value, match):
    with pytest.raises(DistributedConfigError, match=match) as e:
        PSConfig.from_env({**BASE_ENV, name: value})
    assert "mxtorch launch -n N -s M" in str(e.value)


def test_config_missing_variable():
    env = dict(BASE_ENV)
    del env["DMLC_PS_ROOT_URI"]
    with pytest.raises(DistributedConfigError, match="DMLC_PS_ROOT_URI is not set.*mxtorch launch"):
        PSConfig.from_env(env)


def test_interface_address_of_loopback_and_unknown_interface():
    from mxtorch.kvstore.ps.config import interface_address

    assert interface_address("lo") == "127.0.0.1"
    with pytest.raises(DistributedConfigError, match="DMLC_INTERFACE='nosuch0'.*interfaces: .*lo"):
        interface_address("nosuch0")


def test_creating_outside_a_job_says_how_to_launch(monkeypatch):
    for name in ("DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(DistributedConfigError, match="DMLC_ROLE is not set.*mxtorch launch -n N -s M"):
        kv.create("dist_sync")


# ---- wire format ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.uint8,
                                   torch.bool, torch.float64])
@pytest.mark.parametrize("key", [3, "layer.weight", "", -7])
def test_message_round_trip(dtype, key):
    t = (torch.arange(12) % 3).to(dtype).reshape(3, 4)
    msg = Message(Command.PUSH, request_id=2**40 + 5, sender=protocol.worker_node(3), key=key, shard=1,
                  arg=-9, tensors=[t, torch.zeros(0, dtype=dtype), torch.tensor(1, dtype=dtype)])
    back = protocol.decode(protocol.encode(msg))
    assert (back.command, back.request_id, back.sender, back.key, back.shard, back.arg, back.meta) == \
        (Command.PUSH, 2**40 + 5, 15, key, 1, -9, None)
    assert type(back.key) is type(key)
    assert [x.shape for x in back.tensors] == [(3, 4), (0,), ()]
    for a, b in zip(back.tensors, msg.tensors):
        assert b.dtype == a.dtype and torch.equal(a, b)


def test_message_json_frame_only_when_meta_given():
    frames = protocol.encode(Message(Command.PULL, key=1))
    assert len(frames) == 2  # header + key: no JSON on the data path
    back = protocol.decode(protocol.encode(Message(Command.ERROR, meta={"message": "x", "n": [1, 2]})))
    assert back.meta == {"message": "x", "n": [1, 2]} and back.key is None


def test_malformed_messages_are_protocol_errors():
    good = protocol.encode(Message(Command.PUSH, key=1, tensors=[torch.ones(4)]))
    with pytest.raises(protocol.ProtocolError, match="magic"):
        protocol.decode([b"XXXX" + good[0][4:], *good[1:]])
    with pytest.raises(protocol.ProtocolError, match="does not hold a float32 tensor"):
        protocol.decode([good[0], good[1], b"\0" * 12])
    with pytest.raises(protocol.ProtocolError, match="announces 1 tensors"):
        protocol.decode(good[:2])


def test_tree_packing_keeps_tuples_none_and_tensors():
    tensors: list[torch.Tensor] = []
    obj = (torch.ones(2), None, (torch.zeros(1), 3.5))
    packed = protocol.pack_tree(obj, tensors)
    back = protocol.unpack_tree(packed, tensors)
    assert len(tensors) == 2 and back[1] is None and back[2][1] == 3.5
    assert torch.equal(back[0], torch.ones(2)) and torch.equal(back[2][0], torch.zeros(1))


def test_hmac_sign_verify():
    proof = protocol.sign(b"k", "hello", "nonce", b"id")
    assert protocol.verify(b"k", proof, "hello", "nonce", b"id")
    assert not protocol.verify(b"other", proof, "hello", "nonce", b"id")
    assert not protocol.verify(b"k", proof, "hello", "nonc", b"eid")


def test_node_ids_follow_ps_lite():
    assert protocol.server_node(0) == 8 and protocol.worker_node(0) == 9
    assert protocol.describe_node(13) == "worker 2" and protocol.describe_node(10) == "server 1"
    assert [protocol.node_group(i) for i in (1, 8, 9)] == [1, 2, 4]


# ---- optimizer declaration -------------------------------------------------------------------------
def test_optimizer_declaration_round_trip():
    sched = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5)
    opt = mx.optimizer.Adam(learning_rate=0.01, beta1=0.8, wd=0.1, lr_scheduler=sched, multi_precision=True)
    opt.set_lr_mult({0: 2.0, "b": 0.5})
    built = build_optimizer(describe_optimizer(opt))
    assert type(built) is mx.optimizer.Adam
    assert (built.beta1, built.wd, built.multi_precision) == (0.8, 0.1, True)
    assert built.lr_mult == {0: 2.0, "b": 0.5}
    assert [built.lr_scheduler(n) for n in (1, 3, 5)] == [sched(n) for n in (1, 3, 5)]
    apply_hyper(built, {"rescale_grad": 0.25, "wd": 0.2, "lr": None})
    assert (built.rescale_grad, built.wd) == (0.25, 0.2)
    assert hyper_of(opt)["lr"] is None  # a scheduler owns it


def test_unsendable_optimizers_are_clear_errors():
    class Mine(mx.optimizer.SGD):
        pass

    with pytest.raises(KVStoreError, match="not registered.*SERVER_IMPORTS.*update_on_kvstore=False"):
        describe_optimizer(Mine())
    with pytest.raises(KVStoreError, match="lr_scheduler.*update_on_kvstore=False"):
        describe_optimizer(mx.optimizer.SGD(lr_scheduler=lambda n: 0.1))


def test_adopt_takes_the_buffer_only_where_nothing_can_tell():
    from mxtorch.kvstore.ps.worker import _adopt

    data = torch.arange(6, dtype=torch.float32)
    plain = torch.zeros(2, 3)
    assert _adopt(plain, data) and plain.data_ptr() == data.data_ptr()
    _exact(plain, data.view(2, 3))
    param = torch.nn.Parameter(torch.zeros(6))
    with torch.no_grad():
        assert _adopt(param, torch.ones(6))
    assert param.is_leaf and param.requires_grad and float(param.detach().sum()) == 6.0
    base = torch.zeros(6)
    alias = base.view(2, 3)
    assert not _adopt(base, data) and not _adopt(alias, data)  # shared storage
    assert not _adopt(torch.zeros(12)[::2], data)  # a non-contiguous view
    assert not _adopt(torch.zeros(6, dtype=torch.float64), data)  # another dtype
    assert not _adopt(torch.zeros(4), data[2:])  # data not at the start of its storage
    nonleaf = torch.zeros(6, requires_grad=True) * 1
    assert not _adopt(nonleaf, data)


def test_config_adopt_pulls_switch():
    assert PSConfig.from_env(BASE_ENV).adopt_pulls is True
    assert PSConfig.from_env({**BASE_ENV, "MXTORCH_PS_ADOPT_PULLS": "0"}).adopt_pulls is False
    with pytest.raises(DistributedConfigError, match="MXTORCH_PS_ADOPT_PULLS"):
        PSConfig.from_env({**BASE_ENV, "MXTORCH_PS_ADOPT_PULLS": "yes"})


def test_received_frames_are_resent_without_copies():
    import zmq

    ctx = zmq.Context()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    try:
        a.bind("inproc://resend")
        b.connect("inproc://resend")
        t = torch.arange(1 << 16, dtype=torch.float32)
        protocol.send(a, Message(Command.PUSH, key="k", tensors=[t]))
        _, got = protocol.recv(b)
        assert isinstance(got.frames[0], zmq.Frame) and torch.equal(got.tensors[0], t)
        # the received frame goes back as it is; the tensor only describes it
        protocol.send(b, Message(Command.PULL_REPLY, key="k", tensors=got.tensors, frames=got.frames))
        _, back = protocol.recv(a)
        assert torch.equal(back.tensors[0], t)
    finally:
        a.close(0)
        b.close(0)
        ctx.term()


def test_shard_copies_a_resent_frame_before_updating_it():
    from mxtorch.kvstore.ps.shard import KeyShard

    sh = KeyShard("k", 0, 1, (4,), torch.float32, 0, 4)
    received = torch.ones(4)
    sh.set_value(received, frame=object())  # stands for the ZeroMQ frame pulls re-send
    w = sh.writable_value()
    w.add_(1)
    _exact(received, torch.ones(4))  # the buffer a send may still read is untouched
    assert sh.frame is None and w.data_ptr() != received.data_ptr()
    assert sh.writable_value() is w  # now owned: updated in place from here on
    agg_frame = object()
    sh.add_push(0, torch.full((4,), 2.0), agg_frame)
    grad, frame = sh.take_round()
    assert frame is agg_frame and float(grad[0]) == 2.0
    sh.add_push(0, torch.full((4,), 2.0, dtype=torch.float16).to(torch.float32), None)
    assert sh.take_round()[1] is None


def test_a_restored_shard_counts_pushes_by_their_sequence_numbers():
    """Restored at version 2 with 2 workers: worker 1's push 2 (sent again) is not counted; worker
    0's push 4 skips round 3 (lost with the old process), which completes without an update once
    worker 1's push 3 comes; round 4 then holds both pushes 4."""
    from mxtorch.kvstore.ps.shard import KeyShard

    sh = KeyShard("k", 0, 1, (2,), torch.float32, 0, 2, value=torch.zeros(2), version=2, restored=True)
    assert sh.add_push(1, torch.full((2,), 5.0), None, seq=2) == 2 and not sh.round  # a copy: ignored
    assert sh.add_push(0, torch.full((2,), 4.0), None, seq=4) == 4 and sh.skip == {0: 3}
    assert not sh.round_complete(2)
    assert sh.add_push(1, torch.full((2,), 3.0), None, seq=3) == 3
    assert sh.add_push(1, torch.full((2,), 3.0), None, seq=3) == 3  # the copy of a counted push
    assert sh.round_complete(2)
    assert sh.take_round() == (None, None)  # round 3 is lost whole
    sh.version += 1
    assert sh.round == {0} and not sh.skip and not sh.round_complete(2)
    assert sh.add_push(1, torch.full((2,), 6.0), None, seq=4) == 4 and sh.round_complete(2)
    summed, _ = sh.take_round()
    _exact(summed, torch.full((2,), 10.0))
    with pytest.raises(protocol.ProtocolError, match="sequence number -1"):
        sh.add_push(0, torch.ones(2), None, seq=-1)
    fresh = KeyShard("k", 0, 1, (2,), torch.float32, 0, 2, value=torch.zeros(2), version=2)
    assert fresh.add_push(1, torch.ones(2), None, seq=1) == 3  # a slice never restored counts every push


# ---- placement -----------------------------------------------------------------------------------
def test_placement_balances_bytes_and_splits_big_keys():
    loads = [0, 0, 0]
    assert place(10, 4, loads, bound=100) == [(0, 0, 10)]
    assert place(5, 4, loads, bound=100) == [(1, 0, 5)]
    assert place(5, 4, loads, bound=100) == [(2, 0, 5)]
    assert place(1, 4, loads, bound=100) == [(1, 0, 1)]  # fewest bytes; ties go to the lowest rank
    assert place(301, 4, loads, bound=100) == [(0, 0, 101), (1, 101, 100), (2, 201, 100)]
    assert loads == [444, 424, 420]
    assert place(500, 4, [0], bound=100) == [(0, 0, 500)]  # one server, no piece limit: never split
    # a piece limit: slices of at most `piece` elements, a multiple of the servers, dealt round robin
    loads = [0, 0]
    assert place(250, 4, loads, bound=100, piece=100) == [(0, 0, 63), (1, 63, 63), (0, 126, 62), (1, 188, 62)]
    assert loads == [500, 500]
    assert place(250, 4, [0], bound=100, piece=100) == [(0, 0, 84), (0, 84, 83), (0, 167, 83)]
    assert place(250, 4, [0, 0], bound=300, piece=100) == [(0, 0, 250)]  # within the bound: whole
    assert place(60, 4, [0, 0], bound=10, row=10, piece=25) == [(0, 0, 20), (1, 20, 20), (0, 40, 10),
                                                                (1, 50, 10)]  # at row boundaries


def test_slice_optimizer_keeps_a_state_and_count_per_slice():
    from mxtorch.kvstore.ps.shard import KeyShard
    from mxtorch.kvstore.ps.slice_optimizer import SliceOptimizer

    opt = SliceOptimizer(mx.optimizer.Adam(learning_rate=0.1))
    pieces = [KeyShard("w", i, 2, (4,), torch.float32, 2 * i, 2) for i in range(2)]
    weights = [torch.ones(2), torch.ones(2)]
    reference = mx.optimizer.Updater(mx.optimizer.Adam(learning_rate=0.1))
    whole = torch.ones(4)
    for step in range(3):
        grad = torch.tensor([1.0, -2.0, 3.0, 0.5]) * (step + 1)
        for sh, weight in zip(pieces, weights):  # two slices of one key on one server
            opt.step(sh, grad[sh.offset:sh.offset + 2], weight)
        reference("w", grad, whole)
    assert_close(torch.cat(weights), whole)  # Adam's bias correction counted per slice, not twice
    assert opt.counts == {("w", 0): 3, ("w", 1): 3}
    tensors: list[torch.Tensor] = []
    packed = opt.pack([("w", 0), ("w", 1)], tensors)
    again = SliceOptimizer(mx.optimizer.Adam(learning_rate=0.1))
    again.load(packed, tensors)
    assert again.counts == opt.counts and again.optimizer.num_update == 3
    assert_close(again.states[("w", 1)][0], opt.states[("w", 1)][0])
    # the older per-key form names the one slice of the key a server holds
    old = {"states": [[["s", "w"], packed["states"][1][2]]], "counts": [[["s", "w"], 3]], "num_update": 3}
    third = SliceOptimizer(mx.optimizer.Adam())
    third.load(old, tensors, held={"w": [1]})
    assert set(third.states) == {("w", 1)} and third.counts == {("w", 1): 3}
    with pytest.raises(protocol.ProtocolError, match="malformed optimizer state entry"):
        SliceOptimizer(mx.optimizer.Adam()).load(old, tensors, held={"w": [0, 1]})


# ---- real jobs -------------------------------------------------------------------------------------
SMALL_BOUND = {"MXNET_KVSTORE_BIGARRAY_BOUND": "10"}


@pytest.fixture(scope="module")
def semantics():
    return run_ps_job(w.semantics, 2, 2, timeout=120, env=SMALL_BOUND)


def _exact(a, b):
    assert_close(a, b, rtol=0, atol=0)


def test_sync_arithmetic_is_exact_for_every_dtype(semantics):
    for rank, res in enumerate(semantics):
        assert res["meta"] == ("dist_sync", rank, 2, 2, True, True)
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            _exact(res[f"init_{dtype}"], torch.full((2, 3), 5.0, dtype=dtype))  # rank 0's value
            _exact(res[f"push_{dtype}"], torch.full((2, 3), 3.0, dtype=dtype))  # 1 + 2
            _exact(res[f"pushpull_{dtype}"], torch.full((2, 3), 30.0, dtype=dtype))  # 10 + 20
        value, outs = res["str_key"]
        _exact(value, torch.full((4,), rank + 1.0))  # out given: value untouched
        for o in outs:
            _exact(o, torch.full((4,), 3.0))
        _exact(res["list_push"], torch.full((3,), 33.0))  # (1 + 10) + (2 + 20)
        _exact(res["queued"], torch.full((2,), 21.0))  # second round: 10 + 11
        for o in res["broadcast"]:
            _exact(o, torch.full((3,), 7.0))
        assert res["batched"] == [float(2 * k + 1) for k in range(300, 340)]


def test_keys_above_the_bound_are_split_over_the_servers(semantics):
    big = torch.arange(25, dtype=torch.float32).reshape(5, 5)
    for res in semantics:
        assert res["placement"] == ([(0, 0, 13), (1, 13, 12)], [(0, 0, 16), (1, 16, 15)])
        _exact(res["big_init"], big)  # rank 0's
        _exact(res["big_pushpull"], 2 * big + 1)
        _exact(res["big_fp16"], torch.full((31,), 3.0, dtype=torch.float16))  # into a non-contiguous out


def test_usage_errors_are_clear(semantics):
    for res in semantics:
        assert "key 12345 has not been initialized: call kv.init(12345, value)" in res["unknown_key"]
        assert "key 7: pushed shape (4,) float32, but it was initialized as (3,) float32" in res["bad_shape"]
        assert "pushed shape (3,) float64" in res["bad_dtype"]
        assert "key 7 is already initialized as dense (3,) float32; it cannot be initialized again as " \
            "dense (4,) float32" in res["dup_init"]
        _exact(res["rebroadcast"], torch.full((3,), 7.0))  # the first broadcast's value stays
        _exact(res["after_mismatch"], torch.full((2,), 2.0))


def test_init_mismatch_names_key_worker_and_both_shapes(semantics):
    mine = semantics[1]["init_mismatch"]
    assert ("on this worker differs from rank 0's: key 50 has shape (3,) float32 on this worker (rank 1) "
            "but shape (2,) float32 on rank 0") in mine
    assert "key 50 has shape (3,) float32 on worker 1 but shape (2,) float32 on rank 0" in \
        semantics[0]["init_mismatch"]
    assert "key 51 has shape (2,) float16 on this worker (rank 1) but shape (2,) float32 on rank 0" in \
        semantics[1]["init_dtype_mismatch"]


def test_pulls_adopt_the_received_buffer_only_for_unshared_outs(semantics):
    for res in semantics:
        own, moved, view, same = res["adopt"]
        _exact(own, torch.full((6,), 3.0))
        assert moved  # the out now reads the received frame: no copy
        _exact(view, torch.full((2, 3), 3.0))  # the view of a shared out sees the pulled value
        assert same
        _exact(res["opt_after_resend"], torch.full((6,), 1.5))


def test_server_optimizer_follows_hyper_parameter_changes(semantics):
    for res in semantics:
        _exact(res["opt_step1"], torch.full((3,), 2.5))  # 4 - 0.5 * (1 + 2)
        _exact(res["opt_step2"], torch.full((3,), 1.0))  # 2.5 - 0.25 * rescale 2 * 3
        _exact(res["opt_lr_mult"], torch.full((3,), 0.25))  # 1 - 0.25 * lr_mult 0.5 * 2 * 3
        # ten updates of -1e-4 each: lost in fp16 arithmetic, kept by the server's fp32 master copy
        _exact(res["fp16_master"], torch.full((4,), 0.999, dtype=torch.float32).half())


def test_async_applies_pushes_as_they_arrive_in_a_same_script_job_with_a_secret():
    # every role runs the worker function (MXNet's one-script mode); every node proves the secret
    res = run_ps_job(w.async_semantics, 2, 1, timeout=120, mode="same-script",
                     env={"MXTORCH_PS_SECRET": "let-me-in"})
    for r in res:
        assert r["type"] == "dist_async"
        assert r["own_push"][0].item() in (1.0, 2.0)
        assert r["after_barrier"][0].item() in (1.0, 2.0)
        _exact(r["sgd_total"], torch.full((2,), -10.0))
        assert r["dead"] == 0


def test_a_failing_worker_is_reported_with_its_traceback():
    with pytest.raises(PSJobFailed, match=r"(?s)worker 0.*ZeroDivisionError"):
        run_ps_job(w.fails_on_rank0, 1, 1, timeout=60)


def test_module_entry_point_reports_configuration_errors():
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMLC_")}
    env.update({"DMLC_ROLE": "server", "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": "x"})
    proc = subprocess.run([sys.executable, "-m", "mxtorch.kvstore.ps"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert "DMLC_PS_ROOT_PORT='x'" in proc.stderr and "mxtorch launch -n N -s M" in proc.stderr
