"""The one clock every phase measures speed with: device time, host time and loop time of a call.

- **Device time**: the GPU time of one call alone. Before each timed call the L2 is flushed
  (Triton's benchmark buffer zeroed, as `triton.testing.do_bench` does) and the GPU is then kept
  spinning while the host issues the call, so the start event fires only after the call's work is
  queued: no host time falls inside the interval, and the flush is outside it. The spin reads its
  own SM clock (collect/spin_clock.py: its cycles over the GPU timer's nanoseconds), the clock seen
  right before each call.
- **Host time**: the CPU time one call takes to return while the GPU has a backlog, so the call
  never waits for it. The calls rotate over a pool of distinct inputs, so nothing keyed on
  pointers can skip work a real caller pays for.
- **Loop time**: calls back to back with no sync between them, per call, over a pool of inputs
  larger than twice the L2: what a model's forward loop sees. Host-bound calls show their host time
  here, device-bound ones their device time.

Each returns a `Timing` (median, p10, p90, mean, n in milliseconds, and the samples themselves, so
two runs can later be compared with an interval: collect/diff.py). The statistics are plain Python,
tested on the CPU; the GPU parts are exercised by `make collect`.
"""
from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from .schema.common import CLOCK_TICK_MS, tflops
from .spin_clock import stamped_spins

# The SM clock assumed when the device does not report its maximum: it only sizes spins (a spin
# of the right length at a higher clock is merely longer).
DEFAULT_CLOCK_MHZ = 2000.0
# At least this many timed calls for a call under LONG_CALL_MS of device time, and LONG_MIN_REPS above.
MIN_REPS = 50
LONG_CALL_MS = 20.0
LONG_MIN_REPS = 10
# Past the minimum, short calls get more samples, up to about TARGET_MS of device time or MAX_REPS.
TARGET_MS = 15.0
MAX_REPS = 500
# The spin before each timed call lasts at least this many times the call's host time (bounded by
# its synchronised wall time) plus a floor, so the host has always queued the call before the GPU
# reaches it; and at least REST_FRACTION of the call's own length, so back-to-back heavy calls do
# not hold the GPU at its power limit (on the H200 that pulled the SM clock from ~1.9 GHz to
# ~1.6 GHz and a 1.67 ms call to 1.88 ms). A spin is one thread on one SM: it rests the GPU.
SPIN_HOST_FACTOR = 2.0
SPIN_FLOOR_US = 40.0
REST_FRACTION = 0.5
SPIN_MAX_US = 20_000.0
# Loop time: each loop holds about LOOP_TARGET_MS of device work, within [LOOP_MIN_CALLS,
# LOOP_MAX_CALLS] calls (a host-bound call takes longer than its device time says); the median over
# LOOP_REPEATS loops. A call of LONG_CALL_MS or more hides its own launch completely, so its loop
# time is its device time back to back: loops of LONG_LOOP_CALLS show that, where the usual
# minimum would cost seconds of GPU time per case (a 200 ms call, 12 calls).
LOOP_TARGET_MS = 5.0
LOOP_MIN_CALLS = 3
LOOP_MAX_CALLS = 50
LOOP_REPEATS = 3
LONG_LOOP_CALLS = 2
# Host time: about HOST_TARGET_MS of queued device work, within [HOST_MIN_CALLS, HOST_CALLS] calls.
# Every host-timed call still runs on the GPU afterwards, so a device-bound call pays its device
# time per sample, while host time itself varies by microseconds.
HOST_CALLS = 50
HOST_MIN_CALLS = 5
HOST_TARGET_MS = 15.0
# Samples are stored in ms to this many decimals (0.1 µs): below what CUDA events resolve (about half a
# microsecond), and short enough that 500 samples add a few KB to a row.
SAMPLE_DECIMALS = 4


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p10_ms: float
    p90_ms: float
    mean_ms: float
    n: int
    # In the order they were taken (a drift over the measurement stays visible), not sorted.
    samples_ms: tuple[float, ...] = ()


@dataclass(frozen=True)
class DeviceTiming:
    """Device time, and the SM clock (MHz) seen in the spin before each call: median, min, max."""

    timing: Timing
    sm_clock_mhz: float | None = None
    sm_clock_min_mhz: float | None = None
    sm_clock_max_mhz: float | None = None


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of already sorted values, q in [0, 100]."""
    if not sorted_values:
        raise ValueError("percentile of no samples")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(times_ms: Sequence[float]) -> Timing:
    """Median, p10, p90 and mean of raw timings; non-finite or negative samples are a bug upstream."""
    taken = tuple(float(t) for t in times_ms)
    xs = sorted(taken)
    if not xs:
        raise ValueError("no timings to summarize")
    if any(not math.isfinite(x) or x < 0 for x in xs):
        raise ValueError(f"timings must be finite and non-negative, got {[x for x in xs if not math.isfinite(x) or x < 0][:3]}")
    return Timing(percentile(xs, 50), percentile(xs, 10), percentile(xs, 90), sum(xs) / len(xs), len(xs), taken)


def compact_samples(timing: Timing) -> list[float] | None:
    """The samples as a row stores them: ms rounded to 0.1 µs, never below the schema's clock tick
    (a 0.04 µs sample would round to zero, which no clock measures). None when there are none."""
    if not timing.samples_ms:
        return None
    return [max(round(x, SAMPLE_DECIMALS), CLOCK_TICK_MS) for x in timing.samples_ms]


def min_reps(est_ms: float) -> int:
    """The fewest timed calls a measurement of a call this long may have."""
    return LONG_MIN_REPS if est_ms >= LONG_CALL_MS else MIN_REPS


def timed_calls(est_ms: float, flush_ms: float = 0.1) -> int:
    """How many calls to time, given one call's rough device time: the minimum, more for short calls."""
    floor = min_reps(est_ms)
    return max(floor, min(MAX_REPS, math.ceil(TARGET_MS / max(est_ms + flush_ms, 1e-3))))


def loop_calls(est_ms: float) -> int:
    """Calls per timed loop: about LOOP_TARGET_MS of device work, within [LOOP_MIN_CALLS, LOOP_MAX_CALLS];
    LONG_LOOP_CALLS for a long call."""
    if est_ms >= LONG_CALL_MS:
        return LONG_LOOP_CALLS
    return max(LOOP_MIN_CALLS, min(LOOP_MAX_CALLS, math.ceil(LOOP_TARGET_MS / max(est_ms, 1e-3))))


def pool_size(set_bytes: int, l2_bytes: int | None, budget_bytes: int | None = None, least: int = 2) -> int:
    """Distinct input sets to rotate over: together more than twice the L2, at least `least`,
    and no more than `budget_bytes` allows (never fewer than `least`, which the caller already has)."""
    l2 = l2_bytes or 64 * 2**20
    want = max(least, math.floor(2 * l2 / max(set_bytes, 1)) + 1)
    if budget_bytes is not None:
        want = min(want, max(least, budget_bytes // max(set_bytes, 1)))
    return want


def spin_cycles(host_us: float, clock_mhz: float) -> int:
    """Cycles to spin so that the spin outlasts `host_us` of host time with margin."""
    return int(math.ceil((SPIN_HOST_FACTOR * host_us + SPIN_FLOOR_US) * clock_mhz))


def rest_us(wall_ms: float) -> float:
    """Spin before each timed call of a call whose synchronised wall time is `wall_ms`: long enough to
    cover its host time (at most its wall time, and a host time over 1 ms is not expected) and to
    rest the GPU for REST_FRACTION of the call."""
    wall_us = wall_ms * 1e3
    return min(SPIN_MAX_US, max(SPIN_HOST_FACTOR * min(wall_us, 1000.0) + SPIN_FLOOR_US, REST_FRACTION * wall_us))


def clock_mhz(cycles: int, elapsed_ms: float) -> float | None:
    """The SM clock a spin of `cycles` ran at, from its elapsed time; None if too short to tell."""
    if elapsed_ms <= 0:
        return None
    return cycles / (elapsed_ms * 1e3)


# --- on the GPU -------------------------------------------------------------------------------


def _torch():
    import torch

    return torch


def sync() -> None:
    _torch().cuda.synchronize()


def wall_ms(fn: Callable[[], object]) -> float:
    """One synchronised call's wall time in ms (host and device together): what the clock's spins and
    call counts are sized from."""
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return (time.perf_counter() - t0) * 1e3


def host_time(calls: Sequence[Callable[[], object]], n: int, wall_ms: float,
              max_clock_mhz: float | None = None) -> Timing:
    """CPU time per call, the GPU kept busy. A spin long enough to outlast the issuing of all `n`
    calls is queued first; `wall_ms`, one synchronised call's wall time, bounds a call's host time
    (capped at 1 ms: a longer call keeps the GPU busy with its own work)."""
    torch = _torch()
    if not calls:
        raise ValueError("host_time needs at least one call")
    sync()
    torch.cuda._sleep(spin_cycles(n * 1e3 * min(wall_ms, 1.0), max_clock_mhz or DEFAULT_CLOCK_MHZ))
    samples = []
    for i in range(n):
        fn = calls[i % len(calls)]
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    sync()
    return summarize(samples)


def host_calls(est_ms: float) -> int:
    """Host-timed calls of a call whose synchronised wall time is `est_ms`: fewer for longer calls,
    whose queued work the GPU must drain afterwards."""
    return max(HOST_MIN_CALLS, min(HOST_CALLS, math.ceil(HOST_TARGET_MS / max(est_ms, 1e-3))))


def device_time(fn: Callable[[], object], wall_ms: float, n: int | None = None, max_clock_mhz: float | None = None,
                flush: bool = True) -> DeviceTiming:
    """`n` (default: timed_calls(wall_ms)) device-timed calls of an already warm `fn` whose
    synchronised wall time is `wall_ms`: L2 flushed, then a spin (see rest_us), then the call between
    two events. flush=False only for a microbenchmark whose point is to read from a warm L2."""
    torch = _torch()
    from triton import runtime

    driver = runtime.driver.active
    cache = driver.get_empty_cache_for_benchmark()
    n = n or timed_calls(wall_ms)
    cycles = int(math.ceil(rest_us(wall_ms) * (max_clock_mhz or DEFAULT_CLOCK_MHZ)))
    marks = [[torch.cuda.Event(enable_timing=True) for _ in range(3)] for _ in range(n)]
    spins = stamped_spins(n)
    for i, (spin_start, start, end) in enumerate(marks):
        if flush:
            driver.clear_cache(cache)
        spin_start.record()
        if spins is not None:
            spins.spin(i, cycles)
        else:
            torch.cuda._sleep(cycles)
        start.record()
        fn()
        end.record()
    sync()
    timing = summarize([s.elapsed_time(e) for _, s, e in marks])
    clocks = sorted(spins.clocks() if spins is not None else
                    (c for c in (clock_mhz(cycles, a.elapsed_time(s)) for a, s, _ in marks) if c))
    if not clocks:
        return DeviceTiming(timing)
    return DeviceTiming(timing, percentile(clocks, 50), clocks[0], clocks[-1])


def loop_time(calls: Sequence[Callable[[], object]], per_loop: int, repeats: int = LOOP_REPEATS) -> Timing:
    """Per-call time of `per_loop` calls issued back to back (rotating over `calls`), no sync in
    between; the median over `repeats` loops, after one untimed loop."""
    torch = _torch()
    if not calls:
        raise ValueError("loop_time needs at least one call")
    samples = []
    for r in range(repeats + 1):
        sync()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(per_loop):
            calls[i % len(calls)]()
        end.record()
        sync()
        if r:
            samples.append(start.elapsed_time(end) / per_loop)
    return summarize(samples)


@dataclass(frozen=True)
class CallTimes:
    """All three times of one call."""

    device: DeviceTiming
    host: Timing
    loop: Timing | None


def measure_call(calls: Sequence[Callable[[], object]], wall_ms: float, *, loop: bool = True,
                 max_clock_mhz: float | None = None, flush: bool = True) -> CallTimes:
    """Host, device and loop time of a warm call. `calls` are the same call over distinct inputs
    (see pool_size); device time uses the first. `wall_ms`: one synchronised call's wall time.
    Device time first: host and loop time keep the GPU busy back to back, which heats it."""
    dev = device_time(calls[0], wall_ms, max_clock_mhz=max_clock_mhz, flush=flush)
    host = host_time(calls, host_calls(wall_ms), wall_ms, max_clock_mhz)
    looped = loop_time(calls, loop_calls(dev.timing.median_ms)) if loop else None
    return CallTimes(device=dev, host=host, loop=looped)


def record(row, t: CallTimes, flops: float) -> None:
    """Device, host and loop time of one call into a row with the schema's timing fields
    (latency_ms_*, latency_samples_ms, n_timed_runs, tflops, host_us_*, loop_ms_*, sm_clock_*), and a reason where it
    has fewer timed calls than min_reps promises."""
    d = t.device.timing
    row.latency_ms_median, row.latency_ms_p10, row.latency_ms_p90, row.n_timed_runs = d.median_ms, d.p10_ms, d.p90_ms, d.n
    row.latency_samples_ms = compact_samples(d)
    row.tflops = tflops(flops, d.median_ms) if d.median_ms > 0 else None
    row.sm_clock_mhz, row.sm_clock_min_mhz, row.sm_clock_max_mhz = (
        t.device.sm_clock_mhz, t.device.sm_clock_min_mhz, t.device.sm_clock_max_mhz)
    row.host_us_median, row.host_us_p10, row.host_us_p90 = (
        t.host.median_ms * 1e3, t.host.p10_ms * 1e3, t.host.p90_ms * 1e3)
    if t.loop is not None:
        row.loop_ms_median, row.loop_ms_p10, row.loop_ms_p90 = t.loop.median_ms, t.loop.p10_ms, t.loop.p90_ms
    need = min_reps(d.median_ms)
    if d.n < need:
        row.reason = f"only {d.n} timed calls, fewer than the {need} this phase promises"


def is_oom(exc: BaseException) -> bool:
    """CUDA out-of-memory, whichever way torch or triton raised it."""
    name = type(exc).__name__
    text = str(exc).lower()
    # Triton's OutOfResources (a tile too big for shared memory) is not device memory: not an OOM row.
    return name == "OutOfMemoryError" or "out of memory" in text


def is_unsupported(exc: BaseException) -> bool:
    """A fact about this GPU or install, not a failure: a tile that does not fit on chip (Triton's
    OutOfResources), a kernel path this Triton cannot compile or import (kernels.attention.dispatch.PathUnsupported), or
    a third-party baseline not installed or not built for this GPU (kernels.attention.flash_attn4.BaselineUnavailable)."""
    return type(exc).__name__ in ("OutOfResources", "PathUnsupported", "BaselineUnavailable")


def release_cached_memory() -> None:
    """Hand the allocator's cached blocks back once the tensors holding them are dropped: free_cuda_memory
    without its gc.collect, which took 0.11 s a call on the H200 once the collect's modules were loaded
    (7 s of a bench phase that switches input shapes 64 times). Reference counting frees the tensors."""
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    except Exception:  # a broken context is reported by the next case, not here
        pass


def free_cuda_memory() -> None:
    """After an OOM: drop references, collect, and hand cached blocks back so the next case can run."""
    gc.collect()
    release_cached_memory()
