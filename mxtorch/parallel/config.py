"""The parallel layout of a job: how many ways data, pipeline and tensor parallel, and who is where.

Rank layout (Megatron's order: tensor parallel innermost, pipeline outermost)::

    rank = (pp_rank * dp + dp_rank) * tp + tp_rank

so the ranks of one pipeline stage are consecutive (with ``mxtorch launch`` they share a host
first, where the data-parallel all-reduce of every step runs), and consecutive stages sit
``dp * tp`` ranks apart (one activation per micro-batch crosses that boundary).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

from ..base import MXNetError
from ..distributed import group

__all__ = ["ParallelConfig", "Mesh"]


@dataclass(frozen=True)
class ParallelConfig:
    """``dp`` data-parallel replicas × ``pp`` pipeline stages × ``tp`` tensor-parallel shards.

    ``zero``: how the data-parallel ranks shard the training state (:mod:`.zero`): 0 a plain
    replica, 1 optimizer states, 2 optimizer states and reduced gradients, 3 also the parameters
    (gathered per layer for forward and backward; ``Mesh.trainer``).
    """

    dp: int = 1
    pp: int = 1
    tp: int = 1
    zero: int = 0

    def __post_init__(self) -> None:
        for name in ("dp", "pp", "tp"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"ParallelConfig: {name} must be a positive integer, got {v!r}")
        from .zero import check_zero_stage

        check_zero_stage(self.zero, "ParallelConfig")

    @property
    def world_size(self) -> int:
        return self.dp * self.pp * self.tp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """``(dp_rank, pp_rank, tp_rank)`` of global ``rank``."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} is outside a world of {self.world_size}")
        tp_rank = rank % self.tp
        rest = rank // self.tp
        return rest % self.dp, rest // self.dp, tp_rank

    def rank_of(self, dp_rank: int, pp_rank: int, tp_rank: int = 0) -> int:
        return (pp_rank * self.dp + dp_rank) * self.tp + tp_rank


class Mesh:
    """This rank's place in a :class:`ParallelConfig` and its process groups (made by every rank).

    ``pp_group``: the ranks holding the stages of this rank's pipeline (same dp and tp rank);
    ``dp_group``: the ranks holding the same stage (same pp and tp rank); ``tp_group``: the ranks
    sharing the layers of one stage (same dp and pp rank), with ``tp_mesh`` its 1-D DeviceMesh for
    DTensor.  All carry the job's timeout (``MXTORCH_DIST_TIMEOUT``), so a dead peer ends a
    send/recv instead of hanging.
    """

    def __init__(self, cfg: ParallelConfig) -> None:
        info = group.init()
        if info.world_size != cfg.world_size:
            raise MXNetError(
                f"ParallelConfig(dp={cfg.dp}, pp={cfg.pp}, tp={cfg.tp}) needs dp*pp*tp = {cfg.world_size} "
                f"processes but the job has {info.world_size}: launch {cfg.world_size} processes "
                f"(mxtorch launch -n {cfg.world_size} ...) or change the config so that it multiplies to "
                f"{info.world_size}"
            )
        self.cfg = cfg
        self.rank = info.rank
        self.dp_rank, self.pp_rank, self.tp_rank = cfg.coords(info.rank)
        timeout = datetime.timedelta(seconds=group.timeout())
        # every rank creates every group, in the same order (torch's rule for new_group)
        self.pp_ranks, self.pp_group = self._groups(
            lambda d, t: [cfg.rank_of(d, p, t) for p in range(cfg.pp)], cfg.dp, cfg.tp, timeout)
        self.dp_ranks, self.dp_group = self._groups(
            lambda p, t: [cfg.rank_of(d, p, t) for d in range(cfg.dp)], cfg.pp, cfg.tp, timeout)
        self.tp_ranks, self.tp_group = self._groups(
            lambda d, p: [cfg.rank_of(d, p, t) for t in range(cfg.tp)], cfg.dp, cfg.pp, timeout)
        self._tp_mesh: Any = None

    def _groups(self, members: Any, n_a: int, n_b: int,
                timeout: datetime.timedelta) -> tuple[list[int], dist.ProcessGroup]:
        """Create the group ``members(a, b)`` for every a < n_a, b < n_b; return this rank's."""
        mine: tuple[list[int], dist.ProcessGroup] | None = None
        for a in range(n_a):
            for b in range(n_b):
                ranks = members(a, b)
                g = dist.new_group(ranks, timeout=timeout)
                if self.rank in ranks:
                    mine = (ranks, g)
        assert mine is not None
        return mine

    def trainer(self, params: Any, optimizer: Any, optimizer_params: dict[str, Any] | None = None,
                compression_params: dict[str, Any] | None = None, backward_passes_per_step: int = 1) -> Any:
        """A Trainer for this rank's parameters over its data-parallel group: a
        :class:`~.zero.ZeroTrainer` of stage ``cfg.zero``, or a plain Trainer summing over
        ``dp_group`` through the 'allreduce' store (``zero=0``); ``compression_params`` go to
        either (a ZeroTrainer takes any compressor with zero=1, 'fp16'/'bf16' with zero 2 and 3).
        ``backward_passes_per_step``: backward passes before each step (a pipeline's micro-batches):
        the gradients are reduced once, after the last (zero 0 and 1)."""
        from ..gluon.trainer import Trainer
        from ..kvstore.allreduce import AllreduceKVStore
        from .zero import ZeroTrainer

        if self.cfg.zero:
            return ZeroTrainer(params, optimizer, optimizer_params, zero=self.cfg.zero,
                               process_group=self.dp_group, compression_params=compression_params,
                               backward_passes_per_step=backward_passes_per_step)
        store = AllreduceKVStore(process_group=self.dp_group) if self.cfg.dp > 1 else None
        if store is not None:
            store.backward_passes_per_step = backward_passes_per_step
        return Trainer(params, optimizer, optimizer_params, kvstore=store,
                       compression_params=compression_params)

    def tp_mesh(self, device_type: str) -> Any:
        """The tensor-parallel group as a 1-D ``DeviceMesh`` (made once)."""
        if self._tp_mesh is None:
            from torch.distributed.device_mesh import DeviceMesh

            assert self.tp_group is not None
            self._tp_mesh = DeviceMesh.from_group(self.tp_group, device_type, mesh_dim_names=("tp",))
        return self._tp_mesh
