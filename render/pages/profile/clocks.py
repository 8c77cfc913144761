"""One clock: our device time against Nsight Compute's kernel time for the same calls, and the SM clock each saw."""
from __future__ import annotations

import math
import re

import pandas as pd

from ... import escape, fmt
from ...fmt import known
from ...profiler_clock import (CLOCK_FOLLOW_SHARE, CLOCKS_SAME, SHORT_CALL_MS, clock_follow, profiled_clocks,
                               profiler_slowdowns, slowed_who)
from ...tables import table_html
from ...bench_data import BenchData, spread
from ...vocab import case_side, case_versus, impl_label, is_rival, join, plural, side, speedup_words, versus
from .data import ProfileData, count_word, shape_list


class Clocks(ProfileData):
    """The clock cross-check: its finding, its table and what the profiler's clock reading means."""

    # Our device time and Nsight Compute's within this factor either way "agree", for single-kernel
    # calls of at least CLOCK_CHECK_MIN_MS (shorter ones are dominated by the launch itself).
    CLOCKS_AGREE = 1.10
    CLOCK_CHECK_MIN_MS = 0.02

    def clock_check_finding(self) -> str:
        """Our device time beside Nsight Compute's kernel time for the same calls: the proof of the one clock."""
        df = self.run.frame("profile", "clock_check")
        if df.empty:
            return ("This run holds no cross-check of the two clocks: the profile phase recorded no device time beside "
                    "Nsight Compute's for the same calls, so this page cannot show that they agree.")
        one = df[(df["kernels"] == 1) & (df["ncu_ms"] >= self.CLOCK_CHECK_MIN_MS)]
        many = df[df["kernels"] > 1]
        out = []
        if not one.empty:
            r = one["device_over_ncu"]
            agree = ((r <= self.CLOCKS_AGREE) & (r >= 1 / self.CLOCKS_AGREE)).sum()
            # Each end with the figures that set it apart from the band it is judged by (a 1.1013 outside a 10% band
            # printed as 1.10×, beside "within 10% in 23 of 24").
            span = fmt.span(r.min(), r.max(), lambda x: fmt.ratio_vs(x, self.CLOCKS_AGREE if x >= 1 else
                                                                     1 / self.CLOCKS_AGREE))
            out.append(f"For the {plural(len(one), 'call')} of a single kernel lasting at least "
                       f"{self.CLOCK_CHECK_MIN_MS * 1e3:g} µs, our device time is {span} Nsight Compute's kernel time, "
                       f"within {fmt.pct(100 * (self.CLOCKS_AGREE - 1), 2)} in {agree} of {len(one)}.")
            if agree < len(one):
                worst = one.loc[(one["device_over_ncu"].map(lambda x: max(x, 1 / x))).idxmax()]
                # The call's full words: an implementation can have two calls at one N (both maskings).
                out.append(f"The two clocks disagree most for {self._call_words(worst)}: "
                           f"{fmt.ms(worst['device_ms'])} against {fmt.ms(worst['ncu_ms'])}.")
                why = self._config_mismatch(worst)
                if why:
                    out.append(why)
        offset, known_offset = self._offset_words(df)
        out += offset
        if not many.empty and "gap_ms" in many:
            out += self._between_kernels_words(many, offset_known=known_offset)
        return " ".join(out)

    def _offset_words(self, df: pd.DataFrame) -> tuple[list[str], bool]:
        """What our clock adds around a single kernel, from the short single-kernel calls by the rule the Benchmarks
        page's offset takes (render/profiler_clock.py), so the two pages give one range; then the calls that rule
        leaves out, and the longer calls, whose gap is no offset (the kernel's own time drifts between the two runs
        by more). Also whether the offset itself was given."""
        if "gap_ms" not in df:
            return [], False
        single = df[(df["kernels"] == 1) & df["gap_ms"].notna() & df["ncu_ms"].notna()]
        if single.empty:
            return [], False
        short = single[single["ncu_ms"] < SHORT_CALL_MS]
        short = short.join(profiler_slowdowns(self.run, short))
        kept, left = short[~short["slower"]], short[short["slower"]]
        out = []
        if not kept.empty:
            us = lambda v: fmt.num(v * 1e3, 2)  # noqa: E731
            out.append(f"Of the single-kernel calls under {SHORT_CALL_MS:g} ms, {count_word(len(kept))} read "
                       f"{fmt.span(kept['gap_ms'].min(), kept['gap_ms'].max(), us)} µs longer on our clock than under "
                       "Nsight Compute: the events around the kernel, the offset the Benchmarks page allows for.")
            if not left.empty:
                out.append(self._left_out_words(left))
        longer = single[single["ncu_ms"] >= SHORT_CALL_MS]
        if not longer.empty:
            neg, pos = longer[longer["gap_ms"] < 0], longer[longer["gap_ms"] >= 0]
            us = lambda v: f"{fmt.num(abs(v) * 1e3)} µs"  # noqa: E731
            calls = f"{count_word(len(longer))} longer single-kernel call{'' if len(longer) == 1 else 's'}"
            if neg.empty:
                how = f"all read longer on our clock, by up to {us(pos['gap_ms'].max())}"
            elif pos.empty:
                how = f"all read shorter on our clock, by up to {us(neg['gap_ms'].min())}"
            else:
                how = (f"{count_word(len(neg))} read shorter on our clock, by up to {us(neg['gap_ms'].min())}, the "
                       f"others up to {us(pos['gap_ms'].max())} longer")
            out.append(f"In the {calls} the gap mixes the offset with the kernel's own time changing between the two "
                       f"runs: {how}.")
        return out, not kept.empty

    def _left_out_words(self, left: pd.DataFrame) -> str:
        """The short single-kernel calls the offset leaves out (profiler_slowdowns' marks), with what showed each
        slowed, where one thing showed it for all."""
        one = len(left) == 1
        who = "The other call" if one else f"The other {count_word(len(left))}"
        gaps = "its gap is" if one else "their gaps are"
        # Only calls the clock test below can take are pointed to it: one too short to time apart is not there.
        below = " (below)" if (left["ncu_ms"] >= self.CLOCK_CHECK_MIN_MS).all() else ""
        if left["negative"].all() and left["clock"].all():
            return (f"{who} read{'s' if one else ''} shorter on our clock and ran at a lower clock reading under the "
                    f"profiler{below}: {'it' if one else 'they'} ran slower there, so {gaps} no offset.")
        if left["negative"].all():
            return (f"{who} read{'s' if one else ''} shorter on our clock: {'it' if one else 'they'} ran slower under "
                    f"the profiler, so {gaps} no offset.")
        if left["clock"].all():
            return (f"{who} ran at a lower clock reading under the profiler, {'its' if one else 'their'} kernel time "
                    f"grown with it{below}, so {gaps} no offset.")
        return f"{who} ran slower under the profiler, so {gaps} no offset."

    def _between_kernels_words(self, many: pd.DataFrame, offset_known: bool) -> list[str]:
        """How much longer our clock reads calls of several kernels than their kernels add up to: the time between
        kernels, which per-kernel durations leave out. Where some read shorter instead, how many and which: their
        kernels alone took longer under the profiler than the whole call on our clock, which no time between kernels
        explains, so the range is not said of every call."""
        many = many[many["gap_ms"].notna()]
        if many.empty:
            return []
        longer, shorter = many[many["gap_ms"] > 0], many[many["gap_ms"] <= 0]
        what = ("beyond the offset above, the time between kernels" if offset_known else "the time between kernels")
        words = lambda r: f"{self._call_words(r)} ({plural(int(r['kernels']), 'kernel')})"  # noqa: E731
        out = []
        if not longer.empty:
            top = longer.loc[longer["gap_ms"].idxmax()]
            who = ("Calls of several kernels take" if shorter.empty else
                   f"Of the {len(many)} calls of several kernels, {len(longer)} take" if len(longer) > 1 else
                   f"Of the {len(many)} calls of several kernels, one takes")
            out.append(f"{who} longer on our clock than {'their' if len(longer) > 1 else 'its'} kernels add up to, by "
                       f"{'up to ' if len(longer) > 1 else ''}{fmt.ms(top['gap_ms'])} ({self._call_words(top)}, "
                       f"{plural(int(top['kernels']), 'kernel')}): {what}, which per-kernel durations leave out.")
        if not shorter.empty:
            low = shorter.loc[shorter["gap_ms"].idxmin()]
            why = "kernels took longer under the profiler than the whole call did on our clock."
            if len(shorter) == 1:
                who = "The other" if not longer.empty else "The one call of several kernels"
                out.append(f"{who}, {words(low)}, reads {fmt.ms(-low['gap_ms'])} shorter on our clock: its {why}")
            else:
                who = (f"The other {len(shorter)}" if not longer.empty else "Both calls of several kernels"
                       if len(shorter) == 2 else f"All {len(shorter)} calls of several kernels")
                out.append(f"{who} read up to {fmt.ms(-low['gap_ms'])} shorter on our clock, the most "
                           f"{self._call_words(low)} with {plural(int(low['kernels']), 'kernel')}: in each the {why}")
        return out

    # SM clocks of one call under the profiler and on our clock within this share of each other are "the same"
    # (render/profiler_clock.py: the Benchmarks page's offset note judges the clocks by the same band).
    CLOCKS_SAME = CLOCKS_SAME

    def profiler_clock_finding(self) -> str:
        """The SM clock Nsight Compute read for the profiled calls beside the clock of the same calls on our
        clock. Leaving the clocks alone (--clock-control none) does not by itself make the two equal, and a
        reading is not the clock a kernel ran at until its time agrees, so the words come from what each measured."""
        checks = self.run.frame("profile", "clock_check")
        k = self.kernels()
        if checks.empty or k.empty or "sm_clock_mhz" not in checks or "sm_clock_mhz" not in k:
            return ("This run did not record the SM clock of both the profiled kernels and our timing of the same "
                    "calls, so this page cannot say whether the profiler saw the clocks the timed calls ran at.")
        ncu = profiled_clocks(self.run)
        both = checks[checks["sm_clock_mhz"].notna()].join(ncu, on="case_id", how="inner")
        both = both[both["ncu_mhz"].notna()]
        if both.empty:
            return ("This run did not record the SM clock of both the profiled kernels and our timing of the same "
                    "calls, so this page cannot say whether the profiler saw the clocks the timed calls ran at.")
        mhz = lambda v: f"{fmt.num(v, 4)} MHz"  # noqa: E731
        span = lambda c: fmt.span(both[c].min(), both[c].max(), lambda v: fmt.num(v, 4)) + " MHz"  # noqa: E731
        out = [f"Nsight Compute read the SM clock of the profiled calls at {span('ncu_mhz')} (each call's reading "
               f"averaged over its kernels' time), and our timing of the same calls at {span('sm_clock_mhz')}."]
        rel = both["ncu_mhz"] / both["sm_clock_mhz"] - 1
        apart = both[rel.abs() > self.CLOCKS_SAME]
        limit = fmt.pct(100 * self.CLOCKS_SAME, 2)
        if apart.empty:
            out.append(f"Call by call the two were within {limit} of each other, so the profiles saw the clocks "
                       "the timed calls ran at.")
            return " ".join(out)
        lower = (rel[apart.index] < 0).sum()
        side = ("lower" if lower == len(apart) else "higher" if lower == 0 else "lower for some and higher for others")
        worst = apart.loc[rel[apart.index].abs().idxmax()]
        shape = self.shape_text((worst["batch"], worst["heads"], worst["seq_len"], worst["head_dim"], worst["dtype"],
                                 worst["causal"]))
        out.append(f"They differed by more than {limit} for {len(apart)} of {plural(len(both), 'call')}, the "
                   f"profiler's clock {side}, most for {impl_label(worst['impl'])} at {shape}: "
                   f"{mhz(worst['ncu_mhz'])} against {mhz(worst['sm_clock_mhz'])}.")
        out.append(self._clock_reading_tested(apart))
        return " ".join(out)

    # A call's kernel time "moved with" the profiler's clock reading from this share of what the clock change
    # predicts (render/profiler_clock.py, which the Benchmarks page's offset note asks too).
    CLOCK_FOLLOW_SHARE = CLOCK_FOLLOW_SHARE
    # ... and it slowed by "about what" its reading predicts only from this share of the prediction up.
    CLOCK_FOLLOW_CLOSE = 0.8

    def _clock_tests(self, apart: pd.DataFrame) -> pd.DataFrame:
        """Each call whose clock readings differ that can test them: one kernel, long enough to time apart from its
        launch. predicted: how much longer the profiler's reading makes it; moved: how much longer it took under
        the profiler, raw; moved_net: the same with our clock's event offset taken out; follows: moved_net is at
        least CLOCK_FOLLOW_SHARE of predicted; compute: bound by a compute roof, whose time must follow the clock."""
        rows = []
        for _, c in apart.iterrows():
            if c["kernels"] != 1 or not known(c["ncu_ms"]) or c["ncu_ms"] < self.CLOCK_CHECK_MIN_MS:
                continue
            if not known(c["device_ms"]) or not c["device_ms"]:
                continue
            shape = (c["batch"], c["heads"], c["seq_len"], c["head_dim"], c["dtype"], c["causal"])
            bind = self.binding_roofs(shape).get(c["impl"])
            rows.append({**c.to_dict(), **clock_follow(c, self.run.frame("profile", "clock_check")),
                         "compute": bind is not None and " compute" in bind[0]})
        return pd.DataFrame(rows)

    def _clock_reading_tested(self, apart: pd.DataFrame) -> str:
        """Whether the profiled kernels ran at the clock the profiler reported: a call bound by a compute roof that
        really ran at a lower SM clock takes longer by about as much, so its kernel time against our device time
        tests the reading. Calls of several kernels (time between kernels) and calls too short to time apart from
        their launch do not test it. A call bound by memory need not follow the SM clock, so one that does not
        proves nothing; one that does is said, never left out, since its rates on this page then rest on a lower
        clock than the other pages'."""
        t = self._clock_tests(apart)
        said = "Nsight Compute's kernel times, and the rates this report computes from them, were measured at "
        compute = t[t["compute"]] if not t.empty else t
        others = t[~t["compute"] & t["follows"]] if not t.empty else t
        if compute.empty:
            text = (f"No call bound by a compute roof ran as one kernel long enough to show whether its time moved with "
                    f"those clocks, so this run cannot tell whether {said}them.")
        else:
            text = self._compute_bound_verdict(compute, said)
        if not others.empty:
            text += " " + self._followers_words(others)
        return text

    def _compute_bound_verdict(self, t: pd.DataFrame, said: str) -> str:
        """What the calls bound by a compute roof say about the clock readings, said of those calls only."""
        if t["follows"].all():
            return said + "those clocks, not at the timed calls'."
        if t["follows"].any():
            return (f"The kernel times moved with those clocks for {join(self._call_words(r) for _, r in t[t['follows']].iterrows())} "
                    f"but not for {join(self._call_words(r) for _, r in t[~t['follows']].iterrows())}, so the "
                    "profiler's clock reading describes the clock only some profiled kernels ran at.")
        slowest, one = t["moved"].max(), len(t) == 1
        # The largest slowdown printed as a bound on all of them, so to enough figures that it is one.
        # "Would grow": a compute roof setting a call's time makes it grow as the clock falls; whether it set these
        # calls' time at both clocks is what the readings put in question, so it is not asserted.
        grows = "whose time would grow as the SM clock falls if that roof set it"
        if slowest > 0:
            longer = ((f"the one call bound by a compute roof, {grows}, took {fmt.pct(100 * slowest, 3)} longer" if one
                       else f"the {len(t)} calls bound by a compute roof, {grows}, took at most "
                       f"{fmt.pct(100 * slowest, 3)} longer") + " under Nsight Compute than on our clock")
        else:
            longer = ((f"the one call bound by a compute roof, {grows}, took no longer" if one else
                       f"none of the {len(t)} calls bound by a compute roof, {grows}, took longer")
                      + " under Nsight Compute than on our clock")
        if (t["predicted"] > 0).all():
            longer += (f", where the clock reading{'' if one else 's'} would make {'it' if one else 'them'} "
                       f"{'' if one else 'up to '}{fmt.pct(100 * t['predicted'].max(), 2)} longer")
        ex = t.loc[t["predicted"].abs().idxmax()]
        # Said of the calls it was tested on: a call not bound by a compute roof need not follow the SM clock, so its
        # time staying put says nothing of the clock it ran at. Three readings fit the times, and this run tells them
        # apart by none: the profiler's reading is the kernel's own cycles over its time (the cycles its pipe shares
        # are counted in), ours is read in the rest before each timed call, not during it.
        it, its = ("it", "its") if one else ("they", "their")
        whom = "that call" if one else "the calls bound by a compute roof"
        return (f"The kernel times do not follow those readings: {longer}. {self._call_words(ex)}, "
                f"read at {fmt.num(ex['ncu_mhz'], 4)} MHz, took {fmt.num_vs(ex['ncu_ms'], ex['device_ms'])} ms "
                f"against {fmt.num_vs(ex['device_ms'], ex['ncu_ms'])} ms on our clock. So for {whom}, either "
                f"{its} kernel{'' if one else 's'} ran under the profiler at a higher clock than it read, or {it} ran at "
                "about the clock it read in both runs (our timing reads the clock in the rest before each call, not "
                f"during it), or {its} time does not shrink as the clock rises, so something other than the compute "
                "roof likely sets it there. This run cannot tell which; Nsight Compute's reading counts the kernel's "
                "own cycles, the cycles its pipe shares (What limits each kernel, below) are shares of. Either way "
                f"the rates this page computes from {its} kernel time{'' if one else 's'} are not understated by a "
                "lower clock" + (": the two times agree." if side(1 + slowest) == "par" else "."))

    def _followers_words(self, t: pd.DataFrame) -> str:
        """The calls not bound by a compute roof whose kernel time did follow their low clock reading: which, by how
        much against what the reading predicts, and that their rates here rest on that lower clock."""
        one = len(t) == 1
        ex = t.loc[t["moved_net"].idxmax()]
        who = join(self._call_words(r) for _, r in t.iterrows())
        count = f"{count_word(len(t))} call{'' if one else 's'}".capitalize()
        # A call "follows" from CLOCK_FOLLOW_SHARE of the predicted slowdown up: "about what" only where every
        # one came near the whole of it.
        share = (t["moved_net"] / t["predicted"]).min()
        how = "about what" if share >= self.CLOCK_FOLLOW_CLOSE else f"at least {fmt.pct(10 * math.floor(share * 10 + 1e-9), 2)} of what"
        return (f"{count} not bound by a compute roof did run slower under the "
                f"profiler, by {how} {'its' if one else 'their'} clock reading{'' if one else 's'} predict"
                f"{'s' if one else ''}: {who}. {self._call_words(ex)} took {fmt.ms(ex['ncu_ms'])} under Nsight "
                f"Compute against {fmt.ms(ex['device_ms'])} on our clock, {fmt.pct(100 * ex['moved_net'])} longer once "
                "the time our clock adds around a single kernel (above) is taken out, where its reading predicts "
                f"{fmt.pct(100 * ex['predicted'])}. This page's rates for "
                f"{'that call' if one else 'those calls'} rest on that lower clock and may be understated by it."
                f"{self._reranked(t)}")

    def _reranked(self, t: pd.DataFrame) -> str:
        """Where a call that followed its low clock is ours at a shape whose ranking this page's figures and the
        timed ones disagree on: a pointer to where the page says so, since that is the consequence a reader needs."""
        shapes = {(r["batch"], r["heads"], r["seq_len"], r["head_dim"], r["dtype"], bool(r["causal"]))
                  for _, r in t[t["impl"] == "triton"].iterrows()}
        apart = [s for s in self.shapes() if s in shapes and self.ranking_disagreement(s)]
        if not apart:
            return ""
        return (f" At {shape_list([self.shape_text(s) for s in apart])} Nsight Compute's kernel times rank ours and the "
                "fastest other implementation differently from our timing, as that shape's subsection below says.")

    def _bench_versus(self, shape, impl: str) -> tuple[float, tuple[float, float] | None] | None:
        """Ours against `impl` at a profiled shape as the bench phase timed it: the ratio of the medians (theirs over
        ours) and the calls' spread, the figures the Benchmarks page judges a case by; None where either was not
        timed there."""
        b, h, n, d, dt, c = shape
        data = BenchData(self.run)
        if data.rows.empty:
            return None
        ours, theirs = (data.by_n((b, h, d), dt, c, i) for i in ("triton", impl))
        if n not in ours.index or n not in theirs.index:
            return None
        o, r = ours.loc[n], theirs.loc[n]
        return r["latency_ms_median"] / o["latency_ms_median"], spread(r, o)

    def ranking_disagreement(self, shape=None) -> str:
        """Where Nsight Compute's kernel times rank ours against the fastest other implementation differently (vocab:
        win, loss or on par) from the Benchmarks page's medians at the same case, at `shape` (every profiled shape
        when None): this page's figures and that page then tell a different story there, and the reader must know.
        The Benchmarks page's verdict is given in its own words (case_versus: the calls' spread counted); where the
        clock check's single call on our clock ranks them otherwise, the reader is told which figure is the timed
        one. Where the bench phase did not time the case, the clock check's call is the only timing to set against."""
        df = self.run.frame("profile", "clock_check")
        if df.empty:
            return ""
        slowed = profiler_slowdowns(self.run, df)["slower"]
        out = []
        for shape in [shape] if shape else self.shapes():
            b, h, n, d, dt, c = shape
            at = df[(df["batch"] == b) & (df["heads"] == h) & (df["seq_len"] == n) & (df["head_dim"] == d)
                    & (df["dtype"] == dt) & (df["causal"] == c) & df["device_ms"].map(known) & df["ncu_ms"].map(known)]
            ours = at[at["impl"] == "triton"]
            rivals = at[at["impl"].map(is_rival)]
            if ours.empty or rivals.empty:
                continue
            o, r = ours.iloc[0], rivals.loc[rivals["device_ms"].idxmin()]  # the fastest other, as the other pages pick it
            on_ncu, on_ours = r["ncu_ms"] / o["ncu_ms"], r["device_ms"] / o["device_ms"]
            other, where = impl_label(r["impl"]), shape_list([self.shape_text(shape)])
            timed = self._bench_versus(shape, r["impl"])
            if timed is None:
                if side(on_ncu) == side(on_ours):
                    continue
                out.append(f"At {where} the two clocks rank ours against the fastest other implementation, {other}, "
                           f"differently: under Nsight Compute ours is {versus(on_ncu, other)}, on our clock "
                           f"{versus(on_ours, other)}. The bench phase did not time this case, so this page's figures "
                           "at that shape may not rank the two as a timing over many calls would."
                           + self._slowed_words(slowed[o.name], slowed[r.name], other))
                continue
            ratio, sp = timed
            if side(on_ncu) == case_side(ratio, sp):
                continue
            text = (f"At {where} Nsight Compute's kernel times rank ours against the fastest other implementation, "
                    f"{other}, differently from the Benchmarks page: under Nsight Compute ours is "
                    f"{versus(on_ncu, other)}, where the Benchmarks page's medians make it "
                    f"{case_versus(ratio, sp, other)}. So this page's figures at that shape do not rank the two as the "
                    "Benchmarks page does.")
            if side(on_ours) == case_side(ratio, sp):
                text += (f" Our clock's cross-check of the same call ranks them as the Benchmarks page does "
                         f"({speedup_words(on_ours)}).")
            else:
                text += (f" Our clock's cross-check of the same call makes ours {versus(on_ours, other)}; the "
                         "Benchmarks page's figure is the timed one (medians over many calls), the clock check's a "
                         "single cross-check call.")
            out.append(text + self._slowed_words(slowed[o.name], slowed[r.name], other))
        return " ".join(out)

    @staticmethod
    def _slowed_words(ours: bool, theirs: bool, other: str) -> str:
        """Where a ranking under Nsight Compute rests on a call that ran slower under the profiler than on our clock
        (render/profiler_clock.py, the calls the One clock section names and the Benchmarks page leaves out of its
        own comparison): the ranking then measures that slowdown, not the kernels as timed."""
        who = slowed_who(ours, theirs, other)
        if not who:
            return ""
        return (f" Under Nsight Compute {who} ran slower than on our clock (One clock, above), so this disagreement "
                "rests on the profiler's slowdown, not on the kernels as timed.")

    def _call_words(self, c) -> str:
        """'Triton (ours) at N=4096, d=128, causal' for a clock-check row."""
        return (f"{impl_label(c['impl'])} at N={c['seq_len']}, d={c['head_dim']}" + (", causal" if c["causal"] else ""))

    _TILE = re.compile(r"BLOCK_M=(\d+) BLOCK_N=(\d+) warps=(\d+) stages=(\d+)")

    def _config_mismatch(self, check: pd.Series) -> str | None:
        """Why a check of our kernel may compare two kernels: the profiled call ran another tile config
        than our clock (recorded), or, where our clock's was not recorded, than the bench phase timed."""
        impls = self.run.frame("profile", "impls")
        row = impls[impls["case_id"] == check["case_id"]] if "case_id" in impls else impls.iloc[0:0]
        profiled = row["config"].iloc[0] if len(row) and isinstance(row["config"].iloc[0], str) else None
        if profiled is None or not self._TILE.search(profiled):
            return None
        tiles = self._TILE.search(profiled).groups()
        ours = check.get("config")
        if isinstance(ours, str) and self._TILE.search(ours):
            if self._TILE.search(ours).groups() == tiles:
                return None
            return (f"The profiled call ran the tile config {escape.text(profiled)} and our clock "
                    f"{escape.text(ours)}: the two timed different kernels.")
        bench = self.run.frame("bench", "rows")
        if bench.empty or "kernel_config" not in bench:
            return None
        same = bench[(bench["impl"] == check["impl"]) & (bench["batch"] == check["batch"])
                     & (bench["heads"] == check["heads"]) & (bench["seq_len"] == check["seq_len"])
                     & (bench["head_dim"] == check["head_dim"]) & (bench["dtype"] == check["dtype"])
                     & (bench["causal"] == check["causal"])]
        cfg = same["kernel_config"].iloc[0] if len(same) else None
        if not isinstance(cfg, dict) or not {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages"} <= set(cfg):
            return None
        timed = tuple(str(cfg[k]) for k in ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages"))
        if timed == tiles:
            return None
        return (f"The profiled process autotuned its own tile config there ({escape.text(profiled)}), not the one "
                f"the bench phase timed at that case (BLOCK_M={timed[0]} BLOCK_N={timed[1]} warps={timed[2]} "
                f"stages={timed[3]}), and this run did not record which one our clock ran: the two clocks may have "
                "timed different kernels.")

    def clock_check_table(self) -> str:
        df = self.run.frame("profile", "clock_check")
        if df.empty:
            return ""
        df = df.assign(impl=df["impl"].map(impl_label),
                       shape=[f"B={b}, H={h}, N={n}, d={d}" + (", causal" if c else "")
                              for b, h, n, d, c in zip(df["batch"], df["heads"], df["seq_len"], df["head_dim"], df["causal"])])
        return table_html(df, {"impl": "Implementation", "shape": "Shape", "kernels": "Kernels",
                               "ncu_ms": "Nsight Compute (kernel sum)", "device_ms": "Our device time",
                               "device_over_ncu": "ours / Nsight Compute", "gap_ms": "ours − Nsight Compute"},
                          {"ncu_ms": fmt.ms, "device_ms": fmt.ms, "device_over_ncu": fmt.ratio, "gap_ms": fmt.ms})
