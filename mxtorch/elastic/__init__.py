"""Elastic training: allreduce jobs that go on when workers leave or join.

``mxtorch launch --elastic MIN:MAX -n N COMMAND`` (:mod:`mxtorch.launcher.elastic`) runs one torch
elastic agent per worker (:mod:`mxtorch.launcher.elastic_agent`) at a c10d rendezvous the launcher hosts;
``mxtorch launch --join HOST:PORT`` adds one.  A lost or added worker makes the agents re-form the
group and restart their workers at the new world size.  ``mxtorch train`` run this way resumes
from its newest checkpoint on every start, re-shards the data with :class:`ElasticBatchSampler`
(same global batches for any world size) and logs the change (:func:`describe_change`).

In-process mode (Horovod's model; ``MXTORCH_ELASTIC_MODE=inprocess``): :class:`State` holds the
job's state (commit/restore/sync through the Stateful protocol) and :func:`run` re-forms the
group inside the surviving processes when a peer fails or one joins (:mod:`.inprocess`).
"""

from .env import (
    MXTORCH_ELASTIC,
    MXTORCH_ELASTIC_HOST,
    MXTORCH_ELASTIC_MODE,
    ElasticJob,
    is_elastic_worker,
    parse_range,
)
from .inprocess import MembershipChanged, current, in_process_mode, init, is_peer_failure
from .membership import describe_change, gather_hosts
from .run import run
from .sampler import ElasticBatchSampler
from .state import State

__all__ = ["MXTORCH_ELASTIC", "MXTORCH_ELASTIC_HOST", "MXTORCH_ELASTIC_MODE", "ElasticBatchSampler",
           "ElasticJob", "MembershipChanged", "State", "current", "describe_change", "gather_hosts",
           "in_process_mode", "init", "is_elastic_worker", "is_peer_failure", "parse_range", "run"]
