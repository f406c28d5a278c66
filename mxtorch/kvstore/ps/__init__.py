"""MXNet's parameter server (``dist_sync``, ``dist_async``) on ZeroMQ and torch.

Processes: one scheduler (:func:`run_scheduler`), ``DMLC_NUM_SERVER`` servers
(:func:`run_server`) and ``DMLC_NUM_WORKER`` workers, whose ``mx.kv.create('dist_sync')`` is a
:class:`DistKVStore`.  ``mxtorch launch -n N -s M python train.py`` starts them all.

Modules: :mod:`.config` (the environment), :mod:`.protocol` (the wire format),
:mod:`.scheduler`, :mod:`.server` (+ :mod:`.shard`, :mod:`.snapshot`), :mod:`.worker`
(+ :mod:`.client`, :mod:`.placement`, :mod:`.row_transfer`), :mod:`.optimizer_spec`
(optimizers as JSON), :mod:`.rows` (row-sparse values in key slices), :mod:`.codec` (gradient
compression on the servers), :mod:`.roles` (entry points), :mod:`.testing` (local jobs for
tests).
"""

from .config import PSConfig
from .roles import become_role, run_role
from .scheduler import run_scheduler
from .server import run_server
from .worker import STORE_NAMES, DistKVStore, close_all

__all__ = ["PSConfig", "DistKVStore", "STORE_NAMES", "run_scheduler", "run_server", "run_role", "become_role",
           "close_all"]
