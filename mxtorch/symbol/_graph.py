"""The nodes of a symbolic graph and what a graph is made of (:class:`Graph`, the base of ``Symbol``).

A graph is a list of outputs of nodes; a node is a variable (``op`` None) or an operator applied
to earlier nodes' outputs.  The passes over graphs (shape and type inference, common
subexpression elimination, the memory walk, the graph file reader) and the executor work on this
structure; :class:`~mxtorch.symbol.symbol.Symbol` adds composition, operators and binding on top,
and uses the passes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import _ops
from ._scope import HIDDEN_KEYS, parse_attr

__all__ = ["Graph", "Node", "aux_ids", "topo", "with_hidden"]


class Node:
    """One graph node: a variable (``op`` None) or an operator applied to ``inputs``."""

    __slots__ = ("op", "name", "attrs", "inputs", "__weakref__")

    def __init__(
        self, op: str | None, name: str, attrs: dict[str, str], inputs: list[tuple[Node, int]]
    ) -> None:
        self.op = op
        self.name = name
        self.attrs = attrs
        self.inputs = inputs

    @property
    def is_variable(self) -> bool:
        return self.op is None

    def opdef(self) -> _ops.OpDef:
        assert self.op is not None
        return _ops.get_op(self.op, self.attrs)

    def params(self) -> dict[str, Any]:
        """Operator parameters as Python values (hidden ``__x__`` attributes left out)."""
        return {k: parse_attr(v) for k, v in self.attrs.items() if not k.startswith("__")}

    def output_names(self) -> list[str]:
        if self.op is None:
            return [self.name]
        return [f"{self.name}_{o}" for o in self.opdef().outputs(self.params())]

    def num_visible(self) -> int:
        return 1 if self.op is None else len(self.opdef().outputs(self.params()))

    def num_total(self) -> int:
        return 1 if self.op is None else self.opdef().num_total(self.params())

    def aux_positions(self) -> set[int]:
        if self.op is None:
            return set()
        op = self.opdef()
        if not op.aux or op.inputs is None:
            return set()
        names = op.inputs(self.params())
        return {i for i, n in enumerate(names) if n in op.aux}


def topo(heads: Sequence[tuple[Node, int]]) -> list[Node]:
    """Nodes reachable from ``heads``, inputs before users, in MXNet's depth-first order."""
    order: list[Node] = []
    seen: set[int] = set()
    for head, _ in heads:
        if id(head) in seen:
            continue
        stack: list[tuple[Node, int]] = [(head, 0)]
        seen.add(id(head))
        while stack:
            node, i = stack.pop()
            if i < len(node.inputs):
                stack.append((node, i + 1))
                child = node.inputs[i][0]
                if id(child) not in seen:
                    seen.add(id(child))
                    stack.append((child, 0))
            else:
                order.append(node)
    return order


def aux_ids(nodes: Sequence[Node]) -> set[int]:
    out: set[int] = set()
    for n in nodes:
        for pos in n.aux_positions():
            out.add(id(n.inputs[pos][0]))
    return out


def with_hidden(attrs: Mapping[str, str]) -> dict[str, str]:
    out = dict(attrs)
    for k, v in attrs.items():
        if k.startswith("__") and k.endswith("__") and k[2:-2] in HIDDEN_KEYS:
            out[k[2:-2]] = v
    return out


class Graph:
    """The structure of a graph: its outputs, its nodes in order, the names of its inputs and
    outputs (what the passes and the executor read; ``Symbol`` is the graph users build)."""

    __slots__ = ("_outputs",)

    def __init__(self, outputs: Sequence[tuple[Node, int]]) -> None:
        self._outputs = list(outputs)

    @property
    def name(self) -> str | None:
        """The node name of a single-output symbol (None for a group)."""
        return self._outputs[0][0].name if len(self._outputs) == 1 else None

    def _nodes(self) -> list[Node]:
        return topo(self._outputs)

    def list_arguments(self) -> list[str]:
        nodes = self._nodes()
        aux = aux_ids(nodes)
        return [n.name for n in nodes if n.is_variable and id(n) not in aux]

    def list_auxiliary_states(self) -> list[str]:
        nodes = self._nodes()
        aux = aux_ids(nodes)
        return [n.name for n in nodes if n.is_variable and id(n) in aux]

    def list_inputs(self) -> list[str]:
        return [n.name for n in self._nodes() if n.is_variable]

    def list_outputs(self) -> list[str]:
        return [node.output_names()[i] for node, i in self._outputs]

    def __len__(self) -> int:
        return len(self._outputs)

    def attr_dict(self) -> dict[str, dict[str, str]]:
        """``{node name: attributes}`` of every node that has attributes."""
        return {n.name: with_hidden(n.attrs) for n in self._nodes() if n.attrs}
