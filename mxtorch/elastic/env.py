"""What an elastic job's processes share: environment variables, store keys, the MIN:MAX range.

An elastic job (``mxtorch launch --elastic MIN:MAX``) is one torch elastic agent per worker
(:mod:`mxtorch.launcher.elastic_agent`), all meeting at a c10d rendezvous whose TCP store the
launcher hosts.  The launcher writes the job's settings into that store as JSON (:data:`JOB_KEY`),
so that an agent started later (``mxtorch launch --join HOST:PORT``) needs only the address.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .. import bounded_json
from ..distributed.env import LaunchError

__all__ = ["MXTORCH_ELASTIC", "MXTORCH_ELASTIC_HOST", "MXTORCH_ELASTIC_ENDPOINT", "MXTORCH_ELASTIC_MODE",
           "JOB_KEY", "ElasticJob",
           "parse_range", "parse_endpoint", "is_elastic_worker", "host_name"]

MXTORCH_ELASTIC = "MXTORCH_ELASTIC"
"""``1`` in the workers of an elastic job: ``mxtorch train`` then resumes from its newest checkpoint on
every (re)start and re-shards the data for the current world size."""
MXTORCH_ELASTIC_HOST = "MXTORCH_ELASTIC_HOST"
"""The name of the agent (the "host") that started this worker; the membership log uses it."""
MXTORCH_ELASTIC_ENDPOINT = "MXTORCH_ELASTIC_ENDPOINT"
"""``HOST:PORT`` of the job's rendezvous store (what ``mxtorch launch --join`` needs)."""
MXTORCH_ELASTIC_MODE = "MXTORCH_ELASTIC_MODE"
"""``inprocess``: the job recovers inside the running worker processes (``@elastic.run``,
:mod:`mxtorch.elastic.inprocess`); its agents replace a lost worker instead of restarting the
others.  Unset or ``restart``: the agents restart every worker at each membership change."""

JOB_KEY = "mxtorch/elastic/job"
AGENT_COUNT_KEY = "mxtorch/elastic/agents"
_RANGE_HINT = "expected MIN:MAX, the fewest and the most workers the job runs with (e.g. --elastic 2:4)"


def parse_range(text: str) -> tuple[int, int]:
    """``'2:4'`` -> ``(2, 4)``; :class:`LaunchError` for anything else."""
    lo, sep, hi = str(text).partition(":")
    try:
        if not sep:
            raise ValueError
        mn, mx = int(lo), int(hi)
    except ValueError:
        raise LaunchError(f"--elastic {text!r}: {_RANGE_HINT}") from None
    if mn < 1 or mx < mn:
        raise LaunchError(f"--elastic {text!r}: need 1 <= MIN <= MAX; {_RANGE_HINT}")
    return mn, mx


def parse_endpoint(text: str, option: str = "--join") -> tuple[str, int]:
    """``'127.0.0.1:29400'`` -> ``('127.0.0.1', 29400)``."""
    host, sep, port = str(text).rpartition(":")
    try:
        if not sep or not host:
            raise ValueError
        p = int(port)
        if not 0 < p < 65536:
            raise ValueError
    except ValueError:
        raise LaunchError(f"{option} {text!r}: expected HOST:PORT of the job's rendezvous (printed by "
                          "`mxtorch launch --elastic`), e.g. 127.0.0.1:29400") from None
    return host, p


@dataclass
class ElasticJob:
    """The settings every agent of one elastic job uses (stored as JSON under :data:`JOB_KEY`)."""

    run_id: str
    min_workers: int
    max_workers: int
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    max_restarts: int = 10
    rendezvous_timeout: float = 600.0
    start_workers: int = 0
    """How many workers the job starts with (0: MIN); in-process mode forms its first group of them."""

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> ElasticJob:
        try:
            raw: Any = bounded_json.loads(data, where, ValueError, expect=dict)
            return cls(run_id=str(raw["run_id"]), min_workers=int(raw["min_workers"]),
                       max_workers=int(raw["max_workers"]), command=[str(c) for c in raw["command"]],
                       env={str(k): str(v) for k, v in raw.get("env", {}).items()},
                       max_restarts=int(raw.get("max_restarts", 10)),
                       rendezvous_timeout=float(raw.get("rendezvous_timeout", 600.0)),
                       start_workers=int(raw.get("start_workers", 0)))
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as e:
            raise LaunchError(f"{where} holds no valid elastic job description ({e})") from None


def is_elastic_worker(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get(MXTORCH_ELASTIC, "") == "1"


def host_name(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return env.get(MXTORCH_ELASTIC_HOST) or f"pid{os.getpid()}"
