"""``mx.viz``: a text summary of a symbolic graph and a graphviz drawing of it (graphviz optional)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .base import MXNetError

__all__ = ["print_summary", "plot_network"]


def _graph(symbol: Any) -> list[Any]:
    return symbol._nodes()  # type: ignore[no-any-return]


def print_summary(
    symbol: Any,
    shape: dict[str, Any] | None = None,
    line_length: int = 120,
    positions: tuple[float, ...] = (0.44, 0.64, 0.74, 1.0),
) -> str:
    """Print (and return) each operator node with its output shape, its parameter count and the
    nodes it reads, as MXNet's ``print_summary``; ``shape`` (input name -> shape) enables shapes."""
    from .symbol._infer import infer_node_shapes

    var_shapes: dict[str, Any] = {}
    out_shapes: dict[int, list[Any]] = {}
    if shape is not None:
        var_shapes, out_shapes, _ = infer_node_shapes(symbol, {k: tuple(v) for k, v in shape.items()})
    cols = [int(line_length * p) for p in positions]
    header = ["Layer (type)", "Output Shape", "Param #", "Previous Layer"]

    def row(fields: list[str]) -> str:
        line = ""
        for i, f in enumerate(fields):
            line += f
            line = line[: cols[i]].ljust(cols[i])
        return line

    inputs = set(shape or {})
    lines = ["_" * line_length, row(header), "=" * line_length]
    total = 0
    for node in _graph(symbol):
        if node.is_variable:
            if node.name in inputs:
                lines += [
                    row([f"{node.name}(null)", str(var_shapes.get(node.name, "")), "0", ""]),
                    "_" * line_length,
                ]
            continue
        params = 0
        prev = []
        for src, _ in node.inputs:
            if src.is_variable and src.name.endswith("_label"):
                continue  # a label is an input, not a parameter
            if src.is_variable and src.name not in inputs:
                s = var_shapes.get(src.name)
                params += int(np.prod(s)) if s else 0
            else:
                prev.append(src.name)
        total += params
        out = out_shapes.get(id(node), [None])[0]
        lines += [
            row(
                [f"{node.name}({node.op})", str(out if out is not None else ""), str(params), ", ".join(prev)]
            ),
            "_" * line_length,
        ]
    lines.append(f"Total params: {total}")
    lines.append("_" * line_length)
    text = "\n".join(lines)
    print(text)
    return text


def plot_network(
    symbol: Any,
    title: str = "plot",
    save_format: str = "pdf",
    shape: dict[str, Any] | None = None,
    dtype: Any = None,
    node_attrs: dict[str, str] | None = None,
    hide_weights: bool = True,
) -> Any:
    """A ``graphviz.Digraph`` of the graph (needs the optional ``graphviz`` package)."""
    try:
        from graphviz import Digraph
    except ImportError as e:
        raise MXNetError("plot_network needs the graphviz Python package: pip install graphviz") from e
    from .symbol._infer import infer_node_shapes

    names = [n.name for n in _graph(symbol)]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:  # MXNet's warning: nodes are drawn by name in MXNet, so equal names merge there
        warnings.warn("There are multiple variables with the same name in your graph, this may result in a "
                      f"cyclic graph; repeated names: {', '.join(repeated)}", stacklevel=2)
    out_shapes: dict[int, list[Any]] = {}
    if shape is not None:
        _, out_shapes, _ = infer_node_shapes(symbol, {k: tuple(v) for k, v in shape.items()})
    attrs = {"shape": "box", "fixedsize": "true", "width": "1.3", "height": "0.8034", "style": "filled"}
    attrs.update(node_attrs or {})
    dot = Digraph(name=title, format=save_format)
    hidden: set[int] = set()
    for node in _graph(symbol):
        if node.is_variable:
            if hide_weights and (
                node.name.endswith(("_weight", "_bias", "_gamma", "_beta"))
                or "moving_" in node.name
                or "running_" in node.name
            ):
                hidden.add(id(node))
                continue
            dot.node(name=str(id(node)), label=node.name, **{**attrs, "fillcolor": "#8dd3c7"})
            continue
        label = (
            node.op if node.op != "FullyConnected" else f"FullyConnected\n{node.attrs.get('num_hidden', '')}"
        )
        dot.node(name=str(id(node)), label=label, **{**attrs, "fillcolor": "#fb8072"})
        for src, i in node.inputs:
            if id(src) in hidden:
                continue
            label_e = ""
            s = out_shapes.get(id(src), [None] * (i + 1))
            if i < len(s) and s[i] is not None:
                label_e = "x".join(str(d) for d in s[i][1:])
            dot.edge(tail_name=str(id(src)), head_name=str(id(node)), label=label_e)
    return dot
