"""Decode attention alone: the split-KV microbenchmark against SDPA and the copy bandwidth."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ... import escape, fmt
from ...figures import PALETTE
from ...tables import table_html
from ...vocab import join, plural
from .data import (DecodeData, MICRO_COLORS, MICRO_LABELS, MICRO_SPEEDUP, MICRO_SPEEDUP_BATCH, MICRO_SPEEDUP_CONTEXT,
                   MICRO_TARGET, _ok, inset_titles)


class Micro(DecodeData):
    """The microbenchmark's speedups, finding, table and figure."""

    def _micro_ok(self) -> pd.DataFrame:
        m = self.micro[self.micro["status"] == "ok"] if not self.micro.empty else self.micro
        return m[m["latency_ms_median"].notna()] if not m.empty else m

    def micro_speedups(self) -> pd.Series:
        """bf16 kernel time / int8 kernel time, per (batch, context) where both ran."""
        m = self._micro_ok()
        if m.empty:
            return pd.Series(dtype=float)
        key = ["batch", "context"]
        i8 = m[m["impl"] == "triton-int8"].set_index(key)
        bf = m[m["impl"] == "triton-bf16"].set_index(key)
        common = i8.index.intersection(bf.index)
        return bf.loc[common, "latency_ms_median"] / i8.loc[common, "latency_ms_median"]

    def micro_finding(self) -> str:
        m = self._micro_ok()
        if m.empty:
            return "The microbenchmark has no measurement."
        out = []
        mb = m[m["bandwidth_fraction"].notna()]
        for impl in MICRO_LABELS:
            g = mb[mb["impl"] == impl]
            if g.empty:
                continue
            lo, hi = g.loc[g["bandwidth_fraction"].idxmin()], g.loc[g["bandwidth_fraction"].idxmax()]
            a, b = fmt.pct(100 * lo.bandwidth_fraction), fmt.pct(100 * hi.bandwidth_fraction)
            share = (f"{a} of the measured copy bandwidth at every shape measured" if a == b else
                     f"{a} (batch {lo.batch}, context {lo.context}) to {b} (batch {hi.batch}, context {hi.context}) "
                     "of the measured copy bandwidth")
            out.append(f"- **{MICRO_LABELS[impl].format(f=self.f)}**: {share}.")
        if not mb.empty and (mb["bandwidth_fraction"] > 1).any():
            out.append("\nSome figures exceed 100%. The copy bandwidth counts a copy's reads plus its writes, and "
                       "memory likely loses time turning around between the two (this run does not measure that); "
                       "decode attention only reads, so it can stream faster than a copy moves bytes. Above 100% is "
                       "not an error in the byte count.")
        key = ["batch", "context"]
        bf = m[m["impl"] == "triton-bf16"].set_index(key)
        sd = m[m["impl"] == "sdpa"].set_index(key)
        both = bf.index.intersection(sd.index)
        if len(both):
            rel = bf.loc[both, "latency_ms_median"] / sd.loc[both, "latency_ms_median"]
            worst, best = rel.idxmax(), rel.idxmin()
            where = ("" if fmt.num(rel.min()) == fmt.num(rel.max()) else
                     f" (slowest relative to SDPA at batch {worst[0]}, context {worst[1]}; fastest at batch {best[0]}, "
                     f"context {best[1]})")
            out.append(f"\nAgainst SDPA on the same {self.f} cache, our kernel takes "
                       f"{fmt.span(rel.min(), rel.max())} times its time over {len(both)} shapes{where}.")
            # A ratio off 1 whose two timings' p10-p90 ranges overlap tells the two apart from noise no better than
            # one at 1: the range's ends are read with that count beside them.
            a, b = bf.loc[both], sd.loc[both]
            overlap = ((a["latency_ms_p10"] <= b["latency_ms_p90"]) & (b["latency_ms_p10"] <= a["latency_ms_p90"])).sum()
            if overlap:
                out[-1] += (f" At {'all' if overlap == len(both) else overlap} of them the two timings' p10 to p90 "
                            "ranges overlap, so there the two are not told apart.")
        speed = self.micro_speedups()
        if len(speed):
            i8 = m[m["impl"] == "triton-int8"].set_index(key)
            fewer = bf.loc[speed.index, "bytes_read"] / i8.loc[speed.index, "bytes_read"]
            out.append(f"\nThe int8 cache has {fmt.ratio(fewer.median())} fewer bytes to read; the kernel reading it "
                       f"is {fmt.span(speed.min(), speed.max(), fmt.ratio)} as fast as the {self.f} kernel over "
                       f"the {len(speed)} shapes both ran.")
            sel = [k for k in speed.index if k[0] >= MICRO_SPEEDUP_BATCH and k[1] >= MICRO_SPEEDUP_CONTEXT]
            if sel:
                out[-1] += (f" The target is {fmt.ratio(MICRO_SPEEDUP)} at context {MICRO_SPEEDUP_CONTEXT} and above, "
                            f"batch {MICRO_SPEEDUP_BATCH} and above.")
                for b in sorted({k[0] for k in sel}):
                    got = speed[[k for k in sel if k[0] == b]]
                    verdict_ = ("met" if (got >= MICRO_SPEEDUP).all() else
                                "missed" if (got < MICRO_SPEEDUP).all() else
                                f"met at {(got >= MICRO_SPEEDUP).sum()} of {len(got)} contexts")
                    vs = lambda x: fmt.ratio_vs(x, MICRO_SPEEDUP)  # noqa: E731
                    out[-1] += (f" At batch {b} it is {verdict_}: {fmt.span(got.min(), got.max(), vs)} over "
                                f"{plural(len(got), 'context')}.")
        in_step = self._in_step_int8_words()
        if in_step:
            out.append("\n" + in_step)
        return "\n".join(out) + "\n"

    def micro_shape_words(self) -> str:
        """The microbenchmark's heads and head size, from its rows ('with 32 heads of dimension 128')."""
        m = self.micro
        shapes = sorted({(int(h), int(d)) for h, d in zip(m["heads"], m["head_dim"])}) if not m.empty else []
        return join(f"with {h} heads of dimension {d}" for h, d in shapes) or "at the shapes its rows give"

    def _in_step_int8_words(self) -> str:
        """What the int8 attention gains inside the graph step, kernel against kernel, at the profiled shapes: the
        steps' own target rests on these, at the models' head size, which the microbenchmark's need not be."""
        r = self._role_frame if self.has_roles() else None
        if r is None or r.empty:
            return ""
        a = r[r["role"] == "attention"].set_index(["model", "batch", "context", "variant"])
        pairs = []
        for (model, b, c, v), row in a.iterrows():
            if v == "graph" and (model, b, c, "int8-graph") in a.index:
                q = a.loc[(model, b, c, "int8-graph")]
                if _ok(row.us_each) and _ok(q.us_each) and q.us_each > 0:
                    pairs.append((row.bytes_per_step / row.kernels_per_step, row.us_each / q.us_each))
        if not pairs:
            return ""
        gains = [g for _, g in sorted(pairs)]
        dims = {m.head_dim for m in self.data.models}
        micro_dims = set(self.micro["head_dim"]) if not self.micro.empty else set()
        where = (f"At the models' head size ({join(sorted(dims))}), inside the graph step" if dims - micro_dims
                 else "Inside the graph step")
        text = (f"{where}, the int8 attention kernel is {fmt.span(min(gains), max(gains), fmt.ratio)} as fast as the "
                f"{self.f} one over {plural(len(gains), 'profiled shape')} ([kernel by kernel](#kernel-by-kernel)); "
                "the int8-graph step's target rests on those kernels, not on this microbenchmark.")
        if len(gains) > 2 and all(x < y for x, y in zip(gains, gains[1:])):
            text += " The more cache a kernel reads, the more it gains: at these sizes a launch's fixed cost still weighs."
        return text

    def micro_table(self) -> str:
        f = self.micro.sort_values(["batch", "context", "impl"]).copy()
        f["impl"] = f["impl"].map(lambda i: MICRO_LABELS[i].format(f=self.f) if i in MICRO_LABELS else str(i))
        f["status"] = [s if s == "ok" else f"{s}: {r}" for s, r in zip(f["status"], f["reason"].fillna(""))]
        opt = lambda fn: (lambda x: "" if not _ok(x) else fn(x))  # noqa: E731
        return table_html(f, {"batch": "Batch", "context": "Context", "impl": "Kernel", "latency_ms_median": "Device time",
                              "bytes_read": "Bytes read", "achieved_bytes_per_s": "Achieved",
                              "bandwidth_fraction": "Of copy bandwidth", "num_splits": "Splits",
                              "kernel_config": "Config", "max_abs_diff_vs_sdpa": "Max diff vs SDPA", "status": "Status"},
                          formats={"latency_ms_median": opt(fmt.ms), "bytes_read": opt(fmt.bytes_),
                                   "achieved_bytes_per_s": opt(fmt.bandwidth),
                                   "bandwidth_fraction": opt(lambda x: fmt.pct(100 * x)),
                                   "num_splits": opt(lambda x: str(int(x))), "max_abs_diff_vs_sdpa": opt(fmt.num)})

    def micro_figure(self) -> str:
        m = self._micro_ok()
        m = m[m["bandwidth_fraction"].notna()] if not m.empty else m
        if m.empty:
            return "The microbenchmark has no measurement against a copy bandwidth."
        batches = sorted(set(m["batch"]))
        fig = make_subplots(rows=1, cols=len(batches), shared_yaxes=True, horizontal_spacing=0.04,
                            subplot_titles=[f"batch {b}" for b in batches])
        inset_titles(fig, len(batches))
        shown = set()
        for j, b in enumerate(batches, start=1):
            for impl in MICRO_LABELS:
                g = m[(m["batch"] == b) & (m["impl"] == impl)].sort_values("context")
                if g.empty:
                    continue
                name = escape.plot(MICRO_LABELS[impl].format(f=self.f))
                fig.add_trace(go.Scatter(x=g["context"], y=100 * g["bandwidth_fraction"], mode="lines+markers",
                                         name=name, legendgroup=impl, showlegend=impl not in shown,
                                         line=dict(color=MICRO_COLORS[impl]), customdata=g["latency_ms_median"],
                                         hovertemplate=f"{name}<br>context %{{x}}<br>%{{y:.3g}}% of copy bandwidth<br>"
                                                       "%{customdata:.3g} ms<extra></extra>"), row=1, col=j)
                shown.add(impl)
            fig.add_hline(y=100 * MICRO_TARGET, line_dash="dot", line_color=PALETTE[7], line_width=1, row=1, col=j)
            ctxs = sorted(set(m["context"]))
            fig.update_xaxes(type="log", title_text="context", tickvals=ctxs, ticktext=[f"{c // 1024}k" if c >= 1024
                                                                                         else str(c) for c in ctxs],
                             row=1, col=j)
        fig.update_yaxes(range=[0, max(105.0, 110 * float(m["bandwidth_fraction"].max()))])
        fig.update_yaxes(title_text="% of measured copy bandwidth", row=1, col=1)
        r = m.iloc[0]
        return self.figure("micro", fig, f"Decode attention alone: cache bytes read over median device time, as a "
                                         f"share of the measured copy bandwidth (a copy's reads plus writes); "
                                         f"{r.heads} heads, head_dim {r.head_dim}, one query per head, whole cache "
                                         f"valid; the dotted line is {fmt.pct(100 * MICRO_TARGET)}.")
