"""The error by case (a heatmap per dtype and masking) and the error against sequence length."""
from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ... import escape, fmt
from ...axes import log_ticks
from ...figures import PALETTE
from ...vocab import DTYPE_SHORT, facet_label, join
from .common import TREND_FACTOR, CorrectnessSection, absent, as_text, sci


def _short(x: float) -> str:
    """Two significant figures, for a heatmap cell: 1.8e-4."""
    mant, exp = f"{x:.1e}".split("e")
    return f"{mant}e{int(exp)}"


class Errors(CorrectnessSection):
    """The heatmap of errors, the error against N and what its trend says."""

    def _cell_frame(self) -> pd.DataFrame:
        """One cell per (dtype, causal, head_dim, seq_len): the worst batch; a non-ok status wins."""
        g = self.regular
        cells = []
        for key, grp in g.groupby(["dtype", "causal", "head_dim", "seq_len"], sort=True):
            bad = grp[grp["status"] != "ok"]
            if not bad.empty:
                r = bad.iloc[0]
            elif grp["max_abs_err"].notna().any():
                r = grp.loc[grp["max_abs_err"].idxmax()]
            else:
                r = grp.iloc[0]
            cells.append(r)
        return pd.DataFrame(cells)

    def heatmap_figure(self) -> str:
        """Max |error| per case of the grid, faceted by dtype (rows) and causal (columns); the added cases have a table
        of their own."""
        g = self.regular
        if g.empty:
            return "_No kernel cases to plot._"
        cells = self._cell_frame()
        dtypes, causals = self.dtypes, sorted(set(g["causal"]))
        seqs = [str(n) for n in sorted(set(g["seq_len"]))]
        dims = [str(d) for d in sorted(set(g["head_dim"]))]
        fig = make_subplots(rows=len(dtypes), cols=len(causals), shared_xaxes=True, shared_yaxes=True,
                            subplot_titles=[facet_label(d, c) for d in dtypes for c in causals],
                            vertical_spacing=0.12, horizontal_spacing=0.06)
        positive = cells["max_abs_err"][cells["max_abs_err"] > 0] if "max_abs_err" in cells else pd.Series(dtype=float)
        zmin = math.floor(math.log10(positive.min())) if not positive.empty else -6
        zmax = math.ceil(math.log10(positive.max())) if not positive.empty else 0
        zmax = max(zmax, zmin + 1)
        for i, dt in enumerate(dtypes):
            for j, causal in enumerate(causals):
                sub = cells[(cells["dtype"] == dt) & (cells["causal"] == causal)]
                fails: list[tuple[int, int]] = []
                z = [[None] * len(seqs) for _ in dims]
                text = [[""] * len(seqs) for _ in dims]
                hover = [[""] * len(seqs) for _ in dims]
                for _, r in sub.iterrows():
                    y, x = dims.index(str(r["head_dim"])), seqs.index(str(r["seq_len"]))
                    err = r["max_abs_err"]
                    if r["status"] != "ok":
                        text[y][x] = str(r["status"])
                        hover[y][x] = escape.plot(f"{r['status']}: {as_text(r['reason'])}"[:200])
                        continue
                    if absent(err):
                        text[y][x] = "no value"
                        hover[y][x] = escape.plot(as_text(r["reason"]))
                        continue
                    z[y][x] = math.log10(err) if err > 0 else zmin
                    text[y][x] = "exact" if err == 0 else _short(float(err))
                    if not r["passed"]:
                        fails.append((x, y))
                    hover[y][x] = escape.plot(
                        f"N={r['seq_len']}, d={r['head_dim']}, batch {r['batch']}: max |err| {sci(float(err))}, "
                        f"normwise {sci(r['max_rel_err'])}, tolerance used {r['tol_usage']:.2f}, "
                        f"{'pass' if r['passed'] else 'FAIL'}; config {as_text(r['config']) or 'n/a'}")
                fig.add_trace(go.Heatmap(
                    x=seqs, y=dims, z=z, text=text, texttemplate="%{text}", customdata=hover,
                    hovertemplate="%{customdata}<extra></extra>", zmin=zmin, zmax=zmax, coloraxis="coloraxis",
                    textfont=dict(size=10), xgap=2, ygap=2), row=i + 1, col=j + 1)
                if fails:
                    fig.add_trace(go.Scatter(
                        x=[seqs[x] for x, _ in fails], y=[dims[y] for _, y in fails], mode="markers",
                        marker=dict(symbol="square-open", size=30, line=dict(width=3, color=PALETTE[3])),
                        name="failed", showlegend=False, hoverinfo="skip"), row=i + 1, col=j + 1)
        ticks = list(range(zmin, zmax + 1))
        fig.update_layout(coloraxis=dict(colorscale="Viridis", cmin=zmin, cmax=zmax, colorbar=dict(
            title="max |error|", tickvals=ticks, ticktext=[f"1e{t}" for t in ticks])))
        fig.update_xaxes(type="category", title_text="seq_len", row=len(dtypes))
        fig.update_yaxes(type="category", title_text="head_dim", col=1)
        return self.figure("error-heatmap", fig,
                           "Largest absolute error against the float64 reference for each case (worst batch size; "
                           "a framed cell marks a failed case, 'exact' an error of zero, a status word a case that did "
                           "not run); "
                           f"colour on a log scale; {self._cond()}.", height=260 * len(dtypes) + 80)

    def _lines(self) -> pd.DataFrame:
        """Per dtype, causal and seq_len: the largest errors over batch and the main head dims of the grid."""
        ok = self.ok
        if ok.empty:
            return ok
        ok = ok[ok["head_dim"].isin(self._main_dims()) & (ok["route_case"] != True)]  # noqa: E712
        return (ok.groupby(["dtype", "causal", "seq_len"], as_index=False)
                  .agg(max_abs_err=("max_abs_err", "max"), max_rel_err=("max_rel_err", "max"),
                       max_abs_ref=("max_abs_ref", "max")))

    def error_vs_seq_figure(self) -> str:
        lines = self._lines()
        if lines.empty:
            return "_No measured kernel cases to plot._"
        fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.17)
        drawn = lines[lines["max_rel_err"] > 0]["seq_len"]
        n_lo, n_hi = (float(drawn.min()), float(drawn.max())) if not drawn.empty else (1.0, 1.0)
        for i, dt in enumerate(self.dtypes):
            colour = PALETTE[i % len(PALETTE)]
            for causal in (False, True):
                sub = lines[(lines["dtype"] == dt) & (lines["causal"] == causal)].sort_values("seq_len")
                name = facet_label(dt, causal)
                for col, field in ((1, "max_abs_err"), (2, "max_rel_err")):
                    pts = sub[sub[field] > 0]  # log axis: an exact 0 has no place on it
                    if pts.empty:
                        continue
                    fig.add_trace(go.Scatter(x=list(pts["seq_len"]), y=list(pts[field]), mode="lines+markers",
                                             name=name, legendgroup=name, showlegend=col == 1,
                                             line=dict(color=colour, dash="solid" if causal else "dot"),
                                             hovertemplate=f"{escape.plot(name)}: N=%{{x}}, %{{y:.3g}}<extra></extra>"),
                                  row=1, col=col)
            u = self._u(dt)
            if u is not None:  # a trace, not a shape: annotations on log axes misplace themselves
                label = f"u ({DTYPE_SHORT.get(dt, dt)})"
                fig.add_trace(go.Scatter(x=[n_lo, n_hi], y=[u, u], mode="lines", name=label,
                                         line=dict(color=colour, dash="dash", width=1),
                                         hovertemplate=f"{label} = {u:.3g}<extra></extra>"), row=1, col=2)
        fig.update_xaxes(type="log", title_text="seq_len N", **log_ticks(lines["seq_len"] if not lines.empty else []))
        for col, field in ((1, "max_abs_err"), (2, "max_rel_err")):
            vals = list(lines[field]) if not lines.empty else []
            if col == 2:
                vals += [self._u(dt) for dt in self.dtypes if self._u(dt)]
            fig.update_yaxes(type="log", row=1, col=col, **log_ticks(vals))
        fig.update_yaxes(title_text="max |out − ref| (absolute)", row=1, col=1)
        fig.update_yaxes(title_text="max |out − ref| / max |ref| (normwise)", row=1, col=2)
        dims = join(self._main_dims())
        # Counted among the plotted points (the largest error at one length), not among all cases: a zero
        # hidden under another case's error at that length, or at a head_dim not drawn, is not left out here.
        exact = int((lines["max_abs_err"] == 0).sum())
        note = (f" {exact} point{'s' if exact != 1 else ''} whose largest error is exactly zero cannot sit on the "
                "log axis and are left out.") if exact else ""
        return self.figure("error-vs-seq", fig,
                           f"Largest error over batch sizes and head_dim {dims} at each sequence length; solid lines "
                           f"causal, dotted non-causal; dashed lines in the normwise panel mark each dtype's unit roundoff u.{note} "
                           f"{self._cond()}.", height=440)

    def seq_trend_finding(self) -> str:
        """How error moves with N for each dtype and masking, in words chosen by the data."""
        lines = self._lines()
        if lines.empty:
            return ""
        out = []
        for dt in self.dtypes:
            for causal in (False, True):
                sub = lines[(lines["dtype"] == dt) & (lines["causal"] == causal) & (lines["seq_len"] > 1)
                            & (lines["max_abs_err"] > 0)].sort_values("seq_len")
                if len(sub) < 2:
                    continue
                a, b = sub.iloc[0], sub.iloc[-1]
                ratio = b["max_abs_err"] / a["max_abs_err"]
                if ratio < 1 / TREND_FACTOR:
                    move = f"**shrinks {fmt.ratio(1 / ratio)}**"
                elif ratio > TREND_FACTOR:
                    move = f"**grows {fmt.ratio(ratio)}**"
                else:
                    move = f"**stays within a factor of {TREND_FACTOR:g}** (×{fmt.num(ratio)})"
                ref_ratio = b["max_abs_ref"] / a["max_abs_ref"] if a["max_abs_ref"] else float("nan")
                out.append(f"- {facet_label(dt, causal)}: the largest error {move} from N={a['seq_len']} "
                           f"({sci(a['max_abs_err'])}) to N={b['seq_len']} ({sci(b['max_abs_err'])}). Over the same "
                           f"range the largest |output| goes from {fmt.num(a['max_abs_ref'])} to "
                           f"{fmt.num(b['max_abs_ref'])} (×{fmt.num(ref_ratio)}).")
        return "\n".join(out)
