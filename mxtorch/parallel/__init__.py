"""Model parallelism for Gluon networks: pipeline stages across processes, combined with data parallelism.

``ParallelConfig(dp, pp, tp)`` lays the launched world out as a mesh (see :mod:`.config` for the
rank layout); ``parallelize(net, cfg, micro_batches, schedule)`` returns a
:class:`~.pipeline.PipelineNet` whose ``train_step`` runs PyTorch's pipeline schedules
(``torch.distributed.pipelining``) and whose ``kvstore`` sums gradients over the data-parallel
group, and ``tp > 1`` splits Dense/convolution pairs and embeddings over tensor-parallel ranks
(:mod:`.tensor`, on DTensor; :class:`ParallelSoftmaxCrossEntropyLoss` for a vocab-split output) and
RNN/LSTM/GRU layers by hidden units (:mod:`.tp_rnn`).
``ParallelConfig(dp, zero=1|2)`` with ``Mesh(cfg).trainer(...)`` (a :class:`~.zero.ZeroTrainer`)
shards optimizer states and gradients over the data-parallel ranks.
``plan(net, sample_input, world_size, memory_per_device, batch_size)`` ranks the layouts
(:mod:`.planner`).
"""

from .config import Mesh, ParallelConfig
from .pipeline import SCHEDULES, PipelineNet, parallelize
from .planner import Plan, plan
from .tp_loss import ParallelSoftmaxCrossEntropyLoss
from .zero import ZeroTrainer

__all__ = ["ParallelConfig", "Mesh", "parallelize", "PipelineNet", "SCHEDULES", "plan", "Plan",
           "ParallelSoftmaxCrossEntropyLoss", "ZeroTrainer"]
