"""Evaluation-metric base classes, the metric registry and ``create``.

Metrics keep their running sums as torch tensors on the device of the data they were given, so an
``update`` never waits for the device; the Python number is produced only by ``get()``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from numbers import Number
from typing import Any, ClassVar, TypeVar

import numpy
import torch

from .. import bounded_json
from ..registry import Registry, RegistryError, subclasses_of

__all__ = [
    "EvalMetric",
    "CompositeEvalMetric",
    "CustomMetric",
    "check_label_shapes",
    "register",
    "alias",
    "create",
    "np",
    "registered_names",
]

ArrayLike = torch.Tensor | numpy.ndarray | Number
Arrays = ArrayLike | Sequence[ArrayLike] | None
Scalar = int | float | torch.Tensor

_M = TypeVar("_M", bound="type[EvalMetric]")


# ----------------------------------------------------------------------------------------------------------
# array helpers
# ----------------------------------------------------------------------------------------------------------
def _to_tensor(x: Any) -> torch.Tensor:
    """A detached tensor from a tensor, numpy array or number (numpy data is shared, not copied)."""
    if isinstance(x, torch.Tensor):
        return x.detach()
    if isinstance(x, (numpy.ndarray, numpy.generic, Number, list, tuple)):
        return torch.as_tensor(numpy.asarray(x))
    raise TypeError(f"expected a torch.Tensor, a numpy array or a number, got {type(x).__name__}: {x!r}")


def _as_list(x: Arrays) -> list[torch.Tensor]:
    """Wrap a single array into a list; turn every element into a tensor."""
    if x is None:
        return []
    if isinstance(x, (torch.Tensor, numpy.ndarray, numpy.generic, Number)):
        return [_to_tensor(x)]
    if isinstance(x, Mapping):
        return [_to_tensor(v) for v in x.values()]
    if isinstance(x, (list, tuple)):
        return [_to_tensor(v) for v in x]
    raise TypeError(f"expected an array or a list of arrays, got {type(x).__name__}: {x!r}")


def _shape_of(x: Any) -> Any:
    if isinstance(x, (torch.Tensor, numpy.ndarray)):
        return tuple(x.shape)
    return len(x)


def check_label_shapes(labels: Any, preds: Any, wrap: bool = False, shape: bool = False) -> tuple[Any, Any]:
    """Check that labels and predictions agree: in number of arrays, or (``shape=True``) in shape.

    With ``wrap=True`` single arrays are wrapped into lists (of tensors) before the check.
    Raises ``ValueError`` stating both shapes.
    """
    if wrap:
        labels, preds = _as_list(labels), _as_list(preds)
    if shape:
        label_shape, pred_shape = _shape_of(labels), _shape_of(preds)
    else:
        label_shape, pred_shape = len(labels), len(preds)
    if label_shape != pred_shape:
        what = "Shape" if shape else "Number of arrays"
        raise ValueError(f"{what} of labels {label_shape} does not match that of predictions {pred_shape}")
    return labels, preds


def _acc_float(x: torch.Tensor) -> torch.Tensor:
    """Widest float dtype the tensor's device supports (float64, or float32 on MPS)."""
    return x.to(torch.float32 if x.device.type == "mps" else torch.float64)


def _batch_sum(x: torch.Tensor) -> torch.Tensor:
    """The sum of ``x`` in ``x``'s own float dtype, as MXNet's ``nd.sum`` gives it to its metrics.

    MXNet sums with compensated (Kahan) steps in the array's dtype, so its float32 total is the
    exact sum rounded to float32: accumulated here in the widest float, then rounded to the dtype.
    Metrics that MXNet computes on float32 arrays then agree with it (and with numpy's float32
    arithmetic) bit for bit, instead of being more precise than the reference.
    """
    return _acc_float(x).sum().to(x.dtype)


def _acc_value(x: Scalar) -> Scalar:
    """Normalise a per-batch value for accumulation: integer tensors → int64, float tensors → widest."""
    if not isinstance(x, torch.Tensor):
        return x
    x = x.detach()
    if x.dtype == torch.bool or not (x.is_floating_point() or x.is_complex()):
        return x.to(torch.int64)
    return _acc_float(x)


def _add(acc: Scalar, value: Scalar) -> Scalar:
    """``acc + value`` without leaving the device; a tensor on another device is moved to ``acc``'s."""
    value = _acc_value(value)
    if isinstance(acc, torch.Tensor) and isinstance(value, torch.Tensor) and value.device != acc.device:
        value = value.to(acc.device)
    return acc + value


def _on_device_of(label: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
    """``label`` moved to ``pred``'s device (host→device copies are queued, not waited for)."""
    if label.device == pred.device:
        return label
    return label.to(pred.device, non_blocking=label.device.type == "cpu")


def _py(x: Scalar) -> float | int:
    """Python number of a scalar (the one place a device value is read back)."""
    if isinstance(x, torch.Tensor):
        return x.item()
    return x


# ----------------------------------------------------------------------------------------------------------
# EvalMetric
# ----------------------------------------------------------------------------------------------------------
def _stat(attr: str, doc: str) -> Any:
    """A statistic of :class:`EvalMetric` kept in ``attr``: read as a Python number (a sync),
    set as given (MXNet code assigns ``sum_metric``/``num_inst`` directly)."""
    return property(lambda self: _py(getattr(self, attr)), lambda self, value: setattr(self, attr, value),
                    doc=doc)


class EvalMetric:
    """Base class of all evaluation metrics.

    ``update(labels, preds)`` adds a batch, ``get()`` gives ``(name, value)``; ``reset()`` starts over.
    Besides the local statistics (cleared by ``reset_local``) a global copy is kept that only
    ``reset`` clears, read by ``get_global``.  As in MXNet, a subclass keeps global statistics
    only when it says so (``has_global_stats=True``, as every built-in metric does); otherwise
    ``get_global`` returns ``get()``, so a custom metric that only updates ``sum_metric`` and
    ``num_inst`` reads the same through both.
    """

    #: default of ``has_global_stats`` for the class (True for mxtorch's own metrics)
    _keeps_global_stats: ClassVar[bool] = False

    def __init__(
        self,
        name: str,
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.name = str(name)
        self.output_names = list(output_names) if output_names is not None else None
        self.label_names = list(label_names) if label_names is not None else None
        self._has_global_stats = bool(kwargs.pop("has_global_stats", self._keeps_global_stats))
        self._kwargs = kwargs
        self._sum: Scalar = 0
        self._num: Scalar = 0
        self._gsum: Scalar = 0
        self._gnum: Scalar = 0
        self.reset()

    def __str__(self) -> str:
        return f"EvalMetric: {dict(self.get_name_value())}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    # -- statistics, as Python numbers ---------------------------------------------------------------------
    sum_metric = _stat("_sum", "Running sum of the local statistic.")
    num_inst = _stat("_num", "Number of instances counted locally.")
    global_sum_metric = _stat("_gsum", "Running sum of the global statistic.")
    global_num_inst = _stat("_gnum", "Number of instances counted globally.")

    def _accumulate(self, value: Scalar, count: Scalar) -> None:
        """Add ``value`` to both sums and ``count`` to both counts, staying on the device."""
        self._sum = _add(self._sum, value)
        self._gsum = _add(self._gsum, value)
        self._num = _add(self._num, count)
        self._gnum = _add(self._gnum, count)

    # -- API -----------------------------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """The arguments that recreate this metric with ``create(**config)``."""
        config = dict(self._kwargs)
        config.update(
            {
                "metric": type(self).__name__,
                "name": self.name,
                "output_names": self.output_names,
                "label_names": self.label_names,
            }
        )
        return config

    def update_dict(self, label: Mapping[str, Any], pred: Mapping[str, Any]) -> None:
        """Update with name→array mappings, selecting ``label_names``/``output_names`` when set."""
        if self.output_names is not None:
            preds = [pred[name] for name in self.output_names]
        else:
            preds = list(pred.values())
        if self.label_names is not None:
            labels = [label[name] for name in self.label_names]
        else:
            labels = list(label.values())
        self.update(labels, preds)

    def update(self, labels: Arrays, preds: Arrays) -> None:
        """Add one batch of labels and predictions (arrays or lists of arrays)."""
        raise NotImplementedError(f"{type(self).__name__} must implement update()")

    def reset(self) -> None:
        """Clear local and global statistics."""
        self._sum, self._num, self._gsum, self._gnum = 0, 0, 0, 0

    def reset_local(self) -> None:
        """Clear the local statistics only."""
        self._sum, self._num = 0, 0

    def _finish(self, sum_metric: Scalar, num_inst: Scalar, local: bool) -> float:
        """Metric value from the accumulated statistics (``nan`` when nothing was seen)."""
        num = _py(num_inst)
        if num == 0:
            return float("nan")
        return float(_py(sum_metric)) / num

    def get(self) -> tuple[Any, Any]:
        """``(name, value)`` of the local statistics; value is ``nan`` before any update."""
        return self.name, self._finish(self._sum, self._num, local=True)

    def get_global(self) -> tuple[Any, Any]:
        """``(name, value)`` of the global statistics (``get()`` when the metric keeps none)."""
        if not self._has_global_stats:
            return self.get()
        return self.name, self._finish(self._gsum, self._gnum, local=False)

    def get_name_value(self) -> list[tuple[str, float]]:
        """``[(name, value), ...]`` of the local statistics."""
        return _zip_name_value(*self.get())

    def get_global_name_value(self) -> list[tuple[str, float]]:
        """``[(name, value), ...]`` of the global statistics."""
        if not self._has_global_stats:
            return self.get_name_value()
        return _zip_name_value(*self.get_global())


class _NamedMetric(EvalMetric):
    """A metric with MXNet's arguments ``(name, output_names, label_names)``, ``name`` defaulting to
    the subclass's ``_default_name`` (MAE, MSE, RMSE, Loss, Torch, Caffe, ...)."""

    _keeps_global_stats = True
    _default_name: ClassVar[str]

    def __init__(
        self,
        name: str | None = None,
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        name = self._default_name if name is None else name
        super().__init__(name, output_names=output_names, label_names=label_names)


class _AveragedMetric(_NamedMetric):
    """A metric with MXNet's ``average`` argument: ``'macro'`` averages the score of each update,
    ``'micro'`` computes one score from the statistics of all updates (F1, MCC, PearsonCorrelation)."""

    def __init__(
        self,
        name: str | None = None,
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
        average: str = "macro",
    ) -> None:
        if average not in ("macro", "micro"):
            raise ValueError(f"average must be 'macro' or 'micro', got {average!r}")
        self.average = average
        super().__init__(name, output_names, label_names)
        self._kwargs["average"] = average  # get_config() recreates the metric with it


def _zip_name_value(name: Any, value: Any) -> list[tuple[str, float]]:
    if not isinstance(name, list):
        name, value = [name], [value]
    return list(zip(name, value))


# ----------------------------------------------------------------------------------------------------------
# registry
# ----------------------------------------------------------------------------------------------------------
_REGISTRY: Registry[type[EvalMetric]] = Registry("metric", error=RegistryError,
                                           check=subclasses_of(EvalMetric, "EvalMetric subclasses"))
# MXNet's public functions are the registry's methods: ``register`` (class decorator, registered under
# the lower-cased class name), ``alias`` (further names) and ``registered_names`` (sorted names).
register, alias, registered_names = _REGISTRY.register, _REGISTRY.alias, _REGISTRY.names


def create(metric: Any = None, *args: Any, **kwargs: Any) -> EvalMetric:
    """Create a metric from a name, a callable, a list of those, an ``EvalMetric`` class or instance.

    A name is looked up case-insensitively (aliases such as ``'acc'`` and ``'ce'`` included); a
    callable ``feval(label, pred)`` becomes a ``CustomMetric``; a list becomes a
    ``CompositeEvalMetric``; an instance is returned unchanged.  Configurations are accepted as
    ``get_config()`` gives them: ``create(**config)``, a dict, or its JSON text (``'{...}'``, or
    ``'["name", {kwargs}]'``).
    """
    if metric is None:
        raise TypeError("create() needs the metric: a name, a callable, a list, an EvalMetric or a config")
    if isinstance(metric, EvalMetric):
        if args or kwargs:
            raise TypeError(f"create() got extra arguments {args!r} {kwargs!r} along with metric {metric!r}")
        return metric
    if isinstance(metric, type):
        if issubclass(metric, EvalMetric):
            return metric(*args, **kwargs)
        raise TypeError(f"cannot create a metric from class {metric!r}: expected an EvalMetric subclass")
    if isinstance(metric, Mapping):
        if args or kwargs:
            raise TypeError(f"create() got extra arguments {args!r} {kwargs!r} along with config {metric!r}")
        return create(**metric)
    if isinstance(metric, (list, tuple)):
        composite = CompositeEvalMetric()
        for child in metric:
            composite.add(create(child, *args, **kwargs))
        return composite
    if isinstance(metric, str):
        text = metric.strip()
        if text.startswith(("{", "[")):
            if args or kwargs:
                raise TypeError(f"create() got extra arguments {args!r} {kwargs!r} with config {text!r}")
            config = bounded_json.loads(text, f"metric config {text[:80]!r}", ValueError)
            if isinstance(config, dict):
                return create(**config)
            if not (isinstance(config, list) and len(config) == 2 and isinstance(config[1], dict)):
                raise ValueError(f"metric config {text!r} must be a JSON object or [name, {{kwargs}}]")
            return create(config[0], **config[1])
        klass = _REGISTRY[text]
        return klass(*args, **kwargs)
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    raise TypeError(
        f"cannot create a metric from {type(metric).__name__} {metric!r}: expected a name, a callable, "
        "a list, or an EvalMetric"
    )


# ----------------------------------------------------------------------------------------------------------
# Composite / Custom
# ----------------------------------------------------------------------------------------------------------
@register
@alias("composite")
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; ``get()`` returns ``([names], [values])``."""

    _keeps_global_stats = True

    def __init__(
        self,
        metrics: Sequence[Any] | None = None,
        name: str = "composite",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        self.metrics: list[EvalMetric] = [create(m) for m in (metrics or [])]
        super().__init__(name, output_names=output_names, label_names=label_names)

    def add(self, metric: Any) -> None:
        """Append a child metric (anything ``create`` accepts)."""
        self.metrics.append(create(metric))

    def get_metric(self, index: int) -> EvalMetric:
        """The child metric at ``index``."""
        if not isinstance(index, int) or not -len(self.metrics) <= index < len(self.metrics):
            raise ValueError(
                f"metric index {index!r} is out of range: expected 0 <= index < {len(self.metrics)}"
            )
        return self.metrics[index]

    def update_dict(self, label: Mapping[str, Any], pred: Mapping[str, Any]) -> None:
        if self.label_names is not None:
            label = OrderedDict((k, v) for k, v in label.items() if k in self.label_names)
        if self.output_names is not None:
            pred = OrderedDict((k, v) for k, v in pred.items() if k in self.output_names)
        for metric in self.metrics:
            metric.update_dict(label, pred)

    def update(self, labels: Arrays, preds: Arrays) -> None:
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self) -> None:
        super().reset()
        for metric in getattr(self, "metrics", []):
            metric.reset()

    def reset_local(self) -> None:
        super().reset_local()
        for metric in self.metrics:
            metric.reset_local()

    @staticmethod
    def _collect(results: list[tuple[Any, Any]]) -> tuple[list[str], list[float]]:
        names: list[str] = []
        values: list[float] = []
        for name, value in results:
            if isinstance(name, list):
                names.extend(name)
                values.extend(value)
            else:
                names.append(name)
                values.append(value)
        return names, values

    def get(self) -> tuple[list[str], list[float]]:
        return self._collect([m.get() for m in self.metrics])

    def get_global(self) -> tuple[list[str], list[float]]:
        return self._collect([m.get_global() for m in self.metrics])

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["metrics"] = [m.get_config() for m in self.metrics]
        return config


@register
class CustomMetric(EvalMetric):
    """A metric computed by ``feval(label, pred)`` on numpy arrays, one pair at a time.

    ``feval`` returns either a number (counted as one instance) or ``(sum_metric, num_inst)``.
    Converting to numpy reads the data back from the device, so this metric does synchronise.
    """

    _keeps_global_stats = True

    def __init__(
        self,
        feval: Callable[[numpy.ndarray, numpy.ndarray], Any],
        name: str | None = None,
        allow_extra_outputs: bool = False,
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        if not callable(feval):
            raise TypeError(f"feval must be callable, got {type(feval).__name__}: {feval!r}")
        if name is None:
            name = getattr(feval, "__name__", type(feval).__name__)
            if "<" in name:
                name = f"custom({name})"
        super().__init__(
            name,
            feval=feval,
            allow_extra_outputs=allow_extra_outputs,
            output_names=output_names,
            label_names=label_names,
        )
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels: Arrays, preds: Arrays) -> None:
        labels_l, preds_l = _as_list(labels), _as_list(preds)
        if not self._allow_extra_outputs:
            check_label_shapes(labels_l, preds_l)
        for pred, label in zip(preds_l, labels_l):
            reval = self._feval(label.cpu().numpy(), pred.cpu().numpy())
            if isinstance(reval, tuple):
                if len(reval) != 2:
                    raise ValueError(
                        f"feval returned a tuple of {len(reval)} items {reval!r}: expected (sum, count)"
                    )
                value, count = reval
                self._accumulate(float(value), _py(count) if isinstance(count, torch.Tensor) else count)
            else:
                self._accumulate(float(reval), 1)

    def get_config(self) -> dict[str, Any]:
        raise NotImplementedError("CustomMetric cannot be serialized")


def np(
    numpy_feval: Callable[[numpy.ndarray, numpy.ndarray], Any],
    name: str | None = None,
    allow_extra_outputs: bool = False,
) -> CustomMetric:
    """A ``CustomMetric`` from a function of numpy ``(label, pred)`` returning a number."""

    def feval(label: numpy.ndarray, pred: numpy.ndarray) -> Any:
        return numpy_feval(label, pred)

    feval.__name__ = getattr(numpy_feval, "__name__", "feval")
    return CustomMetric(feval, name, allow_extra_outputs)
