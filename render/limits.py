"""What limits one profiled launch, judged from its counters by the rule both halves share
(collect/schema/limiter.py). Home and Profiling ask here, so the stored verdict is checked in one place."""
from __future__ import annotations

import math

from collect.schema.limiter import BUSY_PCT, NEAR_PTS, STALL_PREFIX, UNIT_FIELDS, Verdict, judge, near_line

from . import fmt
from .errors import DataError
from .vocab import limiter_words, verdict_words


def _value(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def verdict(run, kernel) -> Verdict | None:
    """The verdict on a kernel row of `run`'s profile (a row of its kernels frame), from its unit counters
    and its stall rows; None where those counters are missing. A stored verdict the counters contradict
    is refused, naming file, field and value."""
    units = {f: _value(kernel.get(f)) for f in UNIT_FIELDS}
    st = run.frame("profile", "stalls")
    if not st.empty:
        st = st[(st["case_id"] == kernel["case_id"]) & (st["launch"] == kernel["launch"])]
    v = judge(units, dict(zip(st["reason"], st["warps_per_issue"])) if not st.empty else {})
    stored = kernel.get("limiter")
    if isinstance(stored, str) and (v is None or v.word != stored):
        raise DataError(f"{run.path / 'profile.json'}: field kernels[case_id={kernel['case_id']!r}, "
                        f"launch={int(kernel['launch'])}].limiter: value {stored!r}: the counters beside it give "
                        f"{v.word if v else 'no verdict'!r} (collect/schema/limiter.py). Collect the profile again, "
                        "or correct the field.")
    return v


def verdict_phrase(v: Verdict | None) -> str:
    """A verdict in words with the figure behind it, and where its busiest unit sits within NEAR_PTS of the line
    that decides, says so: 'the tensor pipe, 80.03% busy, within 5 points of the 80% line'. The figure is
    printed against the line (fmt.pct_vs), so a share just above it never prints as the line itself."""
    if v is None:
        return limiter_words(None)
    words = verdict_words(v)
    if v.busiest_pct is None:
        return words
    pct = fmt.pct_vs(v.busiest_pct, BUSY_PCT)
    if v.word.startswith(STALL_PREFIX) and near_line(v):
        # A stall verdict that the line decides by a few points is said as a near thing: the unit just under it is
        # nearly the limit (run h100-20261205b: the tensor pipe at 79.98%, at 92% of the measured matmul rate).
        return (f"{words}, though only just: its busiest unit, the {v.busiest}, sits at {pct}, within {NEAR_PTS:g} "
                f"points of the {BUSY_PCT:g}% line that would make it the limit")
    tail = (f", its busiest unit the {v.busiest} at {pct}" if v.word.startswith(STALL_PREFIX) else f", {pct} busy")
    if near_line(v):
        tail += f", within {NEAR_PTS:g} points of the {BUSY_PCT:g}% line"
    return words + tail
