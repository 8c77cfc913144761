"""Device timing and its statistics, shared by every phase that measures speed.

Timing uses triton.testing.do_bench (CUDA events, L2 flushed before every run) and keeps all the
samples, so we report the median and a p10..p90 spread over a guaranteed number of runs.
"""
from __future__ import annotations

import gc
import math
from dataclasses import dataclass
from typing import Callable, Sequence

MIN_REPS = 50


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p10_ms: float
    p90_ms: float
    mean_ms: float
    n: int


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of already sorted values, q in [0, 100]."""
    if not sorted_values:
        raise ValueError("percentile of no samples")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(times_ms: Sequence[float]) -> Timing:
    """Median, p10, p90 and mean of raw timings; non-finite or negative samples are a bug upstream."""
    xs = sorted(float(t) for t in times_ms)
    if not xs:
        raise ValueError("no timings to summarize")
    if any(not math.isfinite(x) or x < 0 for x in xs):
        raise ValueError(f"timings must be finite and non-negative, got {[x for x in xs if not math.isfinite(x) or x < 0][:3]}")
    return Timing(percentile(xs, 50), percentile(xs, 10), percentile(xs, 90), sum(xs) / len(xs), len(xs))


def bench_gpu(fn: Callable[[], object], min_reps: int = MIN_REPS, min_time_ms: float = 100.0, warmup_ms: float = 25.0) -> Timing:
    """Time `fn` on the device: at least `min_reps` runs and about `min_time_ms` of samples, L2 flushed each run.

    The caller warms up first (compilation, autotuning). do_bench sizes its repeat count from a
    5-run estimate that a clock still ramping up from idle inflates, so we call it again until
    the sample count is guaranteed.
    """
    import triton.testing

    times: list[float] = []
    for _ in range(20):
        times += triton.testing.do_bench(fn, warmup=warmup_ms, rep=min_time_ms, return_mode="all")
        if len(times) >= min_reps:
            break
    return summarize(times)


def is_oom(exc: BaseException) -> bool:
    """CUDA out-of-memory, whichever way torch or triton raised it."""
    name = type(exc).__name__
    text = str(exc).lower()
    return name == "OutOfMemoryError" or "out of memory" in text or "outofresources" in name.lower() and "memory" in text


def free_cuda_memory() -> None:
    """After an OOM: drop references, collect, and hand cached blocks back so the next case can run."""
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    except Exception:  # a broken context is reported by the next case, not here
        pass
