"""An emulated cluster on one machine: hosts as network namespaces, links shaped by ``tc``.

``mxtorch cluster up|down|status|exec|kill|link|bandwidth`` (:mod:`mxtorch.cli.cluster`) is
the command line; ``mxtorch launch --launcher cluster`` runs a job across the hosts
(:mod:`.launch`); :mod:`.testing` runs ranks on hosts for tests and benchmarks.  Needs root
and iproute2 (``scripts/setup.sh`` installs it).
"""

from .cluster import (
    MAX_HOSTS,
    MXTORCH_CLUSTER_HOST,
    Cluster,
    Host,
    HostStatus,
    down_all,
    host_environment,
    list_clusters,
    sweep_stale,
)
from .errors import ClusterError, ClusterUnavailable
from .netns import SHAPERS, support_problem
from .rates import format_rate, parse_rate

__all__ = ["Cluster", "Host", "HostStatus", "ClusterError", "ClusterUnavailable", "list_clusters", "down_all",
           "sweep_stale", "host_environment", "support_problem", "parse_rate", "format_rate", "SHAPERS",
           "MAX_HOSTS", "MXTORCH_CLUSTER_HOST"]
