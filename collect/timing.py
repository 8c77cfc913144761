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


def time_fixed(fn: Callable[[], object], n: int) -> Timing:
    """Exactly `n` device-timed calls of an already warm `fn`, the L2 flushed before each (as do_bench does)."""
    import torch
    from triton import runtime

    driver = runtime.driver.active
    cache = driver.get_empty_cache_for_benchmark()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for start, end in zip(starts, ends):
        driver.clear_cache(cache)
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return summarize([s.elapsed_time(e) for s, e in zip(starts, ends)])


def bench_gpu(fn: Callable[[], object], min_reps: int = MIN_REPS, min_time_ms: float = 100.0, warmup_ms: float = 25.0,
              max_reps: int = 5000) -> Timing:
    """Time `fn` on the device: at least `min_reps` calls and about `min_time_ms` of them, L2 flushed each call.

    The caller warms up first (compilation, autotuning); this adds `warmup_ms` of untimed calls so a
    clock ramping up from idle settles. The run count is fixed up front from a short estimate, so
    the guarantee of `min_reps` samples does not depend on the estimate being right.
    """
    import time

    import torch

    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    calls = 0
    while calls < 3 or (time.perf_counter() - t0) * 1e3 < warmup_ms:
        fn()
        calls += 1
        torch.cuda.synchronize()
    est_ms = max((time.perf_counter() - t0) * 1e3 / calls, 1e-3)
    n = min(max(min_reps, math.ceil(min_time_ms / est_ms)), max(max_reps, min_reps))
    return time_fixed(fn, n)


def is_oom(exc: BaseException) -> bool:
    """CUDA out-of-memory, whichever way torch or triton raised it."""
    name = type(exc).__name__
    text = str(exc).lower()
    # Triton's OutOfResources (a tile too big for shared memory) is not device memory: not an OOM row.
    return name == "OutOfMemoryError" or "out of memory" in text


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
