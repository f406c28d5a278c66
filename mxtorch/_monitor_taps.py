"""What an executor shows its monitor callback (``Executor.set_monitor_callback``), MXNet's way.

Forward: every operator node's outputs, named ``<node>_<output>`` (``fc1_output``), in graph
order; with ``monitor_all`` its inputs first (``<node>_<input>``: ``fc1_data``, ``fc1_weight``).
Backward: per node, in reverse graph order, the gradient of each of its non-auxiliary inputs,
named ``<node>_backward_output`` (one input) or ``<node>_backward_output<i>``; an input without a
gradient (data, label) shows zeros.  A node's own input gradients are taken by giving the node an
alias of each input that needs a gradient and hooking the alias, so gradients that several nodes
send to one input are seen per node, as MXNet's backward nodes output them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from .symbol._graph import Graph

__all__ = ["MonitorTaps"]


class MonitorTaps:
    """The monitor of one bound graph: wraps each step of its plan (``before``/``after`` the
    operator runs); the executor calls ``backward_done`` after a backward."""

    def __init__(
        self, symbol: Graph, steps: list[Any], callback: Callable[[str, torch.Tensor], None],
        monitor_all: bool,
    ) -> None:
        nodes = [n for n in symbol._nodes() if not n.is_variable]
        self.callback = callback
        self.monitor_all = bool(monitor_all)
        self.node_names = [n.name for n in nodes]
        self.out_names = [n.output_names() for n in nodes]
        self.in_names: list[list[str]] = []
        self.grad_positions: list[list[int]] = []  # the inputs a backward node has outputs for
        for n in nodes:
            op = n.opdef()
            names = op.inputs(n.params()) if op.inputs is not None else [str(i) for i in range(len(n.inputs))]
            names = list(names) + [str(i) for i in range(len(names), len(n.inputs))]
            self.in_names.append([f"{n.name}_{names[i]}" for i in range(len(n.inputs))])
            aux = n.aux_positions()
            self.grad_positions.append([i for i in range(len(n.inputs)) if i not in aux])
        self._inputs: dict[int, list[Any]] = {}
        self._grads: dict[tuple[int, int], torch.Tensor] = {}
        for k, st in enumerate(steps):  # the bound plan's steps, one per operator node, in order
            # a new callback replaces the last one: wrap the operator itself, not the last taps
            st.call = self._tapped(k, getattr(st.call, "untapped", st.call))
            st.head_loss = False  # the loss head's own backward node runs, so the monitor sees it

    def _tapped(self, k: int, call: Callable[[list[Any], bool], Any]) -> Callable[[list[Any], bool], Any]:
        def run(ins: list[Any], train: bool) -> Any:
            if k == 0:
                self.start()
            out = call(self.before(k, ins), train)
            self.after(k, list(out) if isinstance(out, (list, tuple)) else [out])
            return out

        run.untapped = call  # type: ignore[attr-defined]
        return run

    def start(self) -> None:
        """A new forward: forget the last one's backward taps."""
        self._inputs, self._grads = {}, {}

    def before(self, k: int, ins: list[Any]) -> list[Any]:
        """Step ``k`` is about to run on ``ins``: report them (``monitor_all``) and, when the
        forward records for a backward, hand back aliases that catch this node's input gradients."""
        if self.monitor_all:
            for name, x in zip(self.in_names[k], ins, strict=False):
                if isinstance(x, torch.Tensor):
                    self.callback(name, x.detach())
        if not torch.is_grad_enabled() or not any(
            isinstance(x, torch.Tensor) and x.requires_grad for x in ins
        ):
            return ins
        self._inputs[k] = list(ins)
        out = list(ins)
        for i in self.grad_positions[k]:
            x = ins[i] if i < len(ins) else None
            if isinstance(x, torch.Tensor) and x.requires_grad and x.layout == torch.strided:
                alias = x.view_as(x)
                alias.register_hook(self._keeper(k, i))
                out[i] = alias
        return out

    def _keeper(self, k: int, i: int) -> Callable[[torch.Tensor], None]:
        def keep(grad: torch.Tensor) -> None:
            self._grads[(k, i)] = grad.detach()

        return keep

    def after(self, k: int, outs: list[Any]) -> None:
        """Step ``k`` produced ``outs``: report its visible outputs."""
        for name, x in zip(self.out_names[k], outs, strict=False):
            if isinstance(x, torch.Tensor):
                self.callback(name, x.detach())

    def backward_done(self) -> None:
        """Report each recorded node's input gradients, last node first."""
        for k in sorted(self._inputs, reverse=True):
            ins, positions = self._inputs[k], self.grad_positions[k]
            for i in positions:
                x = ins[i] if i < len(ins) else None
                if not isinstance(x, torch.Tensor):
                    continue
                g = self._grads.get((k, i))
                name = f"{self.node_names[k]}_backward_output" + ("" if len(positions) == 1 else str(i))
                self.callback(name, g if g is not None else torch.zeros_like(x.detach()))
        self.start()
