"""``mxtorch train --profile DIR``: :class:`ProfileHook` records a few training steps with
``mx.profiler`` (torch's operators and mxtorch's spans) and dumps one Chrome trace per rank into
``DIR`` (``profile.rank<r>.json`` in a job, ``profile.json`` alone), which ``mxtorch trace merge DIR``
joins into one timeline of the job.

The steps recorded are the :data:`PROFILE_STEPS` after this process's first step (which compiles
and warms up); a run with fewer steps is recorded to its end.
"""

from __future__ import annotations

import os
from typing import Any

from .train_config import TrainConfig
from .train_hooks import TrainHook

__all__ = ["PROFILE_STEPS", "ProfileHook"]

PROFILE_STEPS = 5
"""How many training steps ``--profile`` records."""


class ProfileHook(TrainHook):
    """Runs ``mx.profiler`` over :data:`PROFILE_STEPS` steps and dumps the trace."""

    def __init__(self, cfg: TrainConfig) -> None:
        assert cfg.profile is not None
        self.folder = cfg.profile
        self.begin = self.end = 0
        self.running = False

    def on_start(self, run: Any) -> None:
        self.begin = run.step + 1  # after the first step
        self.end = self.begin + PROFILE_STEPS

    def on_step(self, run: Any) -> None:
        from .. import profiler

        if run.step == self.begin and not self.running:
            profiler.set_config(profile_all=False, aggregate_stats=False,
                                filename=os.path.join(self.folder, "profile.json"))
            profiler.set_state("run")
            self.running = True
        elif run.step == self.end:
            self._dump()

    def _dump(self) -> None:
        from .. import profiler

        if self.running:
            self.running = False
            profiler.set_state("stop")
            profiler.dump()

    def on_end(self, run: Any) -> None:
        self._dump()

    def report(self, run: Any) -> dict[str, Any]:
        return {"profile": {"dir": self.folder, "steps": [self.begin + 1, min(self.end, run.step)]}}
