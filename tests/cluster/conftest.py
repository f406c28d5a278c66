"""Fixtures of the emulated-cluster tests (``cluster``, ``make_cluster``); see mxtorch.cluster.pytest_plugin.

Run them with ``.venv/bin/pytest -m cluster tests/cluster`` (as root; they skip elsewhere).
"""

from mxtorch.cluster.pytest_plugin import cluster, cluster_support, make_cluster  # noqa: F401
