"""MXNet's ``mx.contrib.tensorboard`` (:class:`LogMetricsCallback`) and a TensorBoard
:class:`SummaryWriter` that takes NDArrays, both on ``torch.utils.tensorboard``.

They need the ``tensorboard`` package: ``pip install 'mxtorch[tensorboard]'`` (the setup script
installs it).  Event files are read by ``tensorboard --logdir DIR``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

__all__ = ["LogMetricsCallback", "SummaryWriter"]

_INSTALL = "pip install 'mxtorch[tensorboard]' (or: pip install tensorboard)"

_MISSING: str | None = None
try:
    from torch.utils.tensorboard import SummaryWriter as _TorchWriter
except ImportError as e:  # the module loads without it; using it says what to install
    _TorchWriter = object  # type: ignore[assignment,misc]
    _MISSING = f"mxtorch.contrib.tensorboard needs the tensorboard package ({e}): {_INSTALL}"


def _require() -> None:
    if _MISSING is not None:
        raise ImportError(_MISSING)


def _plain(value: Any) -> Any:
    """An NDArray as TensorBoard's writers take it: dense, detached, on the CPU, a float type
    numpy has (bfloat16 is widened); containers are converted element by element."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        if t.layout != torch.strided:  # row_sparse / csr: the dense array they stand for
            t = t.to_dense()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.cpu().as_subclass(torch.Tensor)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def _accepting_ndarrays(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        return method(self, *(_plain(a) for a in args), **{k: _plain(v) for k, v in kwargs.items()})
    return wrapper


class SummaryWriter(_TorchWriter):  # type: ignore[misc,valid-type]
    """``torch.utils.tensorboard.SummaryWriter`` whose ``add_*`` methods take NDArrays (dense or
    sparse, any context, any dtype, recorded or not) wherever they take tensors or numbers."""

    def __init__(self, logdir: str | None = None, *args: Any, **kwargs: Any) -> None:
        _require()
        super().__init__(logdir, *args, **kwargs)


if _MISSING is None:
    for _name in dir(_TorchWriter):
        if _name.startswith("add_") and _name != "add_graph":  # add_graph takes a module, not data
            setattr(SummaryWriter, _name, _accepting_ndarrays(getattr(_TorchWriter, _name)))


class LogMetricsCallback:
    """Write a metric's values to TensorBoard at each call: MXNet's callback for ``Module.fit``'s
    ``batch_end_callback`` / ``eval_end_callback`` (anything passing a ``BatchEndParam``).

    Each call writes ``eval_metric.get_name_value()`` as scalars named ``name`` or, with
    ``prefix``, ``prefix-name``.  MXNet wrote them without a step; here the step is the number
    of earlier calls of this callback, so the values draw a curve.
    """

    def __init__(self, logging_dir: str, prefix: str | None = None) -> None:
        if not isinstance(logging_dir, str) or not logging_dir:
            raise ValueError(f"LogMetricsCallback: logging_dir must be a directory path, got {logging_dir!r}")
        if prefix is not None and not isinstance(prefix, str):
            raise ValueError(f"LogMetricsCallback: prefix must be a string or None, got {prefix!r}")
        self.prefix = prefix
        self.summary_writer = SummaryWriter(logging_dir)
        self.step = 0

    def _name(self, name: str, prefix: str | None) -> str:
        return name if prefix is None else f"{prefix}-{name}"

    def __call__(self, param: Any) -> None:
        """Log ``param.eval_metric``'s current values (nothing when it has none)."""
        metric = getattr(param, "eval_metric", None)
        if metric is None:
            return
        for name, value in metric.get_name_value():
            self.summary_writer.add_scalar(self._name(name, self.prefix), value, global_step=self.step)
        self.step += 1
        self.summary_writer.flush()

    def node_histogram_visualization(self, prefix: str | None = None, node_names: Iterable[str] | None = None,
                                     bins: str = "auto") -> Callable[..., None]:
        """An ``epoch_end_callback`` ``(iter_no, sym, arg, aux)`` writing a histogram of each
        parameter (those in ``node_names``, or all), named ``prefix-name`` or ``name``."""
        wanted = None if node_names is None else set(node_names)

        def _callback(iter_no: int, sym: Any = None, arg: Mapping[str, Any] | None = None,
                      aux: Mapping[str, Any] | None = None) -> None:
            for params in (arg or {}, aux or {}):
                for k, v in params.items():
                    if wanted is None or k in wanted:
                        self.summary_writer.add_histogram(self._name(k, prefix), v, global_step=iter_no,
                                                          bins=bins)
            self.summary_writer.flush()

        return _callback

    def close(self) -> None:
        self.summary_writer.close()
