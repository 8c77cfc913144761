"""One section per shape: the findings per dtype and masking, peak memory, the three figures, the speedup table."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ... import escape, fmt
from ...axes import byte_hover, byte_ticks, log_ticks
from ...figures import PALETTE
from ...tables import table_html
from ...vocab import IMPL_DASH, facet_label, impl_color, impl_label, join, path_label, shape_label
from .common import FUSED
from .offset import Offset
from .words import case_words, describe_gap, loglog_slope, spread


class PerShape(Offset):
    """The section each shape gets: findings, peak memory, figures and the speedup table."""

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

            def gap(other: pd.DataFrame, who: str, twins: bool = False, marked: bool = False) -> str:
                common = [n for n in tri.index if n in other.index]
                same = None
                if twins:  # the portable row and ours, where flash_attention took that very kernel
                    same = [other.loc[n, "kernel_path"] if self._one_kernel(rows.loc[n], other.loc[n]) else None
                            for n in common]
                # The table's own rule (speedup_table's "indicative"), so prose and table qualify the same cases.
                ind = [self.indicative(tri[n]) for n in common] if marked else None
                return describe_gap(common, [other.loc[n, "latency_ms_median"] / tri[n] for n in common], who,
                                    spreads=[spread(other.loc[n], rows.loc[n]) for n in common],
                                    paths=[paths.get(n) for n in common], same=same, indicative=ind)

            parts.append(gap(self.b.by_n(shape, dtype, causal, "naive"), "naive PyTorch"))
            parts.append(self._oom_note(shape, dtype, causal, "naive", tri))
            fast = self.b.fastest_rival(shape, dtype, causal)
            common = [n for n in tri.index if n in fast.index]
            names = list(dict.fromkeys(self._sdpa_label(fast.loc[n]) for n in common))
            who = (f"the fastest other implementation ({names[0]} at every N)" if len(names) == 1
                   else f"the fastest other implementation ({join(names)}, depending on N)")
            # The table marks its verdicts against the fastest other implementation alone: so does the prose.
            parts.append(gap(fast, who, marked=True))
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
            # One length is named already; several need the one whose time is given.
            text += f", where Triton ran (in {fmt.ms(tri[where[-1]])} " + ("there)" if len(where) == 1 else
                                                                         f"at N={where[-1]})")
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

    def speedup_table(self, shape) -> str:
        rows = []
        for dtype, causal in self.facets(shape):
            naive = self.latency(shape, dtype, causal, "naive")
            paths = self.b.paths(shape, dtype, causal)
            tri_rows = self.b.by_n(shape, dtype, causal, FUSED)
            naive_rows = self.b.by_n(shape, dtype, causal, "naive")
            for n, v in self.versus_fastest(shape, dtype, causal).items():
                status = lambda impl: self.b.status_at(shape, dtype, causal, impl, n)  # noqa: E731
                t = v.ours
                r = {"facet": facet_label(dtype, causal), "n": n, "tri": fmt.ms(t) if t else status(FUSED),
                     "path": path_label(paths[n]) if n in paths else "n/a"}
                r["naive"] = fmt.ms(naive[n]) if n in naive.index else status("naive")
                r["vs_naive"] = (case_words(naive[n] / t, spread(naive_rows.loc[n], tri_rows.loc[n]))
                                 if t and n in naive.index else "n/a")
                r["sdpa"] = f"{fmt.ms(v.fast)} ({v.who})" if v.who is not None else "none ran"
                r["vs_sdpa"] = v.words + (", indicative" if v.ratio is not None and self.indicative(t) else "")
                rows.append(r)
        return table_html(pd.DataFrame(rows), {
            "facet": "dtype, mask", "n": "N", "tri": "Triton (median device time)", "path": "Triton's path",
            "naive": "naive (median)",
            "vs_naive": "Triton vs naive", "sdpa": "fastest other (median)", "vs_sdpa": "Triton vs fastest other"})


    def _metric_figure(self, shape, name: str, column: str, ytitle: str, fmt_hover: str, caption: str,
                       scale: float = 1.0, errors: bool = False, oom_markers: bool = False, bytes_axis: bool = False) -> str:
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
                    if bytes_axis:
                        trace["customdata"] = byte_hover(y)
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
                            legendgroup=impl, showlegend=False, customdata=byte_hover(o["requested_bytes"] * scale),
                            marker=dict(symbol="x", size=11, color=color, line=dict(width=2, color=color)),
                            hovertemplate=f"{label}<br>N=%{{x}}<br>out of memory at an allocation of %{{customdata}}<extra></extra>"),
                            row=r, col=c)
        mem = self.run.manifest.device.memory_bytes if self.run.manifest.device else None
        if oom_markers and mem:
            ys.append(mem * scale)
            for _, _, r, c in cells:
                fig.add_hline(y=mem * scale, line_dash="dash", line_color=PALETTE[7], line_width=1, row=r, col=c)
        ticks = byte_ticks(ys) if bytes_axis else log_ticks(ys)
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
        return self._metric_figure(shape, "memory", "peak_mem_bytes", "peak above inputs (bytes)", "%{customdata}",
                                   "Peak memory above the inputs (statistics reset after warm-up) against sequence "
                                   "length, log-log; × marks an out-of-memory case at the one allocation that failed, "
                                   "which came on top of what the call already held and so can lie below the dashed "
                                   "line, the device's memory (at its predicted need where the case was not tried).",
                                   oom_markers=True, bytes_axis=True)
