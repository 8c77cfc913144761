"""The bench phase's second measurement of the same goal cases, set beside this page's own."""
from __future__ import annotations

from functools import cached_property

import pandas as pd

from ... import escape, fmt
from ...bench_data import rivals
from ...tables import table_html
from ...vocab import CLOCK_GAP, clock_gap, impl_label, join
from .common import NOISE_BAND, GoalCase, IterationsSection, case_key, cases_index, goal_ratio_text

# Two timing methods whose ratios differ by more than this in some case are worth a word.
MATERIAL = 0.03


class Crosscheck(IterationsSection):
    """This page's ratios checked against the bench phase's, in words and in a table."""

    @cached_property
    def _bench_ok(self) -> pd.DataFrame:
        b = self.run.frame("bench", "rows")
        return b[(b["status"] == "ok") & b["tflops"].notna()] if not b.empty else b

    @cached_property
    def _bench_cases(self) -> dict:
        return cases_index(self._bench_ok) if not self._bench_ok.empty else {}

    def bench_ratio(self, dtype: str, causal: bool, n: int, batch: int, heads: int, head_dim: int) -> float | None:
        """The bench phase's ratio at one goal case: `triton` (flash_attention as shipped) over the fastest
        SDPA backend, same shape."""
        if not self._bench_cases or self.rows.empty:
            return None
        key = case_key(dtype, causal, n, batch, heads, head_dim)
        ours, sdpa = self._bench_triton.get(key), self._bench_fastest_rival.get(key)
        return ours / sdpa if ours is not None and sdpa else None

    @cached_property
    def _bench_triton(self) -> dict:
        """case key -> the bench phase's first `triton` TFLOP/s there."""
        ok = self._bench_ok
        return {k: float(f["tflops"].iloc[0]) for k, f in cases_index(ok[ok["impl"] == "triton"]).items()
                if k is not None}

    @cached_property
    def _bench_fastest_rival(self) -> dict:
        """case key -> the bench phase's fastest other TFLOP/s there, PyTorch's choice counted once, as the
        Benchmarks page counts it (distinct_sdpa decides row by row, so once for the whole frame)."""
        return {k: float(f["tflops"].max()) for k, f in cases_index(rivals(self._bench_ok)).items()
                if k is not None and not f.empty}

    def bench_crosscheck(self) -> str:
        """The same goal cases as the bench phase measured them, with its own timing method."""
        bench = self.run.phase("bench")
        got = [(c, self.bench_ratio(*c)) for c in self.cases()]
        got = [(c, r) for c, r in got if r is not None]
        if bench is None or not got:
            return ("The bench phase did not measure these shapes in this run, so this page's ratios have no second "
                    "measurement to be checked against.")
        goal = self.data.goal_ratio
        final = self.data.final_version
        met = sum(r >= goal for _, r in got)
        mine = sum((self.ratio(final, *c) or 0) >= goal for c, _ in got)
        text = (f"The bench phase timed `flash_attention` as shipped at the same shapes, in a measurement of its "
                f"own, and finds it at "
                f"{fmt.ratio(goal)} or more of the fastest other implementation in {met} of {len(got)} cases, against this "
                f"page's {mine} of {len(got)}.")
        diffs = [(c, r - self.ratio(final, *c)) for c, r in got if self.ratio(final, *c) is not None]
        if diffs:
            far = max(diffs, key=lambda x: abs(x[1]))
            text += (f" The two measurements' ratios differ by at most {abs(far[1]):.3f}, at {self.label(far[0])}; the "
                     "table below has both.")
            gap = self.case_clock_gap(final, far[0])
            clocked = gap is not None and gap[0] > CLOCK_GAP
            if clocked:  # the widest difference of the two measurements comes with a clock gap in one of them
                _, a, b, sdpa = gap
                there = self.bench_clock_gap(far[0])
                text += (f" There this page's two calls had median SM clock readings {fmt.pct(100 * gap[0], 2)} apart "
                         f"(ours at {fmt.num(a, 4)} MHz, {escape.text(impl_label(sdpa))} at {fmt.num(b, 4)} MHz)")
                text += (f", the bench phase's {fmt.pct(100 * there, 2)} apart." if there is not None else ".")
            if max(abs(x) for _, x in diffs) > MATERIAL:
                text += (" Both phases time each call on the same clock (collect/timing.py): the difference is "
                         "between two measurements of the same calls, minutes apart"
                         f"{' and, at that case, at different SM clocks' if clocked else ''}, not between two methods.")
            # The goal is a median and a floor, not a count of cases: judge it under both measurements.
            mine_verdict = self._goal_verdict([self.ratio(final, *c) for c, _ in diffs])[2]
            bench_verdict = self._goal_verdict([r for c, r in got if self.ratio(final, *c) is not None])[2]
            flips = [c for c, _ in diffs if (self.bench_ratio(*c) >= goal) != (self.ratio(final, *c) >= goal)]
            if mine_verdict != bench_verdict:
                # The cases that decide: those on opposite sides of the floor in the two measurements (the median's
                # side can only change through them or through the median itself). The widest difference may lie
                # elsewhere and decide nothing (run h100-20261205b: 0.032 at a case above 1.00 in both).
                floor = goal - NOISE_BAND
                deciding = [(c, x) for c, x in diffs
                            if (self.bench_ratio(*c) >= floor) != (self.ratio(final, *c) >= floor)]
                at = max(deciding, key=lambda d: abs(d[1])) if deciding else max(diffs, key=lambda d: abs(d[1]))
                which = ("the case that decides it" if len(deciding) == 1 else
                         f"the widest of the {len(deciding)} cases that decide it")
                where = (f"at {self.label(at[0])}, {which}, they differ by {abs(at[1]):.3f}"
                         if deciding else f"the median moves, by at most {abs(at[1]):.3f} at any case")
                why = (f"{where}, within the noise band of {NOISE_BAND:g}, so the verdict above is "
                       "within the noise of measuring twice" if abs(at[1]) <= NOISE_BAND else
                       f"{where}, more than the noise band of {NOISE_BAND:g}")
                text += (f" On the bench phase's measurement the goal is {'reached' if bench_verdict else 'missed'}, "
                         f"on this page's {'reached' if mine_verdict else 'missed'}: {why}.")
            elif flips:
                text += (f" Whether a single case reaches {fmt.ratio(goal)} differs between the two at "
                         f"{join(self.label(c) for c in flips)}; the goal itself (its median and its floor) is "
                         f"{'reached' if mine_verdict else 'missed'} on both.")
        return text

    def crosscheck_table(self) -> str:
        """Both phases' ratio to the fastest other implementation, case by case."""
        final = self.data.final_version
        rows = []
        for c in self.cases():
            a, b = self.ratio(final, *c), self.bench_ratio(*c)
            if a is None and b is None:
                continue
            rows.append({"case": self.label(c), "here": a, "bench": b,
                         "diff": _signed(b - a) if a is not None and b is not None else "n/a"})
        if not rows or all(r["bench"] is None for r in rows):
            return ""
        # Near the goal or its floor a ratio gets the figures that say which side it falls on: the counts above use them.
        r = lambda v: "n/a" if v is None else goal_ratio_text(v, self.data.goal_ratio)  # noqa: E731
        return table_html(pd.DataFrame(rows), {"case": "Case", "here": f"{final} (this page)",
                                               "bench": "flash_attention (bench phase)", "diff": "bench − this page"},
                          {"here": r, "bench": r}, caption="Ratio to the fastest other implementation's TFLOP/s")

    def bench_clock_gap(self, case: GoalCase) -> float | None:
        """The same gap as the bench phase saw it: `triton` against the rival row bench_ratio divides by."""
        b = self.run.frame("bench", "rows")
        if b.empty or "sm_clock_mhz" not in b:
            return None
        f = self._case_rows(self._bench_cases, *case)
        ours, sdpa = f[f["impl"] == "triton"]["sm_clock_mhz"].dropna(), rivals(f)
        if ours.empty or sdpa.empty:
            return None
        theirs = sdpa.loc[sdpa["tflops"].idxmax(), "sm_clock_mhz"]
        return clock_gap(ours.iloc[0], theirs)


def _signed(x: float) -> str:
    """A difference to three decimals with a true minus sign; one that rounds to nothing is 0.000, not -0.000."""
    if f"{abs(x):.3f}" == "0.000":
        return "0.000"
    return f"{'+' if x > 0 else '−'}{abs(x):.3f}"
