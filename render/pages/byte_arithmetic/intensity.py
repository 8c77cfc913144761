"""Arithmetic intensity against the ridge point: the table, the finding and the roofline of each shape."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ... import escape, fmt, model
from ...axes import log_ticks
from ...figures import PALETTE
from ...tables import table_html
from ...vocab import MATERIALISING, facet_label, impl_color, impl_label, join, shape_label
from .common import E, BytesSection, matmul_ceiling


class Intensity(BytesSection):
    """The intensity table and finding, and the roofline figure."""

    def intensity_table(self) -> str:
        ridge = self.ridge()
        rows = []
        for shape in self.shapes():
            d = shape[2]
            for n in self.seq_lens(shape):
                a_n, a_f = model.naive_intensity(n, d, E), model.fused_intensity(n, d, E)
                bound = lambda a: "n/a" if ridge is None else ("compute" if a >= ridge else "memory")  # noqa: E731
                rows.append({"d": d, "n": n, "naive": fmt.num(a_n), "nb": bound(a_n), "fused": fmt.num(a_f),
                             "fb": bound(a_f)})
        # The intensities depend on d and N alone, not on the batch or heads: one row per (d, N), in order.
        df = pd.DataFrame(rows).drop_duplicates().sort_values(["d", "n"], kind="stable")
        return table_html(df, {"d": "d", "n": "N", "naive": "naive FLOP/byte", "nb": "naive: bound by (model)",
                               "fused": "fused FLOP/byte", "fb": "fused: bound by (model)"},
                          caption=f"Against the measured fp16 ridge point of {fmt.num(ridge)} FLOP/byte.")

    def intensity_finding(self) -> str:
        ridge = self.ridge()
        if ridge is None:
            return "No measured ridge point in this run, so the intensities cannot be placed against it."
        parts = []
        dims = sorted({s[2] for s in self.shapes()})
        below = [d for d in dims if model.naive_crosses_ridge_n(ridge, d, E) is None]
        if below:
            lims = [model.naive_intensity_limit(d, E) for d in below]
            span = (f"the limit is {fmt.num(lims[0])}" if len(set(lims)) == 1 else
                    f"the limits are {fmt.num(min(lims))} to {fmt.num(max(lims))}")
            # The limits are what no length reaches; the values are the table's, at the lengths swept.
            values = [model.naive_intensity(n, s[2], E) for s in self.shapes() if s[2] in below
                      for n in self.seq_lens(s)]
            parts.append(f"Naive's intensity approaches d/2 and never passes it: {span} FLOP/byte "
                         f"for d={join([str(d) for d in below])}, {'all ' if len(below) > 1 else ''}below the ridge of "
                         f"{fmt.num(ridge)}, so by the model it is bound by memory at every N.")
            parts.append(f"At the lengths swept its intensity is {fmt.span(min(values), max(values))} FLOP/byte "
                         "(the table).")
        for d in [d for d in dims if d not in below]:
            parts.append(f"With d={d}, naive's intensity approaches {fmt.num(model.naive_intensity_limit(d, E))} "
                         f"FLOP/byte, above the ridge of {fmt.num(ridge)}: this GPU's ridge is low enough that naive "
                         f"turns compute-bound from N≈{fmt.num(model.naive_crosses_ridge_n(ridge, d, E))}.")
        n_cross = model.fused_crosses_ridge_n(ridge, E)
        ns = sorted(set(self.bench.rows["seq_len"]))
        share = ("every length swept" if ns[0] >= n_cross else "none of the lengths swept" if ns[-1] < n_cross
                 else f"the lengths from N={min(n for n in ns if n >= n_cross)} on")
        parts.append(f"A fused kernel's intensity N/2 reaches the ridge at N≈{fmt.num(n_cross)}, which puts {share} on "
                     "the compute side of it.")
        return " ".join(parts)

    def roofline_figure(self, shape) -> str:
        """Measured TFLOP/s of each implementation at its modelled intensity, under this GPU's roofs."""
        dtype, causal = next(((dt, c) for dt, c in self.bench.facets(shape) if not c), self.bench.facets(shape)[0])
        ceiling = matmul_ceiling(dtype)
        bw, peak = self.bandwidth(), self.ceilings.measured_rate(f"matmul_{ceiling}")
        d = shape[2]
        ns = self.seq_lens(shape)
        x = np.logspace(0, math.log10(max(model.fused_intensity(ns[-1], d, E), 10) * 2), 80)
        fig = go.Figure()
        sheet_bw, sheet_peak = self.ceilings.sheet_rate("dram"), self.ceilings.sheet_rate(ceiling)
        ys = []
        for label, b_, p_, dash in (("measured roofs", bw, peak, "solid"), ("datasheet roofs", sheet_bw, sheet_peak, "dash")):
            if b_ and p_:
                y = [model.attainable_flops(a, p_, b_) / 1e12 for a in x]
                ys += y
                fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=label,
                                         line=dict(color=PALETTE[7], dash=dash, width=1.5), hoverinfo="skip"))
        ok = self.bench.facet_rows(self.bench.ok, shape, dtype, causal)
        xs = list(x)
        for impl in self.bench.impls():
            g = ok[(ok["impl"] == impl) & ok["tflops"].notna()].sort_values("seq_len")
            if g.empty:
                continue
            used = g["backend_used"].fillna("")
            mat = [impl in MATERIALISING or (impl == "sdpa" and u == "math") for u in used]
            # Naive PyTorch is placed by the bytes its code as written moves (a scaling pass, an fp32 P and its
            # cast): at the model's fewer bytes its points would read as a kernel streaming far below the roof.
            ai = [4 * n * n * d / model.naive_as_written_bytes(n, d, E) if impl == "naive" else
                  model.naive_intensity(n, d, E) if m else model.fused_intensity(n, d, E)
                  for n, m in zip(g["seq_len"], mat)]
            ys += list(g["tflops"])
            label = escape.plot(impl_label(impl))
            fig.add_trace(go.Scatter(x=ai, y=g["tflops"], mode="markers+lines", name=label,
                                     marker=dict(color=impl_color(impl), size=8),
                                     line=dict(color=impl_color(impl), width=1), customdata=g["seq_len"],
                                     hovertemplate=f"{label}<br>N=%{{customdata}}<br>%{{x:.3g}} FLOP/byte (model)"
                                                   "<br>%{y:.3g} TFLOP/s (measured)<extra></extra>"))
        ridge = self.ridge(dtype)
        if ridge:
            fig.add_vline(x=ridge, line_dash="dot", line_color=PALETTE[7], line_width=1)
        fig.update_xaxes(type="log", title_text="arithmetic intensity (FLOP per DRAM byte, from the model)",
                         **log_ticks(xs))
        fig.update_yaxes(type="log", title_text="throughput (TFLOP/s)", **log_ticks(ys))
        return self.figure(f"roofline-{'x'.join(map(str, shape))}", fig,
                           f"Each implementation's measured TFLOP/s at its modelled intensity (naive PyTorch: the bytes "
                           f"its code as written moves, the Traffic section's count; SDPA math: N·d/(2(N+d)); fused: "
                           f"N/2), one point per N, under the {ceiling} roofs; dotted: the "
                           f"measured ridge point. {shape_label(shape)}, {facet_label(dtype, causal)}."
                           + self._math_bytes_words(shape, dtype, causal))

    # Measured bytes this far past the model move a point's real intensity visibly left of where it is drawn.
    MODEL_SHORT = 1.5

    def _math_bytes_words(self, shape, dtype, causal) -> str:
        """Where Nsight Compute measured SDPA math moving well more than the model it is drawn at (its kernels are
        PyTorch's, whose passes the model does not count), how far: its real intensity is that much lower."""
        if not self.run.has("profile"):
            return ""
        p = self.run.frame("profile", "impls")
        if p.empty:
            return ""
        b, h, d = shape
        p = p[(p["impl"] == "sdpa-math") & (p["status"] == "ok") & (p["batch"] == b) & (p["heads"] == h)
              & (p["head_dim"] == d) & (p["dtype"] == dtype) & (p["causal"] == causal)]
        over = []
        for _, r in p.iterrows():
            moved = model.call_dram_bytes(r)
            if moved:
                over.append((moved / model.naive_traffic_bytes(int(r["seq_len"]), d, E, b * h), int(r["seq_len"])))
        over = [(x, n) for x, n in over if x >= self.MODEL_SHORT]
        if not over:
            return ""
        x, n = max(over)
        return (f" Nsight Compute measured SDPA math moving {fmt.ratio(x)} the model's bytes at N={n}, so its "
                "real intensity is that much lower: its points belong that far to the left.")
