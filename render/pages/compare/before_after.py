"""Before and after: the narrated run against the newest earlier run of another kernel version, case by case."""
from __future__ import annotations

import math
from functools import cached_property

import numpy as np
import plotly.graph_objects as go

from collect.schema.diff import DiffCase

from ... import escape, fmt
from ...figures import PALETTE
from ...run_diff import diff_runs, predecessor
from ...runs import Run
from ...vocab import EVEN, HOST_BOUND, impl_label, is_ours, join, plural, side
from .common import CompareSection

# The diff chart: one colour per verdict (collect/schema/diff.py VERDICTS), drawn in this order.
VERDICT_COLORS = {"faster": PALETTE[2], "slower": PALETTE[3], "no change": PALETTE[7], "ratio only": PALETTE[0]}
# The cases the diff's sentence names: the ones that changed most, either way.
DIFF_NAMED = 3
# The implementation a kernel version names: flash_attention as it ships (the other rows of ours hold a path fixed).
FUSED = "triton"


class BeforeAfter(CompareSection):
    """The diff of the narrated run against its predecessor, in words and in a figure."""

    @cached_property
    def before(self) -> Run | None:
        return predecessor(self.run, self.runs)

    @cached_property
    def diff(self):
        return diff_runs(self.before, self.run, self.run.path.parent.parent) if self.before else None

    @property
    def diff_cases(self) -> list[DiffCase]:
        """The diff's cases, each with its pace (host_bound) and its verdict against the floor of its class and pace,
        as `python -m collect diff` gives them."""
        return self.diff.cases if self.diff is not None else []

    def diff_summary(self) -> str:
        """What changed between the previous kernel version's run and this one: our kernel first, then what the host
        moved, then the code that did not change, each from the diff read with its pace."""
        d, before = self.diff, self.before
        if d is None:
            return (f"No earlier run shipped another version of our kernel than `{escape.text(self.run.id)}`, so "
                    "there is no before to compare with yet.")
        a, b = escape.text(before.id), escape.text(self.run.id)
        va, vb = escape.text(d.kernel_version_a), escape.text(d.kernel_version_b)
        out = [f"The narrated run `{b}` ships kernel version `{vb}`; the newest earlier run with another version is "
               f"`{a}` (`{va}`)."]
        if not d.same_device:
            # The predecessor ships another kernel version by its choice (run_diff.predecessor): across two GPUs
            # each ratio carries both changes, and neither can be told apart from the other.
            out.append(f"It ran on {escape.text(d.device_a)}, this run on {escape.text(d.device_b)}: the ratios below "
                       f"compare two GPUs and carry the change of code as well (`{va}` to `{vb}`, and whatever else "
                       "changed between the two commits), so no case is called faster or slower.")
        elif not d.cases:
            out.append("The two runs share no case measured in both.")
        else:
            out += [self._ours_sentence(b), self._host_sentence(b), self._others_sentence(), self._totals(b)]
        only = len(d.only_a) + len(d.only_b)
        if only:
            out.append(f"{plural(only, 'case')} measured in one of the two runs only "
                       f"{'is' if only == 1 else 'are'} left out.")
        # Across two GPUs the sentence above says what the diff's own note on it says: the note once is a repeat.
        notes = [x for x in d.notes if d.same_device or "two GPUs" not in x]
        return " ".join(x for x in out if x) + "\n" + "".join(escape.note(x) for x in notes)

    def _ours_sentence(self, b: str) -> str:
        """Our kernel as it ships, GPU-bound: what a kernel version changes, so the page leads with it."""
        mine = [p for p in self.diff_cases if p.impl == FUSED and p.host_bound is not True]
        if not mine:
            return ""
        n = _counts(mine)
        text = (f"Our kernel as it ships ({impl_label(FUSED)}), where the GPU set the pace: of its "
                f"{plural(len(mine), 'case')} both runs measured, {n['faster']} ran faster in `{b}`, {n['slower']} "
                f"slower and {n['no change']} showed no change beyond the noise.")
        moved = _most_changed(mine)
        if moved:
            text += f" It moved most at {_named(moved)}."
        text += self._beside_unchanged(mine)
        hosted = sum(p.impl == FUSED and p.host_bound is True for p in self.diff_cases)
        if hosted:
            text += (f" Its {plural(hosted, 'host-bound case')} {'is' if hosted == 1 else 'are'} counted with the "
                     "host's below.")
        return text

    def _beside_unchanged(self, mine: list[DiffCase]) -> str:
        """Ours set beside the implementations it is measured against, GPU-bound, whose code the kernel version did not
        change: where they moved as much (their median ratio within ours' median noise floor of ours'), the shift is
        the machine's or a library's, not the version's (run h200-20261205f against b: ours 0.986, cuDNN 0.990)."""
        others = [p.ratio for p in self.diff_cases if p.host_bound is False and not is_ours(p.impl)]
        if not others:
            return ""
        m_ours, m_others = float(np.median([p.ratio for p in mine])), float(np.median(others))
        floor = float(np.median([p.floor for p in mine]))
        rel = m_ours / m_others
        if max(rel, 1 / rel) <= floor:
            return (f" The implementations ours is measured against, whose code no kernel version changes, moved about "
                    f"as much (their median case took {fmt.ratio(m_others)} the time, ours {fmt.ratio(m_ours)}): the "
                    "shift is the machine's or a library's more than the kernel version's.")
        return (f" The implementations ours is measured against, whose code no kernel version changes, took "
                f"{fmt.ratio(m_others)} the time at their median case, ours {fmt.ratio(m_ours)}: ours moved beyond "
                "what moved them.")

    def _host_sentence(self, b: str) -> str:
        """The host-bound cases, ours and the others' alike: a changed host moves them whatever the code did, so they
        are told apart from the code's; where one phase's host-bound cases moved and its GPU-bound ones did not, say so."""
        hosted = [p for p in self.diff_cases if p.host_bound]
        if not hosted:
            return ""
        n = _counts(hosted)
        text = (f"Across every implementation, {plural(len(hosted), 'case')} ran host-bound in one run or both: "
                f"{n['faster']} faster, "
                f"{n['slower']} slower. They time the host as much as the code: a call whose loop ran "
                f"{fmt.pct(100 * (HOST_BOUND - 1), 2)} past its device time with a host time to explain it, or a decode "
                f"step whose kernels kept the GPU busy for less than {fmt.pct(100 / HOST_BOUND, 2)} of it.")
        for phase in dict.fromkeys(p.phase for p in hosted):
            host = [p.ratio for p in hosted if p.phase == phase]
            gpu = [p.ratio for p in self.diff_cases if p.phase == phase and p.host_bound is False]
            mid = float(np.median(host))
            if not gpu or side(1 / mid) == "par" or any(side(1 / r) != "par" for r in gpu):
                continue
            what = "decode loops" if phase == "decode" else "calls"
            kinds = {is_ours(p.impl) for p in hosted if p.phase == phase}
            alike = ", ours and the others' alike," if len(kinds) == 2 else ""
            text += (f" The host-bound {what}{alike} took {fmt.span(min(host), max(host), fmt.ratio)} "
                     f"the time, while the GPU-bound ones took {fmt.span(min(gpu), max(gpu), fmt.ratio)}: the host "
                     f"issued them {'more slowly' if mid > 1 else 'more quickly'} in `{b}`, not a change of code.")
        return text

    def _others_sentence(self) -> str:
        """Cases of code the kernel version does not name: the baselines, and our other code (the portable path, each
        kernel version timed as recorded, the decode loops). What moves the GPU-bound ones is the machine or a
        library; those of unrecorded pace (rows that kept no kernel time, as model.generate's loops) are told apart,
        since the host may have moved them as it moved the host-bound ones."""
        rest = [p for p in self.diff_cases if p.host_bound is not True and p.impl != FUSED]
        out = []
        for mine, who in ((False, "the implementations ours is measured against"),
                          (True, "our other code (the portable path, the kernel versions as recorded, the decode "
                                 "loops)")):
            group = [p for p in rest if is_ours(p.impl) == mine]
            gpu = [p for p in group if p.host_bound is False]
            unknown = [p for p in group if p.host_bound is None]
            if gpu:
                out.append(_tally(f"Of {who}, GPU-bound", gpu))
            if unknown:
                lead = "Of their cases" if gpu else f"Of {who}, the cases"
                out.append(_tally(f"{lead} of unrecorded pace (no kernel time kept, so the host's share of a "
                                  "change cannot be told)", unknown))
        return " ".join(out)

    def _totals(self, b: str) -> str:
        n = _counts(self.diff_cases)
        return (f"In all, of the {plural(len(self.diff_cases), 'case')} both measured, {n['faster']} ran faster in `{b}`, "
                f"{n['slower']} slower and {n['no change']} showed no change beyond the noise.")

    def diff_method(self) -> str:
        """How the section's ratios and verdicts are made, said of the diff the section shows: the rule for a verdict
        as the rule the diff applied where it gave verdicts, as the rule for two runs of one GPU where it gave none
        (two GPUs), and the ratio's interval as the runs kept their samples."""
        make = "Compare any two runs yourself with `make diff A=<run-id> B=<run-id>`"
        tail = ("prints the cases that changed as a table, each with its pace and its floor (`--all` lists every case), "
                "and writes them all as JSON (its format is on the [Data format](data-format.md) page).")
        rule = ("the noise floor of its class (implementation × head size × mask) and its pace (host-bound or "
                "GPU-bound; the class's alone where a run recorded no pace or the repeats hold too few cases of it): "
                "how far repeat runs of one commit on the same GPU sit apart, measured by `python -m collect noise` "
                "into `data/noise/` for the classes its repeat runs hold; any other class, as the decode and "
                "iterations cases where the repeats hold only bench cases, is held to a default floor.")
        cases = self.diff_cases
        if not cases:
            return (f"{make}: each case both runs measured gets the ratio of its median times (B's over A's, so below "
                    "1 B is faster) and, where both runs ran on one GPU, a verdict: faster or slower only when the "
                    f"ratio's bootstrap interval excludes 1 *and* the ratio is further from 1 than {rule} "
                    f"{self.verdict_bands()} It {tail}")
        out = ["Each case is one row both runs measured (same implementation, shape, dtype and mask). Its ratio is the "
               "median time in the newer run over the median time in the older one, so below 1 the newer run is "
               "faster."]
        kept = sum(p.ratio_low is not None for p in cases)
        if kept == len(cases):
            out.append("Both runs kept the time of every call behind their medians, so a bootstrap of the two medians "
                       "gives each ratio an interval.")
        elif kept:
            out.append("Where both runs kept the time of every call behind their medians, a bootstrap of the two "
                       f"medians gives the ratio an interval ({kept} of {plural(len(cases), 'case')}).")
        else:
            out.append("One run or both kept no time per call behind their medians, so no ratio has an interval.")
        if self.diff.same_device:  # a case without an interval is judged by its floor alone (collect.diff.verdict)
            excludes = ("" if not kept else "that interval excludes 1 *and* " if kept == len(cases) else
                        "that interval, where it has one, excludes 1 *and* ")
            out.append(f"A case counts as faster or slower only when {excludes}the ratio is further from 1 than {rule}")
            default = sum(p.floor_source == "default" for p in cases)
            if default:  # the diff's notes, shown above, may already count them: then they are pointed to
                told = any("default" in x for x in self.diff.notes)
                out.append("A class no repeat runs cover is held to a default floor"
                           + (", as the note above says." if told else
                              f" of {fmt.ratio(self.diff.default_floor)} ({plural(default, 'case')} here)."))
            out.append(self.verdict_bands())
            out.append(f"{make}: it computes the verdicts above the same way and {tail}")
        else:
            out.append("A verdict needs two runs of one GPU, which these two are not: there a case counts as faster "
                       "or slower only when its interval excludes 1 *and* its ratio is further from 1 than "
                       f"{rule}")
            out.append(self.verdict_bands())
            out.append(f"{make}: it computes the same ratios, and verdicts where the two runs share a GPU, and {tail}")
        return " ".join(out)

    def verdict_bands(self) -> str:
        """Which band a verdict on this page uses, beside the Benchmarks page's: two questions, two yardsticks."""
        return (f"This is not the {fmt.pct(100 * (EVEN - 1), 2)} band within which the Benchmarks page calls two "
                "implementations of one run on par: that band weighs two kernels against each other, while a noise "
                "floor weighs one case against itself in another run, where only what repeat runs of one commit "
                "move counts as noise.")

    def diff_figure(self) -> str:
        d = self.diff
        if d is None or not d.cases:
            return ""
        rows = sorted(self.diff_cases, key=lambda p: p.ratio)
        fig = go.Figure()
        for verdict, color in VERDICT_COLORS.items():
            for host in (False, True):
                idx = [i for i, p in enumerate(rows) if p.verdict == verdict and bool(p.host_bound) == host]
                if not idx:
                    continue
                cs = [rows[i] for i in idx]
                has = [p.ratio_low is not None for p in cs]
                # Across two GPUs no verdict weighs a floor, so the hover names none.
                floor = [f"<br>noise floor {p.floor:.3f} ({p.floor_source})" if d.same_device else "" for p in cs]
                fig.add_trace(go.Scatter(
                    x=[i + 1 for i in idx], y=[p.ratio for p in cs], mode="markers",
                    name=f"{verdict}, host-bound" if host else verdict, legendgroup=verdict,
                    # Host-bound cases hollow: their change is the host's as much as the code's.
                    marker=dict(color=color, size=6, symbol="circle-open" if host else "circle"),
                    error_y=dict(type="data", symmetric=False, color=color, thickness=1, width=0,
                                 array=[p.ratio_high - p.ratio if h else 0 for p, h in zip(cs, has)],
                                 arrayminus=[p.ratio - p.ratio_low if h else 0 for p, h in zip(cs, has)]),
                    text=[escape.plot(p.label) for p in cs],
                    customdata=[[f"[{p.ratio_low:.3f}, {p.ratio_high:.3f}]" if h else "no interval (no samples)", f]
                                for p, h, f in zip(cs, has, floor)],
                    hovertemplate="%{text}<br>ratio %{y:.3f}, interval %{customdata[0]}%{customdata[1]}"
                                  "<extra>%{fullData.name}</extra>"))
        fig.add_hline(y=1.0, line=dict(color="grey", width=1, dash="dot"))
        floors = {p.floor for p in rows}
        if len(floors) == 1 and d.same_device:
            f = floors.pop()
            fig.add_hrect(y0=1 / f, y1=f, fillcolor="grey", opacity=0.12, line_width=0)
        fig.update_xaxes(title_text="case, sorted by ratio")
        fig.update_yaxes(title_text=f"time in {escape.plot(d.run_b)} / time in {escape.plot(d.run_a)} (below 1: faster)", type="log")
        band = (" The grey band is the noise floor every case was held to." if len(
            {p.floor for p in rows}) == 1 and d.same_device else "")
        colour = ("coloured by verdict" if d.same_device else
                  "in one colour, since across two GPUs no case is given a verdict")
        return self.figure("diff", fig, f"Each case both runs measured: the median time in {d.run_b} over the median "
                           f"time in {d.run_a}, sorted, with its {d.confidence:.0%} bootstrap interval where both runs "
                           f"kept their samples, {colour}; hollow markers ran host-bound in one run or both."
                           f"{band} Runs {d.run_a} ({d.device_a}) and {d.run_b} ({d.device_b}).", height=460)


def _counts(cases: list[DiffCase]) -> dict:
    return {v: sum(p.verdict == v for p in cases) or "none" for v in ("faster", "slower", "no change")}


def _most_changed(cases: list[DiffCase]) -> list[DiffCase]:
    """The cases whose verdict is a change, largest first, at most DIFF_NAMED."""
    moved = [p for p in cases if p.verdict in ("faster", "slower")]
    return sorted(moved, key=lambda p: -abs(math.log(p.ratio)))[:DIFF_NAMED]


def _tally(lead: str, cases: list[DiffCase]) -> str:
    n, moved = _counts(cases), _most_changed(cases)
    text = f"{lead}: {n['faster']} faster, {n['slower']} slower and {n['no change']} unchanged."
    return text + (f" The largest changes: {_named(moved)}." if moved else "")


def _named(cases: list[DiffCase]) -> str:
    return join([f"{escape.text(p.label)} ({fmt.ratio(p.ratio)} the time)" for p in cases])
