"""'allreduce' ('horovod', 'nccl'): workers sum their values with torch.distributed collectives.

There is no server and no stored value: ``pushpull`` sums a key's value over every worker
(and over the list of local values, if several) and ``broadcast`` copies rank 0's value to
every worker, as MXNet's horovod store does.  Each worker then runs the optimizer itself.
``process_group=pg`` (a ``torch.distributed`` subgroup, e.g. the data-parallel replicas of
one pipeline stage) confines every collective of the store to ``pg``: "every worker" above
means every rank of ``pg``, "rank 0" its first rank, and ``rank``/``num_workers`` are the
rank within ``pg`` and its size.
``'nccl'`` insists on CUDA and NCCL; the other names use gloo for CPU tensors and NCCL for
CUDA tensors when the GPUs allow.

Cost model.  A single tensor is reduced in place by exactly one ``all_reduce``.  A list of
keys packs its small tensors (below :data:`ALONE_BYTES`) into flat buckets, one copy in and
one out, because on gloo every collective costs milliseconds of latency while a copy costs
a tenth of a millisecond per megabyte.  Gradients go further (:meth:`attach_gradient_hooks`):
each one is copied into its bucket as soon as autograd has accumulated it, and a bucket's
reduction starts while the rest of the backward pass runs, as in DDP.

Safety.  The first time a key is used (and whenever its shape or dtype changes) the workers
compare its shape and dtype with one small ``all_gather``; a mismatch raises on every rank,
naming each differing rank.  Every
collective is bounded by the process group's timeout (``MXTORCH_DIST_TIMEOUT``), so a dead
or stuck peer ends in a :class:`KVStoreError`, never a hang.

Modules, one job each: :mod:`.store` (the KVStore interface), :mod:`.buffers` (fusion of small
tensors into buckets), :mod:`.collectives` (sum, broadcast, descriptor agreement),
:mod:`.compressed` (compressed payload exchange), :mod:`.overlap` (reduction during backward).
"""

from .buffers import ALONE_BYTES, DEFAULT_BUCKET_BYTES
from .overlap import GradientSource
from .store import AllreduceKVStore

__all__ = ["AllreduceKVStore", "ALONE_BYTES", "DEFAULT_BUCKET_BYTES", "GradientSource"]
