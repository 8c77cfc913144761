"""Against the fastest other implementation and the matmul ceiling: whether the shipped version reaches its goal,
which implementation it was measured against, the clocks the cases ran at, the TFLOP/s figure, the ratio table and
the matmul ceiling."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ... import escape, fmt
from ...figures import PALETTE
from ...tables import table_html
from ...vocab import DTYPE_SHORT as SHORT
from ...clock_reading import overshoot_words
from ...vocab import CLOCK_GAP, clock_gap, impl_label, join, masking, plural, version_kernel
from .common import NOISE_BAND, GoalCase, IterationsSection, goal_ratio_text, share, where_ran

# What the ratio table's Kernel column says of an implementation that is not ours, by its row kind: FlashAttention-4
# is not an SDPA backend, whatever the page compares it beside.
OTHER_KERNELS = {"sdpa": "SDPA backend", "baseline": "another project's kernel"}


class Goal(IterationsSection):
    """The goal finding, the figure and table of ratios, and the ceiling finding."""

    def goal_finding(self) -> str:
        """Whether the final version reached the goal ratio, case by case."""
        d = self.data
        final = d.final_version
        ratios = [(c, self.ratio(final, *c)) for c in self.cases()]
        measured = [(c, r) for c, r in ratios if r is not None]
        goal = fmt.ratio(d.goal_ratio)
        if not measured:
            return (f"The final version, **{escape.text(final)}**, has no case measured beside another implementation in this "
                    f"run, so whether it reaches {goal} of the fastest other implementation cannot be said here.")
        met = [(c, r) for c, r in measured if r >= d.goal_ratio]
        worst = min(measured, key=lambda x: x[1])
        best = max(measured, key=lambda x: x[1])
        med, low, reached = self._goal_verdict([r for _, r in measured])
        floor = d.goal_ratio - NOISE_BAND
        shown = lambda r: goal_ratio_text(r, d.goal_ratio)  # noqa: E731
        out = [f"The goal: over the goal cases, a median of {goal} or more of the fastest other implementation's TFLOP/s, "
               f"and no case below {fmt.ratio(floor)} (a noise band of {share(NOISE_BAND)}, the same for every run, not "
               "measured in this one). The final version, "
               f"**{escape.text(final)}**, has a median of {shown(med)} with "
               f"{plural(len(low), 'case', none=True)} below {fmt.ratio(floor)}: the goal is "
               f"{'reached' if reached else 'missed'}. "
               f"It reaches {goal} in {len(met)} of {len(measured)} cases"]
        # A case that clears the goal by less than the noise band could fall under it on another measurement.
        close = [r for _, r in met if r < d.goal_ratio + NOISE_BAND]
        out[-1] += (f", {len(close)} of them by less than the {share(NOISE_BAND)} noise band." if close else ".")
        missed = [self.label(c) for c, r in measured if r < d.goal_ratio]
        if 0 < len(missed) <= 3:  # a longer list belongs to the table below, not to a sentence
            out.append(f"It falls short at {join(missed)}.")
        out.append(f"Its ratio runs from {shown(worst[1])} ({self.label(worst[0])}) to {shown(best[1])} "
                   f"({self.label(best[0])}); the table below has every case.")
        beats = [c for c, r in measured if r >= 1.0]
        if beats and d.goal_ratio != 1.0:  # at a goal of 1.0 the count above says the same
            out.append(f"It is at least as fast as every other implementation measured in {len(beats)} of {len(measured)} cases.")
        out.append(self.rival_finding([c for c, _ in measured]))
        out.append(self.clock_gap_finding())
        return " ".join(x for x in out if x)

    def rival_finding(self, cases: list[GoalCase]) -> str:
        """Which implementation the fastest other one was, case by case: the ratios are against it, not against SDPA."""
        who: dict[str, list] = {}
        for c in cases:
            if (s := self.fastest_rival(*c)) is not None:
                who.setdefault(s[0], []).append(c)
        if not who:
            return ""
        ranked = sorted(who.items(), key=lambda x: -len(x[1]))
        if len(ranked) == 1:
            return f"The fastest other implementation was {escape.text(impl_label(ranked[0][0]))} in every case."
        (first, many), rest = ranked[0], ranked[1:]
        others = "; ".join(f"{escape.text(impl_label(i))} in {len(cs)}: {self._where(cs)}" for i, cs in rest)
        return (f"The fastest other implementation was {escape.text(impl_label(first))} in {len(many)} of "
                f"{len(cases)} cases; {others}.")

    @staticmethod
    def _where(cases: list[GoalCase]) -> str:
        """'non-causal at N=2048 (d=64, fp16 and bf16)' for a few goal cases."""
        return join(f"{masking(m)} at {where_ran([(c.head_dim, c.n, c.dtype) for c in cases if c.causal == m])}"
                    for m in dict.fromkeys(c.causal for c in cases))

    def clock_gap_finding(self) -> str:
        """Where the final version and the fastest other implementation had median SM clock readings more than CLOCK_GAP apart
        (clocks are read, never set): how many goal cases, and the widest."""
        final = self.data.final_version
        gaps = [(g, c) for c in self.cases() if (g := self.case_clock_gap(final, c)) is not None]
        apart = [(g, c) for g, c in gaps if g[0] > CLOCK_GAP]
        if not apart:
            return ""
        (_, a, b, sdpa), c = max(apart, key=lambda x: x[0][0])
        text = (f"In {len(apart)} of {plural(len(gaps), 'goal case')} {escape.text(final)} and the fastest other "
                f"implementation had median SM clock readings more than {share(CLOCK_GAP)} apart (clocks are read, never set). "
                f"The widest gap is at {self.label(c)}: ours at {fmt.num(a, 4)} MHz, "
                f"{escape.text(impl_label(sdpa))} at {fmt.num(b, 4)} MHz.")
        return (text + " " + self._reading_lean(a, b)
                + overshoot_words(self.ok, self.run.manifest.device))

    def _reading_lean(self, ours: float, theirs: float) -> str:
        """Which way a clock-reading gap may lean the ratio there, without a size: a reading is of the rest before each
        call, not of the call (vocab.clocks_apart)."""
        favours = "ours" if ours > theirs else "theirs"
        return (f"The higher reading was {favours}, so the ratio there may "
                f"{'flatter ours' if favours == 'ours' else 'understate ours'}; a reading is of the rest before each "
                "call, so it does not say by how much.")

    def tflops_figure(self) -> str:
        """Versions along x, TFLOP/s up; one line per N; dashed: fastest other; dotted: matmul ceiling."""
        facets = self.facets()
        names = [v.name for v in self.timed_versions()]  # a version with no rows would be an empty tick
        ticks = [n.split("-")[0] for n in names]  # 'v20': the full name and kernel are in the hover and the tables
        if len(set(ticks)) < len(ticks):
            ticks = names
        kernel = {v.name: version_kernel(v.path, v.features) for v in self.timed_versions()}
        dtypes = list(dict.fromkeys(d for d, _ in facets))
        causals = sorted({c for _, c in facets})
        fig = make_subplots(rows=len(dtypes), cols=len(causals), shared_yaxes="all", shared_xaxes=True,
                            subplot_titles=[f"{SHORT.get(d, d)}, {masking(c)}" for d in dtypes for c in causals],
                            horizontal_spacing=0.06, vertical_spacing=0.12)
        # One series per shape and length: two shapes can share an N.
        sizes = list(dict.fromkeys((c.n, c.batch, c.heads, c.head_dim) for c in self.cases()))
        shown = set()
        for i, dtype in enumerate(dtypes):
            for j, causal in enumerate(causals):
                for k, (n, b, h, hd) in enumerate(sizes):
                    case = GoalCase(dtype, causal, n, b, h, hd)
                    size = f"N={n}, d={hd}" if self.several_shapes else f"N={n}"
                    color = PALETTE[k % len(PALETTE)]
                    ys = [self.tflops(v, *case) for v in names]
                    if all(y is None for y in ys):
                        continue
                    hover = [escape.plot(f"{v} ({kernel[v]}), {self.label(case)}: {fmt.num(y)} TFLOP/s")
                             if y is not None else escape.plot(f"{v}: not measured") for v, y in zip(names, ys)]
                    key = f"ours {size}"
                    fig.add_trace(go.Scatter(x=ticks, y=ys, mode="lines+markers", name=key, legendgroup=key,
                                             showlegend=key not in shown, line=dict(color=color),
                                             hovertext=hover, hoverinfo="text"), row=i + 1, col=j + 1)
                    shown.add(key)
                    s = self.fastest_rival(*case)
                    if s:
                        key = f"fastest other {size}"
                        label = escape.plot(f"{impl_label(s[0])}, {self.label(case)}: "
                                            f"{fmt.num(s[1])} TFLOP/s")
                        fig.add_trace(go.Scatter(x=[ticks[0], ticks[-1]], y=[s[1], s[1]], mode="lines", name=key,
                                                 legendgroup=key, showlegend=key not in shown,
                                                 line=dict(color=color, dash="dash"), hovertext=[label, label],
                                                 hoverinfo="text"), row=i + 1, col=j + 1)
                        shown.add(key)
                ceil = self.ceiling(dtype)
                if ceil:
                    key = "matmul ceiling"
                    label = escape.plot(f"measured {SHORT.get(dtype, dtype)} matmul: {fmt.flops(ceil)}")
                    fig.add_trace(go.Scatter(x=[ticks[0], ticks[-1]], y=[ceil / 1e12] * 2, mode="lines", name=key,
                                             legendgroup=key, showlegend=key not in shown,
                                             line=dict(color=PALETTE[7], dash="dot"), hovertext=[label, label],
                                             hoverinfo="text"), row=i + 1, col=j + 1)
                    shown.add(key)
        fig.update_yaxes(title_text="TFLOP/s", rangemode="tozero", col=1)
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=ticks, tickangle=-60,
                         tickfont=dict(size=11), title_text="version (hover for its name and kernel)", row=len(dtypes))
        caption = (f"TFLOP/s of each kernel version (solid, in journey order) against the fastest other implementation of the "
                   f"same case (dashed) and the measured matmul rate (dotted); {self.shape_lengths()}; "
                   f"4·B·H·N²·d FLOP per call, halved when causal.")
        return self.figure("tflops", fig, caption, height=300 * len(dtypes) + 120)

    def ratio_table(self) -> str:
        """Each implementation by shape class (head_dim and masking): its ratio to the fastest other implementation over
        the cases of that class it ran, and how many it ran; the per-case TFLOP/s are in the figure's hover."""
        others = self.rows[self.rows["kind"].isin(tuple(OTHER_KERNELS))]
        kinds = dict(zip(others["impl"], others["kind"]))
        impls = [*(v.name for v in self.timed_versions()), *kinds]
        classes = list(dict.fromkeys((c.head_dim, c.causal) for c in self.cases()))
        cols = {"impl": "Implementation", "kernel": "Kernel"}
        shown = lambda r: goal_ratio_text(r, self.data.goal_ratio)  # noqa: E731
        data = []
        for impl in impls:
            v = self.version(impl)
            r = {"impl": impl_label(impl), "kernel": version_kernel(v.path, v.features) if v else OTHER_KERNELS[kinds[impl]]}
            for j, (hd, causal) in enumerate(classes):
                cases = [c for c in self.cases() if c.head_dim == hd and c.causal == causal]
                ratios = [x for x in (self.ratio(impl, *c) for c in cases) if x is not None]
                r[f"k{j}"] = (f"{fmt.span(min(ratios), max(ratios), shown)} ({len(ratios)} of {len(cases)})"
                              if ratios else "not run")
                cols[f"k{j}"] = f"d={hd}, {masking(causal)}"
            data.append(r)
        return table_html(pd.DataFrame(data), cols,
                          caption="Lowest to highest ratio of TFLOP/s to the fastest other implementation of the same case, over "
                                  "the cases of each class the implementation ran (how many, of the class's); "
                                  "hover the figure above for each case's TFLOP/s")

    def ceiling_finding(self) -> str:
        """The final version and the fastest other implementation as fractions of the measured matmul rate."""
        final = self.data.final_version
        parts = []
        for dtype, causal in self.facets():
            ceil = self.ceiling(dtype)
            if not ceil or causal:
                continue
            case = max((c for c in self.cases() if c.dtype == dtype and c.causal == causal),
                       key=lambda c: (c.head_dim, c.n))
            t = self.tflops(final, *case)
            s = self.fastest_rival(*case)
            if t is None and s is None:
                continue
            shape = f", B={case.batch}, H={case.heads}, d={case.head_dim}" if self.several_shapes else ""
            bit = f"In {SHORT.get(dtype, dtype)}, {masking(causal)}, at N={case.n}{shape}, "
            bit += (f"{escape.text(final)} reaches {fmt.pct(100 * t * 1e12 / ceil)}" if t is not None
                    else f"{escape.text(final)} did not run")
            if s:
                bit += f" and {escape.text(impl_label(s[0]))} {fmt.pct(100 * s[1] * 1e12 / ceil)}"
            parts.append(bit + f" of the measured {fmt.flops(ceil)} matmul rate.")
            calls = [(name, tf, self.clock(name, case)) for name, tf in ((final, t), *([s] if s else [])) if tf is not None]
            parts.append(self._ceiling_clocks(dtype, calls))
        if not parts:
            return "No measured matmul ceiling (or no non-causal case) in this run to set the attention rates against."
        return ("The FLOPs counted for attention are those of two matmuls per score tile, with a softmax between them "
                "that the tensor cores do not do, so the measured rate of one large matmul (Hardware page) is the "
                "natural roof to compare against. " + " ".join(p for p in parts if p))

    def _ceiling_clocks(self, dtype: str, calls: list) -> str:
        """Where the attention calls' clock readings lie more than CLOCK_GAP from the matmul's, which read higher: the
        shares above are of the rate as measured, and no share is rescaled per cycle, since a reading is of the rest
        before a call, not of the call (vocab.clocks_apart)."""
        at = self.ceiling_clock(dtype)
        calls = [(n, t, c) for n, t, c in calls if c is not None]
        if at is None or not calls or all((clock_gap(c, at) or 0) <= CLOCK_GAP for _, _, c in calls):
            return ""
        # The finding sets one dtype's calls after another's: each clock named by its dtype and its call, so that none
        # is read as the other dtype's.
        d = SHORT.get(dtype, dtype)
        one = len(calls) == 1
        mhz = join(f"{fmt.num(c, 4)} MHz ({escape.text(impl_label(n))})" for n, _, c in calls)
        lower = all(c < at for _, _, c in calls)
        higher = all(c > at for _, _, c in calls)
        lean = ("lower than the matmul's, so the shares may understate what the calls do per cycle" if lower else
                "higher than the matmul's, so the shares may overstate what the calls do per cycle" if higher else
                "on both sides of the matmul's")
        return (f"The {d} call{'' if one else 's'} had {'a ' if one else ''}median SM clock reading{'' if one else 's'} "
                f"of {mhz}, the {d} matmul {fmt.num(at, 4)} MHz: {lean}. A reading is of the rest before a call, not "
                "of the call, so the shares are not rescaled by it.")
