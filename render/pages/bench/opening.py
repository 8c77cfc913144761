"""What this run shows: the page's opening findings, and the published study's kernel against naive PyTorch."""
from __future__ import annotations

import pandas as pd

from ... import fmt
from ...bench_data import BenchData
from ...runs import load_references
from ...vocab import STUDY, facet_label, host_bound, join, plural, shape_label, side, speedup_words
from .common import FUSED, BenchSection, host_ms
from .words import against_naive, band_words, case_side, loglog_slope, spread


class Opening(BenchSection):
    """What this run shows, in the page's first paragraphs."""

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
                                 sdpa_loop=f.get("loop_ms_median"), sdpa_dev=f["latency_ms_median"],
                                 tri_host=host_ms(t), sdpa_host=host_ms(f))
                    out.append(r)
        return pd.DataFrame(out, columns=["shape", "dtype", "causal", "n", "naive", "naive_side", "sdpa", "sdpa_side",
                                          "sdpa_spread", "tri_loop", "tri_dev", "sdpa_loop", "sdpa_dev", "tri_host",
                                          "sdpa_host"])

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
            out.append(self._against_fastest(sd))
        mem = self._memory_slopes()
        if mem:
            out.append(mem)
        return " ".join(out)

    @staticmethod
    def _against_fastest(sd: pd.DataFrame) -> str:
        """Ours against the fastest other implementation, counted by the medians: the headline must not lean on the
        calls' spread, which the tables weigh case by case (words.edge_of)."""
        sides = sd["sdpa"].map(side)
        worst = sd.loc[sd["sdpa"].idxmin()]
        text = (f"Against the fastest other implementation of each case, Triton is on par or faster in "
                f"{int((sides != 'loss').sum())} of {len(sd)} cases by the medians ({band_words()} counts as on par)")
        least = "its largest deficit is" if sides.eq("loss").any() else "where it stands lowest, it is"
        text += (f"; {least} {speedup_words(worst['sdpa'])} at N={worst['n']} "
                 f"({facet_label(worst['dtype'], worst['causal'])}, {shape_label(worst['shape'])})")
        edge = int((sd["sdpa_side"] != sides).sum())
        if edge:
            text += (f"; in {plural(edge, 'case')} past the band by the medians, both ends of the calls' spread fall "
                     "inside it, and the tables below call those on par at the edge")
        return text + "."

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
        """Where a deficit in device time is a case both calls run host-bound (vocab.host_bound) and their loop times
        are on par, that a loop of either call costs the same: the host, not the kernel, sets that pace."""
        vals = [r.get(c) for c in ("tri_loop", "tri_dev", "sdpa_loop", "sdpa_dev")]
        if any(v is None or v != v or not v for v in vals):
            return ""
        tri_loop, tri_dev, sdpa_loop, sdpa_dev = vals
        paced = [host_bound(dev, loop, r.get(host)) for dev, loop, host in
                 ((tri_dev, tri_loop, "tri_host"), (sdpa_dev, sdpa_loop, "sdpa_host"))]
        if not all(paced) or side(sdpa_loop / tri_loop) != "par":
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
