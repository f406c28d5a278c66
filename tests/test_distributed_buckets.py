"""The shared bucket layout of the allreduce store's overlap and ZeRO 2: backward order, one dtype
and device per bucket, at most bucket_bytes each."""

from __future__ import annotations

import torch

from mxtorch.distributed.buckets import backward_order_groups


def test_buckets_fill_in_backward_order_per_dtype_and_close_at_the_byte_cap() -> None:
    f32 = [torch.zeros(4), torch.zeros(4), torch.zeros(8), torch.zeros(2)]  # 16, 16, 32, 8 bytes
    f16 = torch.zeros(4, dtype=torch.float16)  # 8 bytes
    order = [(3, f32[3]), (2, f32[2]), (9, f16), (1, f32[1]), (0, f32[0])]
    # 8 + 32 = 40 fits in 40; 16 more closes it; 16 + 16 = 32 stays open; the float16 bucket alone
    assert backward_order_groups(order, 40) == [[3, 2], [1, 0], [9]]
    # a tensor larger than the cap gets a bucket of its own
    assert backward_order_groups(order, 10) == [[3], [2], [1], [0], [9]]
    assert backward_order_groups([], 10) == []
