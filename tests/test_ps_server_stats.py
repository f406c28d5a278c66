"""kv.server_stats(): a parameter server's counters per command and key slice (issue 30)."""

from __future__ import annotations

import ps_stats_workers as w  # noqa: I001  (tests/ is on sys.path)
import torch

from mxtorch.kvstore.ps.protocol import Command, Message
from mxtorch.kvstore.ps.server_stats import ServerStats
from mxtorch.kvstore.ps.shard import KeyShard
from mxtorch.kvstore.ps.testing import run_ps_job


def test_dist_sync_counts_equal_the_pushes_and_pulls_made():
    results = run_ps_job(w.counted_job, 2, 1, timeout=120)
    stats = results[0]["stats"]
    assert len(stats) == 1 and stats[0]["server"] == 0
    (server,) = stats
    cmds = server["commands"]
    assert cmds["PUSH"]["requests"] == 2 * (w.PUSHES + 1)
    assert cmds["PULL"]["requests"] == 2 * w.PULLS
    assert cmds["INIT"]["requests"] == 2 * 2  # each worker declares both keys
    assert cmds["PUSH"]["bytes_in"] == 2 * (w.PUSHES * 20 + 10) * 4  # float32 payloads
    assert cmds["PULL"]["bytes_in"] == 0
    assert cmds["PULL"]["bytes_out"] == 2 * w.PULLS * 20 * 4
    for row in cmds.values():
        assert row["queue_wait_s"] >= 0 and row["busy_s"] >= 0
    by_key = {s["key"]: s for s in server["keys"]}
    assert set(by_key) == {3, "w"}
    k3 = by_key[3]
    assert k3["range"] == [0, 20]
    assert k3["commands"]["PUSH"]["requests"] == 2 * w.PUSHES
    assert k3["commands"]["PUSH"]["bytes_in"] == 2 * w.PUSHES * 20 * 4
    assert k3["commands"]["PULL"]["requests"] == 2 * w.PULLS
    assert k3["commands"]["PULL"]["bytes_out"] == 2 * w.PULLS * 20 * 4
    assert by_key["w"]["commands"]["PUSH"]["requests"] == 2
    assert "PULL" not in by_key["w"]["commands"]
    assert results[1]["stats"][0]["commands"]["PUSH"] == cmds["PUSH"]  # both asked after the same barrier


def test_requests_for_keys_a_server_does_not_hold_grow_no_rows():
    stats = ServerStats()
    held = KeyShard(key=7, shard=0, num_shards=1, shape=(4,), dtype=torch.float32, offset=0, numel=4)
    held.value = torch.zeros(4)
    shards = {(7, 0): held}
    for key in range(1000):  # a peer naming keys the server never saw
        with stats.handling(Message(Command.PUSH, key=key, tensors=[torch.ones(4)]), 0.0, shards):
            pass
    report = stats.report(0)
    assert report["commands"]["PUSH"]["requests"] == 1000
    assert report["commands"]["PUSH"]["bytes_in"] == 1000 * 16
    assert [(s["key"], s["commands"]["PUSH"]["requests"]) for s in report["keys"]] == [(7, 1)]
