"""Elastic training: allreduce jobs that go on when workers leave or join.

``mxtorch launch --elastic MIN:MAX -n N COMMAND`` (:mod:`mxtorch.launcher.elastic`) runs one torch
elastic agent per worker (:mod:`mxtorch.launcher.elastic_agent`) at a c10d rendezvous the launcher hosts;
``mxtorch launch --join HOST:PORT`` adds one.  A lost or added worker makes the agents re-form the
group and restart their workers at the new world size.  ``mxtorch train`` run this way resumes
from its newest checkpoint on every start, re-shards the data with :class:`ElasticBatchSampler`
(same global batches for any world size) and logs the change (:func:`describe_change`).
"""

from .env import MXTORCH_ELASTIC, MXTORCH_ELASTIC_HOST, ElasticJob, is_elastic_worker, parse_range
from .membership import describe_change, gather_hosts
from .sampler import ElasticBatchSampler

__all__ = ["MXTORCH_ELASTIC", "MXTORCH_ELASTIC_HOST", "ElasticBatchSampler", "ElasticJob", "describe_change",
           "gather_hosts", "is_elastic_worker", "parse_range"]
