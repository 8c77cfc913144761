"""Pieces every data file shares: the schema version, row statuses and documented, bounded fields."""
from __future__ import annotations

import dataclasses
from typing import Any

SCHEMA_VERSION = 5

# A row that could not be measured keeps its place with one of these and a reason.
# `skipped`: a case not run for time (a budget), with the reason.
STATUSES = ("ok", "oom", "unsupported", "error", "skipped")
ROW_STATUS = "^(" + "|".join(STATUSES) + ")$"  # doc(..., pattern=ROW_STATUS): pages branch on these words
# A phase in the manifest: `running` while it runs (and after a crash), `partial` when it stopped with rows saved.
PHASE_STATUSES = ("complete", "partial", "failed", "running", "unsupported")


def doc(text: str, default: Any = dataclasses.MISSING, default_factory: Any = dataclasses.MISSING, *,
        lo: float | None = None, hi: float | None = None, lo_open: bool = False, hi_open: bool = False,
        pattern: str | None = None, utc_time: bool = False):
    """A dataclass field whose description feeds the generated "Data format" page, with the values it
    may take: a number within [lo, hi] (lo_open / hi_open exclude the end), a string matching
    `pattern`, or (utc_time) an ISO 8601 time with its offset. render/ rejects anything else."""
    meta: dict[str, Any] = {"doc": text}
    if lo is not None or hi is not None:
        meta["bounds"] = (lo, hi, lo_open, hi_open)
    if pattern is not None:
        meta["pattern"] = pattern
    if utc_time:
        meta["utc_time"] = True
    return dataclasses.field(default=default, default_factory=default_factory, metadata=meta)


# Bounds shared by many fields, passed as doc(..., **MS). Upper ends far above any GPU stop absurd
# values (1e300 would print as a 300-digit number) without judging real ones.
HOUR_MS = 3.6e6
MS = dict(lo=0, lo_open=True, hi=HOUR_MS)  # a measured time: more than 0, at most an hour
US = dict(lo=0, lo_open=True, hi=HOUR_MS * 1e3)
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
NONNEGATIVE = dict(lo=0, hi=1e40)  # an error or a difference of outputs (above any fp16/bf16 value)

# A run id names a folder and a URL path: a short slug.
RUN_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$"
# Names pages branch on, join by and print (implementations, dtypes, case ids, variants): identifiers.
IDENT = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$"
IDENT_OR_EMPTY = r"^([A-Za-z0-9][A-Za-z0-9._+-]{0,127})?$"
GIT_COMMIT = r"^[0-9a-f]{7,64}$"


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


def attention_flops(batch: int, heads: int, seq_len: int, head_dim: int, causal: bool) -> float:
    """FLOP counted for one attention call: 4*B*H*N*N*d (Q Kᵀ and P V, 2*N*N*d each per head),
    halved when causal. The convention every phase's `flops` field and every TFLOP/s use."""
    f = 4.0 * batch * heads * seq_len * seq_len * head_dim
    return f / 2 if causal else f
