"""Benchmarks: latency, TFLOP/s and peak memory over seq_len, and where our kernel wins or loses."""
from __future__ import annotations

import math
from functools import cached_property

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import escape, fmt
from ..figures import PALETTE
from ..tables import table_html
from .base import Page

IMPL_LABELS = {
    "naive": "naive PyTorch", "sdpa-flash": "SDPA flash", "sdpa-cudnn": "SDPA cuDNN",
    "sdpa-efficient": "SDPA mem-efficient", "sdpa-math": "SDPA math", "sdpa": "SDPA (PyTorch's choice)",
    "triton": "Triton (ours)", "triton-portable": "Triton (ours, portable path)",
}
IMPL_COLORS = {
    "naive": PALETTE[7], "sdpa-flash": PALETTE[0], "sdpa-cudnn": PALETTE[5], "sdpa-efficient": PALETTE[2],
    "sdpa-math": PALETTE[4], "sdpa": PALETTE[1], "triton": PALETTE[3],
    "triton-portable": PALETTE[3],  # our colour, dashed: the same kernel family on its other path
}
IMPL_DASH = {"sdpa": "dot", "triton-portable": "dash"}
SHORT = {"float16": "fp16", "bfloat16": "bf16"}

# Two latencies within this factor either way are "on par"; timing noise on a busy GPU is a few percent.
EVEN = 1.05
# A speedup that changes by less than this factor from the shortest to the longest N "holds steady".
TREND = 1.15


def impl_label(impl: str) -> str:
    return IMPL_LABELS.get(impl, impl)


def shape_label(shape) -> str:
    b, h, d = shape
    return f"B={b}, H={h}, d={d}"


def facet_label(dtype: str, causal: bool) -> str:
    return f"{SHORT.get(dtype, dtype)}, {'causal' if causal else 'non-causal'}"


def join(items) -> str:
    items = [str(i) for i in items]
    if not items:
        return ""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def speedup_words(s: float) -> str:
    """How Triton compares when the other takes s times as long."""
    if s >= EVEN:
        return f"{fmt.ratio(s)} faster"
    if s <= 1 / EVEN:
        return f"{fmt.ratio(1 / s)} slower"
    return f"on par ({fmt.ratio(s)})"


def loglog_slope(x, y) -> float | None:
    """Least-squares exponent k of y ~ x^k, or None with fewer than two usable points."""
    pts = [(math.log(a), math.log(b)) for a, b in zip(x, y) if a and b and a > 0 and b > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return None if sxx == 0 else sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def describe_gap(ns: list[int], speedups: list[float], other: str) -> str:
    """One sentence on Triton against `other` over N, chosen from the speedups (other time / Triton time)."""
    if not ns:
        return f"No sequence length has a measurement of both Triton and {other}."
    if len(ns) == 1:
        return f"At N={ns[0]}, the only length both ran, Triton is {speedup_words(speedups[0])} than {other}."
    first, last = speedups[0], speedups[-1]
    span = f"{speedup_words(first)} at N={ns[0]} and {speedup_words(last)} at N={ns[-1]}"
    if all(s >= EVEN for s in speedups):
        head = f"Triton is faster than {other} at every N measured: {span}"
    elif all(s <= 1 / EVEN for s in speedups):
        head = f"Triton is slower than {other} at every N measured: {span}"
    else:
        sides = ["win" if s >= EVEN else "loss" if s <= 1 / EVEN else "par" for s in speedups]
        changes = [i for i in range(1, len(sides)) if sides[i] != sides[i - 1]]
        words = ", ".join(f"{speedup_words(s)} at N={n}" for n, s in zip(ns, speedups))
        if len(changes) == 1:
            i = changes[0]
            verb = {"win": "pulls ahead of", "loss": "falls behind", "par": "draws level with"}[sides[i]]
            return f"Triton {verb} {other} between N={ns[i - 1]} and N={ns[i]} ({words})."
        return f"Triton's standing against {other} changes with N: {words}."
    f0, f1 = max(first, 1 / first), max(last, 1 / last)
    if f1 / f0 >= TREND:
        trend = "the gap grows with N"
    elif f0 / f1 >= TREND:
        trend = "the gap narrows with N"
    else:
        trend = "the gap holds roughly steady across N"
    return f"{head}; {trend}."


class BenchPage(Page):
    slug = "bench"
    phase = "bench"

    # --- frames ----------------------------------------------------------------------------

    @cached_property
    def rows(self) -> pd.DataFrame:
        df = self.run.frame("bench", "rows")
        df["shape"] = list(zip(df["batch"], df["heads"], df["head_dim"]))
        return df

    @cached_property
    def ok(self) -> pd.DataFrame:
        return self.rows[self.rows["status"] == "ok"]

    def shapes(self) -> list[tuple]:
        return list(dict.fromkeys(self.rows["shape"]))

    def shape_title(self, shape) -> str:
        return f"Batch {shape[0]}, {shape[1]} heads, head_dim {shape[2]}"

    def facets(self, shape) -> list[tuple[str, bool]]:
        sub = self.rows[self.rows["shape"] == shape]
        return [(dt, c) for dt in dict.fromkeys(sub["dtype"]) for c in sorted(set(sub["causal"]))]

    def impls(self) -> list[str]:
        present = set(self.rows["impl"])
        return [i for i in IMPL_LABELS if i in present] + sorted(present - set(IMPL_LABELS))

    def facet_rows(self, df: pd.DataFrame, shape, dtype: str, causal: bool) -> pd.DataFrame:
        return df[(df["shape"] == shape) & (df["dtype"] == dtype) & (df["causal"] == causal)]

    def latency(self, shape, dtype: str, causal: bool, impl: str) -> pd.Series:
        """Median latency by seq_len, ok rows only."""
        f = self.facet_rows(self.ok, shape, dtype, causal)
        return f[f["impl"] == impl].set_index("seq_len")["latency_ms_median"].sort_index()

    def fastest_sdpa(self, shape, dtype: str, causal: bool) -> pd.DataFrame:
        """Per seq_len, the quickest ok SDPA row (forced backend or PyTorch's choice)."""
        f = self.facet_rows(self.ok, shape, dtype, causal)
        f = f[f["impl"].str.startswith("sdpa")]
        if f.empty:
            return f
        return f.loc[f.groupby("seq_len")["latency_ms_median"].idxmin()].set_index("seq_len").sort_index()

    # --- prose -----------------------------------------------------------------------------

    def summary(self) -> str:
        data = self.data
        counts = self.rows["status"].value_counts()
        status = join(f"{counts[s]} {s}" for s in ("ok", "oom", "unsupported", "error") if s in counts)
        ns = sorted(set(self.rows["seq_len"]))
        text = (f"This run measured {len(self.rows)} cases ({status}): "
                f"{join(impl_label(i) for i in self.impls())}; "
                f"seq_len {ns[0]} to {ns[-1]}; shapes {join(shape_label(s) for s in self.shapes())}; "
                f"{join(SHORT.get(d, d) for d in dict.fromkeys(self.rows['dtype']))}; "
                f"{join(sorted({'causal' if c else 'non-causal' for c in self.rows['causal']}))}. "
                f"Timing: {escape.text(data.timing_method)}.")
        for note in data.notes:
            text += f"\n\n!!! note\n    {escape.text(note)}"
        return text

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
        return (f"With no backend forced, PyTorch chose {join(parts)}. "
                f"The choice was read with {escape.text(self.data.backend_choice_method)}.")

    def findings(self, shape) -> str:
        """Bullets per dtype and masking: Triton against naive and against the fastest SDPA backend."""
        out = []
        for dtype, causal in self.facets(shape):
            tri = self.latency(shape, dtype, causal, "triton")
            parts = []
            naive = self.latency(shape, dtype, causal, "naive")
            common = [n for n in tri.index if n in naive.index]
            parts.append(describe_gap(common, [naive[n] / tri[n] for n in common], "naive PyTorch"))
            parts.append(self._oom_note(shape, dtype, causal, "naive", tri))
            fast = self.fastest_sdpa(shape, dtype, causal)
            common = [n for n in tri.index if n in fast.index]
            names = list(dict.fromkeys(impl_label(fast.loc[n, "impl"]) for n in common))
            who = (f"the fastest SDPA backend ({names[0]} at every N)" if len(names) == 1
                   else f"the fastest SDPA backend ({join(names)}, depending on N)")
            parts.append(describe_gap(common, [fast.loc[n, "latency_ms_median"] / tri[n] for n in common], who))
            port = self.latency(shape, dtype, causal, "triton-portable")
            common = [n for n in tri.index if n in port.index]
            if common:  # what the path flash_attention chose here buys over the portable kernel
                parts.append(describe_gap(common, [port[n] / tri[n] for n in common],
                                          "our own kernel held to the portable path"))
            if tri.empty:
                parts = [f"No Triton case ran ({self._statuses(shape, dtype, causal, 'triton')})."]
            out.append(f"- **{facet_label(dtype, causal)}.** " + " ".join(p for p in parts if p))
        return "\n".join(out) + "\n"

    def _statuses(self, shape, dtype, causal, impl) -> str:
        f = self.facet_rows(self.rows, shape, dtype, causal)
        return join(f"{n} {s}" for s, n in f[f["impl"] == impl]["status"].value_counts().items()) or "no rows"

    def _oom_note(self, shape, dtype, causal, impl, tri: pd.Series) -> str:
        f = self.facet_rows(self.rows, shape, dtype, causal)
        oom = sorted(f[(f["impl"] == impl) & (f["status"] == "oom")]["seq_len"])
        if not oom:
            return ""
        label = impl_label(impl)
        text = f"{label[0].upper()}{label[1:]} ran out of memory at N={join(oom)}"
        where = [n for n in oom if n in tri.index]
        if where:
            text += f", where Triton ran in {join(fmt.ms(tri[n]) for n in where)}"
        return text + "."

    def memory_finding(self, shape) -> str:
        """How peak memory above the inputs grows with N, naive against Triton, on the first facet."""
        dtype, causal = self.facets(shape)[0]
        f = self.facet_rows(self.ok, shape, dtype, causal)
        slopes, peaks = {}, {}
        for impl in ("naive", "triton"):
            g = f[f["impl"] == impl].sort_values("seq_len")
            g = g[g["peak_mem_bytes"].notna() & (g["peak_mem_bytes"] > 0)]
            slopes[impl] = loglog_slope(g["seq_len"], g["peak_mem_bytes"])
            peaks[impl] = g.set_index("seq_len")["peak_mem_bytes"]
        if slopes["naive"] is None or slopes["triton"] is None:
            return (f"Too few peak-memory measurements of naive PyTorch and Triton ({facet_label(dtype, causal)}) "
                    "to say how they grow with N.")
        text = (f"Peak memory above the inputs ({facet_label(dtype, causal)}) grows about as "
                f"N<sup>{slopes['naive']:.2f}</sup> for naive PyTorch and N<sup>{slopes['triton']:.2f}</sup> for "
                f"Triton")
        common = [n for n in peaks["naive"].index if n in peaks["triton"].index]
        if common:
            n = common[-1]
            a, b = peaks["naive"][n], peaks["triton"][n]
            rel = f"{fmt.ratio(a / b)} Triton's {fmt.bytes_(b)}" if a >= b else f"less than Triton's {fmt.bytes_(b)}"
            text += f"; at N={n}, the longest both ran, naive needed {fmt.bytes_(a)}, {rel}"
        return text + "."

    def autotune_note(self) -> str:
        t = self.rows[(self.rows["impl"] == "triton") & self.rows["warmup_s"].notna()]
        if t.empty:
            return ""
        worst = t.loc[t["warmup_s"].idxmax()]
        return (f"The first call of each Triton case (compilation and autotuning, excluded from every number above) "
                f"took {fmt.num(t['warmup_s'].sum())} s over the {len(t)} Triton cases, at most "
                f"{fmt.num(worst['warmup_s'])} s ({shape_label(worst['shape'])}, "
                f"{facet_label(worst['dtype'], worst['causal'])}, N={worst['seq_len']}).")

    # --- tables ----------------------------------------------------------------------------

    def speedup_table(self, shape) -> str:
        rows = []
        for dtype, causal in self.facets(shape):
            tri = self.latency(shape, dtype, causal, "triton")
            naive = self.latency(shape, dtype, causal, "naive")
            fast = self.fastest_sdpa(shape, dtype, causal)
            f = self.facet_rows(self.rows, shape, dtype, causal)
            for n in sorted(set(f["seq_len"])):
                status = lambda impl: self._status_at(f, impl, n)  # noqa: E731
                t = tri.get(n)
                r = {"facet": facet_label(dtype, causal), "n": n, "tri": fmt.ms(t) if t else status("triton")}
                r["naive"] = fmt.ms(naive[n]) if n in naive.index else status("naive")
                r["vs_naive"] = speedup_words(naive[n] / t) if t and n in naive.index else "n/a"
                if n in fast.index:
                    r["sdpa"] = f"{fmt.ms(fast.loc[n, 'latency_ms_median'])} ({impl_label(fast.loc[n, 'impl'])})"
                    r["vs_sdpa"] = speedup_words(fast.loc[n, "latency_ms_median"] / t) if t else "n/a"
                else:
                    r["sdpa"], r["vs_sdpa"] = "none ran", "n/a"
                rows.append(r)
        return table_html(pd.DataFrame(rows), {
            "facet": "dtype, mask", "n": "N", "tri": "Triton (median)", "naive": "naive (median)",
            "vs_naive": "Triton vs naive", "sdpa": "fastest SDPA (median)", "vs_sdpa": "Triton vs fastest SDPA"})

    @staticmethod
    def _status_at(f: pd.DataFrame, impl: str, n: int) -> str:
        s = f[(f["impl"] == impl) & (f["seq_len"] == n)]["status"]
        return s.iloc[0] if len(s) else "not in sweep"

    def failures_table(self) -> str:
        bad = self.rows[self.rows["status"] != "ok"]
        if bad.empty:
            return "Every case ran."
        out = []
        for (impl, status), grp in bad.groupby(["impl", "status"], sort=False):
            reasons = grp["reason"].fillna("").map(lambda r: r if status in ("unsupported", "error") else "")
            for reason, g in grp.groupby(reasons, sort=False):
                masks = sorted({"causal" if c else "non-causal" for c in g["causal"]}, reverse=True)
                where = (f"{'; '.join(shape_label(s) for s in dict.fromkeys(g['shape']))}; "
                         f"N={join(sorted(set(g['seq_len'])))}; "
                         f"{join(SHORT.get(d, d) for d in dict.fromkeys(g['dtype']))}; {join(masks)}")
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
                            horizontal_spacing=0.05, vertical_spacing=0.1)
        # Facet titles sit inside each panel's top-left corner, clear of the legend above the first row.
        fig.for_each_annotation(lambda a: a.update(y=a.y - 0.01, yanchor="top", x=a.x - 0.5 / len(causals) + 0.01,
                                                   xanchor="left", font=dict(size=12)))
        cells = [(d, c, i + 1, j + 1) for i, d in enumerate(dtypes) for j, c in enumerate(causals)]
        return fig, cells, len(dtypes)

    def _metric_figure(self, shape, name: str, column: str, ytitle: str, fmt_hover: str, caption: str,
                       scale: float = 1.0, errors: bool = False, oom_markers: bool = False,
                       yaxis: dict | None = None) -> str:
        yaxis = yaxis or {}
        fig, cells, nrows = self._grid(shape)
        shown = set()
        ns = sorted(set(self.rows[self.rows["shape"] == shape]["seq_len"]))
        for dtype, causal, r, c in cells:
            okf = self.facet_rows(self.ok, shape, dtype, causal)
            allf = self.facet_rows(self.rows, shape, dtype, causal)
            for impl in self.impls():
                g = okf[(okf["impl"] == impl) & okf[column].notna() & (okf[column] > 0)].sort_values("seq_len")
                label = escape.plot(impl_label(impl))
                color = IMPL_COLORS.get(impl, PALETTE[6])
                if not g.empty:
                    y = g[column] * scale
                    trace = dict(x=g["seq_len"], y=y, mode="lines+markers", name=label, legendgroup=impl,
                                 showlegend=impl not in shown, line=dict(color=color,
                                                                          dash=IMPL_DASH.get(impl, "solid")),
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
                        fig.add_trace(go.Scatter(
                            x=o["seq_len"], y=o["requested_bytes"] * scale, mode="markers", name=f"{label}: OOM",
                            legendgroup=impl, showlegend=False,
                            marker=dict(symbol="x", size=11, color=color, line=dict(width=2, color=color)),
                            hovertemplate=f"{label}<br>N=%{{x}}<br>out of memory; asked for %{{y:.3s}}B<extra></extra>"),
                            row=r, col=c)
            fig.update_yaxes(title_text=ytitle if c == 1 else None, type="log", row=r, col=c, **yaxis)
            fig.update_xaxes(type="log", tickvals=ns, ticktext=[str(n) for n in ns],
                             title_text="seq_len N" if r == nrows else None, row=r, col=c)
        mem = self.run.manifest.device.memory_bytes if self.run.manifest.device else None
        if oom_markers and mem:
            for _, _, r, c in cells:
                fig.add_hline(y=mem * scale, line_dash="dash", line_color=PALETTE[7], line_width=1, row=r, col=c)
        return self.figure(f"{name}-{'x'.join(map(str, shape))}", fig,
                           f"{caption} {shape_label(shape)}; rows: dtype, columns: masking.", height=300 * nrows + 120)

    def latency_figure(self, shape) -> str:
        return self._metric_figure(shape, "latency", "latency_ms_median", "latency (ms)",
                                   "%{y:.3g} ms (median)",
                                   "Forward latency against sequence length, log-log; bars span p10 to p90 of the "
                                   "timed calls. A missing point did not run (see the table of cases that did not).",
                                   errors=True)

    def tflops_figure(self, shape) -> str:
        return self._metric_figure(shape, "tflops", "tflops", "TFLOP/s", "%{y:.3g} TFLOP/s",
                                   "Throughput against sequence length: 4·B·H·N²·d FLOP per call (halved when causal) "
                                   "over the median latency.")

    def memory_figure(self, shape) -> str:
        return self._metric_figure(shape, "memory", "peak_mem_bytes", "peak above inputs", "%{y:.3s}B",
                                   "Peak memory above the inputs (statistics reset after warm-up) against sequence "
                                   "length, log-log; × marks an out-of-memory case at the size it asked for; the "
                                   "dashed line is the device's memory.", oom_markers=True,
                                   yaxis=dict(exponentformat="SI", ticksuffix="B"))
