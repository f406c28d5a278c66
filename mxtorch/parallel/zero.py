"""Sharded data parallelism (ZeRO stages 1, 2 and 3): ``ParallelConfig(dp, zero=1|2|3)`` and
``Mesh(cfg).trainer(...)``.  The trainer lives in :mod:`mxtorch.gluon.zero_trainer`, beside the
Trainer whose internals it extends."""

from ..gluon.zero_grads import DEFAULT_BUCKET_BYTES
from ..gluon.zero_trainer import (
    ZERO_STAGES,
    ZeroTrainer,
    check_zero_stage,
    optimizer_state_bytes,
    parameter_bytes,
    shard_owners,
)

__all__ = ["ZeroTrainer", "DEFAULT_BUCKET_BYTES", "ZERO_STAGES", "check_zero_stage", "shard_owners",
           "optimizer_state_bytes", "parameter_bytes"]
