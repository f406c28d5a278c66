"""The allreduce KVStore over a process subgroup: 4 ranks as dp=2 x pp=2, stores over {0, 2} and {1, 3}.

One job checks everything (4 processes on a small machine take a while to start): sums stay
inside the group, broadcasts come from the group's first rank, rank/num_workers are the
group's, row_sparse and compressed exchanges (2bit all-gather, fp16 all-reduce, PowerSGD's
collective_sum) use the group, a shape mismatch in one group raises there while the other
group goes on, and a Trainer (gradient hooks) matches single-process training on the group's
concatenated batch.
"""

from __future__ import annotations

import subgroup_workers as w
import torch
from torch.testing import assert_close

from mxtorch.distributed.testing import run_workers


def test_store_over_a_subgroup():
    results = run_workers(w.subgroup_store, 4, timeout=120, env={"MXTORCH_DIST_TIMEOUT": "30"})
    reference = {tuple(ranks): w.train(ranks, seed=100 + ranks[0]) for ranks in w.GROUPS}
    for g, res in enumerate(results):
        ranks = w.GROUPS[g % 2]
        group_rank = ranks.index(g)
        first = ranks[0]
        total = float(sum(10 ** r for r in ranks))  # 101 or 1010; the job's sum would be 1111
        assert res["global"] == g and res["ranks"] == ranks
        assert res["errors"]["outside"].startswith(f"KVStoreError: global rank {g}: the process_group given "
                                                   "does not contain this process")
        assert res["errors"]["type"].startswith("TypeError: process_group must be a torch.distributed")
        assert res["meta"] == ("horovod", group_rank, 2, True, True)
        assert_close(res["one"], torch.full((3,), total), rtol=0, atol=0)
        ints, dense_out = res["int_out"]
        assert_close(ints, torch.full((2,), 10 ** g))  # out given: value untouched
        assert_close(dense_out, torch.full((2,), int(total)))
        for k, s in enumerate(res["bucketed"]):
            assert_close(s, torch.full((k + 1,), total), rtol=0, atol=0)
        if g in w.GROUPS[1]:
            assert_close(res["only_b"], torch.full((2,), total))
        assert_close(res["broadcast"], torch.full((3,), float(first + 7)))  # the group's first rank's
        assert_close(res["init"], torch.full((2,), float(first + 5)))
        rows = torch.zeros(6, 2)
        for r in ranks:
            rows[r] += 10.0 ** r
            rows[5] += 10.0 ** r
        assert_close(res["row_sparse"], rows, rtol=0, atol=0)
        if first == 0:  # group {0, 2}: rank 2 (group rank 1) passed (3, 5)
            for text in (f"rank {group_rank} of 2 in process group [0, 2] (global rank {g}): pushpull",
                         "key 'bad': rank 1 (global 2) has shape (3, 5) float32, "
                         "expected rank 0 (global 0)'s (3, 4) float32"):
                assert text in res["mismatch"], res["mismatch"]
        else:
            assert res["mismatch"] == "no error"
        assert_close(res["after"], torch.full((2,), 2.0))
        comp = res["compressed"]
        two_bit = torch.zeros(5)
        two_bit[ranks] = 0.5
        two_bit[4] = 1.0
        assert_close(comp["2bit"], two_bit, rtol=0, atol=0)
        assert_close(comp["fp16"], torch.full((4,), total), rtol=0, atol=0)
        rank_one = torch.outer(torch.arange(1.0, 9.0), torch.linspace(-1.0, 1.0, 6))
        assert_close(comp["powersgd"], sum(r + 1 for r in ranks) * rank_one, rtol=1e-5, atol=1e-5)
    for g, res in enumerate(results):
        ranks = w.GROUPS[g % 2]
        peer = results[ranks[1 - ranks.index(g)]]["weights"]
        for mine, theirs, ref in zip(res["weights"], peer, reference[tuple(ranks)]):
            assert_close(mine, theirs, rtol=0, atol=0)  # the two replicas of a stage agree exactly
            assert_close(mine, ref, rtol=1e-5, atol=1e-6)  # = one process on the group's whole batch
