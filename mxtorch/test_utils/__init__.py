"""``mx.test_utils``: the helpers MXNet users' own tests rely on.

Comparison helpers accept torch tensors, numpy arrays and Python scalars alike; tolerances
follow MXNet's per-dtype table (see :mod:`._tolerance`). The symbolic checks
(``check_symbolic_forward`` ...) bind symbols through :mod:`mxtorch.executor`; the statistical
ones (``verify_generator`` ...) test random generators by chi-square.

MXNet's ``test_utils`` has no ``__all__``, so ``from mxnet.test_utils import *`` also hands
out the modules it imports (``np``, ``sys``, ``os``, ``rnd`` = ``numpy.random``, ...), and MXNet
test files rely on that: ``__all__`` here lists exactly those names plus the helpers.
"""

# ruff: noqa: F401  (the module imports below are part of MXNet's star-import surface)
from __future__ import annotations

import bz2
import errno
import gzip
import json
import logging
import numbers
import os
import platform
import struct
import sys
import time
import traceback
import zipfile
from collections import OrderedDict
from contextlib import contextmanager

import numpy as np
import numpy.random as rnd
import numpy.testing as npt

from .. import runtime as _runtime
from ..base import MXNetError
from ..context import Context, current_context
from ..nd import array
from ..util import getenv, setenv, use_np, use_np_array, use_np_shape
from ._compare import (
    almost_equal,
    assert_allclose,
    assert_almost_equal,
    assert_almost_equal_ignore_nan,
    assert_almost_equal_with_err,
    assert_exception,
    checkShapes,
    collapse_sum_like,
    np_reduce,
    same,
    same_array,
)
from ._generators import chi_square_check, gen_buckets_probs_with_ppf, mean_check, var_check, verify_generator
from ._gradient import (
    check_consistency,
    check_numeric_gradient,
    check_symbolic_backward,
    check_symbolic_forward,
    numeric_grad,
    simple_forward,
)
from ._inputs import (
    assign_each,
    assign_each2,
    create_2d_tensor,
    create_sparse_array,
    create_sparse_array_zd,
    create_vector,
    get_identity_mat,
    get_identity_mat_batch,
    rand_coord_2d,
    rand_ndarray,
    rand_shape_2d,
    rand_shape_3d,
    rand_shape_nd,
    rand_sparse_ndarray,
    random_arrays,
    random_sample,
    random_uniform_arrays,
    shuffle_csr_column_indices,
)
from ._misc import (
    DummyIter,
    compare_ndarray_tuple,
    compare_optimizer,
    discard_stderr,
    environment,
    has_tvm_ops,
    is_aarch64_run,
    is_cd_run,
    is_op_runnable,
    list_gpus,
    retry,
    same_symbol_structure,
    set_env_var,
)
from ._tolerance import (
    default_atols,
    default_context,
    default_device,
    default_dtype,
    default_numeric_eps,
    default_rtols,
    effective_dtype,
    get_atol,
    get_etol,
    get_rtol,
    get_tolerance,
    get_tols,
    set_default_context,
    set_default_device,
)

Features = _runtime.Features
mx = sys.modules[__name__.rsplit(".", 2)[0]]  # MXNet's test_utils exports its ``import mxnet as mx``

_MODULE_IMPORTS = [
    "time",
    "gzip",
    "struct",
    "traceback",
    "numbers",
    "sys",
    "os",
    "platform",
    "errno",
    "logging",
    "bz2",
    "zipfile",
    "json",
    "contextmanager",
    "OrderedDict",
    "np",
    "npt",
    "rnd",
    "mx",
    "Context",
    "current_context",
    "array",
    "use_np",
    "getenv",
    "setenv",
    "Features",
]

__all__ = _MODULE_IMPORTS + [
    "MXNetError",
    "use_np_array",
    "use_np_shape",
    # tolerances and contexts
    "default_context",
    "set_default_context",
    "default_device",
    "set_default_device",
    "default_dtype",
    "default_rtols",
    "default_atols",
    "default_numeric_eps",
    "effective_dtype",
    "get_tolerance",
    "get_tols",
    "get_atol",
    "get_rtol",
    "get_etol",
    # comparisons
    "almost_equal",
    "assert_almost_equal",
    "assert_almost_equal_with_err",
    "assert_almost_equal_ignore_nan",
    "assert_allclose",
    "assert_exception",
    "checkShapes",
    "same",
    "same_array",
    "np_reduce",
    "collapse_sum_like",
    # inputs
    "random_arrays",
    "random_uniform_arrays",
    "random_sample",
    "rand_shape_2d",
    "rand_shape_3d",
    "rand_shape_nd",
    "rand_coord_2d",
    "rand_ndarray",
    "rand_sparse_ndarray",
    "create_sparse_array",
    "create_sparse_array_zd",
    "shuffle_csr_column_indices",
    "assign_each",
    "assign_each2",
    "create_2d_tensor",
    "create_vector",
    "get_identity_mat",
    "get_identity_mat_batch",
    # gradients and symbols
    "simple_forward",
    "numeric_grad",
    "check_numeric_gradient",
    "check_symbolic_forward",
    "check_symbolic_backward",
    "check_consistency",
    # random generators
    "gen_buckets_probs_with_ppf",
    "mean_check",
    "var_check",
    "chi_square_check",
    "verify_generator",
    # environment and the rest
    "set_env_var",
    "environment",
    "discard_stderr",
    "retry",
    "list_gpus",
    "is_cd_run",
    "is_aarch64_run",
    "has_tvm_ops",
    "is_op_runnable",
    "same_symbol_structure",
    "compare_ndarray_tuple",
    "compare_optimizer",
    "DummyIter",
]
