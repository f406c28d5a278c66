"""``hvd.elastic``: Horovod's elastic API on :mod:`mxtorch.elastic` (in-process recovery).

``hvd.elastic.run`` and ``hvd.elastic.State`` are :func:`mxtorch.elastic.run` and
:class:`mxtorch.elastic.State`; ``ObjectState`` is the same class (any named objects and values),
``TorchState(model, optimizer, **kwargs)`` Horovod's spelling for a model and its optimizer (here a
Gluon block and a Trainer, or anything with ``state_dict``/``load_state_dict``).
``HostsUpdatedInterrupt`` is what ``State.commit()`` raises when a worker waits to join
(:class:`mxtorch.elastic.MembershipChanged`); a failed collective is a ``RuntimeError`` from
torch.distributed, or an mxtorch error raised from one, where Horovod raises ``HorovodInternalError``.

``hvd.init()`` in an in-process elastic job joins it (:func:`mxtorch.elastic.init`), and
``hvd.rank()``/``hvd.size()`` follow each re-formed group, and so does ``hvd.DistributedTrainer``
on the global set: after the change it averages over the new ``hvd.size()`` (its store or its own
reduction runs on the new group), so ``step(local_batch)`` keeps Horovod's rule at any size.  A
trainer on an added process set cannot follow (the sets are dropped, as in Horovod's elastic
mode): its next step raises.  ``gluon.Trainer(..., kvstore='horovod')`` with ``step(global_batch)``
(MXNet's rule, which the default reset keeps) works as well.
"""

from __future__ import annotations

from typing import Any

from ..elastic import ElasticBatchSampler, MembershipChanged, State, run
from ..elastic.inprocess import init, on_reform
from . import _basics

__all__ = ["run", "State", "ObjectState", "TorchState", "HostsUpdatedInterrupt", "ElasticSampler", "init"]

ObjectState = State
HostsUpdatedInterrupt = MembershipChanged
ElasticSampler = ElasticBatchSampler


class TorchState(State):
    """Horovod's ``TorchState(model=None, optimizer=None, **kwargs)``: the model and optimizer are
    kept through their ``state_dict``/``load_state_dict``, the keyword values as attributes."""

    def __init__(self, model: Any = None, optimizer: Any = None, **kwargs: Any) -> None:
        objects = {k: v for k, v in (("model", model), ("optimizer", optimizer)) if v is not None}
        super().__init__(**objects, **kwargs)


def _follow_group() -> None:
    """Read ``hvd.rank()``/``hvd.size()`` again after the group was re-formed."""
    layout = _basics._layout
    if layout is None or layout.backend == "none":
        return
    from ..distributed import group

    info = group.world()
    _basics._layout = _basics._Layout(info.world_size, info.rank, info.local_size, info.local_rank,
                                      info.cross_size, info.cross_rank, group.backend())


on_reform(_follow_group)
