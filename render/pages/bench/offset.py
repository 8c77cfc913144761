"""Device time's fixed offset: what the events around a call add to the kernel, read from the run's Nsight Compute
cross-check (profile.json clock_check), and which verdicts on short calls it leaves indicative only."""
from __future__ import annotations

from functools import cached_property

import pandas as pd

from ... import fmt
from ...profiler_clock import CLOCKS_SAME, SHORT_CALL_MS, profiled_clocks, profiler_slowdowns
from ...vocab import EVEN, facet_label, impl_label, plural, shape_label, side, speedup_words, versus
from .common import FUSED, BenchSection


class Offset(BenchSection):
    """The offset between device time and Nsight Compute's kernel time, and the verdicts it makes indicative."""

    @cached_property
    def _checks(self) -> pd.DataFrame:
        df = self.run.frame("profile", "clock_check")
        if df.empty:
            return df
        return df[(df["kernels"] == 1) & df["gap_ms"].notna() & df["ncu_ms"].notna()]

    @cached_property
    def _slowed(self) -> pd.DataFrame:
        """For each cross-checked single-kernel call, whether it ran slower under Nsight Compute than on our clock
        (render/profiler_clock.py, the rule the Profiling page names such calls by): `negative`, `clock`, `slower`."""
        return profiler_slowdowns(self.run, self._checks)

    @cached_property
    def _short(self) -> pd.DataFrame:
        """The cross-checked single-kernel calls under SHORT_CALL_MS, each marked `slower` where it ran slower under
        Nsight Compute than on our clock, so that its gap is no offset: device time the shorter (the events bracket
        the kernel, so an offset is never negative), or its kernel time grown with a profiled SM clock more than
        CLOCKS_SAME below the timed one."""
        if self._checks.empty:
            return pd.DataFrame(columns=["gap_ms", "negative", "clock", "slower"])
        return self._checks.join(self._slowed)[self._checks["ncu_ms"] < SHORT_CALL_MS]

    @cached_property
    def offset_spread_ms(self) -> float | None:
        """How far apart the offsets of the short single-kernel calls lie (ms), the calls that ran slower under
        Nsight Compute left out, or None without two such calls: the most the offset alone can move one call's time
        against another's."""
        kept = self._short[~self._short["slower"].astype(bool)]
        if len(kept) < 2:
            return None
        return float(kept["gap_ms"].max() - kept["gap_ms"].min())

    @property
    def indicative_below_ms(self) -> float | None:
        """Calls of ours shorter than this: the offsets' spread alone exceeds the "on par" band's width of them."""
        spread = self.offset_spread_ms
        return spread / (EVEN - 1) if spread else None

    def _threshold_words(self) -> str:
        """The indicative threshold in ms, with as many figures as it takes to differ from the call of ours nearest
        it: a call just under it and the threshold printed alike (0.0422 ms both, run h100-20261205b) read as a call
        marked for being at the threshold, not under it."""
        top = self.indicative_below_ms
        ours = self.ok[self.ok["impl"] == FUSED]["latency_ms_median"].dropna() if "impl" in self.ok else []
        if len(ours) == 0:
            return fmt.ms(top)
        nearest = float(ours.iloc[(ours - top).abs().argmin()])
        return f"{fmt.num_vs(top, nearest)} ms"

    def indicative(self, ours_ms) -> bool:
        top = self.indicative_below_ms
        return bool(top and fmt.known(ours_ms) and ours_ms < top)

    def offset_note(self) -> str:
        """What the offset is, how large it ran in this run, which verdicts it leaves indicative, and where Nsight
        Compute's kernel times give another verdict than device time."""
        slower = self._short[self._short["slower"].astype(bool)]
        if self.offset_spread_ms is None:
            if slower.empty:
                return ("This run holds no Nsight Compute cross-check of short calls, so the small fixed offset device "
                        "time carries beside the kernel (the events' and the launch's own cost) is not known here; "
                        "verdicts on the shortest calls may rest on it.")
            return (f"The run's Nsight Compute cross-check timed single-kernel calls under {SHORT_CALL_MS:g} ms, and "
                    f"this page leaves out {self._slower_words(slower)} That leaves fewer than two to measure by, so "
                    "the small fixed offset "
                    "device time carries beside the kernel (the events' and the launch's own cost) is not known here; "
                    "verdicts on the shortest calls may rest on it.")
        kept = self._short[~self._short["slower"]]
        lo, hi = kept["gap_ms"].min() * 1e3, kept["gap_ms"].max() * 1e3
        text = (f"Device time carries a small fixed offset beside the kernel (the events' and the launch's own cost), "
                f"and it differs between implementations: for the single-kernel calls under {SHORT_CALL_MS:g} ms that "
                f"the run's Nsight Compute cross-check timed (Profiling page), device time less the kernel's own time "
                f"ranged from {_micro(lo)} to {_micro(hi)}.")
        if not slower.empty:
            text += f" That range leaves out {self._slower_words(slower)}"
        spread = "The width of that range" if not slower.empty else "That spread"
        text += (f" {spread} alone moves a ratio past the {fmt.pct(100 * (EVEN - 1), 2)} band for calls of ours under "
                 f"{self._threshold_words()}, so the tables mark their verdicts *indicative*.")
        return text + self._ncu_disagrees()

    def _kept_low(self) -> int:
        """How many of the short calls the offset keeps also read a profiled SM clock more than CLOCKS_SAME below the
        reading before their timed calls, yet took no longer: what tells the left-out calls apart is their kernel time,
        not their reading."""
        kept = self._short[~self._short["slower"].astype(bool)]
        ncu = profiled_clocks(self.run)
        if kept.empty or ncu.empty or "sm_clock_mhz" not in kept:
            return 0
        ratio = kept["case_id"].map(ncu) / kept["sm_clock_mhz"] - 1
        return int((ratio < -CLOCKS_SAME).sum())

    def _slower_words(self, slower: pd.DataFrame) -> str:
        """'2 calls that ran slower under Nsight Compute than on our clock: ...', with what showed it for each and
        why such a call's gap is not the offset; ends its own sentences."""
        n = len(slower)
        band = fmt.pct(100 * CLOCKS_SAME, 2)

        def who(k: int) -> str:
            return "it" if n == 1 else "both" if k == n == 2 else "all" if k == n else f"{k} of them"

        why = []
        neg, clock = int(slower["negative"].sum()), int(slower["clock"].sum())
        if neg:
            why.append(f"{who(neg)} read shorter on our clock than under the profiler")
        if clock:
            low = self._kept_low()
            why.append(f"{who(clock)} took longer there by as much as the SM clock Nsight Compute read over "
                       f"{'it' if clock == 1 else 'them'}, more than {band} below the reading before the timed calls, "
                       "predicts"
                       + (f" ({plural(low, 'other call')} read as low a clock there and took no longer: a reading "
                          "before a call is not the call's clock)" if low else ""))
        gaps = "that call's gap measures" if n == 1 else "those calls' gaps measure"
        return (f"{plural(n, 'call')} that ran slower under Nsight Compute than on our clock: {', and '.join(why)}. An "
                "offset cannot be negative (the events bracket the kernel), and a lower clock lengthens the kernel "
                f"itself, so {gaps} the profiler's slowdown, not the offset.")

    def _ncu_disagrees(self) -> str:
        """The cross-checked case where Nsight Compute's kernel times give ours against the fastest other
        implementation another verdict than device time does, the widest apart, among the calls that did not run
        slower under the profiler; '' where none does."""
        if self._checks.empty:
            return ""
        found = []
        # A call that ran slower under the profiler measures that slowdown, as the offset above leaves it out for;
        # a verdict resting on it would set the profiler's slowdown against device time, not the kernels.
        kept = self._checks[~self._slowed["slower"].astype(bool)]
        for key, g in kept.groupby(["batch", "heads", "head_dim", "dtype", "causal", "seq_len"]):
            b, h, d, dtype, causal, n = key
            fast = self.b.fastest_rival((b, h, d), dtype, bool(causal))
            ours = self.b.by_n((b, h, d), dtype, bool(causal), FUSED)
            if n not in fast.index or n not in ours.index:
                continue
            who = fast.loc[n, "impl"]
            # One call per implementation: a case may be cross-checked more than once (another config, a repeat).
            by = g.groupby("impl")["ncu_ms"].median()
            if FUSED not in by or who not in by:
                continue
            dev = fast.loc[n, "latency_ms_median"] / ours.loc[n, "latency_ms_median"]
            ncu = by[who] / by[FUSED]
            if side(dev) != side(ncu):
                found.append((abs(ncu / dev - 1), (b, h, d), dtype, bool(causal), int(n), who, dev, ncu))
        if not found:
            return ""
        _, shape, dtype, causal, n, who, dev, ncu = max(found, key=lambda x: x[0])
        return (f" At {shape_label(shape)}, N={n}, {facet_label(dtype, causal)}, Nsight Compute's kernel times make "
                f"ours {versus(ncu, impl_label(who))}, where device time makes it {speedup_words(dev)}.")


def _micro(us: float) -> str:
    """A signed offset in µs: 'from 1.2 µs less' reads worse than a sign."""
    return f"{'+' if us > 0 else '−' if us < 0 else ''}{fmt.num(abs(us), 2)} µs"
