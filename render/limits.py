"""What limits one profiled launch, judged from its counters by the rule both halves share
(collect/schema/limiter.py). Home and Profiling ask here, so the stored verdict is checked in one place."""
from __future__ import annotations

import math

from collect.schema.limiter import UNIT_FIELDS, Verdict, judge

from .errors import DataError


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
