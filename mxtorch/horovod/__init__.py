"""``horovod.mxnet``'s API on mxtorch: ``import mxtorch.horovod as hvd``.

Collectives run on torch.distributed (gloo for CPU tensors, NCCL for CUDA tensors) in the process
group of :mod:`mxtorch.distributed`; launch with ``mxtorch launch`` or ``torchrun``.  A script
written for ``horovod.mxnet`` runs with its import changed::

    import mxtorch as mx
    import mxtorch.horovod as hvd

    hvd.init()
    net.initialize(ctx=mx.cpu())
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    ...
    trainer.step(local_batch_size)

Differences from Horovod, and why:

* Collectives run in call order, so every rank must issue them in the same order; names are
  checked, not used for matching.  A header exchanged before each collective turns mismatched
  calls (names, shapes, dtypes, factors) into :class:`CollectiveMismatchError` on every rank.
* ``priority`` is accepted and ignored; ops are synchronous and not differentiable.
* ``hvd.Adasum`` (which Horovod's MXNet binding refuses) runs the reference algorithm over a
  gathered copy of every rank's tensor (see :mod:`mxtorch.horovod._adasum`).
* Process sets are torch.distributed groups: adding or removing one is collective over the whole
  job (no ``HOROVOD_DYNAMIC_PROCESS_SETS`` needed); MPI communicators are not supported.
* ``hvd.join()`` (from ``horovod.torch``) serves allreduces; joined ranks contribute neutral
  values for Min, Max and Product where Horovod contributes zeros.
* ``broadcast_object``/``allgather_object`` send JSON (see :mod:`mxtorch.horovod._codec` for the
  supported types) instead of cloudpickle, so nothing received is ever unpickled.
* fp16/bf16 sums over more than two ranks accumulate in fp32 (rounded once at the end).
* ``DistributedOptimizer`` averages inside the reduction rather than through ``rescale_grad``,
  because the Trainer rewrites ``rescale_grad`` at every step.
* ``DistributedTrainer`` with Horovod's defaults runs on the 'horovod' KVStore, which overlaps the
  reduction with backward and, like every distributed store, gives all ranks rank 0's parameters
  when the Trainer is created; with compression, a predivide factor or ``num_groups`` it reduces
  at ``step`` exactly as Horovod does.
* ``cross_rank``/``cross_size`` are the node index and count (Horovod's "same local rank"
  definition gives the same numbers on evenly filled nodes).
* A process not started by a launcher runs as a one-process job (``size() == 1``), as Horovod
  does; one started by a launcher joins :mod:`mxtorch.distributed`'s process group.
"""

from __future__ import annotations

from . import elastic as elastic  # hvd.elastic.run / State (in-process elastic recovery)
from ._basics import (
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    gloo_built,
    gloo_enabled,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    rocm_built,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
)
from ._codec import ObjectDecodingError, ObjectEncodingError
from ._compression import Compression, Compressor, FP16Compressor, NoneCompressor
from ._distributed_trainer import DistributedOptimizer, DistributedTrainer, broadcast_parameters
from ._errors import (
    CollectiveMismatchError,
    CollectiveTypeError,
    CollectiveValueError,
    HorovodError,
    NotInitializedError,
)
from ._gather import allgather, alltoall, grouped_allgather, grouped_reducescatter, reducescatter
from ._join import join
from ._objects import allgather_object, broadcast_object
from ._ops import (
    Adasum,
    Average,
    Max,
    Min,
    Product,
    ReduceOp,
    Sum,
    allreduce,
    allreduce_,
    barrier,
    broadcast,
    broadcast_,
    grouped_allreduce,
    grouped_allreduce_,
)
from ._process_sets import ProcessSet, add_process_set, global_process_set, init, remove_process_set

__all__ = [
    # set-up and topology
    "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank", "cross_size",
    "cross_rank", "mpi_threads_supported", "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built",
    "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built",
    # process sets
    "ProcessSet", "global_process_set", "add_process_set", "remove_process_set",
    # collectives
    "ReduceOp", "Average", "Sum", "Adasum", "Min", "Max", "Product", "allreduce", "allreduce_",
    "grouped_allreduce", "grouped_allreduce_", "allgather", "grouped_allgather", "broadcast", "broadcast_",
    "alltoall", "reducescatter", "grouped_reducescatter", "barrier", "join", "broadcast_object",
    "allgather_object",
    # training
    "Compression", "Compressor", "NoneCompressor", "FP16Compressor", "DistributedTrainer",
    "DistributedOptimizer", "broadcast_parameters",
    # timeline
    "start_timeline", "stop_timeline",
    # errors
    "HorovodError", "NotInitializedError", "CollectiveMismatchError", "CollectiveValueError",
    "CollectiveTypeError", "ObjectEncodingError",
    "ObjectDecodingError",
]
