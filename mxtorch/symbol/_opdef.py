"""What an operator is to a symbolic graph (:class:`OpDef`): the table of every operator
(:mod:`._ops`) and the per-configuration Custom operators (:mod:`._custom`) are made of these."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Shape = tuple[int, ...]

__all__ = ["OpDef", "one_output"]


def one_output(attrs: dict[str, Any]) -> list[str]:
    return ["output"]


@dataclass
class OpDef:
    """How one operator behaves in a graph.

    ``run(inputs, attrs, train)`` computes the outputs from the input tensors (arguments then
    auxiliary states, in ``inputs(attrs)`` order).  ``params`` are the inputs an operator creates
    as variables when they are not given (``fc1_weight``); ``aux`` the auxiliary states (moving
    statistics) among them.  ``param_shapes(attrs, data_shape)`` gives their shapes.
    ``infer(shapes, dtypes)``, when given, gives the ``(shape, dtype)`` of each output without
    running the operator, and ``infer_types(dtypes)`` the (input, output) dtypes (Custom operators).
    """

    name: str
    run: Callable[[list[Any], dict[str, Any], bool], Any]
    inputs: Callable[[dict[str, Any]], list[str]] | None = None  # None: variadic / positional
    aux: tuple[str, ...] = ()
    outputs: Callable[[dict[str, Any]], list[str]] = one_output
    total_outputs: Callable[[dict[str, Any]], int] | None = None
    param_shapes: Callable[[dict[str, Any], Shape], dict[str, Shape]] | None = None
    aux_init: dict[str, str] = field(default_factory=dict)
    is_loss: bool = False
    compile: Callable[[dict[str, Any]], Callable[[list[Any], bool], Any]] | None = None
    infer: Callable[[list[Shape], list[Any]], list[tuple[Shape, Any]]] | None = None
    infer_types: Callable[[list[Any]], tuple[list[Any], list[Any]]] | None = None
    differentiable: bool = True  # False: MXNet defines no gradient (binding it for training fails)

    def compiled(self, attrs: dict[str, Any]) -> Callable[[list[Any], bool], Any]:
        """``call(inputs, train)`` with ``attrs`` bound once (what a bound graph runs per node)."""
        if self.compile is not None:
            return self.compile(attrs)
        run = self.run
        return lambda ins, train: run(ins, attrs, train)

    def num_total(self, attrs: dict[str, Any]) -> int:
        if self.total_outputs is not None:
            return self.total_outputs(attrs)
        return len(self.outputs(attrs))
