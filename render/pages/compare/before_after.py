"""Before and after: the narrated run against the newest earlier run of another kernel version, case by case."""
from __future__ import annotations

import math
from functools import cached_property

import plotly.graph_objects as go

from ... import escape, fmt
from ...figures import PALETTE
from ...run_diff import diff_runs, predecessor
from ...runs import Run
from ...vocab import is_ours, join, plural
from .common import CompareSection

# The diff chart: one colour per verdict (collect/schema/diff.py VERDICTS), drawn in this order.
VERDICT_COLORS = {"faster": PALETTE[2], "slower": PALETTE[3], "no change": PALETTE[7], "ratio only": PALETTE[0]}
# The cases the diff's sentence names: the ones that changed most, either way.
DIFF_NAMED = 3


class BeforeAfter(CompareSection):
    """The diff of the narrated run against its predecessor, in words and in a figure."""

    @cached_property
    def before(self) -> Run | None:
        return predecessor(self.run, self.runs)

    @cached_property
    def diff(self):
        return diff_runs(self.before, self.run, self.run.path.parent.parent) if self.before else None

    def _changed(self) -> list:
        d = self.diff
        return sorted((c for c in d.cases if c.verdict in ("faster", "slower")), key=lambda c: -abs(math.log(c.ratio)))

    def diff_summary(self) -> str:
        """What changed between the previous kernel version's run and this one, in sentences from the diff."""
        d, before = self.diff, self.before
        if d is None:
            return (f"No earlier run shipped another version of our kernel than `{escape.text(self.run.id)}`, so "
                    "there is no before to compare with yet.")
        a, b = escape.text(before.id), escape.text(self.run.id)
        va, vb = escape.text(d.kernel_version_a), escape.text(d.kernel_version_b)
        out = [f"The narrated run `{b}` ships kernel version `{vb}`; the newest earlier run with another version is "
               f"`{a}` (`{va}`)."]
        if not d.same_device:
            out.append(f"It ran on {escape.text(d.device_a)}, this run on {escape.text(d.device_b)}: the ratios below "
                       "compare two GPUs, not a change of code, so no case is called faster or slower.")
        elif not d.cases:
            out.append("The two runs share no case measured in both.")
        else:
            n = {v: sum(c.verdict == v for c in d.cases) or "none" for v in ("faster", "slower", "no change")}
            out.append(f"Of the {plural(len(d.cases), 'case')} both measured, {n['faster']} ran faster in `{b}`, "
                       f"{n['slower']} slower, and {n['no change']} showed no change beyond the noise.")
            changed = self._changed()
            mine = [c for c in changed if is_ours(c.impl)][:DIFF_NAMED]
            theirs = [c for c in changed if not is_ours(c.impl)][:DIFF_NAMED]
            words = lambda cs: join([f"{escape.text(c.label)} ({fmt.ratio(c.ratio)} the time)" for c in cs])  # noqa: E731
            if mine:
                out.append(f"Of our own code, the {'case' if len(mine) == 1 else 'cases'} that changed most: "
                           f"{words(mine)}.")
            if theirs:
                # Their code is not ours to change: a difference there is the machine, a library or how it was run.
                out.append(f"Of the implementations ours is measured against, {words(theirs)} changed most.")
        only = len(d.only_a) + len(d.only_b)
        if only:
            out.append(f"{plural(only, 'case')} measured in one of the two runs only "
                       f"{'is' if only == 1 else 'are'} left out.")
        return " ".join(out) + "\n" + "".join(escape.note(x) for x in d.notes)

    def diff_figure(self) -> str:
        d = self.diff
        if d is None or not d.cases:
            return ""
        rows = sorted(d.cases, key=lambda c: c.ratio)
        fig = go.Figure()
        for verdict, color in VERDICT_COLORS.items():
            idx = [i for i, c in enumerate(rows) if c.verdict == verdict]
            if not idx:
                continue
            cs = [rows[i] for i in idx]
            has = [c.ratio_low is not None for c in cs]
            fig.add_trace(go.Scatter(
                x=[i + 1 for i in idx], y=[c.ratio for c in cs], mode="markers", name=verdict,
                marker=dict(color=color, size=6),
                error_y=dict(type="data", symmetric=False, color=color, thickness=1, width=0,
                             array=[c.ratio_high - c.ratio if h else 0 for c, h in zip(cs, has)],
                             arrayminus=[c.ratio - c.ratio_low if h else 0 for c, h in zip(cs, has)]),
                text=[escape.plot(c.label) for c in cs],
                customdata=[[f"[{c.ratio_low:.3f}, {c.ratio_high:.3f}]" if h else "no interval (no samples)",
                             f"{c.floor:.3f} ({c.floor_source})"] for c, h in zip(cs, has)],
                hovertemplate="%{text}<br>ratio %{y:.3f}, interval %{customdata[0]}<br>noise floor "
                              "%{customdata[1]}<extra>%{fullData.name}</extra>"))
        fig.add_hline(y=1.0, line=dict(color="grey", width=1, dash="dot"))
        floors = {c.floor for c in rows}
        if len(floors) == 1 and d.same_device:
            f = floors.pop()
            fig.add_hrect(y0=1 / f, y1=f, fillcolor="grey", opacity=0.12, line_width=0)
        fig.update_xaxes(title_text="case, sorted by ratio")
        fig.update_yaxes(title_text=f"time in {escape.plot(d.run_b)} / time in {escape.plot(d.run_a)} (below 1: faster)", type="log")
        band = (" The grey band is the noise floor every case was held to." if len(
            {c.floor for c in rows}) == 1 and d.same_device else "")
        return self.figure("diff", fig, f"Each case both runs measured: the median time in {d.run_b} over the median "
                           f"time in {d.run_a}, sorted, with its {d.confidence:.0%} bootstrap interval where both runs "
                           f"kept their samples, coloured by verdict.{band} Runs {d.run_a} ({d.device_a}) and "
                           f"{d.run_b} ({d.device_b})", height=460)
