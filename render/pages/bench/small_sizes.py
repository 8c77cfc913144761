"""Small sizes, the host or the GPU: device, host and loop time side by side, and where the host sets the pace."""
from __future__ import annotations

from functools import cached_property

import pandas as pd
import plotly.graph_objects as go

from ... import escape, fmt
from ...axes import log_ticks
from ...figures import PALETTE
from ...tables import table_html
from ...vocab import (EVEN, IMPL_DASH, dtype_short, facet_label, host_bound, impl_color, impl_label, join, masking,
                      plural, shape_label, side)
from .common import FUSED, HOST_BOUND, BenchSection, host_ms
from .words import band_words


def host_beside_loop(host_ms, loop_ms) -> str:
    """The clause after a loop time that says what the host time, measured apart from the loop, tells about
    it. A host time on par with or above the loop time is not "the cost of issuing each call" in that loop:
    the loop cannot run faster than it issues calls, so there the two separate measurements agree (or the
    call timed alone was the slower), and the words say so instead of adding the two up."""
    if host_ms is None or host_ms != host_ms or not loop_ms:
        return ""
    where = side(loop_ms / host_ms)
    if where == "win":
        return f", and {fmt.ms(host_ms)} of CPU time to issue one call (host time, measured apart from the loop)"
    if where == "par":
        return (f"; its host time, one call timed alone in a measurement of its own, is on par with that loop time "
                f"({fmt.ms(host_ms)}): the loop runs at the pace the host issues calls")
    return (f"; its host time, one call timed alone in a measurement of its own, came out above that loop time, at "
            f"{fmt.ms(host_ms)}: timed alone, the call returned more slowly than inside the loop, so the loop time, "
            "not the host time, is what a loop of these calls costs")


def _host_cannot_pace(row) -> bool:
    """Whether one call's host time is too short to slow a loop of it past the margin (vocab.host_bound): whatever
    slows that loop is the GPU's own, not the host."""
    host = host_ms(row) if "host_us_median" in row else row.get("host_ms")
    return fmt.known(host) and host * HOST_BOUND < row["latency_ms_median"]


class SmallSizes(BenchSection):
    """Device, host and loop time at small sizes: who sets the pace."""

    @cached_property
    def clock(self) -> pd.DataFrame:
        """ok rows with device, host and loop time side by side (ms), where the run recorded them."""
        df = self.ok.copy()
        for col in ("loop_ms_median", "host_us_median"):
            if col not in df:
                df[col] = None
        df = df[df["latency_ms_median"].notna()]
        df = df.assign(host_ms=pd.to_numeric(df["host_us_median"], errors="coerce") / 1e3,
                       loop_ms=pd.to_numeric(df["loop_ms_median"], errors="coerce"))
        df["loop_over_device"] = df["loop_ms"] / df["latency_ms_median"]
        return df

    @property
    def has_loop_time(self) -> bool:
        return bool(self.clock["loop_ms"].notna().any())

    def _host_bound(self) -> pd.DataFrame:
        c = self.clock[self.clock["loop_over_device"].notna()]
        return c[self._paced_by_host(c)]

    @staticmethod
    def _paced_by_host(c: pd.DataFrame) -> pd.Series:
        """Per row, whether the host sets its loop's pace (vocab.host_bound: the loop past the margin, and a host
        time long enough to explain it)."""
        return pd.Series([bool(host_bound(d, lp, h)) for d, lp, h in
                          zip(c["latency_ms_median"], c["loop_ms"], c["host_ms"])], index=c.index, dtype=bool)

    def _small_n_verdict(self) -> str:
        """One sentence for the page's opening: where the host, not the GPU, sets the pace."""
        if not self.has_loop_time:
            return ("This run recorded device time only, so whether the shortest calls are host-bound is not known "
                    "here.")
        hb = self._host_bound()
        if hb.empty:
            return ("At every size measured, a loop of calls runs within 25% of the device time: the GPU, not the "
                    "host, sets the pace.")
        n_max = int(hb["seq_len"].max())
        # Implementations grouped by how far they stay host-bound, furthest first: one long list would hide that
        # one of them (a costly launch) reaches far past the rest.
        groups = [f"up to N={n}: {join(names)}" for n, names in self._by_reach(hb, furthest_first=True)]
        never = [impl_label(i) for i in self.impls() if i not in set(hb["impl"]) and i in set(self.clock["impl"])]
        if never:
            groups.append(f"at no length: {join(never)}")
        # The whole rule, margin and host time both: a loop merely slower than the device time is no sign of the host
        # (at the longest lengths loops run well above it on the GPU alone, as the small sizes' section says).
        return (f"Up to N={n_max}, some calls are host-bound: a loop of them takes more than "
                f"{fmt.pct(100 * (HOST_BOUND - 1), 2)} longer than the GPU's own time, and issuing one call on the CPU "
                f"takes long enough to explain it ({'; '.join(groups)}; the section on small sizes gives each shape).")

    def small_n_finding(self) -> str:
        """What sets the pace at small sizes: device time against host and loop time, in words from the data."""
        if not self.has_loop_time:
            return ("This run recorded device time only (the GPU's work for one call alone, with the L2 flushed). "
                    "It has no host time (the CPU time of one call, timed alone) and no loop time (calls back to "
                    "back), so this page cannot say whether the shortest calls are limited by the host. Re-collect the "
                    "bench phase with this version of `collect` to measure them.")
        c = self.clock[self.clock["loop_over_device"].notna()]
        hb = self._host_bound()
        ns = sorted(set(c["seq_len"]))
        out = [f"Device time is the GPU's work for one call alone; a user's loop of calls sees the loop time (calls "
               "issued back to back, timed on the GPU), which also pays for issuing each call on the CPU. Host time "
               "is measured apart from that loop: the CPU time one call takes to return, each call timed on its own "
               "while the GPU is kept busy. Where the loop time exceeds the device time by more "
               f"than {fmt.pct(100 * (HOST_BOUND - 1), 2)} and one call's host time is long enough to explain it (at "
               f"least {fmt.pct(100 / HOST_BOUND, 2)} of the device time), this page calls the call host-bound at that "
               "size."]
        if hb.empty:
            out.append(f"No case is host-bound here by that rule, at any N from {ns[0]} to {ns[-1]}.")
            out.append(self._unrested(c))
            return " ".join(x for x in out if x)
        out.append(f"Host-bound cases: {self._host_bound_by_shape(hb)} (each in at least one dtype and masking).")
        worst = hb.loc[hb["loop_over_device"].idxmax()]
        why = (f"The most host-bound is {impl_label(worst['impl'])} at N={worst['seq_len']} "
               f"({facet_label(worst['dtype'], worst['causal'])}, {shape_label(worst['shape'])}): "
               f"{fmt.ms(worst['loop_ms'])} per call in a loop against {fmt.ms(worst['latency_ms_median'])} of "
               "device time")
        out.append(why + host_beside_loop(worst["host_ms"], worst["loop_ms"]) + ".")
        free = [n for n in ns if n > hb["seq_len"].max()]
        if free:
            out.append(f"From N={free[0]} on, no implementation is host-bound by that rule.")
            out.append(self._unrested(c[c["seq_len"] >= free[0]]))
        fused = hb[hb["impl"] == FUSED]
        for shape, g in fused.groupby("shape", sort=False):
            n = int(g["seq_len"].max())
            out.append(f"At {shape_label(shape)}, up to N={n}, the ratios to Triton below compare device times that "
                       "a loop of Triton calls does not reach; the table of host, device and loop time has them side "
                       "by side.")
        return " ".join(x for x in out if x)

    def _host_bound_by_shape(self, hb: pd.DataFrame) -> str:
        """Per shape, each host-bound implementation and the longest length it is host-bound at: a boundary holds
        for the shape it was measured at (a larger batch gives the GPU more work per call to hide the host behind)."""
        parts = []
        for shape in self.b.shapes():
            g = hb[hb["shape"] == shape]
            if g.empty:
                continue
            single = len(self.b.seq_lens(shape)) == 1
            # One length per group, not one per implementation: a figure for each would run past what a
            # sentence can hold.
            per = [f"{join(names)} {'at' if single else 'up to'} N={n}" for n, names in self._by_reach(g)]
            parts.append(f"at {shape_label(shape)}, {', then '.join(per)}")
        return "; ".join(parts)

    def _by_reach(self, hb: pd.DataFrame, furthest_first: bool = False) -> list[tuple[int, list[str]]]:
        """(the longest length, the implementations host-bound up to it) for each such length, in the page's order
        of implementations within a group."""
        reach = hb.groupby("impl")["seq_len"].max()
        order = self.impls() + [i for i in reach.index if i not in self.impls()]
        return [(int(n), [impl_label(i) for i in order if reach.get(i) == n])
                for n in sorted(set(reach), reverse=furthest_first)]

    def _unrested(self, c: pd.DataFrame) -> str:
        """What a loop pays at the lengths where the GPU sets every call's pace (`c`): device time is taken after the
        GPU rested (collect/timing.py), a loop's calls get no rest, and ratios of loop times need not match the
        device-time ratios the page compares. The power limit is a likely cause, not a measured one: the run reads
        the SM clock during the device timing only, so the words say so."""
        gpu = c[[_host_cannot_pace(r) for _, r in c.iterrows()]]
        if gpu.empty:
            return ""
        least = int(gpu["seq_len"].min())
        top = gpu.loc[gpu["loop_over_device"].idxmax()]
        if top["loop_over_device"] < EVEN:
            return (f"There a loop runs {band_words()} of the device time: the speedups below are what a loop "
                    "sees.")
        text = (f"Even there, a loop of calls runs up to {fmt.pct(100 * (top['loop_over_device'] - 1), 2)} "
                f"above the device time ({impl_label(top['impl'])} at N={top['seq_len']}, "
                f"{facet_label(top['dtype'], top['causal'])}, {shape_label(top['shape'])}): device time is taken after "
                "the GPU rests, and calls back to back get no rest, which likely holds them nearer the GPU's power "
                "limit (the clock is read during the device timing only, so the loop's own is not known)."
                + self._back_to_back_clock(top))
        flips, total, widest = self._loop_verdicts(least)
        if total and fmt.pct(100 * (widest - 1), 2) == fmt.pct(0, 2):
            text += " Ratios of loop times match the ratios of device times below there."
        elif total:
            text += (f" Ratios of loop times differ from the ratios of device times below by up to "
                     f"{fmt.pct(100 * (widest - 1), 2)} there, and give another verdict in "
                     f"{flips} of {plural(total, 'comparison')} with the fastest other implementation.")
        return text

    def _back_to_back_clock(self, top) -> str:
        """Where the power phase ran the case of `top` (a row whose loop ran furthest above its device time) back to back,
        or its twin of the other masking, what it measured there: the SM clock back to back against the clock read for
        the rested calls, and the time per call against the rested one, with the case it covers named. '' where it ran
        neither."""
        shape, dtype, n = top["shape"], top["dtype"], int(top["seq_len"])
        for causal in (bool(top["causal"]), not top["causal"]):
            r = self.power_row(top["impl"], shape, dtype, causal, n)
            if r is None or not all(fmt.known(r.get(f)) for f in ("power_sm_clock_mhz", "sm_clock_mhz", "power_loop_ms")):
                continue
            which = ("this case" if causal == bool(top["causal"]) else
                     f"its {masking(causal)} twin ({dtype_short(dtype)}, same shape and N)")
            return (f" The power phase ran {which} back to back: there {impl_label(top['impl'])}'s SM clock "
                    f"averaged {fmt.num(r['power_sm_clock_mhz'], 4)} MHz against {fmt.num(r['sm_clock_mhz'], 4)} MHz "
                    f"read for its rested calls, and a call took {fmt.ratio(r['power_loop_ms'] / r['latency_ms_median'])} "
                    "its rested device time.")
        return ""

    def _loop_verdicts(self, least: int) -> tuple[int, int, float]:
        """Ours against the fastest other implementation by loop time, from N=`least` on where neither call's host time
        could pace its loop: how many verdicts differ from the device time's, of how many, and the widest factor
        between the two ratios."""
        flips = total = 0
        widest = 1.0
        for shape in self.b.shapes():
            for dtype, causal in self.facets(shape):
                ours = self.b.by_n(shape, dtype, causal, FUSED)
                fast = self.b.fastest_rival(shape, dtype, causal)
                for n in ours.index.intersection(fast.index):
                    if n < least:
                        continue
                    t, f = ours.loc[n], fast.loc[n]
                    tl, fl = t.get("loop_ms_median"), f.get("loop_ms_median")
                    if not (fmt.known(tl) and fmt.known(fl)) or not all(_host_cannot_pace(r) for r in (t, f)):
                        continue
                    dev, loop = f["latency_ms_median"] / t["latency_ms_median"], fl / tl
                    total += 1
                    flips += side(dev) != side(loop)
                    widest = max(widest, loop / dev, dev / loop)
        return flips, total, widest

    def small_n_table(self) -> str:
        """Host, device and loop time at each implementation's smallest two lengths, first shape and facet."""
        if not self.has_loop_time:
            return ""
        c = self.clock[self.clock["loop_ms"].notna()]
        shape = self.shapes()[0]
        dtype, causal = self.facets(shape)[0]
        f = self.b.facet_rows(c, shape, dtype, causal)
        ns = sorted(set(f["seq_len"]))[:3]
        f = f[f["seq_len"].isin(ns)].sort_values(["seq_len", "latency_ms_median"])
        if f.empty:
            return ""
        rows = [{"impl": impl_label(r["impl"]), "n": r["seq_len"], "host": r["host_ms"],
                 "device": r["latency_ms_median"], "loop": r["loop_ms"], "ratio": r["loop_over_device"],
                 "verdict": "host-bound" if host_bound(r["latency_ms_median"], r["loop_ms"], r["host_ms"]) else "GPU-bound"}
                for _, r in f.iterrows()]
        caption = (f"{shape_label(shape)}, {facet_label(dtype, causal)}, the three shortest lengths. Host time: one "
                   "call timed alone on the CPU, in a measurement of its own; loop time: calls back to back, timed on "
                   "the GPU.")
        # A loop cannot run faster than its calls are issued, so a host time above the loop time is the
        # separate measurement's own slowness; the reader must not take it for the loop's issuing cost.
        # Counted as the table prints them: a row whose two figures read the same is not "above".
        above = sum(1 for h, lp in zip(f["host_ms"], f["loop_ms"]) if h > lp and fmt.ms(h) != fmt.ms(lp))
        if above:
            caption += (f" In {plural(above, 'row')}, the host time is above the loop time: those calls, timed "
                        "alone, returned more slowly than the same calls did inside the loop, which cannot run faster "
                        "than it issues them.")
        return table_html(pd.DataFrame(rows), {
            "n": "N", "impl": "Implementation", "host": "host time (one call alone)", "device": "device time",
            "loop": "loop time per call", "ratio": "loop / device", "verdict": "Paced by"},
            {"host": fmt.ms, "device": fmt.ms, "loop": fmt.ms, "ratio": fmt.ratio}, caption=caption)

    def small_n_figure(self) -> str:
        if not self.has_loop_time:
            return ""
        shape = self.shapes()[0]
        c = self.clock[self.clock["loop_over_device"].notna()]
        fig, cells, nrows = self._grid(shape)
        shown = set()
        ys = list(c["loop_over_device"])
        for dtype, causal, r, col in cells:
            f = self.b.facet_rows(c, shape, dtype, causal)
            for impl in self.impls():
                g = f[f["impl"] == impl].sort_values("seq_len")
                if g.empty:
                    continue
                label = escape.plot(impl_label(impl))
                fig.add_trace(go.Scatter(
                    x=g["seq_len"], y=g["loop_over_device"], mode="lines+markers", name=label, legendgroup=impl,
                    showlegend=impl not in shown, line=dict(color=impl_color(impl), dash=IMPL_DASH.get(impl, "solid")),
                    hovertemplate=f"{label}<br>N=%{{x}}<br>loop / device %{{y:.3g}}×<extra></extra>"), row=r, col=col)
                shown.add(impl)
            fig.add_hline(y=HOST_BOUND, line_dash="dash", line_color=PALETTE[7], line_width=1, row=r, col=col)
        ns = self.b.seq_lens(shape)
        for _, _, r, col in cells:
            fig.update_yaxes(type="log", title_text="loop / device time (×)" if col == 1 else None, row=r, col=col,
                             **log_ticks(ys + [1.0]))
            fig.update_xaxes(type="log", tickvals=ns, ticktext=[str(n) for n in ns],
                             title_text="seq_len N" if r == nrows else None, row=r, col=col)
        return self.figure(f"loop-over-device-{'x'.join(map(str, shape))}", fig,
                           "Loop time over device time per call against sequence length, log-log: 1 means a loop of "
                           "calls runs at the GPU's pace; above the dashed line a loop runs past the margin, host-bound "
                           "where one call's host time is long enough to explain it (the table and the text say which). "
                           f"{shape_label(shape)}; rows: dtype, columns: masking.", height=300 * nrows + 140)
