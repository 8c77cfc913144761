"""Step time against context, and throughput against batch: the sweeps' findings and figures."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ... import escape, fmt
from ...decode_memory import idle_share
from ...figures import PALETTE
from ...vocab import FAR_FLOOR, join
from .data import (DecodeData, FLOOR_TARGETS, HOST_BOUND, SAME_APPROACH, VARIANT_COLORS, _ok, floor_words,
                   inset_titles, than)


class Context(DecodeData):
    """How the loops compare at the longest context, how a step grows with it, and the sweep figures."""

    def overhead_finding(self) -> str:
        """Per model, at its longest context: the loops against each other and the graph against its floor.
        The step times themselves are in the figure below and the rows table; the sentences give the ratios."""
        out = []
        for model in self.models():
            b = self.context_batch(model)
            f = self.ok[(self.ok["model"] == model) & (self.ok["batch"] == b)]
            if f.empty:
                out.append(f"- **{escape.text(model)}.** No row ran at batch {b}.")
                continue
            c = int(f["context"].max())
            r = {v: self.row(model, v, b, c) for v in self.variants()}
            hf = r.get("hf-eager") if r.get("hf-eager") is not None else r.get("hf")
            eager, g, hc = r.get("eager"), r.get("graph"), r.get("hf-compiled")
            sentences = []
            if eager is not None and hf is not None:
                text = "our eager loop is " + than(eager.step_ms_median, hf.step_ms_median, "transformers' eager loop")
                busy = hf.get("kernel_ms_per_step")
                if _ok(busy) and busy < HOST_BOUND * hf.step_ms_median:
                    text += (f"; the GPU is busy for only {fmt.pct(100 * busy / hf.step_ms_median)} of transformers' "
                             "eager step, so the host issuing its kernels sets the pace")
                # The sentence says already how little of its step transformers' GPU was busy; the spread follows.
                sentences.append(text + "." + self.host_caveat(model, b, c, "eager", [hf.variant], idle=False))
            if g is not None and (eager is not None or hc is not None):
                slows = [v for v, r_ in (("eager", eager), ("hf-compiled", hc)) if r_ is not None]
                vs = [than(g.step_ms_median, r[v].step_ms_median, self.named(v)) for v in slows]
                sentences.append(f"our graph step is {join(vs)}." + self.host_caveat(model, b, c, "graph", slows))
            if g is not None and _ok(g.achieved_over_floor):
                if (model, b, c) in {(m, tb, tc) for m, tb, tc, _ in FLOOR_TARGETS}:
                    # Where the floor finding above already said what sets this step's pace, the ratio is enough.
                    sentences.append(f"the graph's step takes {fmt.ratio(g.achieved_over_floor)} its bandwidth floor; "
                                     "what sets its pace is said above.")
                else:
                    sentences.append(f"the graph's step takes "
                                     f"{floor_words(g.achieved_over_floor, idle=idle_share(g))}.")
            if not sentences:
                sentences = ["too few variants ran to compare."]
            text = " ".join(f"{x[0].upper()}{x[1:]}" for x in sentences)
            out.append(f"- **{escape.text(model)}, batch {b}, context {c}.** {text}")
            grow = self._growth(model, b)
            if grow:
                out[-1] += " " + grow
        return "\n".join(out) + "\n"

    def _growth(self, model: str, b: int) -> str:
        g = self.ok[(self.ok["model"] == model) & (self.ok["batch"] == b) & (self.ok["variant"] == "graph")]
        g = g[g["floor_ms"].notna()].sort_values("context")
        if len(g) < 2:
            return ""
        lo, hi = g.iloc[0], g.iloc[-1]
        return (f"From context {lo.context} to {hi.context} the floor grows {fmt.ratio(hi.floor_ms / lo.floor_ms)} "
                f"and the graph's step time {fmt.ratio(hi.step_ms_median / lo.step_ms_median)}.")

    def size_finding(self) -> str:
        """Which model comes closer to its floor, at a shape both ran (the longest context of the largest batch
        they share): where decode turns bandwidth-bound. Each model's best over every shape would set one
        model's batch 64 beside another's batch 4."""
        g = self.ok[(self.ok["variant"] == "graph") & self.ok["achieved_over_floor"].notna()]
        models = [m for m in self.models() if m in set(g["model"])]
        if len(models) < 2:
            return ""
        shared = set.intersection(*({(int(r.batch), int(r.context)) for r in g[g["model"] == m].itertuples()}
                                    for m in models))
        if not shared:
            return (f"No shape ran the CUDA-graph step of {join(escape.text(m) for m in models)} alike, so which comes "
                    "closer to its floor cannot be said here.")
        b, c = max(shared)
        rows = sorted((self.row(m, "graph", b, c) for m in models), key=lambda r: r.achieved_over_floor)
        r1, r2 = rows[0], rows[-1]
        # Not "closest approach": that reads as each model's best over every shape, which this is not.
        text = (f"At batch {b}, context {c} (the largest shape both ran), the CUDA-graph step takes "
                f"{fmt.ratio(r1.achieved_over_floor)} its floor for {escape.text(r1.model)} against "
                f"{fmt.ratio(r2.achieved_over_floor)} for {escape.text(r2.model)}.")
        # Said only where the data bear it out: the closer step is the one moving more bytes.
        gap = r2.achieved_over_floor / r1.achieved_over_floor
        if gap < SAME_APPROACH:
            text += (f" They are {fmt.pct(100 * (gap - 1))} apart, within the {fmt.pct(100 * (SAME_APPROACH - 1))} "
                     "that repeated collects move a step: too close to say that either comes closer, or why.")
        elif r1.bytes_per_step > r2.bytes_per_step:
            text += " The step that moves more bytes spreads its fixed costs over them and comes closer."
        else:
            text += (f" The closer step moves fewer bytes ({fmt.bytes_(r1.bytes_per_step)} against "
                     f"{fmt.bytes_(r2.bytes_per_step)}): how close a step comes depends on how fast its kernels run, "
                     "not on its bytes alone.")
        return text

    NO_SWEEP = ("This run has no context sweep to draw: no model has step times at two or more contexts (the rows "
                "that did not run are listed at the end of the page, with why).")

    def _not_run_words(self, rows: pd.DataFrame) -> str:
        """Why rows did not run, in a few words: for time where a spent budget skipped every one of them."""
        return ("were skipped for time" if (rows["status"] == "skipped").all() else
                "did not run (listed at the end of the page, with why)")

    def context_gaps(self) -> str:
        """Per model, where its context sweep has holes: which of the planned contexts ran, and for which variants,
        and why the rest did not; '' where every planned row of every sweep ran."""
        out = []
        for model in self.models():
            b = self.context_batch(model)
            planned = self.rows[(self.rows["model"] == model) & (self.rows["batch"] == b)]
            ok = self.ok[(self.ok["model"] == model) & (self.ok["batch"] == b)]
            missing = planned[planned["status"] != "ok"]
            contexts = sorted(int(c) for c in set(planned["context"]))
            if len(contexts) < 2 or missing.empty:
                continue
            ran = sorted(int(c) for c in set(ok["context"]))
            head = (f"no context ran of the {len(contexts)} planned" if not ran else
                    f"{'all' if len(ran) == len(contexts) else 'only'} context{'s' if len(ran) > 1 else ''} "
                    f"{join(ran)} ran of the {len(contexts)} planned ({fmt.span(contexts[0], contexts[-1], str)})")
            # A context that ran is short only of the loops planned there that did not run: the loops that run at the
            # key shapes alone (transformers compiled, the persistent step) were never planned at the others.
            partial = [f"context {c} without {join(self.named(v) for v in self.variants() if v in gone)}"
                       for c in ran if (gone := set(missing[missing["context"] == c]["variant"]))]
            why = ("were skipped for time" if (missing["status"] == "skipped").all() else
                   "are listed at the end of the page, with why")
            out.append(f"At {escape.text(model)}, batch {b}, {head}{', but ' + join(partial) if partial else ''}; "
                       f"the rows that did not run {why}.")
        # A paragraph, not a list: the findings below are one, and two lists in a row would run together.
        return "Not every row the context sweeps planned ran. " + " ".join(out) + "\n" if out else ""

    def no_batch_sweep(self) -> str:
        """Why the batch figure is missing, from the rows: at each context planned at several batches, which ran and
        why the rest did not; or that none were planned (a profile without a batch sweep)."""
        planned = self.rows.groupby(["model", "context"])["batch"].nunique()
        planned = planned[planned > 1]
        if planned.empty:
            return "This run has no batch sweep to draw: its profile times one batch at each context."
        parts = []
        for model, c in planned.index:
            rows = self.rows[(self.rows["model"] == model) & (self.rows["context"] == c)]
            ran = sorted(int(b) for b in set(rows[rows["status"] == "ok"]["batch"]))
            gone = sorted(int(b) for b in set(rows["batch"]) - set(ran))
            missing = rows[rows["batch"].isin(gone)]
            said = (f"only batch {ran[0]} ran" if len(ran) == 1 else "no batch ran") if len(ran) < 2 else ""
            if said and gone:
                parts.append(f"at {escape.text(model)}, context {c}, {said}; batch{'es' if len(gone) > 1 else ''} "
                             f"{join(gone)} {self._not_run_words(missing)}")
        return ("This run has no batch sweep to draw: " + "; ".join(parts) + "." if parts else
                "This run has no batch sweep to draw: its rows at a second batch did not run (listed at the end of "
                "the page, with why).")

    def _by_model(self, title) -> tuple[go.Figure, list[str]]:
        models = self.swept_models()
        fig = make_subplots(rows=1, cols=max(1, len(models)), subplot_titles=[escape.plot(title(m)) for m in models],
                            horizontal_spacing=0.08)
        inset_titles(fig, max(1, len(models)))
        return fig, models

    def latency_figure(self) -> str:
        if not self.swept_models():
            return self.NO_SWEEP
        fig, models = self._by_model(lambda m: f"{m}, batch {self.context_batch(m)}")
        shown = set()
        for j, model in enumerate(models, start=1):
            b = self.context_batch(model)
            f = self.ok[(self.ok["model"] == model) & (self.ok["batch"] == b)]
            for v in self.variants():
                g = f[f["variant"] == v].sort_values("context")
                if g.empty:
                    continue
                name = escape.plot(self.label(v))
                fig.add_trace(go.Scatter(
                    x=g["context"], y=g["step_ms_median"], mode="lines+markers", name=name, legendgroup=v,
                    showlegend=v not in shown, line=dict(color=VARIANT_COLORS.get(v, PALETTE[6])),
                    error_y=dict(type="data", symmetric=False, thickness=1, width=3,
                                 array=g["step_ms_p90"] - g["step_ms_median"],
                                 arrayminus=g["step_ms_median"] - g["step_ms_p10"]),
                    customdata=g["tokens_per_s"],
                    hovertemplate=f"{name}<br>context %{{x}}<br>%{{y:.3g}} ms per step<br>%{{customdata:.4g}} tokens/s"
                                  "<extra></extra>"), row=1, col=j)
                shown.add(v)
            base = "graph" if "graph" in set(f["variant"]) else "eager"
            fl = f[(f["variant"] == base) & f["floor_ms"].notna()].sort_values("context")
            if not fl.empty:
                fig.add_trace(go.Scatter(x=fl["context"], y=fl["floor_ms"], mode="lines",
                                         name=f"bandwidth floor ({self.f} cache)", legendgroup="floor",
                                         showlegend="floor" not in shown, line=dict(color=PALETTE[7], dash="dash", width=1),
                                         hovertemplate="floor %{y:.3g} ms<extra></extra>"), row=1, col=j)
                shown.add("floor")
            fig.update_yaxes(type="log", title_text="step time (ms)" if j == 1 else None, row=1, col=j)
            fig.update_xaxes(title_text="context (prompt tokens)", row=1, col=j)
        loops = self.ok["loops_timed"].dropna() if "loops_timed" in self.ok else pd.Series(dtype=float)
        few = (f" (each row times {fmt.span(loops.min(), loops.max(), lambda v: f'{v:.0f}')} loops, so these are "
               "interpolated between them)") if len(loops) and loops.max() < 10 else ""
        return self.figure("latency", fig, "Loop time of one decode step against context, log scale; bars span p10 to "
                                           f"p90 of the timed loops{few}; the dashed line is the bandwidth floor (weights "
                                           "plus cache over copy bandwidth). Hover for tokens/s. "
                                           f"{self.data.dtype}, {self._weights_words()}.")

    def throughput_figure(self) -> str:
        fig = go.Figure()
        title = []
        for model in self.models():
            c = self.batch_context(model)
            if c is None:
                continue
            title.append(f"{model} at context {c}")
            f = self.ok[(self.ok["model"] == model) & (self.ok["context"] == c)]
            for v in self.variants():
                g = f[f["variant"] == v].sort_values("batch")
                if g.empty:
                    continue
                name = escape.plot(f"{self.label(v)} ({model})" if len(self.models()) > 1 else self.label(v))
                fig.add_trace(go.Scatter(x=g["batch"], y=g["tokens_per_s"], mode="lines+markers", name=name,
                                         line=dict(color=VARIANT_COLORS.get(v, PALETTE[6])),
                                         customdata=g["achieved_over_floor"],
                                         hovertemplate=f"{name}<br>batch %{{x}}<br>%{{y:.4g}} tokens/s<br>"
                                                       "%{customdata:.3g}× floor<extra></extra>"))
        if not title:
            return self.no_batch_sweep()
        fig.update_xaxes(type="log", title_text="batch")
        fig.update_yaxes(type="log", title_text="tokens/s (all sequences)")
        return self.figure("throughput", fig, f"Decode throughput against batch, {join(title)}; tokens/s "
                                              f"is batch over the step's loop time. {self.data.dtype}, "
                                              f"{self._weights_words()}.")

    def floor_figure(self) -> str:
        if not self.swept_models():
            return ""  # the sentence above the latency figure says why
        fig, models = self._by_model(lambda m: f"{m}, batch {self.context_batch(m)}")
        shown = set()
        for j, model in enumerate(models, start=1):
            b = self.context_batch(model)
            f = self.ok[(self.ok["model"] == model) & (self.ok["batch"] == b) & self.ok["achieved_over_floor"].notna()]
            for v in self.variants():
                g = f[f["variant"] == v].sort_values("context")
                if g.empty:
                    continue
                name = escape.plot(self.label(v))
                fig.add_trace(go.Scatter(x=g["context"], y=g["achieved_over_floor"], mode="lines+markers", name=name,
                                         legendgroup=v, showlegend=v not in shown,
                                         line=dict(color=VARIANT_COLORS.get(v, PALETTE[6])),
                                         hovertemplate=f"{name}<br>context %{{x}}<br>%{{y:.3g}}× floor<extra></extra>"),
                              row=1, col=j)
                shown.add(v)
            fig.add_hline(y=1, line_dash="dash", line_color=PALETTE[7], line_width=1, row=1, col=j)
            fig.add_hline(y=FAR_FLOOR, line_dash="dot", line_color=PALETTE[7], line_width=1, row=1, col=j)
            fig.update_yaxes(type="log", title_text="step time / floor" if j == 1 else None, row=1, col=j)
            fig.update_xaxes(title_text="context (prompt tokens)", row=1, col=j)
        # The dotted line is the page's FAR_FLOOR, not a target (gpt2-xl's is 1.5x): the caption says what it marks.
        return self.figure("floor", fig, f"Achieved step time over the bandwidth floor, log scale: 1 (dashed) would "
                                         f"move the step's bytes at copy bandwidth; above the dotted line, "
                                         f"{fmt.ratio(FAR_FLOOR)}, moving the bytes takes under "
                                         f"{fmt.pct(100 / FAR_FLOOR)} of a step: the kernels set its pace, by their "
                                         "own costs or, where the host cannot keep the GPU busy, by the idle gaps "
                                         "between them (the time figure above shows which, at the key shapes). "
                                         f"Each variant's floor counts its own cache format "
                                         f"(int8 plus scales for the int8 variants). {self.data.dtype}, "
                                         f"{self._weights_words()}.")
