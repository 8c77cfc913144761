"""A bootstrap interval for the ratio of two medians, in plain Python (no numpy: the page build and the
GPU image both run it, and it is cheap enough this way).

Resampling n values with replacement and taking the median costs O(n) per resample the obvious way.
It need not: the k-th smallest of n indices drawn uniformly from 0..n-1 is floor(n * U) where U is the
k-th smallest of n uniforms, which is Beta(k, n + 1 - k); the next order statistic is U + (1 - U) *
Beta(1, n - k). So one resampled median is one or two Beta draws and a lookup into the sorted values,
exactly distributed as the resampled median (tests/test_diff.py checks it against the slow way).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from .timing import percentile


@dataclass(frozen=True)
class BootstrapConfig:
    """How intervals are drawn: resamples per case, the interval's confidence, and the seed."""

    resamples: int = 2000
    confidence: float = 0.95
    seed: int = 20261204


def resampled_median(sorted_xs: Sequence[float], rng: random.Random) -> float:
    """The median of one resample (with replacement) of `sorted_xs`, drawn through its order statistics."""
    n = len(sorted_xs)
    k = (n + 1) // 2
    u = rng.betavariate(k, n + 1 - k)
    lo = sorted_xs[min(int(u * n), n - 1)]
    if n % 2:
        return lo
    v = u + (1.0 - u) * rng.betavariate(1, n - k)
    return (lo + sorted_xs[min(int(v * n), n - 1)]) / 2


def ratio_interval(a: Sequence[float], b: Sequence[float], cfg: BootstrapConfig, key: str = "") -> tuple[float, float]:
    """The `cfg.confidence` percentile interval of median(b) / median(a) over resamples of both.
    `key` names the case: each case gets its own stream from the seed, so the interval of one case does
    not depend on which other cases were compared before it."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError("an interval needs at least two samples on each side")
    rng = random.Random(f"{cfg.seed}:{key}")
    xa, xb = sorted(a), sorted(b)
    ratios = sorted(resampled_median(xb, rng) / resampled_median(xa, rng) for _ in range(cfg.resamples))
    tail = (1.0 - cfg.confidence) * 100 / 2
    return percentile(ratios, tail), percentile(ratios, 100 - tail)
