"""What limits each kernel: pipe and Speed-of-Light utilisation judged against the rule in collect/schema/limiter.py."""
from __future__ import annotations

from functools import cached_property

import pandas as pd
import plotly.graph_objects as go

from collect.schema.limiter import BUSY_PCT, UNITS, UNIT_FIELDS

from ... import escape, fmt, limits
from ...fmt import known
from ...tables import table_html
from ...vocab import MATERIALISING, impl_label, join, limiter_words
from .data import ProfileData, _esc, _step_words


def step_short(step) -> str:
    """' g8' for our kernel's recorded step, '' without one: for tick labels that must stay short."""
    return f" {step}" if isinstance(step, str) and step else ""


class Limiter(ProfileData):
    """The limiter table, the utilisation heat map, and our kernel's verdict per shape."""

    @cached_property
    def _limiters(self) -> pd.DataFrame:
        """The main kernel of every fused call whose units were measured, with its verdict judged again from
        its counters (collect/schema/limiter.py); a stored verdict that disagrees is refused."""
        k = self.kernels()
        cols = ["case_id", "launch", "impl", "shape", "label", "kernel_step", *UNIT_FIELDS, "verdict", "evidence"]
        if k.empty or not set(UNIT_FIELDS) <= set(k.columns) or k[list(UNIT_FIELDS)].isna().all().all():
            return pd.DataFrame(columns=cols)
        im = self.impls()
        im = im[(im["group"] == "main") & (im["status"] == "ok") & ~im["impl"].isin(MATERIALISING)
                & (im["impl"] != "sdpa")]
        rows = []
        for _, r in im.iterrows():
            mine = self._case_kernels(r["case_id"])
            mine = mine[mine[list(UNIT_FIELDS)].notna().any(axis=1)] if not mine.empty else mine
            if mine.empty:
                continue
            kk = mine.sort_values("duration_ms", ascending=False, na_position="last").iloc[0]
            units = {f: (float(kk[f]) if known(kk[f]) else None) for f in UNIT_FIELDS}
            verdict = limits.verdict(self.run, kk)
            shape = (int(r["batch"]), int(r["heads"]), int(r["seq_len"]), int(r["head_dim"]), r["dtype"], bool(r["causal"]))
            step = next((x for x in (kk.get("kernel_step"), r.get("kernel_step")) if known(x)), None)
            rows.append(dict(case_id=kk["case_id"], launch=int(kk["launch"]), impl=r["impl"], shape=shape,
                             label=impl_label(r["impl"]) + _step_words(step), kernel_step=step, **units,
                             verdict=verdict.word if verdict else None, evidence=verdict.evidence if verdict else None))
        return pd.DataFrame(rows, columns=cols)

    def limiter_shapes(self) -> list[tuple]:
        """The shapes at which our kernel's units were measured, in profile order."""
        df = self._limiters
        return list(dict.fromkeys(df[df["impl"] == "triton"]["shape"])) if not df.empty else []

    def limiter_table(self) -> str:
        df = self._limiters
        if df.empty:
            return ("_This run's profile has no pipe or Speed-of-Light counters (it predates them, or Nsight Compute "
                    "could not collect them), so no kernel's limiter is judged._")
        t = df.assign(shape_text=[self.shape_text(s) for s in df["shape"]],
                      verdict_text=[limiter_words(v) for v in df["verdict"]])
        cols = {"shape_text": "Shape", "label": "Kernel"}
        cols.update({f: name[0].upper() + name[1:] + " (% of peak)" for _, f, name in UNITS})
        cols["verdict_text"] = "What limits it"
        return table_html(t, cols, {f: fmt.pct for f in UNIT_FIELDS})

    def utilisation_figure(self) -> str:
        df = self._limiters
        if df.empty:
            return ""
        # One row per kernel and shape, one column per unit: a cell's colour is its busy share, and the
        # colour scale turns at the share the rule calls a limit, so a limiting unit stands out.
        y = [_esc(f"{impl_label(i)}{step_short(s)} · B{b} H{h} N{n} d{d}{' causal' if c else ''}")
             for i, s, (b, h, n, d, _, c) in zip(df["impl"], df["kernel_step"], df["shape"])]
        x = [_esc(name) for _, _, name in UNITS]
        z = df[list(UNIT_FIELDS)].astype(float).values
        turn = BUSY_PCT / 100
        fig = go.Figure(go.Heatmap(
            z=z, x=x, y=y, zmin=0, zmax=100, texttemplate="%{z:.0f}",
            colorscale=[[0, "#f7fbff"], [turn * 0.5, "#9ecae1"], [turn - 1e-6, "#2171b5"], [turn, "#cb181d"], [1, "#67000d"]],
            colorbar=dict(title="% of peak", tickvals=[0, 20, 40, 60, BUSY_PCT, 100]),
            hovertemplate="%{y}<br>%{x}: %{z:.3g}% of its peak<extra></extra>"))
        fig.update_layout(yaxis=dict(autorange="reversed", automargin=True), xaxis=dict(side="top", automargin=True))
        return self.figure("utilisation", fig,
                           "How busy each unit was while the kernel ran, as a share of its own peak (the cell's number): "
                           "the tensor, exponential (XU), FMA, ALU and load/store pipes and the instruction issue slots "
                           "(sm__pipe_*_cycles_active, sm__inst_executed_pipe_*, sm__inst_issued, as % of peak "
                           "sustained while the SM was active), and DRAM, L2 and L1/shared throughput (Speed of "
                           f"Light). Cells at {BUSY_PCT:.0f}% or more, where a unit counts as the limit, turn red. "
                           "Nsight Compute with --clock-control none, one profiled call after warm-up",
                           height=160 + 28 * len(y))

    def limiter_finding(self) -> str:
        """Per shape: our kernel's verdict, the busiest unit, and the fastest peer's verdict beside it."""
        df = self._limiters
        out = []
        for shape in self.limiter_shapes():
            at = df[df["shape"] == shape]
            ours = at[at["impl"] == "triton"].iloc[0]
            busiest = max(UNITS, key=lambda u: ours[u[1]] if known(ours[u[1]]) else -1)
            text = (f"At {self.shape_text(shape)}, our kernel{escape.text(_step_words(ours.kernel_step))} "
                    f"is limited by **{escape.text(limiter_words(ours.verdict))}**: {escape.text(ours.evidence or '')}")
            peers = at[at["impl"] != "triton"]
            same = [impl_label(p) for p, v in zip(peers["impl"], peers["verdict"]) if v == ours.verdict]
            by_verdict: dict[str, list[str]] = {}
            for p, v in zip(peers["impl"], peers["verdict"]):
                if v != ours.verdict:
                    by_verdict.setdefault(v, []).append(impl_label(p))
            other = [f"{join(names)} by {escape.text(limiter_words(v))}" for v, names in by_verdict.items()]
            if same:
                text += f". {join(same)} {'is' if len(same) == 1 else 'are'} limited the same way"
            if other:
                text += f"{'; ' if same else '. '}{join(other)}"
            out.append(text + f" (our busiest unit: the {busiest[2]}).")
        return "\n\n".join(out)

    def limiter_headline(self) -> str:
        """One sentence for the top of the page: our kernel's verdict at each limiter shape, grouped."""
        df = self._limiters
        shapes = self.limiter_shapes()
        if not shapes:
            return ""
        by: dict[str, list[str]] = {}
        for shape in shapes:
            ours = df[(df["shape"] == shape) & (df["impl"] == "triton")].iloc[0]
            by.setdefault(ours.verdict, []).append(self.shape_text(shape))
        parts = [f"{escape.text(limiter_words(v))} at {join(s)}" for v, s in by.items()]
        return (f"By its counters, our kernel is limited by {'; '.join(parts)} (a unit counts as the limit at "
                f"{BUSY_PCT:.0f}% of its peak; below that, the largest share of stalls names what the warps wait for).")
