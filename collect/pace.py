"""Whether the host or the GPU set a case's pace: the one rule the report's pages, the diff of two runs and the
noise floor all judge pace by. Standard library only (the GPU image runs it in `python -m collect diff` and
`noise`; render/vocab.py re-exports it for the pages).

A timed call (bench and iterations rows) is host-bound when its loop time, calls issued back to back, runs
HOST_BOUND over its device time and one call's host time (where recorded) is long enough to explain it. A decode
step is host-bound when its kernels kept the GPU busy for less than 1/HOST_BOUND of it: the step is its loop
time, the kernels' busy time its device time.
"""
from __future__ import annotations

import math
from typing import Any

# A loop of calls whose per-call time exceeds the device time by this factor runs slower than the GPU alone.
HOST_BOUND = 1.25

# Per phase, the row fields the rule reads: (device time in ms, loop time in ms, host time in µs or None).
PACE_FIELDS: dict[str, tuple[str, str, str | None]] = {
    "bench": ("latency_ms_median", "loop_ms_median", "host_us_median"),
    "iterations": ("latency_ms_median", "loop_ms_median", "host_us_median"),
    "decode": ("kernel_ms_per_step", "step_ms_median", None),
}


def _known(x) -> bool:
    """Whether a value was recorded: pandas stores an absent one as None or NaN, depending on the column's dtype."""
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def host_bound(device_ms, loop_ms, host_ms=None) -> bool | None:
    """Whether the host sets a loop's pace: the loop runs HOST_BOUND over the device time, and one call's host time
    (where recorded) is long enough to explain it. A long call's loop also runs slower than its device time because
    back-to-back calls get no rest and hold the GPU at its power limit; its host time is then a sliver of the device
    time, and the host is not what slows it. None where device or loop time is missing. Every page judges pace so."""
    if not (_known(device_ms) and _known(loop_ms)) or device_ms <= 0:
        return None
    if loop_ms / device_ms < HOST_BOUND:
        return False
    return not _known(host_ms) or host_ms * HOST_BOUND >= device_ms


def _get(row: Any, name: str | None) -> Any:
    if name is None:
        return None
    return row.get(name) if isinstance(row, dict) else getattr(row, name, None)


def row_host_bound(phase: str, row: Any) -> bool | None:
    """Whether the host set the pace of one row of `phase` (a dataclass, a dict or a pandas row); None where the row
    recorded no loop time (iterations rows, runs before loop time was kept) or the phase has no pace."""
    if phase not in PACE_FIELDS:
        return None
    device, loop, host = PACE_FIELDS[phase]
    host_us = _get(row, host)
    return host_bound(_get(row, device), _get(row, loop), host_us / 1e3 if _known(host_us) else None)


def either_host_bound(paces) -> bool | None:
    """One pace from several readings of a case (repeat runs, or the two runs of a diff): host-bound where any
    reading was; GPU-bound where every recorded one was; None where none was recorded."""
    seen = [p for p in paces if p is not None]
    return any(seen) if seen else None
