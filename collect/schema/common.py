"""Pieces every data file shares: the schema version, row statuses and documented, bounded fields."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

SCHEMA_VERSION = 11

# A row that could not be measured keeps its place with one of these and a reason.
# `skipped`: a case not run for time (a budget), with the reason.
STATUSES = ("ok", "oom", "unsupported", "error", "skipped")
ROW_STATUS = "^(" + "|".join(STATUSES) + ")$"  # doc(..., pattern=ROW_STATUS): pages branch on these words
# A phase in the manifest: `running` while it runs (and after a crash), `partial` when it stopped with rows saved.
PHASE_STATUSES = ("complete", "partial", "failed", "running", "unsupported")


def doc(text: str, default: Any = dataclasses.MISSING, default_factory: Any = dataclasses.MISSING, *,
        lo: float | None = None, hi: float | None = None, lo_open: bool = False, hi_open: bool = False,
        pattern: str | None = None, utc_time: bool = False, max_len: int | None = None,
        choices: tuple[str, ...] | None = None, at_most: str | None = None, at_least: str | None = None,
        derived: Callable[[Any, Any], float | None] | None = None):
    """A dataclass field whose description feeds the generated "Data format" page, with the values it
    may take: a number within [lo, hi] (lo_open / hi_open exclude the end), a string matching
    `pattern` or one of `choices`, or (utc_time) an ISO 8601 time with its offset, no later than the
    build. Every string in the field (a list's items, a mapping's keys and values) is at most `max_len`
    characters (a pattern of ours brings its own bound). `at_most` / `at_least` name a field of the
    same record this one may not exceed / fall below (a 10th percentile and its median). `derived(row,
    file)` recomputes a field stored for convenience (None where it cannot); the stored value must agree
    with it. render/ rejects anything else."""
    meta: dict[str, Any] = {"doc": text}
    if lo is not None or hi is not None:
        meta["bounds"] = (lo, hi, lo_open, hi_open)
    if pattern is not None:
        meta["pattern"] = pattern
        max_len = max_len or _PATTERN_MAX_LEN[pattern]  # an inline pattern states its bound
    if choices is not None:
        meta["choices"] = tuple(choices)
    if max_len is not None:
        meta["max_len"] = max_len
    if utc_time:
        meta["utc_time"] = True
        meta["max_len"] = UTC_TIME_LEN
    for key, value in (("at_most", at_most), ("at_least", at_least), ("derived", derived)):
        if value is not None:
            meta[key] = value
    return dataclasses.field(default=default, default_factory=default_factory, metadata=meta)


# Bounds shared by many fields, passed as doc(..., **MS). Upper ends far above any GPU stop absurd
# values (1e300 would print as a 300-digit number) without judging real ones.
HOUR_MS = 3.6e6
# The shortest time a clock reports: GPU timers tick in nanoseconds, CUDA events in about half a microsecond,
# and no launch takes less than a microsecond. A smaller time is no measurement (1e-300 ms would stretch every
# latency axis down to it).
CLOCK_TICK_MS = 1e-4
MS = dict(lo=CLOCK_TICK_MS, hi=HOUR_MS)  # a measured time: at least 0.1 µs, at most an hour
US = dict(lo=CLOCK_TICK_MS * 1e3, hi=HOUR_MS * 1e3)
SECONDS = dict(lo=0, hi=7 * 86400.0)  # a wall time of collect's own work (rounded, so 0.0 can occur)
BYTES = dict(lo=0, hi=1e18)  # a byte count
FLOP = dict(lo=0, hi=1e24)  # a FLOP count
COUNT = dict(lo=0, hi=1e15)  # launches, registers, blocks, tokens, instructions...
SIZE = dict(lo=1, hi=2.0**31)  # a dimension of a shape: batch, heads, length, head_dim
PCT = dict(lo=0, hi=100)  # a percentage
FRACTION = dict(lo=0, hi=1)  # a share or an agreement
RATIO = dict(lo=0, lo_open=True, hi=1e9)  # a ratio physics allows above 1
BYTES_PER_S = dict(lo=0, lo_open=True, hi=1e17)
FLOP_PER_S = dict(lo=0, lo_open=True, hi=1e20)
TFLOP_PER_S = dict(lo=0, hi=1e8)
CLOCK_MHZ = dict(lo=0, lo_open=True, hi=1e5)
WATTS = dict(lo=0, lo_open=True, hi=1e5)  # a board's power draw or limit
MILLIJOULES = dict(lo=0, lo_open=True, hi=1e12)
NONNEGATIVE = dict(lo=0, hi=1e40)  # an error or a difference of outputs (above any fp16/bf16 value)

# A run id names a folder and a URL path: a short slug.
RUN_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$"
# The lock file in a run folder that one collect holds while it writes there (collect/lock.py); not data:
# render/ neither reads nor publishes it.
RUN_LOCK = ".collect.lock"
# Names pages branch on, join by and print (implementations, case ids, version names): identifiers.
IDENT = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$"
IDENT_OR_EMPTY = r"^([A-Za-z0-9][A-Za-z0-9._+-]{0,127})?$"
GIT_COMMIT = r"^[0-9a-f]{7,64}$"
# A GPU generation as the kernels name it: 'sm75', 'sm90', 'sm100'.
GPU_TARGET = r"^sm[0-9]{2,3}$"
# The longest string each pattern above matches, so a field with a pattern has a length bound too.
_PATTERN_MAX_LEN = {RUN_ID: 80, IDENT: 128, IDENT_OR_EMPTY: 128, GIT_COMMIT: 64, GPU_TARGET: 5,
                    ROW_STATUS: max(map(len, STATUSES))}
UTC_TIME_LEN = 40  # '2026-11-29T08:00:00.123456+00:00' and room to spare

# Length bounds of text, passed as doc(..., **NAME) beside the field. A string is printed on many pages
# (a device name is in every caption), so the bound is what keeps a long one from multiplying the site.
NAME = dict(max_len=512)  # a name or short label: a device, a model, a version string, a tile config
KERNEL_NAME = dict(max_len=8192)  # demangled CUTLASS and CuTe template names run to thousands of characters
TEXT = dict(max_len=4096)  # a sentence or a paragraph: a reason, a note, a method described
LONG_TEXT = dict(max_len=16384)  # an error with its traceback, a command line, the profiler's metric list

# Enumerations shared by several files (doc(..., choices=DTYPES)); pages branch on these words.
DTYPES = ("float16", "bfloat16", "float32")
PROFILES = ("quick", "full", "published")  # 'published': figures transcribed in data/reference/


def case_key(obj: Any, cls: type) -> tuple:
    """The values of `cls.CASE_KEY` on `obj` (a row, or a phase's case with the same attribute names):
    two rows of one table with one key measure the same case twice."""
    return tuple(getattr(obj, k) for k in cls.CASE_KEY)


# Pydantic reads this plain dict from each dataclass (no pydantic import needed here):
# unknown keys, NaN and infinity are data errors, and "3" is not silently an int.
STRICT = {"extra": "forbid", "allow_inf_nan": False, "strict": True}


def strict(cls):
    """Class decorator: attach the strict validation config that render/ enforces."""
    cls.__pydantic_config__ = STRICT
    return cls


def clock_fields(n_timed_runs: str = "Timed calls behind the statistics.", p10: str = "10th percentile.",
                 p90: str = "90th percentile.") -> dict[str, tuple[str, Any]]:
    """The one clock's fields, name -> (type, field), in the order a row declares them: device time with its
    samples, host time, loop time, the SM clock seen, and the FLOPs and rate. Every row timed by
    collect/timing.py carries them (bench and iterations rows); a row names where with @with_fields, and may word
    its count and percentiles for its own phase."""
    return {
        "latency_ms_median": ("float | None", doc(
            "Device time: median GPU time of one call alone (L2 flushed and the GPU spinning while the host issues "
            "the call, so no host time is inside).", None, **MS)),
        "latency_ms_p10": ("float | None", doc(p10, None, **MS, at_most="latency_ms_median")),
        "latency_ms_p90": ("float | None", doc(p90, None, **MS, at_least="latency_ms_median")),
        "n_timed_runs": ("int | None", doc(n_timed_runs, None, **COUNT)),
        "latency_samples_ms": ("list[float] | None", doc(
            "The device time of each timed call behind the median and percentiles, in the order taken, in ms to "
            "0.1 µs: what a comparison of two runs resamples (python -m collect diff). Null in runs before schema "
            "version 6.", None, **MS)),
        "host_us_median": ("float | None", doc(
            "Host time: median CPU time one call takes to return, the GPU kept busy so the call never waits for it; "
            "inputs rotate over a pool of distinct tensors.", None, **US)),
        "host_us_p10": ("float | None", doc("10th percentile of the host time.", None, **US, at_most="host_us_median")),
        "host_us_p90": ("float | None", doc("90th percentile of the host time.", None, **US,
                                            at_least="host_us_median")),
        "loop_ms_median": ("float | None", doc(
            "Loop time: per-call time of calls issued back to back with no sync, inputs rotating over a pool larger "
            "than twice the L2 (median over loops).", None, **MS)),
        "loop_ms_p10": ("float | None", doc("10th percentile of the loop time.", None, **MS, at_most="loop_ms_median")),
        "loop_ms_p90": ("float | None", doc("90th percentile of the loop time.", None, **MS,
                                            at_least="loop_ms_median")),
        "sm_clock_mhz": ("float | None", doc(
            "Median SM clock read in the spin before each timed call, not during the call: the spin SM's cycles over "
            "the GPU timer's nanoseconds (runs before 2026-12-06: the spin's requested cycles over its elapsed time "
            "between CUDA events, which read low before short calls). Either can read above the device's reported "
            "maximum SM clock: the rest before a call can run past it (render/clock_reading.py).",
            None, **CLOCK_MHZ)),
        "sm_clock_min_mhz": ("float | None", doc("Lowest SM clock read before a timed call.", None, **CLOCK_MHZ,
                                                 at_most="sm_clock_mhz")),
        "sm_clock_max_mhz": ("float | None", doc("Highest SM clock read before a timed call.", None,
                                                 **CLOCK_MHZ, at_least="sm_clock_mhz")),
        "flops": ("float", doc("FLOP counted per call: 4*B*H*N*N*d, halved when causal.", 0.0, **FLOP)),
        "tflops": ("float | None", doc("flops / median latency, in 10^12 FLOP/s.", None, **TFLOP_PER_S,
                                       derived=lambda r, _: tflops(r.flops, r.latency_ms_median))),
    }


def with_fields(fields: dict[str, tuple[str, Any]], after: str | None):
    """Class decorator, under @dataclass: a block of fields several records share (clock_fields), declared once,
    placed after the record's own field `after` (None: before its first), so the JSON and the Data format page
    keep the record's order."""
    def insert(cls):
        own = cls.__dict__.get("__annotations__", {})
        if (after is not None and after not in own) or set(fields) & set(own):
            raise TypeError(f"{cls.__name__}: no field {after!r} to insert after, or a shared field declared again")
        order = {} if after is not None else {n: hint for n, (hint, _) in fields.items()}
        for name, hint in own.items():
            order[name] = hint
            if name == after:
                order.update({n: hint for n, (hint, _) in fields.items()})
        cls.__annotations__ = order
        for name, (_, field) in fields.items():
            setattr(cls, name, field)
        return cls
    return insert


def tflops(flops: float, latency_ms: float | None) -> float | None:
    """flops / latency in 10^12 FLOP/s: every phase's `tflops` field."""
    return flops / (latency_ms * 1e-3) / 1e12 if latency_ms else None


def attention_flops(batch: int, heads: int, seq_len: int, head_dim: int, causal: bool) -> float:
    """FLOP counted for one attention call: 4*B*H*N*N*d (Q Kᵀ and P V, 2*N*N*d each per head),
    halved when causal. The convention every phase's `flops` field and every TFLOP/s use."""
    f = 4.0 * batch * heads * seq_len * seq_len * head_dim
    return f / 2 if causal else f
