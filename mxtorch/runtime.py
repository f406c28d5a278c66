"""``mx.runtime``: which build features this installation has (MXNet's ``Features``).

MXNet reports the switches it was compiled with; mxtorch reports what the torch it runs on
provides, under MXNet's feature names, so code that asks ``Features().is_enabled('CUDA')``
gets a true answer. Features MXNet had and mxtorch has no counterpart for read as disabled.
"""

from __future__ import annotations

import importlib.util
from collections import OrderedDict

import torch

__all__ = ["Feature", "Features", "feature_list"]


class Feature:
    """One build feature: its ``name`` and whether it is ``enabled``."""

    def __init__(self, name: str, enabled: bool) -> None:
        self.name = name
        self.enabled = bool(enabled)

    def __repr__(self) -> str:
        return f"{'✔' if self.enabled else '✖'} {self.name}"


def _detect() -> dict[str, bool]:
    cuda = torch.cuda.is_available()
    dist = torch.distributed.is_available()
    return {
        "CUDA": torch.version.cuda is not None,
        "CUDNN": cuda and torch.backends.cudnn.is_available(),
        "NCCL": dist and torch.distributed.is_nccl_available(),
        "TENSORRT": False,
        "CPU_SSE": True,
        "CPU_SSE2": True,
        "CPU_AVX": torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"),
        "CPU_AVX2": torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"),
        "OPENMP": torch.backends.openmp.is_available(),
        "BLAS_MKL": torch.backends.mkl.is_available(),
        "BLAS_OPEN": not torch.backends.mkl.is_available(),
        "LAPACK": bool(getattr(torch._C, "has_lapack", True)),
        "MKLDNN": torch.backends.mkldnn.is_available(),
        "OPENCV": importlib.util.find_spec("cv2") is not None,
        "DIST_KVSTORE": dist,
        "PROFILER": True,
        "INT64_TENSOR_SIZE": True,  # torch sizes and indices are 64-bit
        "SIGNAL_HANDLER": False,
        "DEBUG": False,
        "TVM_OP": False,
    }


class Features(OrderedDict[str, Feature]):
    """All features by name; ``Features().is_enabled('CUDA')``."""

    def __init__(self) -> None:
        super().__init__((name, Feature(name, on)) for name, on in _detect().items())

    def __repr__(self) -> str:
        return str(list(self.values()))

    def is_enabled(self, feature_name: str) -> bool:
        """Whether the named feature is enabled; RuntimeError for a name that is not a feature."""
        name = feature_name.upper()
        if name not in self:
            raise RuntimeError(
                f"Feature '{feature_name}' is unknown, known features are: {list(self.keys())}"
            )
        return self[name].enabled


def feature_list() -> list[Feature]:
    """Every feature, in MXNet's order."""
    return list(Features().values())
