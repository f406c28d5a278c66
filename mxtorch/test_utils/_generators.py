"""Statistical checks of random generators (``mx.test_utils.verify_generator`` and friends).

A generator is a function ``generator(n)`` returning ``n`` i.i.d. samples (numpy array, tensor
or list). The chi-square p-value is computed with torch's regularized incomplete gamma
function, so no scipy is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ._compare import _np

Generator = Callable[[int], Any]


def gen_buckets_probs_with_ppf(
    ppf: Callable[[float], float], nbuckets: int
) -> tuple[list[tuple[float, float]], list[float]]:
    """``nbuckets`` equally likely buckets ``(ppf(i/n), ppf((i+1)/n))`` and their probabilities 1/n
    (``ppf`` is the distribution's quantile function, the inverse of its cdf)."""
    if nbuckets <= 0:
        raise ValueError(f"gen_buckets_probs_with_ppf: nbuckets must be positive, got {nbuckets}")
    probs = [1.0 / nbuckets] * nbuckets
    buckets = [(ppf(i / float(nbuckets)), ppf((i + 1) / float(nbuckets))) for i in range(nbuckets)]
    return buckets, probs


def _samples(generator: Generator, n: int) -> np.ndarray:
    return _np(generator(n)).reshape(-1)


def mean_check(generator: Generator, mu: float, sigma: float, nsamples: int = 1000000) -> bool:
    """Whether the sample mean lies within mu ± 3 sigma / sqrt(n)."""
    mean = float(_samples(generator, nsamples).astype(np.float64).mean())
    half = 3 * sigma / np.sqrt(nsamples)
    return bool(mu - half < mean < mu + half)


def var_check(generator: Generator, sigma: float, nsamples: int = 1000000) -> bool:
    """Whether the sample variance lies within sigma² ± 3 sqrt(2 sigma⁴ / (n - 1))."""
    var = float(_samples(generator, nsamples).astype(np.float64).var(ddof=1))
    half = 3 * np.sqrt(2 * sigma**4 / (nsamples - 1))
    return bool(sigma**2 - half < var < sigma**2 + half)


def _chi2_sf(stat: float, dof: int) -> float:
    """P(X >= stat) for X chi-square distributed with ``dof`` degrees of freedom."""
    if dof <= 0:
        return 1.0
    return float(
        torch.special.gammaincc(
            torch.tensor(dof / 2.0, dtype=torch.float64),
            torch.tensor(max(stat, 0.0) / 2.0, dtype=torch.float64),
        )
    )


def chi_square_check(
    generator: Generator, buckets: Sequence[Any], probs: Sequence[float], nsamples: int = 1000000
) -> tuple[float, np.ndarray, np.ndarray]:
    """Pearson's chi-square test of ``nsamples`` draws against the bucket probabilities.

    ``buckets``: ascending, disjoint ``(low, high)`` ranges for a continuous distribution (a
    sample counts where ``low <= x < high``), or the possible values of a discrete one.
    Returns ``(p, observed counts, expected counts)``; a small p means the generator is wrong.
    """
    buckets = list(buckets)
    if len(probs) != len(buckets) or not buckets:
        raise ValueError(f"chi_square_check: {len(probs)} probabilities for {len(buckets)} buckets")
    samples = _samples(generator, nsamples)
    expected = nsamples * np.asarray(probs, dtype=np.float64)
    if isinstance(buckets[0], (list, tuple)):
        edges = np.asarray(buckets, dtype=np.float64)
        if np.any(edges[:, 0] > edges[:, 1]) or np.any(edges[1:, 0] < edges[:-1, 1]):
            raise ValueError(
                "chi_square_check: buckets must be ascending (low, high) ranges that do not overlap"
            )
        flat = edges.reshape(-1)
        pos = np.searchsorted(flat, samples.astype(np.float64), side="right")
        inside = pos % 2 == 1  # between a bucket's low and high edge
        observed = np.bincount(pos[inside] // 2, minlength=len(buckets))[: len(buckets)]
    else:
        observed = np.array([(samples == b).sum() for b in buckets])
    keep = expected > 0
    stat = float((((observed - expected) ** 2)[keep] / expected[keep]).sum())
    return _chi2_sf(stat, int(keep.sum()) - 1), observed, expected


def verify_generator(
    generator: Generator,
    buckets: Sequence[Any],
    probs: Sequence[float],
    nsamples: int = 1000000,
    nrepeat: int = 5,
    success_rate: float = 0.2,
    alpha: float = 0.05,
) -> list[float]:
    """Run :func:`chi_square_check` ``nrepeat`` times; raise AssertionError unless at least
    ``success_rate`` of the runs have p > ``alpha``. Returns the p-values."""
    results = [chi_square_check(generator, buckets, probs, nsamples) for _ in range(nrepeat)]
    ps = [r[0] for r in results]
    if sum(p > alpha for p in ps) < nrepeat * success_rate:
        raise AssertionError(
            f"Generator test fails, chi-square p={ps}, observed={[r[1].tolist() for r in results]}, "
            f"expected={[r[2].tolist() for r in results]}\nbuckets={list(buckets)}, probs={list(probs)}"
        )
    return ps
