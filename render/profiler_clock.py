"""The SM clock Nsight Compute read for a profiled call beside the clock our timing of the same call saw
(profile.json clock_check), and whether a call's kernel time followed a lower reading. One test for both pages
that ask: the Profiling page's clock finding names the calls that ran slower under the profiler, and the
Benchmarks page leaves those same calls out of the offset device time carries and out of its comparison with
Nsight Compute's kernel times."""
from __future__ import annotations

import pandas as pd

from .fmt import known

# SM clocks of one call under the profiler and on our clock within this share of each other are "the same".
CLOCKS_SAME = 0.03
# Cross-checked calls shorter than this show the offset alone: at a clock a percent off, such a call moves by about
# a microsecond, so its gap to Nsight Compute's kernel time is the events' and the launch's, not the clock's. A
# longer call's gap mixes in its kernel's own time changing between the two runs, which soon exceeds the offset.
SHORT_CALL_MS = 0.1
# A call's kernel time "moved with" the profiler's clock reading where it changed by at least this share of
# what the clock change predicts: a call bound by a compute roof scales fully with the SM clock, so even
# half of that is well clear of the event offset and the run-to-run spread of one call.
CLOCK_FOLLOW_SHARE = 0.5


def profiled_clocks(run) -> pd.Series:
    """Each profiled call's SM clock under Nsight Compute (MHz, by case_id): its kernels' readings weighted by their
    time, as its kernel time adds them up. Empty where the profile recorded none."""
    k = run.frame("profile", "kernels")
    if k.empty or "sm_clock_mhz" not in k or "duration_ms" not in k:
        return pd.Series(dtype=float, name="ncu_mhz")
    k = k[k["sm_clock_mhz"].notna() & k["duration_ms"].notna()]
    w = k.assign(cw=k["sm_clock_mhz"] * k["duration_ms"]).groupby("case_id")[["cw", "duration_ms"]].sum()
    return (w["cw"] / w["duration_ms"]).rename("ncu_mhz")


def event_offset(checks: pd.DataFrame, case_id) -> float:
    """What our clock adds to a single kernel's call (the events around it): the median gap of the other
    single-kernel calls under SHORT_CALL_MS that read longer on our clock, none where there are none. Taken out
    before a call's times are compared, it keeps a short call's offset from hiding or faking a slowdown; leaving the
    call itself out keeps its own slowdown from being taken for the offset. Longer calls and negative gaps stay out:
    a negative gap is a slowdown, not an offset, and with the longer calls' gaps in, the median fell far below the
    short calls' offsets and hid the very slowdowns it is taken out to show."""
    if checks.empty or "gap_ms" not in checks:
        return 0.0
    gaps = checks[(checks["kernels"] == 1) & (checks["case_id"] != case_id)
                  & (checks["ncu_ms"] < SHORT_CALL_MS)]["gap_ms"].dropna()
    gaps = gaps[gaps >= 0]
    return float(gaps.median()) if len(gaps) else 0.0


def clock_follow(c, checks: pd.DataFrame) -> dict:
    """How one single-kernel clock-check row (with its profiled clock, ncu_mhz) moved against its clock readings.
    predicted: how much longer the profiler's reading makes it; moved: how much longer it took under the profiler,
    raw; moved_net: the same with our clock's event offset taken out; follows: moved_net is at least
    CLOCK_FOLLOW_SHARE of predicted, where the reading predicts a slowdown at all."""
    predicted = c["sm_clock_mhz"] / c["ncu_mhz"] - 1
    net = (c["ncu_ms"] + event_offset(checks, c["case_id"])) / c["device_ms"] - 1
    return {"predicted": predicted, "moved": c["ncu_ms"] / c["device_ms"] - 1, "moved_net": net,
            "follows": bool(predicted > 0 and net / predicted >= CLOCK_FOLLOW_SHARE)}


def slowed_by_clock(run, checks: pd.DataFrame) -> pd.Series:
    """For each row of `checks` (the run's clock_check rows), whether the call ran slower under Nsight Compute for
    a lower SM clock: one kernel, its profiled clock more than CLOCKS_SAME below the timed one, and its kernel time
    longer by at least CLOCK_FOLLOW_SHARE of what that predicts. The reading alone is not enough: a reading need
    not be the clock the kernel ran at (the Profiling page tests that on the calls bound by a compute roof)."""
    if checks.empty or "sm_clock_mhz" not in checks:
        return pd.Series(False, index=checks.index, dtype=bool)
    ncu = profiled_clocks(run)
    every = run.frame("profile", "clock_check")

    def slowed(c) -> bool:
        mhz = ncu.get(c["case_id"])
        if (c["kernels"] != 1 or not all(known(x) and x for x in (mhz, c["sm_clock_mhz"], c["device_ms"]))
                or not known(c["ncu_ms"]) or mhz / c["sm_clock_mhz"] - 1 >= -CLOCKS_SAME):
            return False
        return clock_follow({**c.to_dict(), "ncu_mhz": mhz}, every)["follows"]

    return checks.apply(slowed, axis=1).astype(bool) if len(checks) else pd.Series(False, index=checks.index, dtype=bool)


def profiler_slowdowns(run, checks: pd.DataFrame) -> pd.DataFrame:
    """For each row of `checks` (clock_check rows), whether the call ran slower under Nsight Compute than on our
    clock, so that neither its gap nor its kernel time stands for the call as timed: `negative`, a single kernel
    under SHORT_CALL_MS that read shorter on our clock (the events bracket the kernel, so only a kernel that ran
    longer under the profiler reads so; in a longer call its own time's drift between the runs outweighs the
    offset either way, so there it shows nothing); `clock`, slowed_by_clock; `slower`, either. The one rule by
    which the Benchmarks page leaves calls out of the offset and of its comparison with Nsight Compute, and the
    Profiling page names them."""
    if checks.empty:
        return pd.DataFrame({"negative": [], "clock": [], "slower": []}, index=checks.index, dtype=bool)
    negative = ((checks["kernels"] == 1) & (checks["ncu_ms"] < SHORT_CALL_MS) & (checks["gap_ms"] < 0)).astype(bool)
    clock = slowed_by_clock(run, checks)
    return pd.DataFrame({"negative": negative, "clock": clock, "slower": negative | clock}, index=checks.index)


def slowed_who(ours: bool, theirs: bool, other: str) -> str:
    """Whose call of a pair ran slower under the profiler (profiler_slowdowns' `slower`): 'both calls', 'ours', the
    other's label, or '' where neither did. The words the Profiling and Iterations pages give a ranking that rests on
    such a call."""
    return "both calls" if ours and theirs else "ours" if ours else other if theirs else ""
