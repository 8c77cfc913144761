"""How far a phase's SM clock readings can stand from the calls' own clocks, from the readings themselves.

A clock reading is taken in the spin just before each timed call, never during the call (collect/timing.py). Each
phase records how (PhaseRecord.sm_clock_method): the spin's own counters (collect/spin_clock.py) or, in runs before them,
the spin's requested cycles over its elapsed time between CUDA events. Both read above the device's reported maximum SM clock on an
H100 (up to about 5%). A probe there (2026-12-06, scripts/probe_spin_clock.py) found the counters right and the rest's
clock really past that maximum: a 1 s spin read 1,980.0 MHz by the GPU timer and 1,979.6 by the host's clock; in the
bench's loop the GPU timer agreed with CUDA events within 0.1% while the readings cycled over 1,965, 2,025, 2,055 and
2,084 MHz, steps of the clock's own 15 MHz, and the calls after the highest took 2-3% less time (two runs of the probe);
nvidia-smi, sampling every 20 ms, reported 1,965 throughout (its software power cap active). A second spin on another
stream, beside the call, read the call's own clock past the maximum too (SDPA's FlashAttention-2, fp16, 1x32 heads,
d=128: 2,063 MHz during N=16384 calls after rests at 2,084; 1,984-2,007 during N=4096 calls after 2,071-2,085), 1-4%
under the rest before it. So a reading is the rest's clock, which swings by several percent from call to call between
heavy calls; pages that weigh gaps of a few percent between two readings say so beside them where the readings pass the
reported maximum."""
from __future__ import annotations

import pandas as pd

from . import fmt
from .bench_data import BenchData
from .runs import Run


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
    """' The clock readings are of the rest before each call ...': the clause that qualifies a clock gap, or '' where
    the readings stay under the device's maximum."""
    o = overshoot(rows, device)
    if o is None:
        return ""
    hi, top = o
    return (f" The clock readings{where} are of the rest before each call, not of the call: the highest, "
            f"{fmt.num(hi, 4)} MHz, lies {fmt.pct(100 * (hi / top - 1), 2)} above the device's reported maximum of "
            f"{fmt.num(top, 4)} MHz, so a gap between two readings of that size or less need not be one between the "
            "calls' own clocks.")


def timed_reading(run: Run, bench: BenchData, impl: str, shape, case_id) -> tuple[float, bool] | None:
    """(median SM clock read in MHz, whether by the bench phase) before the timed calls of `impl` at `shape` (batch,
    heads, seq_len, head_dim, dtype, causal): the bench phase's row, else the profile phase's clock check of the same
    call (`case_id`); None where neither recorded one."""
    b, h, n, d, dt, c = shape
    t = bench.by_n((b, h, d), dt, c, impl) if not bench.rows.empty else bench.rows
    if n in t.index and "sm_clock_mhz" in t and fmt.known(t.loc[n, "sm_clock_mhz"]):
        return float(t.loc[n, "sm_clock_mhz"]), True
    cc = run.frame("profile", "clock_check")
    cc = cc[cc["case_id"] == case_id] if "sm_clock_mhz" in cc else cc.iloc[0:0]
    if cc.empty or not (fmt.known(cc["sm_clock_mhz"].iloc[0]) and cc["sm_clock_mhz"].iloc[0] > 0):
        return None
    return float(cc["sm_clock_mhz"].iloc[0]), False
