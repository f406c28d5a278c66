"""The agent of one worker of an in-process elastic job (``MXTORCH_ELASTIC_MODE=inprocess``).

``mxtorch launch --elastic MIN:MAX -n N --env MXTORCH_ELASTIC_MODE:inprocess COMMAND`` (or the
variable in the launcher's environment) chooses the mode when the job starts; every agent reads it
from the job's description in the store.  Such an agent does not run torch's elastic agent: its
worker forms and re-forms the process group itself (:mod:`mxtorch.elastic.inprocess`), so the
survivors of a lost worker keep running in the same processes.  The agent only replaces its own
worker when that one fails: the new process joins the running job and is admitted, with the job's
state, at the workers' next commit.  Once the job's training has ended nothing is replaced.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from typing import Any

from ..elastic.env import ElasticJob
from ..elastic.rendezvous import Rendezvous

__all__ = ["run_inprocess_agent"]

_log = logging.getLogger("mxtorch.launcher")


def run_inprocess_agent(job: ElasticJob, store: Any, name: str) -> int:
    """Run ``job.command`` until it succeeds, replacing it at most ``job.max_restarts`` times;
    the agent's exit status (0: the job finished)."""
    rendezvous = Rendezvous(store, job.min_workers, job.max_workers, job.rendezvous_timeout)
    child: list[subprocess.Popen[bytes]] = []

    def stop(signum: int, _frame: Any) -> None:  # the launcher stops the job: stop the worker first
        for p in child:
            if p.poll() is None:
                p.send_signal(signum)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    replaced = 0
    while True:
        child[:] = [subprocess.Popen(job.command, env=os.environ.copy())]
        rc = child[0].wait()
        if rc == 0:
            return 0
        if rendezvous.finished():
            print(f"mxtorch elastic agent {name}: its worker ended with status {rc} after the job had "
                  "finished; nothing to replace", file=sys.stderr, flush=True)
            return 0
        if replaced >= job.max_restarts:
            print(f"mxtorch elastic agent {name}: its worker failed with status {rc}; it was replaced "
                  f"{replaced} time(s), the most allowed (--max-restarts)", file=sys.stderr, flush=True)
            return 1
        replaced += 1
        print(f"mxtorch elastic agent {name}: its worker (pid {child[0].pid}) ended with status {rc}; "
              f"starting a replacement that joins the running job ({replaced} of {job.max_restarts})",
              file=sys.stderr, flush=True)
