"""``mxtorch launch --nnodes ... --node-rank R --rdzv-endpoint HOST:PORT --nproc-per-node N``.

The per-node mode of schedulers that start one launcher per node (Kubernetes pods, ``sbatch``
arrays, one ``ssh`` per host), in torchrun's words.  Every node's launcher gets the same
``--nnodes`` and ``--rdzv-endpoint`` and starts ``--nproc-per-node`` workers there; together they
form one job of ``nnodes * nproc_per_node`` workers.

* ``--nnodes N`` (a fixed count) with ``--node-rank R``: torch's *static* rendezvous.  Node 0
  hosts the job's store at the endpoint (so HOST is node 0's address and PORT a free port there);
  node ``R`` runs ranks ``R * nproc .. R * nproc + nproc - 1``.
* ``--nnodes MIN:MAX`` (``N:N`` too): torch's *c10d* rendezvous at the endpoint; the job starts when MIN
  nodes have arrived and takes nodes up to MAX; node ranks are given in arrival order (a
  ``--node-rank`` is then only noted), and a lost node makes the others restart their workers
  (``--max-restarts``).

All nodes of one job share ``--rdzv-id`` (default: derived from the endpoint).
"""

from __future__ import annotations

from dataclasses import dataclass

from .job import LaunchError

__all__ = ["NodeLayout", "check_nodes", "PER_NODE_FLAGS"]

PER_NODE_FLAGS = ("--nnodes", "--node-rank", "--rdzv-endpoint", "--nproc-per-node", "--rdzv-id")


@dataclass(frozen=True)
class NodeLayout:
    """Where this launcher's node sits in a per-node job."""

    min_nodes: int
    max_nodes: int
    node_rank: int | None
    nproc_per_node: int
    endpoint_host: str
    endpoint_port: int
    run_id: str
    by_arrival: bool = False  # --nnodes MIN:MAX (also N:N): nodes numbered as they arrive (c10d)

    @property
    def static(self) -> bool:
        """A fixed node count with a node rank: torch's static rendezvous (node 0 hosts the store)."""
        return not self.by_arrival and self.min_nodes == self.max_nodes and self.node_rank is not None

    @property
    def endpoint(self) -> str:
        host = f"[{self.endpoint_host}]" if ":" in self.endpoint_host else self.endpoint_host
        return f"{host}:{self.endpoint_port}"

    @property
    def fixed_world_size(self) -> int | None:
        """The number of workers of the job when the node count is fixed."""
        return self.min_nodes * self.nproc_per_node if self.min_nodes == self.max_nodes else None


def _nodes(text: str) -> tuple[int, int]:
    lo, sep, hi = str(text).strip().partition(":")
    try:
        mn = int(lo)
        mx = int(hi) if sep else mn
    except ValueError:
        raise LaunchError(f"--nnodes {text!r}: expected N or MIN:MAX (numbers of nodes), e.g. --nnodes 2 "
                          "or --nnodes 2:4") from None
    if mn < 1 or mx < mn:
        raise LaunchError(f"--nnodes {text!r}: need 1 <= MIN <= MAX")
    return mn, mx


def check_nodes(nnodes: str | None, node_rank: int | None, endpoint: str | None, nproc_per_node: int | None,
                run_id: str | None) -> NodeLayout:
    """The :class:`NodeLayout` of the per-node flags; :class:`LaunchError` saying what is missing."""
    from ..elastic.env import parse_endpoint

    if nnodes is None:
        raise LaunchError("the per-node flags (--node-rank, --rdzv-endpoint, --nproc-per-node, --rdzv-id) "
                          "need --nnodes N (or MIN:MAX): the number of nodes, each starting one launcher")
    mn, mx = _nodes(nnodes)
    if endpoint is None:
        raise LaunchError(f"--nnodes {nnodes} needs --rdzv-endpoint HOST:PORT, the same on every node "
                          "(node 0's address and a free port there)")
    host, port = parse_endpoint(endpoint, "--rdzv-endpoint")
    nproc = 1 if nproc_per_node is None else nproc_per_node
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise LaunchError(f"--nproc-per-node must be an integer >= 1, got {nproc_per_node!r}")
    if node_rank is not None:
        if isinstance(node_rank, bool) or not isinstance(node_rank, int) or node_rank < 0:
            raise LaunchError(f"--node-rank must be an integer >= 0, got {node_rank!r}")
        if node_rank >= mx:
            raise LaunchError(f"--node-rank {node_rank} with --nnodes {nnodes}: node ranks run from 0 to "
                              f"{mx - 1}")
    elif mn == mx and mn > 1 and ":" not in str(nnodes):
        raise LaunchError(f"--nnodes {nnodes} needs --node-rank R (0..{mx - 1}, a different one on each "
                          "node), or a range --nnodes MIN:MAX to number the nodes as they arrive")
    rid = run_id or f"mxtorch-{host}-{port}"
    if not rid.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise LaunchError(f"--rdzv-id {run_id!r}: use letters, digits, '-', '_' and '.'")
    by_arrival = ":" in str(nnodes)
    fixed_rank = 0 if mn == mx and not by_arrival else None
    return NodeLayout(mn, mx, node_rank if node_rank is not None else fixed_rank, nproc, host, port, rid,
                      by_arrival)
