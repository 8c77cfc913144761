"""Benchmarks: latency, TFLOP/s and peak memory over seq_len, where our kernel wins or loses, and what
sets the pace at small sizes (the host or the GPU)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import escape, fmt
from ..axes import log_ticks
from ..bench_data import BenchData, distinct_sdpa
from ..figures import PALETTE
from ..runs import load_references
from ..tables import table_html
from ..vocab import (CLOCK_GAP, EVEN, IMPL_DASH, STUDY, clock_gap, dtype_short, facet_label, impl_color, impl_label,
                     join, path_label, plural, shape_label, side, speedup_words)
from .base import Page

# A speedup that changes by less than this factor from the shortest to the longest N "holds steady".
TREND = 1.15
# Loop time over device time above this: the calls are issued slower than the GPU runs them (host-bound).
HOST_BOUND = 1.25
FUSED = "triton"


def loglog_slope(x, y) -> float | None:
    """Least-squares exponent k of y ~ x^k, or None with fewer than two usable points."""
    pts = [(math.log(a), math.log(b)) for a, b in zip(x, y) if a and b and a > 0 and b > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return None if sxx == 0 else sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def spread(other, ours) -> tuple[float, float] | None:
    """(other's p10 over ours, other's p90 over ours) for two rows of one case, or None where either row lacks
    its p10 or p90 (published figures carry none)."""
    try:
        r = (other["latency_ms_p10"] / ours["latency_ms_p10"], other["latency_ms_p90"] / ours["latency_ms_p90"])
    except (KeyError, TypeError, ZeroDivisionError):
        return None
    return r if all(x == x and x > 0 and math.isfinite(x) for x in r) else None


def edge_of(s: float, sp: tuple[float, float] | None) -> str:
    """Which of the calls' p10s and p90s put a speedup s, past the "on par" band by the medians, back inside it
    ("p10s", "p90s", "p10s and p90s"), or "" where the verdict holds at both ends or the rows have no spread. The
    two calls' quick ends compared, then their slow ends: where they disagree with the medians' verdict, that
    verdict rests on where the median fell inside the calls' own noise, not on the kernels."""
    if sp is None or side(s) == "par":
        return ""
    off = [name for name, r in zip(("p10s", "p90s"), sp) if side(r) != side(s)]
    return join(off)


def case_side(s: float, sp: tuple[float, float] | None = None) -> str:
    """side(s), with a verdict the calls' spread does not carry (edge_of) counted as on par."""
    return "par" if edge_of(s, sp) else side(s)


def case_words(s: float, sp: tuple[float, float] | None = None) -> str:
    """speedup_words(s), or, where the calls' spread straddles the band's edge, 'on par at the edge' with the
    medians' figure and which ends of the spread fall inside the band."""
    where = edge_of(s, sp)
    if not where:
        return speedup_words(s)
    word = "faster" if s >= 1 else "slower"
    return (f"on par at the edge ({fmt.ratio_vs(max(s, 1 / s), EVEN)} {word} by the medians, within "
            f"{fmt.pct(100 * (EVEN - 1), 2)} by the calls' {where})")


def _call_then_words(method: str) -> str:
    """A recorded method such as 'f(x, y) on the inputs, which ...': the call as code, the words after it as
    prose (a code span around the whole would set the explanation in code too)."""
    method = str(method)
    end = method.find(")") + 1 if method.find("(") > 0 else 0
    if not end:
        return escape.text(method)
    return escape.code(method[:end]) + " " + escape.text(method[end:]) if method[end:].strip() else escape.code(method)


def _path_name(p: str) -> str:
    return f"the {escape.text(path_label(p))}"


def describe_gap(ns: list[int], speedups: list[float], other: str, spreads=None, paths=None, same=None) -> str:
    """Sentences on Triton against `other` over N (speedup = other's time / Triton's), with at most two ratios
    in the main one: the pattern is the finding, the table below the page holds every ratio.

    spreads: per N, (ratio of the p10s, ratio of the p90s) or None (see edge_of); paths: per N, the kernel
    path Triton took, named where a crossover coincides with a change of path; same: per N, the path both
    calls took where they ran one kernel (same path and tile config), so there is no standing to give."""
    k = len(ns)
    spreads = list(spreads) if spreads is not None else [None] * k
    paths = list(paths) if paths is not None else [None] * k
    same = list(same) if same is not None else [None] * k
    lead, every, only = "", "every N measured", "the only length both ran"
    twins = [i for i in range(k) if same[i]]
    if twins:
        kinds = list(dict.fromkeys(same[i] for i in twins))
        lead = (f"At N={join(ns[i] for i in twins)}, flash_attention itself took {join(_path_name(p) for p in kinds)} "
                f"with the same tile config, so Triton and {other} are one kernel there and have no standing.")
        keep = [i for i in range(k) if not same[i]]
        ns, speedups, spreads, paths = ([x[i] for i in keep] for x in (ns, speedups, spreads, paths))
        every, only = "every other N", "the only other length both ran"
        if not ns:
            return lead
        lead += " "
    if not ns:
        return f"No sequence length has a measurement of both Triton and {other}."
    return lead + _Standing(ns, speedups, spreads, paths, other).sentences(every, only)


@dataclass
class _Standing:
    """Triton's standing against one other implementation over the lengths both ran, told by its pattern:
    one side throughout, one crossover, one run of lengths off the "on par" band, or back and forth."""

    ns: list[int]
    speedups: list[float]
    spreads: list
    paths: list
    other: str
    shown: set[int] = field(default_factory=set)  # lengths whose verdict a sentence already printed

    def __post_init__(self):
        self.words = [case_words(s, sp) for s, sp in zip(self.speedups, self.spreads)]
        self.sides = [case_side(s, sp) for s, sp in zip(self.speedups, self.spreads)]

    def sentences(self, every: str, only: str) -> str:
        ns, words, sides = self.ns, self.words, self.sides
        if len(ns) == 1:
            said = (words[0].replace("on par", f"on par with {self.other}", 1) if words[0].startswith("on par")
                    else f"{words[0]} than {self.other}")
            return f"At N={ns[0]}, {only}, Triton is {said}."
        if len(set(sides)) == 1:
            return self._one_side(every)
        changes = [i for i in range(1, len(sides)) if sides[i] != sides[i - 1]]
        if len(changes) == 1:
            return self._one_change(changes[0])
        off = [i for i, sd in enumerate(sides) if sd != "par"]
        if len({sides[i] for i in off}) == 1 and off == list(range(off[0], off[-1] + 1)):
            return self._one_excursion(off)
        return self._back_and_forth()

    @property
    def span(self) -> str:
        return f"{self.words[0]} at N={self.ns[0]} and {self.words[-1]} at N={self.ns[-1]}"

    def edges(self) -> str:
        """The edge verdicts the sentence before did not print, one short sentence each."""
        return "".join(f" At N={self.ns[i]} it is {self.words[i]}." for i in range(len(self.ns))
                       if i not in self.shown and edge_of(self.speedups[i], self.spreads[i]))

    def _one_side(self, every: str) -> str:
        if self.sides[0] == "par":
            return f"Triton is on par with {self.other} at {every} (within 5% either way)." + self.edges()
        word = "faster" if self.sides[0] == "win" else "slower"
        gaps = [max(x, 1 / x) for x in self.speedups]
        f0, f1 = gaps[0], gaps[-1]
        peak = max(range(len(gaps)), key=gaps.__getitem__)
        # A gap widest mid-range that falls back by more than the "on par" band has narrowed again.
        if 0 < peak < len(gaps) - 1 and gaps[peak] / f1 >= EVEN and gaps[peak] / f0 >= TREND:
            trend = f"the gap grows up to N={self.ns[peak]}, then narrows"
        else:
            trend = ("the gap grows with N" if f1 / f0 >= TREND else "the gap narrows with N" if f0 / f1 >= TREND
                     else "the gap holds roughly steady across N")
        return f"Triton is {word} than {self.other} at {every}, {self.span}: {trend}."

    def _one_change(self, i: int) -> str:
        self.shown |= {0, len(self.ns) - 1}
        verb = {"win": "pulls ahead of", "loss": "falls behind", "par": "draws level with"}[self.sides[i]]
        where = ""
        a, b = self.paths[i - 1], self.paths[i]
        if isinstance(a, str) and isinstance(b, str) and a != b:
            where = f", where our dispatcher switches from {_path_name(a)} to {_path_name(b)}"
        return (f"Triton {verb} {self.other} between N={self.ns[i - 1]} and N={self.ns[i]}{where}: {self.span}."
                + self.edges())

    def _one_excursion(self, off: list[int]) -> str:
        """One run of lengths off the band, on par either side of it: not a standing that changes back and forth."""
        word = "faster" if self.sides[off[0]] == "win" else "slower"
        peak = max(off, key=lambda i: max(self.speedups[i], 1 / self.speedups[i]))
        self.shown.add(peak)
        widest = f"{self.words[peak]} at N={self.ns[peak]}" if len(off) > 1 else self.words[peak]
        return (f"Triton is {word} than {self.other} only at N={join(self.ns[i] for i in off)} ({widest}), on par "
                "elsewhere." + self.edges())

    def _back_and_forth(self) -> str:
        ns, words = self.ns, self.words
        groups = {w: [n for n, sd in zip(ns, self.sides) if sd == key]
                  for key, w in (("win", "faster"), ("loss", "slower"), ("par", "on par"))}
        parts = [f"{w} at N={join(g)}" for w, g in groups.items() if g]
        worst = min(range(len(ns)), key=lambda i: self.speedups[i])
        best = max(range(len(ns)), key=lambda i: self.speedups[i])
        self.shown |= {worst, best}
        return (f"Triton's standing against {self.other} changes back and forth with N: {join(parts, 'and')}; from "
                f"{words[worst]} at N={ns[worst]} to {words[best]} at N={ns[best]}.") + self.edges()


def against_naive(speedups: list[float]) -> str:
    """How a kernel compares with naive PyTorch over the lengths tried, trend included ('slower than naive
    PyTorch at every length it tried, by a roughly constant factor'), from its speedups in order of N."""
    if not speedups:
        return "not compared with naive PyTorch at any length"
    sides = {side(s) for s in speedups}
    if sides == {"par"}:
        return "on par with naive PyTorch at every length it tried"
    if len(sides) > 1:
        return "faster than naive PyTorch at some lengths and not at others"
    word = "faster" if sides == {"win"} else "slower"
    gaps = [max(s, 1 / s) for s in speedups]
    trend = ("by a widening margin" if gaps[-1] / gaps[0] >= TREND else "by a narrowing margin"
             if gaps[0] / gaps[-1] >= TREND else "by a roughly constant factor")
    return f"{word} than naive PyTorch at every length it tried, {trend}"


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


class BenchPage(Page):
    slug = "bench"
    phase = "bench"

    @cached_property
    def b(self) -> BenchData:
        return BenchData(self.run)

    # the frames other code (tests, the templates) reads
    @property
    def rows(self) -> pd.DataFrame:
        return self.b.rows

    @property
    def ok(self) -> pd.DataFrame:
        return self.b.ok

    def shapes(self) -> list[tuple]:
        """The shapes swept over N, each with its own section; single shapes are in points_table."""
        return self.b.sweep_shapes()

    def shape_title(self, shape) -> str:
        return f"Batch {shape[0]}, {shape[1]} heads, head_dim {shape[2]}"

    def facets(self, shape) -> list[tuple[str, bool]]:
        return self.b.facets(shape)

    def impls(self) -> list[str]:
        return self.b.impls()

    def latency(self, shape, dtype: str, causal: bool, impl: str) -> pd.Series:
        return self.b.latency(shape, dtype, causal, impl)

    # --- what this run shows ---------------------------------------------------------------

    def _standing(self):
        """Per (shape, dtype, causal, N): Triton's speedup over naive and over the fastest other implementation, each with
        its verdict (case_side: the calls' spread counted), and both calls' loop and device times against SDPA."""
        out = []
        for shape in self.b.shapes():
            for dtype, causal in self.facets(shape):
                tri = self.b.by_n(shape, dtype, causal, FUSED)
                naive = self.b.by_n(shape, dtype, causal, "naive")
                fast = self.b.fastest_rival(shape, dtype, causal)
                for n, t in tri.iterrows():
                    r = {"shape": shape, "dtype": dtype, "causal": causal, "n": n, "naive": None, "naive_side": None,
                         "sdpa": None, "sdpa_side": None, "sdpa_spread": None}
                    if n in naive.index:
                        r["naive"] = naive.loc[n, "latency_ms_median"] / t["latency_ms_median"]
                        r["naive_side"] = case_side(r["naive"], spread(naive.loc[n], t))
                    if n in fast.index:
                        f = fast.loc[n]
                        r["sdpa"] = f["latency_ms_median"] / t["latency_ms_median"]
                        r["sdpa_spread"] = spread(f, t)
                        r["sdpa_side"] = case_side(r["sdpa"], r["sdpa_spread"])
                        r.update(tri_loop=t.get("loop_ms_median"), tri_dev=t["latency_ms_median"],
                                 sdpa_loop=f.get("loop_ms_median"), sdpa_dev=f["latency_ms_median"])
                    out.append(r)
        return pd.DataFrame(out, columns=["shape", "dtype", "causal", "n", "naive", "naive_side", "sdpa", "sdpa_side",
                                          "sdpa_spread", "tri_loop", "tri_dev", "sdpa_loop", "sdpa_dev"])

    def path_sentence(self) -> str:
        """Which kernel our rows ran and whether its code used the tensor cores, from the rows themselves."""
        df = self.run.frame("bench", "rows")
        if df.empty or "kernel_path" not in df:
            return ""
        ours = df[(df["impl"] == FUSED) & (df["status"] == "ok") & df["kernel_path"].notna()]
        if ours.empty:
            return ""
        parts = []
        for path, g in ours.groupby("kernel_path", sort=False):
            tc = g["tensor_cores"].dropna() if "tensor_cores" in g else pd.Series(dtype=bool)
            use = ("with tensor cores in its code" if len(tc) and tc.all() else
                   "without tensor cores in its code" if len(tc) and not tc.any() else
                   f"with tensor cores in {int(tc.sum())} of {len(tc)}" if len(tc) else "tensor-core use not recorded")
            parts.append(f"the {escape.text(path)} kernel in {plural(len(g), 'case')} ({use})")
        return (f"Which kernel ran, from each row: {join(parts)}. The code is read from the compiled kernel that ran "
                "(`kernels/aot.py`), so a GPU where Triton compiles matrix multiplies without tensor cores says so here.")

    def findings_first(self) -> str:
        """At most three sentences: against naive, against SDPA, memory (findings_more says what small sizes do)."""
        st = self._standing()
        if st.empty:
            return f"Our Triton kernel completed no benchmark case in this run ({self._statuses_all(FUSED)})."
        out = []
        nv = st.dropna(subset=["naive"])
        if not nv.empty:
            wins = nv[nv["naive_side"] == "win"]
            top = nv.loc[nv["naive"].idxmax()]
            text = (f"Against naive PyTorch, Triton is faster in {len(wins)} of {len(nv)} cases measured beside it, "
                    f"by up to {fmt.ratio(top['naive'])} ({facet_label(top['dtype'], top['causal'])}, "
                    f"{shape_label(top['shape'])}, N={top['n']})")
            losses = nv[nv["naive_side"] == "loss"]
            if len(losses):
                text += f"; it is slower only at N={join(sorted(set(losses['n'])))}"
            out.append(text + ".")
        sd = st.dropna(subset=["sdpa"])
        if not sd.empty:
            level = sd[sd["sdpa_side"] != "loss"]
            worst = sd.loc[sd["sdpa"].idxmin()]
            text = (f"Against the fastest other implementation of each case, Triton is on par or faster in {len(level)} of "
                    f"{len(sd)} cases; its largest deficit is {case_words(worst['sdpa'], worst['sdpa_spread'])} at "
                    f"N={worst['n']} ({facet_label(worst['dtype'], worst['causal'])}, {shape_label(worst['shape'])}).")
            out.append(text)
        mem = self._memory_slopes()
        if mem:
            out.append(mem)
        return " ".join(out)

    def findings_more(self) -> str:
        """What the largest deficit against SDPA looks like in a loop, and where calls are host-bound."""
        st = self._standing()
        sd = st.dropna(subset=["sdpa"]) if not st.empty else st
        out = []
        if not sd.empty:
            worst = sd.loc[sd["sdpa"].idxmin()]
            loop = self._loop_beside(worst).strip()
            if loop:
                out.append(f"Where ours trails the others most (N={worst['n']}, {facet_label(worst['dtype'], worst['causal'])}, "
                           f"{shape_label(worst['shape'])}), b{loop[1:]}")
        out.append(self._small_n_verdict())
        return " ".join(x for x in out if x)

    @staticmethod
    def _loop_beside(r) -> str:
        """Where a deficit in device time is a case both calls run host-bound (HOST_BOUND) and their loop times
        are on par, that a loop of either call costs the same: the host, not the kernel, sets that pace."""
        vals = [r.get(c) for c in ("tri_loop", "tri_dev", "sdpa_loop", "sdpa_dev")]
        if any(v is None or v != v or not v for v in vals):
            return ""
        tri_loop, tri_dev, sdpa_loop, sdpa_dev = vals
        if tri_loop / tri_dev < HOST_BOUND or sdpa_loop / sdpa_dev < HOST_BOUND or side(sdpa_loop / tri_loop) != "par":
            return ""
        return f" Both calls are host-bound there: in a loop the two are {speedup_words(sdpa_loop / tri_loop)}."

    def _statuses_all(self, impl: str) -> str:
        f = self.rows[self.rows["impl"] == impl]
        return join(f"{n} {s}" for s, n in f["status"].value_counts().items()) or "no rows"

    def _memory_slopes(self) -> str:
        shape = self.shapes()[0]
        dtype, causal = self.facets(shape)[0]
        slopes = {}
        for impl in ("naive", FUSED):
            s = self.b.series(shape, dtype, causal, impl, "peak_mem_bytes")
            slopes[impl] = loglog_slope(s.index, s.values)
        if slopes["naive"] is None or slopes[FUSED] is None:
            return ""
        grows = lambda k: "about as N²" if k > 1.6 else "about linearly in N" if k > 0.6 else "slower than N"  # noqa: E731
        return (f"Peak memory above the inputs grows {grows(slopes['naive'])} for naive PyTorch and "
                f"{grows(slopes[FUSED])} for Triton ({shape_label(shape)}, {facet_label(dtype, causal)}).")

    # The published study the report follows: its transcribed figures, in data/reference/.
    STUDY_REFERENCE = "t4-published"

    def published_vs_naive(self) -> str:
        """The published study's kernel against naive PyTorch at its own shape, in words from its transcribed
        figures (against_naive), for the page's static introduction."""
        refs = [r for r in load_references(self.run.path.parent.parent)
                if r.id == self.STUDY_REFERENCE and r.has("bench")]
        if not refs:
            return "faster or slower than naive PyTorch (its figures are not in data/reference/ here to say which)"
        b = BenchData(refs[0])
        shape = (STUDY["batch"], STUDY["heads"], STUDY["head_dim"])
        tri = b.latency(shape, STUDY["dtype"], STUDY["causal"], FUSED)
        naive = b.latency(shape, STUDY["dtype"], STUDY["causal"], "naive")
        return against_naive([naive[n] / tri[n] for n in tri.index if n in naive.index])

    # --- the run's cases -------------------------------------------------------------------

    def summary(self) -> str:
        data = self.data
        counts = self.rows["status"].value_counts()
        status = join(f"{counts[s]} {s}" for s in ("ok", "oom", "unsupported", "error", "skipped") if s in counts)
        ns = self.b.seq_lens()
        points = self.b.point_shapes()
        single = (f", and single shapes {join(f'{shape_label(p)} at N={self.b.seq_lens(p)[0]}' for p in points)}"
                  if points else "")
        text = (f"This run measured {len(self.rows)} cases ({status}) of "
                f"{join(impl_label(i) for i in self.impls())}, at seq_len {ns[0]} to {ns[-1]}: shapes "
                f"{join(shape_label(s) for s in self.shapes())} over N{single}, in "
                f"{join(dtype_short(d) for d in dict.fromkeys(self.rows['dtype']))}, causal and not.")
        text += self._clock_sentence() + self._clock_gap_sentence()
        text += f'\n\n??? info "How each case was timed"\n    {escape.text(data.timing_method)}\n'
        text += "".join(map(escape.note, data.notes))
        return text

    def _clock_sentence(self) -> str:
        """The SM clock seen while the device time was measured, where the run recorded it: the spread of
        the cases' medians, then the single samples' extremes, which one call's wake-up or a power-limit
        dip can set alone."""
        ok = self.ok
        if "sm_clock_mhz" not in ok or ok["sm_clock_mhz"].isna().all():
            return " The SM clock during the timing was not recorded in this run."
        med = ok["sm_clock_mhz"].dropna()
        lo = ok["sm_clock_min_mhz"].dropna().min() if "sm_clock_min_mhz" in ok else float("nan")
        hi = ok["sm_clock_max_mhz"].dropna().max() if "sm_clock_max_mhz" in ok else float("nan")
        lo = med.min() if lo != lo else min(lo, med.min())
        hi = med.max() if hi != hi else max(hi, med.max())
        a, b = fmt.num(med.min(), 4), fmt.num(med.max(), 4)
        text = (f" While the device time was measured, each case's median SM clock was {a} MHz" if a == b else
                f" While the device time was measured, each case's median SM clock lay between {a} and {b} MHz")
        x, y = fmt.num(lo, 4), fmt.num(hi, 4)
        if (x, y) != (a, b):
            text += f", and single calls saw {x} to {y} MHz"
        return text + " (clocks are read, never set)."

    def _clock_gap_sentence(self) -> str:
        """Where our kernel and the fastest other implementation it is compared with ran at median SM clocks more than
        CLOCK_GAP apart (clocks are read, never set), how many such comparisons there are and the widest."""
        if "sm_clock_mhz" not in self.ok:
            return ""
        pairs = []
        for shape in self.b.shapes():
            for dtype, causal in self.facets(shape):
                f = self.b.facet_rows(self.ok, shape, dtype, causal)
                ours = f[f["impl"] == FUSED].set_index("seq_len")["sm_clock_mhz"]
                fast = self.b.fastest_rival(shape, dtype, causal)
                for n in ours.index.intersection(fast.index):
                    a, b = ours[n], fast.loc[n, "sm_clock_mhz"]
                    if (gap := clock_gap(a, b)) is not None:
                        pairs.append((gap, a, b, shape, dtype, causal, int(n), self._sdpa_label(fast.loc[n])))
        apart = [x for x in pairs if x[0] > CLOCK_GAP]
        if not apart:
            return ""
        _, a, b, shape, dtype, causal, n, who = max(apart, key=lambda x: x[0])
        return (f" In {len(apart)} of {plural(len(pairs), 'comparison')} with the fastest other implementation the two calls' "
                f"median SM clocks differ by more than {fmt.pct(100 * CLOCK_GAP, 2)}. The widest gap is at "
                f"{facet_label(dtype, causal)}, {shape_label(shape)}, N={n}, ours at {fmt.num(a, 4)} MHz against "
                f"{who}'s {fmt.num(b, 4)} MHz: a compute-bound call's time scales about inversely with its clock, so "
                "those ratios carry the gap.")

    def backend_choice(self) -> str:
        """Which backend PyTorch chose when none was forced."""
        auto = self.ok[self.ok["impl"] == "sdpa"]
        if auto.empty:
            return "No case of SDPA without a forced backend ran, so PyTorch's own choice is not known for this run."
        parts = []
        for backend, grp in auto.groupby("backend_used", sort=False):
            where = ""
            if len(grp) < len(auto):
                facets = dict.fromkeys(f"{shape_label(s)} {facet_label(dt, c)}"
                                       for s, dt, c in zip(grp["shape"], grp["dtype"], grp["causal"]))
                where = f" ({join(facets)})"
            parts.append(f"**{escape.text(backend)}** in {len(grp)} of {len(auto)} cases{where}")
        text = (f"With no backend forced, PyTorch chose {join(parts)}. "
                f"The choice was read with {_call_then_words(self.data.backend_choice_method)}.")
        return text + self._choice_counted_once(auto)

    def _choice_counted_once(self, auto: pd.DataFrame) -> str:
        """How many of PyTorch's choices ran a backend that was also timed forced: those rows time the same
        kernel twice, and the comparisons with the fastest other implementation use the forced row alone."""
        timed = auto[auto["latency_ms_median"].notna()]
        twice = int((~timed.index.isin(distinct_sdpa(self.ok).index)).sum())
        if not twice:
            return ""
        rest = len(timed) - twice
        where = "In every one of them" if not rest else f"In {twice} of them"
        text = (f" {where}, the backend it chose was also timed forced, so the two rows are one kernel timed twice: "
                "the comparisons with the fastest other implementation below count that kernel once, by its forced run.")
        if rest:
            text += (f" In the other {rest}, PyTorch's choice is compared as it is "
                     "(its backend was not timed forced there, or is not known).")
        return text

    # --- per shape -------------------------------------------------------------------------

    def findings(self, shape) -> str:
        """Bullets per dtype and masking: Triton against naive and against the fastest other implementation."""
        out = []
        for dtype, causal in self.facets(shape):
            tri = self.latency(shape, dtype, causal, FUSED)
            if tri.empty:
                out.append(f"- **{facet_label(dtype, causal)}.** No Triton case ran "
                           f"({self._statuses(shape, dtype, causal, FUSED)}).")
                continue
            parts = []
            rows = self.b.by_n(shape, dtype, causal, FUSED)
            paths = self.b.paths(shape, dtype, causal)

            def gap(other: pd.DataFrame, who: str, twins: bool = False) -> str:
                common = [n for n in tri.index if n in other.index]
                same = None
                if twins:  # the portable row and ours, where flash_attention took that very kernel
                    same = [other.loc[n, "kernel_path"] if self._one_kernel(rows.loc[n], other.loc[n]) else None
                            for n in common]
                return describe_gap(common, [other.loc[n, "latency_ms_median"] / tri[n] for n in common], who,
                                    spreads=[spread(other.loc[n], rows.loc[n]) for n in common],
                                    paths=[paths.get(n) for n in common], same=same)

            parts.append(gap(self.b.by_n(shape, dtype, causal, "naive"), "naive PyTorch"))
            parts.append(self._oom_note(shape, dtype, causal, "naive", tri))
            fast = self.b.fastest_rival(shape, dtype, causal)
            common = [n for n in tri.index if n in fast.index]
            names = list(dict.fromkeys(self._sdpa_label(fast.loc[n]) for n in common))
            who = (f"the fastest other implementation ({names[0]} at every N)" if len(names) == 1
                   else f"the fastest other implementation ({join(names)}, depending on N)")
            parts.append(gap(fast, who))
            port = self.b.by_n(shape, dtype, causal, "triton-portable")
            if any(n in port.index for n in tri.index):  # what the path flash_attention chose buys over the portable
                parts.append(gap(port, "our own kernel held to the portable path", twins=True))
            out.append(f"- **{facet_label(dtype, causal)}.** " + " ".join(p for p in parts if p))
        return "\n".join(out) + "\n"

    @staticmethod
    def _one_kernel(a, b) -> bool:
        """Whether two of our rows ran one kernel: the same path, Gluon step and tile config. Their ratio is
        then two samples of one kernel, not a standing."""
        def key(r):
            step = r.get("kernel_step")
            return (r.get("kernel_path"), step if isinstance(step, str) else None, r.get("kernel_config"))
        ka, kb = key(a), key(b)
        return isinstance(ka[0], str) and bool(ka[2]) and ka == kb

    @staticmethod
    def _sdpa_label(row) -> str:
        """An SDPA row's name; PyTorch's choice with the backend it ran, where known, since it stands in a
        comparison only when that backend has no forced row of its own there."""
        used = row.get("backend_used")
        if row["impl"] == "sdpa" and isinstance(used, str) and used != "unknown":
            return f"SDPA (PyTorch's choice: {escape.text(used)})"
        return impl_label(row["impl"])

    def _statuses(self, shape, dtype, causal, impl) -> str:
        f = self.b.facet_rows(self.rows, shape, dtype, causal)
        return join(f"{n} {s}" for s, n in f[f["impl"] == impl]["status"].value_counts().items()) or "no rows"

    def _oom_note(self, shape, dtype, causal, impl, tri: pd.Series) -> str:
        f = self.b.facet_rows(self.rows, shape, dtype, causal)
        oom = sorted(f[(f["impl"] == impl) & (f["status"] == "oom")]["seq_len"])
        if not oom:
            return ""
        label = impl_label(impl)
        text = f"{label[0].upper()}{label[1:]} ran out of memory at N={join(oom)}"
        where = [n for n in oom if n in tri.index]
        if where:
            text += f", where Triton ran (in {fmt.ms(tri[where[-1]])} at N={where[-1]})"
        return text + "."

    def memory_finding(self, shape) -> str:
        """How peak memory above the inputs grows with N, naive against Triton, on the first facet."""
        dtype, causal = self.facets(shape)[0]
        slopes, peaks = {}, {}
        for impl in ("naive", FUSED):
            s = self.b.series(shape, dtype, causal, impl, "peak_mem_bytes")
            s = s[s > 0]
            slopes[impl] = loglog_slope(s.index, s.values)
            peaks[impl] = s
        if slopes["naive"] is None or slopes[FUSED] is None:
            return (f"Too few peak-memory measurements of naive PyTorch and Triton ({facet_label(dtype, causal)}) "
                    "to say how they grow with N.")
        text = (f"Peak memory above the inputs ({facet_label(dtype, causal)}) grows about as "
                f"N<sup>{slopes['naive']:.2f}</sup> for naive PyTorch and N<sup>{slopes[FUSED]:.2f}</sup> for "
                f"Triton.")
        common = [n for n in peaks["naive"].index if n in peaks[FUSED].index]
        if common:
            n = common[-1]
            a, b = peaks["naive"][n], peaks[FUSED][n]
            rel = (f"{fmt.ratio(a / b)} Triton's {fmt.bytes_(b)}" if a >= b
                   else f"less than Triton's {fmt.bytes_(b)}")
            text += f" At N={n}, the longest both ran, naive needed {fmt.bytes_(a)}, {rel}."
        return text

    # --- small sizes: host, device and loop time -------------------------------------------

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
        return c[c["loop_over_device"] >= HOST_BOUND]

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
        return (f"Up to N={n_max}, some calls are host-bound: a loop of them takes longer than the GPU's own time "
                f"({join(impl_label(i) for i in dict.fromkeys(hb.sort_values('seq_len')['impl']))}).")

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
               f"than {fmt.pct(100 * (HOST_BOUND - 1), 2)}, this page calls the call host-bound at that size."]
        if hb.empty:
            out.append(f"No case is host-bound here: at every N from {ns[0]} to {ns[-1]} the loop runs within that "
                       "margin of the device time, so the device times on this page are what a loop sees.")
            return " ".join(out)
        by_impl = hb.groupby("impl")["seq_len"].max().sort_values()
        per = [f"{impl_label(i)} up to N={int(n)}" for i, n in by_impl.items()]
        out.append(f"Host-bound cases: {join(per)} (in at least one dtype and masking).")
        worst = hb.loc[hb["loop_over_device"].idxmax()]
        why = (f"The most host-bound is {impl_label(worst['impl'])} at N={worst['seq_len']} "
               f"({facet_label(worst['dtype'], worst['causal'])}, {shape_label(worst['shape'])}): "
               f"{fmt.ms(worst['loop_ms'])} per call in a loop against {fmt.ms(worst['latency_ms_median'])} of "
               "device time")
        out.append(why + host_beside_loop(worst["host_ms"], worst["loop_ms"]) + ".")
        free = [n for n in ns if n > hb["seq_len"].max()]
        if free:
            out.append(f"From N={free[0]} on, every implementation's loop runs within the margin of its device "
                       "time: the GPU sets the pace, and the speedups below are what a loop sees.")
        fused = hb[hb["impl"] == FUSED]
        if not fused.empty:
            n = int(fused["seq_len"].max())
            out.append(f"Up to N={n}, the ratios to Triton below compare device times that a loop of Triton calls "
                       "does not reach; the table of host, device and loop time has them side by side.")
        return " ".join(out)

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
                 "verdict": "host-bound" if r["loop_over_device"] >= HOST_BOUND else "GPU-bound"}
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
                           "calls runs at the GPU's pace; above the dashed line the host sets the pace. "
                           f"{shape_label(shape)}; rows: dtype, columns: masking.", height=300 * nrows + 140)

    # A first call that took less than this cannot have compiled our kernel: compiling one config takes
    # seconds (kernels/attention/portable.py), loading a compiled one from Triton's on-disk cache milliseconds.
    COMPILE_S = 0.5

    def first_call_note(self) -> str:
        """What the untimed first call of each Triton case cost, and, where it was too short to compile,
        that the kernel came from Triton's cache. Autotuning is not named: flash_attention's rows record the
        tile config that ran, not that an autotuner chose it."""
        t = self.rows[(self.rows["impl"] == FUSED) & self.rows["warmup_s"].notna()]
        if t.empty:
            return ""
        worst = t.loc[t["warmup_s"].idxmax()]
        text = (f"The first call of each Triton case (compilation, or loading the compiled kernel from Triton's "
                f"cache; excluded from every number above) took {fmt.num(t['warmup_s'].sum())} s over the {len(t)} "
                f"Triton cases, at most {fmt.num(worst['warmup_s'])} s ({shape_label(worst['shape'])}, "
                f"{facet_label(worst['dtype'], worst['causal'])}, N={worst['seq_len']}).")
        quick = int((t["warmup_s"] < self.COMPILE_S).sum())
        limit = f"under {fmt.num(self.COMPILE_S, 1)} s, too short to compile a kernel (compiling one takes seconds)"
        if quick == len(t):
            text += f" Every one of them took {limit}, so the kernels evidently came from Triton's cache."
        elif quick:
            text += f" {quick} of them took {limit}: those kernels evidently came from Triton's cache."
        return text

    # --- tables ----------------------------------------------------------------------------

    def speedup_table(self, shape) -> str:
        rows = []
        for dtype, causal in self.facets(shape):
            tri = self.latency(shape, dtype, causal, FUSED)
            naive = self.latency(shape, dtype, causal, "naive")
            fast = self.b.fastest_rival(shape, dtype, causal)
            paths = self.b.paths(shape, dtype, causal)
            tri_rows = self.b.by_n(shape, dtype, causal, FUSED)
            naive_rows = self.b.by_n(shape, dtype, causal, "naive")
            for n in self.b.seq_lens(shape):
                status = lambda impl: self.b.status_at(shape, dtype, causal, impl, n)  # noqa: E731
                t = tri.get(n)
                r = {"facet": facet_label(dtype, causal), "n": n, "tri": fmt.ms(t) if t else status(FUSED),
                     "path": path_label(paths[n]) if n in paths else "n/a"}
                r["naive"] = fmt.ms(naive[n]) if n in naive.index else status("naive")
                r["vs_naive"] = (case_words(naive[n] / t, spread(naive_rows.loc[n], tri_rows.loc[n]))
                                 if t and n in naive.index else "n/a")
                if n in fast.index:
                    r["sdpa"] = f"{fmt.ms(fast.loc[n, 'latency_ms_median'])} ({self._sdpa_label(fast.loc[n])})"
                    f = fast.loc[n]
                    r["vs_sdpa"] = (case_words(f["latency_ms_median"] / t, spread(f, tri_rows.loc[n])) if t
                                    else "n/a")
                else:
                    r["sdpa"], r["vs_sdpa"] = "none ran", "n/a"
                rows.append(r)
        return table_html(pd.DataFrame(rows), {
            "facet": "dtype, mask", "n": "N", "tri": "Triton (median device time)", "path": "Triton's path",
            "naive": "naive (median)",
            "vs_naive": "Triton vs naive", "sdpa": "fastest other (median)", "vs_sdpa": "Triton vs fastest other"})

    def points_finding(self) -> str:
        """The single shapes in one sentence: how many cases ours is on par or faster than the fastest other
        implementation, and the worst case; '' where the run has none."""
        t = self._points()
        t = t[t["ratio"].notna()]
        if t.empty:
            return ""
        level = t[t["side"] != "loss"]
        worst = t.loc[t["ratio"].idxmin()]
        return (f"At the single shapes, ours is on par with or faster than the fastest other implementation in "
                f"{len(level)} of {len(t)} cases; its lowest speed ratio is {fmt.ratio(worst['ratio'])}, "
                f"{facet_label(worst['dtype'], worst['causal'])} at {shape_label(worst['shape'])}, N={worst['n']}, "
                f"against {worst['who']}.")

    def _points(self) -> pd.DataFrame:
        rows = []
        for shape in self.b.point_shapes():
            n = self.b.seq_lens(shape)[0]
            for dtype, causal in self.facets(shape):
                tri = self.b.by_n(shape, dtype, causal, FUSED)
                fast = self.b.fastest_rival(shape, dtype, causal)
                r = {"shape": shape, "n": n, "dtype": dtype, "causal": causal, "ours": None, "fast": None, "who": None,
                     "ratio": None, "side": None, "words": "n/a", "path": None}
                if n in tri.index:
                    r["ours"] = tri.loc[n, "latency_ms_median"]
                    r["path"] = self.b.paths(shape, dtype, causal).get(n)
                if n in fast.index:
                    f = fast.loc[n]
                    r["fast"], r["who"] = f["latency_ms_median"], self._sdpa_label(f)
                    if r["ours"]:
                        sp = spread(f, tri.loc[n])
                        r["ratio"] = f["latency_ms_median"] / r["ours"]
                        r["side"], r["words"] = case_side(r["ratio"], sp), case_words(r["ratio"], sp)
                rows.append(r)
        return pd.DataFrame(rows, columns=["shape", "n", "dtype", "causal", "ours", "fast", "who", "ratio", "side",
                                           "words", "path"])

    def points_table(self) -> str:
        """Each single shape: ours, the fastest other implementation and the ratio, per dtype and mask."""
        t = self._points()
        if t.empty:
            return ""
        out = pd.DataFrame({
            "shape": [f"{shape_label(s)}, N={n}" for s, n in zip(t["shape"], t["n"])],
            "facet": [facet_label(d, c) for d, c in zip(t["dtype"], t["causal"])],
            "ours": [fmt.ms(x) if x else "not measured" for x in t["ours"]],
            "path": [path_label(p) if isinstance(p, str) else "n/a" for p in t["path"]],
            "fast": [f"{fmt.ms(x)} ({w})" if x else "none ran" for x, w in zip(t["fast"], t["who"])],
            "words": t["words"]})
        return table_html(out, {"shape": "Shape", "facet": "dtype, mask", "ours": "Triton (median device time)",
                                "path": "Triton's path", "fast": "fastest other (median)",
                                "words": "Triton vs fastest other"})

    def failures_table(self) -> str:
        bad = self.rows[self.rows["status"] != "ok"]
        if bad.empty:
            return "Every case ran."
        out = []
        for (impl, status), grp in bad.groupby(["impl", "status"], sort=False):
            reasons = grp["reason"].fillna("").map(lambda r: r if status in ("unsupported", "error", "skipped") else "")
            for reason, g in grp.groupby(reasons, sort=False):
                masks = sorted({"causal" if c else "non-causal" for c in g["causal"]}, reverse=True)
                where = (f"{'; '.join(shape_label(s) for s in dict.fromkeys(g['shape']))}; "
                         f"N={join(sorted(set(g['seq_len'])))}; "
                         f"{join(dtype_short(d) for d in dict.fromkeys(g['dtype']))}; {join(masks)}")
                if status == "oom":
                    asked = g["requested_bytes"].dropna()
                    reason = f"asked for up to {fmt.bytes_(asked.max())}" if len(asked) else "out of memory"
                out.append({"impl": impl_label(impl), "status": status, "n": len(g), "where": where, "reason": reason})
        return table_html(pd.DataFrame(out), {"impl": "Implementation", "status": "Status", "n": "Cases",
                                              "where": "Where", "reason": "Reason"})

    # --- figures ---------------------------------------------------------------------------

    def _grid(self, shape):
        facets = self.facets(shape)
        dtypes = list(dict.fromkeys(d for d, _ in facets))
        causals = sorted({c for _, c in facets})
        fig = make_subplots(rows=len(dtypes), cols=len(causals), shared_xaxes=True, shared_yaxes="all",
                            subplot_titles=[facet_label(d, c) for d in dtypes for c in causals],
                            horizontal_spacing=0.06, vertical_spacing=0.14)
        # Facet titles centred above each panel, in the gap the vertical spacing leaves.
        fig.for_each_annotation(lambda a: a.update(font=dict(size=12), yshift=4))
        cells = [(d, c, i + 1, j + 1) for i, d in enumerate(dtypes) for j, c in enumerate(causals)]
        return fig, cells, len(dtypes)

    def _metric_figure(self, shape, name: str, column: str, ytitle: str, fmt_hover: str, caption: str,
                       scale: float = 1.0, errors: bool = False, oom_markers: bool = False, si_unit: str = "") -> str:
        fig, cells, nrows = self._grid(shape)
        shown = set()
        ns = self.b.seq_lens(shape)
        ys = []
        for dtype, causal, r, c in cells:
            okf = self.b.facet_rows(self.ok, shape, dtype, causal)
            allf = self.b.facet_rows(self.rows, shape, dtype, causal)
            for impl in self.impls():
                g = okf[(okf["impl"] == impl) & okf[column].notna() & (okf[column] > 0)].sort_values("seq_len")
                label = escape.plot(impl_label(impl))
                color = impl_color(impl)
                if not g.empty:
                    y = g[column] * scale
                    ys += list(y)
                    trace = dict(x=g["seq_len"], y=y, mode="lines+markers", name=label, legendgroup=impl,
                                 showlegend=impl not in shown,
                                 line=dict(color=color, dash=IMPL_DASH.get(impl, "solid")),
                                 hovertemplate=f"{label}<br>N=%{{x}}<br>{fmt_hover}<extra></extra>")
                    if errors:
                        trace["error_y"] = dict(type="data", symmetric=False, thickness=1, width=3,
                                                array=(g["latency_ms_p90"] - g["latency_ms_median"]) * scale,
                                                arrayminus=(g["latency_ms_median"] - g["latency_ms_p10"]) * scale)
                    fig.add_trace(go.Scatter(**trace), row=r, col=c)
                    shown.add(impl)
                if oom_markers:
                    o = allf[(allf["impl"] == impl) & (allf["status"] == "oom") & allf["requested_bytes"].notna()]
                    if not o.empty:
                        ys += list(o["requested_bytes"] * scale)
                        fig.add_trace(go.Scatter(
                            x=o["seq_len"], y=o["requested_bytes"] * scale, mode="markers", name=f"{label}: OOM",
                            legendgroup=impl, showlegend=False,
                            marker=dict(symbol="x", size=11, color=color, line=dict(width=2, color=color)),
                            hovertemplate=f"{label}<br>N=%{{x}}<br>out of memory; asked for %{{y:.3s}}B<extra></extra>"),
                            row=r, col=c)
        mem = self.run.manifest.device.memory_bytes if self.run.manifest.device else None
        if oom_markers and mem:
            ys.append(mem * scale)
            for _, _, r, c in cells:
                fig.add_hline(y=mem * scale, line_dash="dash", line_color=PALETTE[7], line_width=1, row=r, col=c)
        ticks = log_ticks(ys, si_unit, si=bool(si_unit))
        for _, _, r, c in cells:
            fig.update_yaxes(title_text=ytitle if c == 1 else None, type="log", row=r, col=c, **ticks)
            fig.update_xaxes(type="log", tickvals=ns, ticktext=[str(n) for n in ns],
                             title_text="seq_len N" if r == nrows else None, row=r, col=c)
        return self.figure(f"{name}-{'x'.join(map(str, shape))}", fig,
                           f"{caption} {shape_label(shape)}; rows: dtype, columns: masking.", height=300 * nrows + 140)

    def latency_figure(self, shape) -> str:
        return self._metric_figure(shape, "latency", "latency_ms_median", "device time (ms)",
                                   "%{y:.3g} ms (median)",
                                   "Forward latency (median device time) against sequence length, log-log; bars span "
                                   "p10 to p90 of the timed calls. A missing point did not run (see the table of cases "
                                   "that did not).", errors=True)

    def tflops_figure(self, shape) -> str:
        return self._metric_figure(shape, "tflops", "tflops", "throughput (TFLOP/s)", "%{y:.3g} TFLOP/s",
                                   "Throughput against sequence length: 4·B·H·N²·d FLOP per call (halved when causal) "
                                   "over the median device time.")

    def memory_figure(self, shape) -> str:
        return self._metric_figure(shape, "memory", "peak_mem_bytes", "peak above inputs (bytes)", "%{y:.3s}B",
                                   "Peak memory above the inputs (statistics reset after warm-up) against sequence "
                                   "length, log-log; × marks an out-of-memory case at the size it asked for; the "
                                   "dashed line is the device's memory.", oom_markers=True, si_unit="B")
