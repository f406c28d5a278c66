"""The old path of :mod:`mxtorch.launcher.elastic_agent` (launcher code, now in the launcher):
``python -m mxtorch.elastic.agent ...`` and ``import mxtorch.elastic.agent`` keep working (the same
module object) for commands and scripts written before the move."""

from __future__ import annotations

import sys

from ..launcher import elastic_agent

if __name__ == "__main__":
    sys.exit(elastic_agent.main())
else:
    sys.modules[__name__] = elastic_agent
