"""How far a phase's SM clock readings can be off, from the readings themselves.

A clock reading is taken in the spin just before each timed call, never during the call (collect/timing.py). Runs
from 2026-12-06 on read it from the spin's own counters (collect/spin_clock.py); earlier runs estimated it from the
spin's requested cycles over its elapsed time between CUDA events. Both can read above the device's maximum SM clock
(on an H100 by up to about 5%, for reasons not yet known). Where a reading passes that maximum, it is off by at least
that much; pages that weigh gaps of a few percent between two readings say so beside them."""
from __future__ import annotations

import pandas as pd

from . import fmt


def overshoot(rows: pd.DataFrame, device) -> tuple[float, float] | None:
    """(the highest reading, the device's maximum SM clock) where a reading among `rows` (a phase's rows, with
    sm_clock_mhz and, where recorded, the single samples' sm_clock_max_mhz) lies above that maximum by enough to
    print differently; None otherwise, or where either is not recorded."""
    top = getattr(device, "sm_clock_max_mhz", None) if device else None
    if not fmt.known(top) or not top or rows.empty:
        return None
    cols = [c for c in ("sm_clock_mhz", "sm_clock_max_mhz") if c in rows]
    seen = pd.concat([pd.to_numeric(rows[c], errors="coerce") for c in cols]).dropna() if cols else pd.Series([])
    if seen.empty:
        return None
    hi = float(seen.max())
    return (hi, float(top)) if hi > top and fmt.num(hi, 4) != fmt.num(top, 4) else None


def overshoot_words(rows: pd.DataFrame, device, where: str = "") -> str:
    """' Some of this phase's readings exceed ...': the clause that qualifies a clock gap, or '' where the readings
    stay under the device's maximum."""
    o = overshoot(rows, device)
    if o is None:
        return ""
    hi, top = o
    return (f" The clock readings are estimates{where}: the highest, {fmt.num(hi, 4)} MHz, lies "
            f"{fmt.pct(100 * (hi / top - 1), 2)} above the device's maximum of {fmt.num(top, 4)} MHz, so a gap "
            "between two readings of that size or less may be the readings' own error.")
