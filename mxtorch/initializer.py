"""Weight initializers (MXNet's ``mx.init``) that fill torch tensors in place.

An initializer is called as ``init(name, tensor)``; the ending of the name picks what is filled
('...weight' → the initializer's own rule, '...bias'/'...beta' → 0, '...gamma' → 1, running
statistics → 0/1).  Random numbers come from torch's global generator on the tensor's device, so
``torch.manual_seed`` makes them reproducible.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy
import torch

from . import bounded_json
from .registry import Registry, RegistryError, subclasses_of

__all__ = [
    "InitDesc",
    "Initializer",
    "register",
    "alias",
    "create",
    "registered_names",
    "Load",
    "Mixed",
    "Zero",
    "One",
    "Constant",
    "Uniform",
    "Normal",
    "Orthogonal",
    "Xavier",
    "MSRAPrelu",
    "Bilinear",
    "LSTMBias",
    "FusedRNN",
]

_I = TypeVar("_I", bound="type[Initializer]")


class InitDesc(str):
    """A parameter name carrying extra information for initializers.

    ``attrs`` may hold ``'__init__'``: an initializer (or its name / ``dumps()`` string) that then
    initializes this parameter whatever its name; ``global_init`` is the initializer that was
    called first for it.
    """

    attrs: dict[str, Any]
    global_init: Initializer | None

    def __new__(
        cls, name: str, attrs: Mapping[str, Any] | None = None, global_init: Initializer | None = None
    ) -> InitDesc:
        ret = super().__new__(cls, name)
        ret.attrs = dict(attrs or {})
        ret.global_init = global_init
        return ret


def _check_tensor(arr: Any, who: str) -> torch.Tensor:
    if not isinstance(arr, torch.Tensor):
        raise TypeError(f"{who}: expected a torch.Tensor to initialize, got {type(arr).__name__}: {arr!r}")
    return arr


def _check_float(arr: torch.Tensor, who: str) -> None:
    if not (arr.is_floating_point() or arr.is_complex()):
        raise TypeError(f"{who} draws random numbers: expected a floating-point tensor, got {arr.dtype}")


def _json_safe(value: Any) -> Any:
    """``value`` in a JSON-serialisable form (arrays → lists, initializers → ``[name, kwargs]``)."""
    if isinstance(value, Initializer):
        return json.loads(value.dumps())
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().tolist()
    if isinstance(value, (numpy.ndarray, numpy.generic)):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return value


class Initializer:
    """Base class of all initializers; subclasses implement ``_init_weight(name, arr)``."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._verbose = False
        self._print_func: Callable[[torch.Tensor], str] | None = None

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        # MXNet's rule: the same initializer with the same arguments (ParameterDict.get compares
        # the init of a shared parameter this way)
        if not isinstance(other, Initializer):
            return NotImplemented
        return type(self) is type(other) and self.dumps() == other.dumps()

    def __hash__(self) -> int:
        return hash((type(self), self.dumps()))

    def set_verbosity(
        self, verbose: bool = False, print_func: Callable[[torch.Tensor], str] | None = None
    ) -> Initializer:
        """Log (``logging.info``) a line for each array initialized: ``print_func(arr)``, by default
        the root mean square ``norm(arr) / sqrt(size)``, as MXNet does."""
        self._verbose = verbose
        self._print_func = print_func
        return self

    def _verbose_print(self, desc: str, init: Any, arr: torch.Tensor) -> None:
        if not self._verbose:
            return
        if self._print_func is not None:
            stat = self._print_func(arr)
        elif arr.numel():
            stat = str(float(torch.linalg.vector_norm(arr.detach().double()) / math.sqrt(arr.numel())))
        else:
            stat = "empty"
        logging.info("Initialized %s as %s: %s", desc, init, stat)

    def dumps(self) -> str:
        """JSON string ``[name, kwargs]`` from which ``create`` rebuilds this initializer."""
        return json.dumps([type(self).__name__.lower(), _json_safe(self._kwargs)])

    def __call__(self, desc: str, arr: torch.Tensor) -> None:
        """Fill ``arr`` in place, choosing the rule from the ending of the name ``desc``."""
        arr = _check_tensor(arr, type(self).__name__)
        with torch.no_grad():
            if isinstance(desc, InitDesc):
                if desc.global_init is None:
                    desc.global_init = self
                init = desc.attrs.get("__init__", "")
                if init:
                    create(init)._init_weight(desc, arr)
                    self._verbose_print(desc, init, arr)
                    return
            elif not isinstance(desc, str):
                raise TypeError(f"expected the parameter name as a str, got {type(desc).__name__}: {desc!r}")
            self._dispatch(desc, arr, legacy=not isinstance(desc, InitDesc))

    def _dispatch(self, name: str, arr: torch.Tensor, legacy: bool) -> None:
        if legacy and name.startswith("upsampling"):
            self._init_bilinear(name, arr)
            self._verbose_print(name, "bilinear", arr)
            return
        if legacy and name.startswith("stn_loc") and name.endswith("weight"):
            self._init_zero(name, arr)
            self._verbose_print(name, "zero", arr)
            return
        if legacy and name.startswith("stn_loc") and name.endswith("bias"):
            self._init_loc_bias(name, arr)
            self._verbose_print(name, "loc_bias", arr)
            return
        rules: list[tuple[tuple[str, ...], Callable[[str, torch.Tensor], None], str]] = [
            (("weight",), self._init_weight, "weight"),
            (("bias",), self._init_bias, "bias"),
            (("gamma",), self._init_gamma, "gamma"),
            (("beta",), self._init_beta, "beta"),
            (("running_mean", "moving_mean", "moving_inv_var", "moving_avg"), self._init_zero, "zero"),
            (("running_var", "moving_var"), self._init_one, "one"),
            (("min",), self._init_zero, "zero"),
            (("max",), self._init_one, "one"),
        ]
        for endings, fill, label in rules:
            if name.endswith(endings):
                fill(name, arr)
                self._verbose_print(name, label if label != "weight" else self, arr)
                return
        self._init_default(name, arr)

    # -- fill rules ----------------------------------------------------------------------------------------
    def _init_weight(self, name: str, arr: torch.Tensor) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _init_weight()")

    def _init_bias(self, _: str, arr: torch.Tensor) -> None:
        arr.zero_()

    def _init_gamma(self, _: str, arr: torch.Tensor) -> None:
        arr.fill_(1.0)

    def _init_beta(self, _: str, arr: torch.Tensor) -> None:
        arr.zero_()

    def _init_zero(self, _: str, arr: torch.Tensor) -> None:
        arr.zero_()

    def _init_one(self, _: str, arr: torch.Tensor) -> None:
        arr.fill_(1.0)

    def _init_bilinear(self, name: str, arr: torch.Tensor) -> None:
        arr.copy_(_bilinear_kernel(arr, name))

    def _init_loc_bias(self, name: str, arr: torch.Tensor) -> None:
        if tuple(arr.shape) != (6,):
            raise ValueError(f"{name}: a spatial-transformer loc bias has shape (6,), got {tuple(arr.shape)}")
        arr.copy_(torch.tensor([1.0, 0, 0, 0, 1.0, 0], dtype=arr.dtype, device=arr.device))

    def _init_default(self, name: str, arr: torch.Tensor) -> None:
        raise ValueError(
            f"unknown initialization pattern for {name!r}: default initialization only covers names "
            "ending in 'weight', 'bias', 'beta' (0), 'gamma' (1), and running/moving mean (0) and var (1); "
            "give this parameter an explicit initializer, e.g. init=mxtorch.init.Constant(...)"
        )


# ----------------------------------------------------------------------------------------------------------
# registry
# ----------------------------------------------------------------------------------------------------------
_REGISTRY: Registry[type[Initializer]] = Registry("initializer", error=RegistryError,
                                           check=subclasses_of(Initializer, "Initializer subclasses"))
# MXNet's public functions are the registry's methods: ``register`` (class decorator, registered under
# the lower-cased class name), ``alias`` (further names) and ``registered_names`` (sorted names).
register, alias, registered_names = _REGISTRY.register, _REGISTRY.alias, _REGISTRY.names


def create(init: Any = None, /, **kwargs: Any) -> Initializer:
    """An initializer from a name (case-insensitive, aliases included), a ``dumps()`` string,
    a ``[name, kwargs]`` pair, an ``Initializer`` class, or an instance (returned unchanged).

    The name may also be given as ``initializer=`` (MXNet's registry keyword); every other
    keyword goes to the constructor (so an initializer taking ``init=``, like FusedRNN, works).
    """
    if init is None:
        init = kwargs.pop("initializer", None)
        if init is None:
            raise TypeError("create() needs the initializer: a name, a dumps() string, a class, an instance")
    if isinstance(init, Initializer):
        if kwargs:
            raise TypeError(f"create() got keyword arguments {kwargs!r} along with the initializer {init!r}")
        return init
    if isinstance(init, type):
        if issubclass(init, Initializer):
            return init(**kwargs)
        raise TypeError(f"cannot create an initializer from class {init!r}: expected an Initializer subclass")
    if isinstance(init, (list, tuple)):
        if len(init) != 2 or not isinstance(init[0], str) or not isinstance(init[1], Mapping):
            raise ValueError(f"expected an initializer spec [name, kwargs], got {init!r}")
        return create(init[0], **{**init[1], **kwargs})
    if isinstance(init, str):
        text = init.strip()
        if text.startswith("["):
            if kwargs:
                raise TypeError(f"create() got keyword arguments {kwargs!r} along with the spec {init!r}")
            spec = bounded_json.loads(text, f"initializer spec {init[:80]!r}", ValueError)
            return create(spec)
        klass = _REGISTRY[text]
        return klass(**kwargs)
    raise TypeError(
        f"cannot create an initializer from {type(init).__name__} {init!r}: expected a name, a dumps() "
        "string, an Initializer class or instance"
    )


# ----------------------------------------------------------------------------------------------------------
# initializers
# ----------------------------------------------------------------------------------------------------------
@register
class Load(Initializer):
    """Copy values from a dict of arrays or a file of named arrays (MXNet's format, as
    ``mx.nd.save`` and checkpoints write it, or safetensors); others go to ``default_init``.

    Names prefixed ``arg:`` or ``aux:`` (MXNet checkpoints) are matched without the prefix.
    """

    def __init__(
        self, param: Mapping[str, Any] | str, default_init: Initializer | None = None, verbose: bool = False
    ) -> None:
        super().__init__()
        if isinstance(param, str):
            from .nd._io import load

            loaded = load(param)  # either format, told apart by the file's first bytes
            if not isinstance(loaded, Mapping):
                raise TypeError(f"Load: {param!r} holds a list of arrays; it needs names (a dict was saved)")
            param = loaded
        if not isinstance(param, Mapping):
            raise TypeError(f"Load expects a dict of arrays or a file name, got {type(param).__name__}")
        self.param: dict[str, torch.Tensor] = {}
        for name, value in param.items():
            if name.startswith(("arg:", "aux:")):
                name = name[4:]
            self.param[name] = torch.as_tensor(value)
        self.default_init = None if default_init is None else create(default_init)
        self.verbose = verbose

    def dumps(self) -> str:
        raise NotImplementedError("Load initializers hold arrays and cannot be serialized with dumps()")

    def __call__(self, desc: str, arr: torch.Tensor) -> None:
        arr = _check_tensor(arr, "Load")
        name = str(desc)
        if name in self.param:
            src = self.param[name]
            if tuple(src.shape) != tuple(arr.shape):
                raise ValueError(
                    f"parameter {name!r} cannot be initialized from loading: shape mismatch, "
                    f"target {tuple(arr.shape)} vs loaded {tuple(src.shape)}"
                )
            with torch.no_grad():
                arr.copy_(src)
            if self.verbose:
                logging.info("Initialized %s by loading", name)  # as MXNet logs it
            return
        if self.default_init is None:
            raise ValueError(
                f"cannot initialize {name!r}: not found in the loaded parameters and no default_init given"
            )
        self.default_init(desc, arr)
        if self.verbose:
            logging.info("Initialized %s by default", name)


@register
class Mixed(Initializer):
    """Initialize each parameter with the initializer of the first regex in ``patterns`` that matches
    the start of its name (``re.match``); no match is an error, so end with ``'.*'`` for a default."""

    def __init__(self, patterns: Sequence[str], initializers: Sequence[Any]) -> None:
        if isinstance(patterns, str) or len(patterns) != len(initializers):
            raise ValueError(
                f"Mixed needs as many patterns as initializers, got {len(patterns)} patterns "
                f"{list(patterns)!r} and {len(initializers)} initializers"
            )
        inits = [create(i) for i in initializers]
        super().__init__(patterns=list(patterns), initializers=inits)
        self.map = list(zip([re.compile(p) for p in patterns], inits))

    def __call__(self, desc: str, arr: torch.Tensor) -> None:
        for prog, init in self.map:
            if prog.match(str(desc)):
                init(desc, arr)
                return
        raise ValueError(
            f"parameter name {str(desc)!r} did not match any pattern of {[p.pattern for p, _ in self.map]}; "
            "add a '.*' pattern at the end with a default initializer"
        )


@register
@alias("zeros")
class Zero(Initializer):
    """Fill weights with 0."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: str, arr: torch.Tensor) -> None:
        arr.zero_()


@register
@alias("ones")
class One(Initializer):
    """Fill weights with 1."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: str, arr: torch.Tensor) -> None:
        arr.fill_(1.0)


@register
class Constant(Initializer):
    """Fill weights with ``value``: a scalar, or an array broadcast to the weight's shape.

    An array value is kept in ``_kwargs`` as nested lists (MXNet's ``dumps`` form), so
    ``json.dumps([name, init._kwargs])`` equals ``init.dumps()``.
    """

    def __init__(self, value: Any) -> None:
        super().__init__(value=value if isinstance(value, (int, float, bool)) else _json_safe(value))
        self.value = value

    def _init_weight(self, name: str, arr: torch.Tensor) -> None:
        value = self.value
        if isinstance(value, (int, float, bool)):
            arr.fill_(value)
            return
        src = torch.as_tensor(numpy.asarray(value) if not isinstance(value, torch.Tensor) else value)
        try:
            src = src.to(device=arr.device, dtype=arr.dtype).expand_as(arr)
        except RuntimeError:
            raise ValueError(
                f"Constant value of shape {tuple(src.shape)} cannot be broadcast to {name!r} of shape "
                f"{tuple(arr.shape)}"
            ) from None
        arr.copy_(src)


@register
class Uniform(Initializer):
    """Draw weights uniformly from ``[-scale, scale)``."""

    def __init__(self, scale: float = 0.07) -> None:
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _: str, arr: torch.Tensor) -> None:
        _check_float(arr, "Uniform")
        arr.uniform_(-self.scale, self.scale)


@register
class Normal(Initializer):
    """Draw weights from a normal distribution with mean 0 and standard deviation ``sigma``."""

    def __init__(self, sigma: float = 0.01) -> None:
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _: str, arr: torch.Tensor) -> None:
        _check_float(arr, "Normal")
        arr.normal_(0.0, self.sigma)


@register
class Orthogonal(Initializer):
    """Fill weights with ``scale`` times an orthogonal matrix (the SVD factor of a random matrix).

    The weight is viewed as ``(shape[0], prod(shape[1:]))``; ``rand_type`` ('uniform' or 'normal')
    picks the distribution of the random matrix.
    """

    def __init__(self, scale: float = 1.414, rand_type: str = "uniform") -> None:
        if rand_type not in ("uniform", "normal"):
            raise ValueError(f"rand_type must be 'uniform' or 'normal', got {rand_type!r}")
        super().__init__(scale=scale, rand_type=rand_type)
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, name: str, arr: torch.Tensor) -> None:
        _check_float(arr, "Orthogonal")
        if arr.dim() == 0:
            raise ValueError(f"Orthogonal cannot initialize {name!r}: it is a scalar, expected at least 1-D")
        nout = arr.shape[0]
        nin = math.prod(arr.shape[1:])
        work = torch.float64 if arr.dtype == torch.float64 else torch.float32
        tmp = torch.empty((nout, nin), dtype=work, device=arr.device)
        if self.rand_type == "uniform":
            tmp.uniform_(-1.0, 1.0)
        else:
            tmp.normal_(0.0, 1.0)
        u, _, vh = torch.linalg.svd(tmp, full_matrices=False)
        res = u if u.shape == tmp.shape else vh
        arr.copy_((self.scale * res).reshape(arr.shape))


_FACTOR_TYPES = ("avg", "in", "out")


@register
class Xavier(Initializer):
    """Xavier/Glorot initialization with MXNet's fans.

    For a weight of shape ``(out, in, *k)``: ``fan_in = in * prod(k)``, ``fan_out = out * prod(k)``;
    ``factor`` is their average ('avg'), ``fan_in`` ('in') or ``fan_out`` ('out'), and
    ``scale = sqrt(magnitude / factor)``.  'uniform' draws from ``[-scale, scale)``, 'gaussian' from
    N(0, scale²).  Weights with fewer than 2 dimensions are rejected, as in MXNet.
    """

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg", magnitude: float = 3) -> None:
        if rnd_type not in ("uniform", "gaussian"):
            raise ValueError(f"rnd_type must be 'uniform' or 'gaussian', got {rnd_type!r}")
        if factor_type not in _FACTOR_TYPES:
            raise ValueError(f"factor_type must be one of {list(_FACTOR_TYPES)}, got {factor_type!r}")
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _scale(self, name: str, shape: Sequence[int]) -> float:
        if len(shape) < 2:
            raise ValueError(
                f"{type(self).__name__} cannot initialize {name!r} of shape {tuple(shape)}: "
                "it needs a weight with at least 2 dimensions"
            )
        hw_scale = math.prod(shape[2:]) if len(shape) > 2 else 1
        fan_in, fan_out = shape[1] * hw_scale, shape[0] * hw_scale
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[self.factor_type]
        if factor == 0:
            raise ValueError(
                f"{type(self).__name__} cannot initialize {name!r} of shape {tuple(shape)}: its fan is 0"
            )
        return math.sqrt(self.magnitude / factor)

    def _init_weight(self, name: str, arr: torch.Tensor) -> None:
        _check_float(arr, type(self).__name__)
        scale = self._scale(name, tuple(arr.shape))
        if self.rnd_type == "uniform":
            arr.uniform_(-scale, scale)
        else:
            arr.normal_(0.0, scale)


@register
class MSRAPrelu(Xavier):
    """He/MSRA initialization for PReLU nets: Gaussian Xavier with ``magnitude = 2 / (1 + slope²)``."""

    def __init__(self, factor_type: str = "avg", slope: float = 0.25) -> None:
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope**2))
        self._kwargs = {"factor_type": factor_type, "slope": slope}
        self.slope = slope


def _bilinear_kernel(arr: torch.Tensor, name: str) -> torch.Tensor:
    if arr.dim() != 4:
        raise ValueError(
            f"bilinear initialization of {name!r} needs a 4-D weight (C_in, C_out, H, W), "
            f"got shape {tuple(arr.shape)}"
        )
    height, width = arr.shape[2], arr.shape[3]
    f = math.ceil(width / 2.0)
    c = (2 * f - 1 - f % 2) / (2.0 * f)
    x = torch.arange(width, dtype=torch.float64, device=arr.device)
    y = torch.arange(height, dtype=torch.float64, device=arr.device)
    kernel = (1 - (y / f - c).abs()).unsqueeze(1) * (1 - (x / f - c).abs()).unsqueeze(0)
    return kernel.to(arr.dtype).expand_as(arr)


@register
class Bilinear(Initializer):
    """Bilinear-interpolation kernels for upsampling (deconvolution) weights of shape (C_in, C_out, H, W)."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, name: str, arr: torch.Tensor) -> None:
        arr.copy_(_bilinear_kernel(arr, name))


@register
class LSTMBias(Initializer):
    """LSTM bias: 0 everywhere except ``forget_bias`` on the forget gate, the second of the four
    gate blocks (MXNet's gate order i, f, c, o)."""

    def __init__(self, forget_bias: float = 1.0) -> None:
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, name: str, arr: torch.Tensor) -> None:
        if arr.dim() == 0 or arr.shape[0] % 4 != 0:
            raise ValueError(
                f"LSTMBias cannot initialize {name!r} of shape {tuple(arr.shape)}: "
                "expected a first dimension divisible by 4 (four gates)"
            )
        arr.zero_()
        num_hidden = arr.shape[0] // 4
        arr[num_hidden : 2 * num_hidden] = self.forget_bias


_GATES = {"rnn_relu": ("",), "rnn_tanh": ("",), "lstm": ("_i", "_f", "_c", "_o"), "gru": ("_r", "_z", "_o")}


@register
class FusedRNN(Initializer):
    """Initialize the single flat parameter vector of a fused (cuDNN-layout) RNN.

    The vector is cut into one view per layer, direction ('l', and 'r' when bidirectional),
    gate and kind, named as MXNet's ``FusedRNNCell.unpack_weights`` names them
    (``l0_i2h_i_weight``, ``r1_h2h_f_bias``, ...): first every weight (per layer and direction,
    the i2h gates then the h2h gates), then every bias in the same order.  Each view is filled by
    ``init`` (or, when ``init`` is None, by the global initializer of the call's ``InitDesc``);
    for 'lstm' the forget-gate biases (``*_f_bias``, both i2h and h2h) get ``forget_bias``.
    """

    def __init__(
        self,
        init: Any,
        num_hidden: int,
        num_layers: int,
        mode: str,
        bidirectional: bool = False,
        forget_bias: float = 1.0,
    ) -> None:
        if mode not in _GATES:
            raise ValueError(f"mode must be one of {sorted(_GATES)}, got {mode!r}")
        for what, value in (("num_hidden", num_hidden), ("num_layers", num_layers)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{what} must be a positive int, got {value!r}")
        inner = None if init is None else create(init)
        super().__init__(
            init=None if inner is None else inner.dumps(),
            num_hidden=num_hidden,
            num_layers=num_layers,
            mode=mode,
            bidirectional=bidirectional,
            forget_bias=forget_bias,
        )
        self._init = inner
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bool(bidirectional)
        self._forget_bias = forget_bias

    def unpack(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Named views into ``flat`` (MXNet's ``FusedRNNCell`` names, no prefix)."""
        gates = _GATES[self._mode]
        dirs = ("l", "r") if self._bidirectional else ("l",)
        b, m, h, layers = len(dirs), len(gates), self._num_hidden, self._num_layers
        per = flat.numel() // (b * m * h)
        num_input = per - (layers - 1) * (h + b * h + 2) - h - 2
        if num_input < 1 or b * m * h * (num_input + h + 2 + (layers - 1) * (b * h + h + 2)) != flat.numel():
            raise ValueError(
                f"FusedRNN: a parameter of {flat.numel()} elements does not fit mode={self._mode!r}, "
                f"num_hidden={h}, num_layers={layers}, bidirectional={self._bidirectional}"
            )
        views: dict[str, torch.Tensor] = {}
        pos = 0

        def take(name: str, *shape: int) -> None:
            nonlocal pos
            size = math.prod(shape)
            views[name] = flat[pos : pos + size].view(*shape)
            pos += size

        for layer in range(layers):
            width = num_input if layer == 0 else b * h
            for d in dirs:
                for g in gates:
                    take(f"{d}{layer}_i2h{g}_weight", h, width)
                for g in gates:
                    take(f"{d}{layer}_h2h{g}_weight", h, h)
        for layer in range(layers):
            for d in dirs:
                for kind in ("i2h", "h2h"):
                    for g in gates:
                        take(f"{d}{layer}_{kind}{g}_bias", h)
        return views

    def _init_weight(self, name: str, arr: torch.Tensor) -> None:
        if not arr.is_contiguous():
            raise ValueError(f"FusedRNN needs a contiguous parameter to fill in place, {name!r} is not")
        fallback = getattr(name, "global_init", None)
        inner = self._init if self._init is not None else fallback
        if inner is None or inner is self:
            raise ValueError(
                f"FusedRNN(init=None) fills {name!r} with the global initializer, but none was given: "
                "pass an initializer, e.g. FusedRNN(mxtorch.init.Xavier(), ...)"
            )
        for sub, view in self.unpack(arr.view(-1)).items():
            if self._mode == "lstm" and sub.endswith("_f_bias"):
                view.fill_(self._forget_bias)
            else:
                inner(InitDesc(sub, global_init=fallback), view)
