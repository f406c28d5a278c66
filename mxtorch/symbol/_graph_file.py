"""Reading MXNet's JSON graph format (``prefix-symbol.json``, ``Symbol.tojson()``) into graph nodes
(``mx.sym.load`` / ``load_json`` make the Symbol of them).

A graph file is input from outside (a download, a model zoo, a colleague): whatever it holds,
:func:`read_file` and :func:`read_json` raise :class:`~mxtorch.base.MXNetError` naming the file and,
where there is one, the node.  The text goes through :mod:`mxtorch.bounded_json` (at most
:data:`MAX_GRAPH_BYTES` bytes, nested at most :data:`~mxtorch.bounded_json.MAX_DEPTH` deep, UTF-8);
every node is checked (an object with ``op`` and ``name``, attributes as objects, inputs as
``[earlier node, output, version]``); counts that size the graph, such as a split's
``num_outputs``, are bounded (:data:`~mxtorch.symbol._ops.MAX_OUTPUTS`) before anything is built.
"""

from __future__ import annotations

import os
from typing import Any

from .. import bounded_json
from ..base import MXNetError
from . import _ops
from ._graph import Node as _Node

__all__ = ["read_file", "read_json", "MAX_GRAPH_BYTES"]

MAX_GRAPH_BYTES = 256 << 20
"""Largest graph file read (MXNet's biggest model-zoo graphs are a few MB)."""

# what a malformed node can make the graph code raise besides MXNetError
_MALFORMED = (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, RecursionError)


Heads = list[tuple[_Node, int]]


def read_json(json_str: str) -> Heads:
    """The outputs of the graph in MXNet's JSON format (files of MXNet 1.x and older ``param``/``attr``
    keys); :class:`MXNetError` for any text that is not such a graph."""
    if not isinstance(json_str, (str, bytes, bytearray)):
        raise MXNetError(f"load_json: expected the JSON text of a graph, got {type(json_str).__name__}")
    graph = bounded_json.loads(json_str, "load_json: the text", MXNetError, max_bytes=MAX_GRAPH_BYTES)
    return _from_graph(graph, "load_json")


def read_file(fname: str | os.PathLike[str]) -> Heads:
    """The outputs of the graph in an MXNet JSON graph file (``prefix-symbol.json``); :class:`MXNetError`
    naming the file for one that is missing, too large, binary, malformed or not an MXNet graph."""
    name = os.fspath(fname)
    if not os.path.isfile(name):
        raise MXNetError(f"symbol file {name!r} does not exist")
    source = f"symbol file {name!r}"
    try:
        with open(name, "rb") as f:
            raw = f.read(MAX_GRAPH_BYTES + 1)  # a larger file is refused without reading it all
    except OSError as e:
        raise MXNetError(f"cannot read {source}: {e}") from e
    graph = bounded_json.loads(raw, source, MXNetError, max_bytes=MAX_GRAPH_BYTES)
    return _from_graph(graph, source)


def _from_graph(graph: Any, source: str) -> Heads:
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list) or \
            not isinstance(graph.get("heads"), list):
        raise MXNetError(f"{source}: not an MXNet graph (expected a JSON object with 'nodes' and 'heads' "
                         "lists)")
    nodes_json, heads_json = graph["nodes"], graph["heads"]
    nodes: list[_Node] = []
    for i, entry in enumerate(nodes_json):
        try:
            nodes.append(_node(entry, i, nodes, source))
        except MXNetError:
            raise
        except _MALFORMED as e:
            raise MXNetError(f"{source}: node {i} is malformed: {type(e).__name__}: {str(e)[:200]}") from e
    heads = []
    for ref in heads_json:
        head = _entry_ref(ref, nodes, len(nodes))
        if head is None:
            raise MXNetError(f"{source}: bad head reference {ref!r:.100} (the graph has {len(nodes)} nodes)")
        heads.append(head)
    return heads


def _node(entry: Any, i: int, nodes: list[_Node], source: str) -> _Node:
    if not isinstance(entry, dict) or not isinstance(entry.get("op"), str) or \
            not isinstance(entry.get("name"), str):
        raise MXNetError(f"{source}: node {i} is malformed (needs 'op' and 'name' strings): {entry!r:.200}")
    name = entry["name"]
    attrs: dict[str, str] = {}
    for key in ("param", "attr", "attrs"):  # MXNet 0.x wrote param/attr, 1.x writes attrs
        raw = entry.get(key) or {}
        if not isinstance(raw, dict):
            raise MXNetError(f"{source}: node {i} ({name!r:.100}) has a malformed {key!r}")
        attrs.update({str(k): str(v) for k, v in raw.items()})
    op = None if entry["op"] == "null" else entry["op"]
    if op is not None and not _ops.has_op(op):
        raise MXNetError(f"{source}: node {i} ({name!r:.100}) uses operator {op!r:.100}, which mxtorch does "
                         "not implement")
    if op is not None:
        try:  # the operator's outputs, from its attributes: refused here when they are bad
            node = _Node(op, name, attrs, [])
            node.num_total()
        except MXNetError as e:
            raise MXNetError(f"{source}: node {i} ({name!r:.100}): {e}") from e
    refs = entry.get("inputs", [])
    if not isinstance(refs, list):
        raise MXNetError(f"{source}: node {i} ({name!r:.100}) has 'inputs' that are not a list")
    inputs = []
    for ref in refs:
        src = _entry_ref(ref, nodes, i)
        if src is None:
            raise MXNetError(
                f"{source}: node {i} ({name!r:.100}) has a bad input reference {ref!r:.100} (an input is "
                f"[earlier node index, output index, version]; there are {i} earlier nodes)"
            )
        inputs.append(src)
    return _Node(op, name, attrs, inputs)


def _entry_ref(ref: Any, nodes: list[_Node], limit: int) -> tuple[_Node, int] | None:
    """``(node, output)`` of a graph-file reference ``[node, output, version]``; None if invalid."""
    if not isinstance(ref, list) or len(ref) < 2 or not all(isinstance(v, int) for v in ref[:2]):
        return None
    k, out = ref[0], ref[1]
    if not 0 <= k < limit or not 0 <= out < nodes[k].num_total():
        return None
    return nodes[k], out
