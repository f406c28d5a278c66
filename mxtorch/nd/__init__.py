"""``mx.nd``: MXNet's NDArray operators as functions.

Creation functions, samplers and ``load`` return :class:`NDArray` (a torch.Tensor subclass that
carries MXNet's meaning for the methods torch also defines: ``x.size``, ``x.reshape(0, -1)`` ...);
an operator given an NDArray returns NDArrays, given plain torch tensors plain torch tensors.
``isinstance(t, nd.NDArray)`` is true for every torch.Tensor.
The module also serves as the ``F`` of MXNet 1.x ``hybrid_forward(F, x, ...)`` code, so it
carries the symbol-style operators (``F.FullyConnected``, ``F.Convolution``, ``F.BatchNorm`` ...).

Every operator takes MXNet's ``out=`` (the result is written into that array, which is
returned) and ``name=`` (ignored: it names symbol nodes), as MXNet's generated operators do.

Differences from torch worth knowing: creation functions default to float32 (also for numpy
float64 input) and take ``ctx``; full reductions return shape (1,); index results
(``argmax``, ``topk``...) are float32; comparisons return 1/0 in the input dtype.
Sparse arrays are not here (``mxtorch.nd.sparse`` is separate); ``mxtorch.nd.ndarray`` holds
the names MXNet code imports from ``mxnet.ndarray.ndarray``.
"""

from __future__ import annotations

from .. import _mxnet_methods
from ..operator import Custom as Custom  # MXNet's Python custom operators (mx.operator.register)
from . import (
    _creation,
    _ctc,
    _io,
    _legacy,
    _nn,
    _ops,
    _patches,
    _random_pdf,
    _sparse_ndarray,
    _update_ops,
    contrib,
    ndarray,
    random,
    sparse,
)
from . import _internal as _internal  # mx.nd._internal: MXNet's underscore operators
from . import image as image  # mx.nd.image: MXNet's image operators
from . import linalg as linalg  # mx.nd.linalg: MXNet's batched linear algebra
from ._cached_op import CachedOp
from ._common import mx_operator as _mx_operator
from ._creation import *  # noqa: F403
from ._ctc import *  # noqa: F403
from ._elemwise import PARAMETERLESS as _PARAMETERLESS
from ._io import *  # noqa: F403
from ._legacy import *  # noqa: F403
from ._legacy import SAMPLER_ALIASES as _SAMPLER_ALIASES
from ._ndarray_type import NDArray, follows_inputs
from ._nn import *  # noqa: F403
from ._ops import *  # noqa: F403
from ._patches import *  # noqa: F403
from ._random_pdf import *  # noqa: F403
from ._update_ops import *  # noqa: F403
from .ndarray import (
    from_dlpack,
    histogram,
    moveaxis,
    onehot_encode,
    to_dlpack_for_read,
    to_dlpack_for_write,
    true_divide,
)
from .sparse import cast_storage  # MXNet's operator of mx.nd (storage type conversion)

__all__ = [
    "NDArray", "ndarray", "random", "sparse", "from_dlpack", "histogram", "moveaxis", "onehot_encode",
    "true_divide", "to_dlpack_for_read", "to_dlpack_for_write", "contrib", "CachedOp", "cast_storage",
    *sorted(_SAMPLER_ALIASES), *sorted(linalg.TOP_LEVEL),
] + [
    n for n in (*_creation.__all__, *_ctc.__all__, *_io.__all__, *_nn.__all__, *_ops.__all__,
                *_patches.__all__,
                *_legacy.__all__, *_random_pdf.__all__, *_update_ops.__all__) if n != "infer_reshape"
]
globals().update(_SAMPLER_ALIASES)
globals().update(linalg.TOP_LEVEL)  # mx.nd.linalg_gemm ...: the mx.nd.linalg operators

_OPERATORS = (*_ops.__all__, *_nn.__all__, *_patches.__all__,
              *_ctc.__all__, *_legacy.__all__, *_random_pdf.__all__, "cast",
              "Cast", "zeros_like", "ones_like", "full_like")
for _name in _OPERATORS:
    if _name != "infer_reshape":
        globals()[_name] = follows_inputs(_mx_operator(globals()[_name], _name in _PARAMETERLESS))
del _name

# MXNet method mode's rules (x.sort(), x.sum(exclude=True) ...) call these operators: handed down to
# the module below the arrays' methods that holds the rules
_mxnet_methods.use_operators(globals())
_sparse_ndarray.use_dense_class(NDArray)  # dense results of sparse operations are NDArrays
