"""What limits each kernel: pipe and Speed-of-Light utilisation judged against the rule in collect/schema/limiter.py."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import pandas as pd
import plotly.graph_objects as go

from collect.schema.limiter import BUSY_PCT, NEAR_PTS, STALL_PREFIX, UNITS, UNIT_FIELDS, near_line, stall_shares

from ... import escape, fmt, limits
from ...bench_data import BenchData
from ...clock_reading import timed_reading
from ...fmt import known
from ...tables import table_html
from ...vocab import (MATERIALISING, clocks_apart, impl_label, join, limiter_words, masking, stall_lead,
                      verdict_words)
from .data import ProfileData, _esc, _step_words, count_word, shape_list, step_link
from .roofline import LEVELS, level_name
from .ws_steps import ws_partition


# The units whose busy share is a share of the SM's own cycles (collect/schema/limiter.py UNITS): where a call was timed
# at another SM clock than it was profiled at, the same work over its timed length fills another share of them. The
# memory units' throughput is not counted in SM cycles, so it is not carried over.
SM_CYCLE_UNITS = ("tensor pipe", "exponential (XU) pipe", "FMA pipe", "ALU pipe", "load/store pipe",
                  "instruction issue slots")


@dataclass(frozen=True)
class TimedClock:
    """A busy share as profiled beside the SM clock read for the same call's timed calls, where the two clocks lie
    apart."""

    unit: str            # the busiest unit ('tensor pipe')
    pct: float           # its busy share as profiled, percent
    profiled_mhz: float  # the SM clock Nsight Compute read over the kernel
    mhz: float           # the SM clock read for the timed calls (in the rest before each)
    bench: bool          # timed by the bench phase (the Benchmarks page); else by the profile phase's clock check


def step_short(step) -> str:
    """' g8' for our kernel's recorded step, '' without one: for tick labels that must stay short."""
    return f" {step}" if isinstance(step, str) and step else ""


def _short(*vs) -> str:
    """Verdicts of one word without the stall reason's gloss, for a sentence that names two: 'stalls (chiefly
    barrier)', or 'stalls (led by wait)' where that reason is not over half of them in every
    one (vocab.stall_lead)."""
    v = vs[0]
    if v is not None and v.word.startswith(STALL_PREFIX):
        return f"stalls ({stall_lead(_least_share(vs))} {escape.text(v.word[len(STALL_PREFIX):])})"
    return escape.text(verdict_words(v))


def _least_share(vs) -> float | None:
    """The smallest stall share of verdicts said in one phrase (None where one is not known): a shared "chiefly"
    must hold for each."""
    shares = [getattr(v, "stall_pct", None) for v in vs]
    return None if None in shares else min(shares)


def _pipe_said(v) -> bool:
    """Whether a verdict rests on its busiest unit's share: the unit is the limit, or the line is a near thing."""
    return v is not None and (near_line(v) or not v.word.startswith(STALL_PREFIX))


def _shared_words(vs) -> str:
    """limiter_words for verdicts of one word, said once."""
    return limiter_words(vs[0].word, _least_share(vs))


class Limiter(ProfileData):
    """The limiter table, the utilisation heat map, and our kernel's verdict per shape."""

    @cached_property
    def _limiters(self) -> pd.DataFrame:
        """The main kernel of every fused call whose units were measured, with its verdict judged again from
        its counters (collect/schema/limiter.py); a stored verdict that disagrees is refused."""
        k = self.kernels()
        cols = ["case_id", "launch", "impl", "shape", "label", "kernel_step", *UNIT_FIELDS, "verdict", "evidence", "v",
                "top_stall", "top_stall_pct"]
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
            top = self._top_stall(kk["case_id"], kk["launch"])
            rows.append(dict(case_id=kk["case_id"], launch=int(kk["launch"]), impl=r["impl"], shape=shape,
                             label=impl_label(r["impl"]) + _step_words(step), kernel_step=step, **units,
                             verdict=verdict.word if verdict else None, evidence=verdict.evidence if verdict else None,
                             v=verdict, top_stall=top[0], top_stall_pct=top[1]))
        return pd.DataFrame(rows, columns=cols)

    def _top_stall(self, case_id, launch) -> tuple[str | None, float | None]:
        """A launch's largest stall reason and its share (percent, 'selected' left out), whatever its verdict:
        a kernel limited by a unit still waits, and on what says something about its schedule."""
        st = self.run.frame("profile", "stalls")
        if st.empty:
            return None, None
        st = st[(st["case_id"] == case_id) & (st["launch"] == launch)]
        shares = stall_shares(dict(zip(st["reason"], st["warps_per_issue"])))
        return max(shares.items(), key=lambda kv: (kv[1], kv[0])) if shares else (None, None)

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
                      verdict_text=[verdict_words(v) + (f", within {NEAR_PTS:g} points of the line" if near_line(v) else "")
                                    for v in df["v"]])
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
                           "Nsight Compute with --clock-control none, one profiled call after warm-up.",
                           height=160 + 28 * len(y))

    def _ours(self, shape) -> pd.Series:
        df = self._limiters
        return df[(df["shape"] == shape) & (df["impl"] == "triton")].iloc[0]

    def _twin(self, shape) -> tuple | None:
        """The shape that differs from `shape` in its masking alone, where our kernel's units were measured."""
        other = (*shape[:5], not shape[5])
        return other if other in self.limiter_shapes() else None

    def limiter_finding(self) -> str:
        """Per shape: our kernel's verdict with its figure, whether it sits near the line (and how the same kernel
        fares at the other masking), what that figure is a share of where the roofline gives the same unit another,
        the peers' verdicts beside it (the ones near the line named), and why barrier stalls are by design where the
        kernel's schedule makes them."""
        df = self._limiters
        out = []
        for shape in self.limiter_shapes():
            at = df[df["shape"] == shape]
            ours = self._ours(shape)
            text = (f"At {self.shape_text(shape)}, our kernel{step_link(ours.kernel_step)} is limited by "
                    f"**{escape.text(verdict_words(ours.v))}**: {escape.text(ours.evidence or '')}.")
            near = self._near_line_words(shape)
            if near:
                text += " " + near
            two = self._two_peaks(shape)
            if two:
                text += " " + two
            if _pipe_said(ours.v):
                clock = self.timed_clock_words([ours])
                text += f" {clock}" if clock else ""
            peers = at[at["impl"] != "triton"]
            too = near_line(ours.v)
            same = [(p, v) for p, v in zip(peers["impl"], peers["v"]) if v is not None and v.word == ours.verdict]
            by_verdict: dict[str, list] = {}
            for p, v in zip(peers["impl"], peers["v"]):
                if v is not None and v.word != ours.verdict:
                    by_verdict.setdefault(v.word, []).append((p, v))
            other = [f"{join(impl_label(p) for p, _ in group)} by "
                     f"{escape.text(_shared_words([v for _, v in group]))}{self._peers_near(group, too)}"
                     for group in by_verdict.values()]
            if same:
                text += (f" {join(impl_label(p) for p, _ in same)} {'is' if len(same) == 1 else 'are'} limited the "
                         f"same way{self._peers_near(same, too)}")
            if other:
                text += f"{'; ' if same else ' '}{'; '.join(other)}"
            text += "." if same or other else ""
            for _, peer in peers.iterrows():  # a peer limited by a pipe: that verdict, too, is of the kernel as profiled
                if peer["v"] is not None and not peer["v"].word.startswith(STALL_PREFIX):
                    clock = self.timed_clock_words([peer], who=f"{impl_label(peer['impl'])}'s")
                    text += f" {clock}" if clock else ""
            if ours.verdict == STALL_PREFIX + "barrier":
                design = self.barrier_design(ours.kernel_step, shape[3])
                text += f" {design}{self._unchecked_by_hotspots(ours)}" if design else ""
            out.append(text)
        return "\n\n".join(out)

    @staticmethod
    def _peers_near(group, too: bool) -> str:
        """', of them only Triton (ours, portable path) near the line too' after a group of peers with one verdict:
        which of them sit within NEAR_PTS of the line, named after the group's verdict. A mark beside a name in the
        list would read as the whole list's (names carry parentheses of their own), so the peers it holds for are
        named, or the group said to be near as one where all are. "Too" only where our kernel is near as well."""
        near = [impl_label(p) for p, v in group if near_line(v)]
        if not near:
            return ""
        line = "near the line too" if too else f"within {NEAR_PTS:g} points of the {BUSY_PCT:g}% line"
        if len(near) == len(group):
            return f", {'' if len(group) == 1 else 'both ' if len(group) == 2 else 'all '}{line}"
        return f", of them only {join(near)} {line}"

    def _two_peaks(self, shape) -> str:
        """Where our kernel's busiest unit is the one whose roof binds the same call on the roofline, what each of the
        two shares is of: the verdict's is of the peak Nsight Compute rates the unit at, the roofline's of the roof
        this run measured (or took from elsewhere, named), so the section below gives the same unit another figure
        and neither contradicts the other. '' where the two do not meet (another unit, no roof, no verdict)."""
        ours = self._ours(shape)
        v = ours.v
        if v is None or v.busiest_pct is None:
            return ""
        bound = self.binding_roofs(shape).get("triton")
        if bound is None:
            return ""
        level, share = bound
        roof = self._roof_of_unit(shape, v.busiest, level)
        if roof is None or not roof.ok or share >= 1:  # a roof the call beat is not its ceiling (exceeded_roofs)
            return ""
        what = "rate" if roof.unit == "FLOP/s" else "read rate" if roof.key == "l2" else "bandwidth"
        whose = (f"the {roof.label} {what} this run measured" if roof.source == "measured"
                 else f"the {roof.source} {roof.label} {what}")
        return (f"The {fmt.pct_vs(v.busiest_pct, BUSY_PCT)} is a share of the peak Nsight Compute rates the "
                f"{escape.text(v.busiest)} at; the roofline of this shape, below, holds the same call to {whose} "
                f"({roof.text()}), its lowest roof, and puts it at {fmt.pct(100 * share)} of that roof: two shares of "
                "two different ceilings, not one figure measured twice.")

    def _roof_of_unit(self, shape, unit: str, level: str):
        """The roof behind `level` (the roofline's name of a call's lowest roof, 'L2 bandwidth'), where it is the roof
        of the unit the limiter rule calls `unit` ('L2 bandwidth', 'tensor pipe'); None where the two are different
        things, whose shares no reader would set side by side."""
        if level.startswith("tensor ") and unit == "tensor pipe":
            return self.compute_roof(shape, "triton")
        # The rule's memory units by the roofline's level labels (roofline.LEVELS): L1 and shared memory share a roof.
        labels = {"DRAM bandwidth": ("DRAM",), "L2 bandwidth": ("L2",), "L1/shared bandwidth": ("L1", "shared memory")}
        roofs = self.roofs(shape)
        for _, label, *_, roof_key in LEVELS:
            if label in labels.get(unit, ()) and level == level_name(label, roofs[roof_key]):
                return roofs[roof_key]
        return None

    def _near_line_words(self, shape) -> str:
        """Where our kernel's busiest unit sits within NEAR_PTS of the line: that the verdict is a near thing, and
        where the same kernel at the other masking falls on the other side, that the two are one behaviour."""
        ours = self._ours(shape)
        if not near_line(ours.v):
            return ""
        text = (f"That is within {NEAR_PTS:g} points of the {BUSY_PCT:g}% line: near the limit, on whichever side "
                "it falls.")
        twin = self._twin(shape)
        if twin is None:
            return text
        other = self._ours(twin)
        if (other.v is None or other.v.word == ours.verdict or other.kernel_step != ours.kernel_step
                or other.v.busiest != ours.v.busiest or not near_line(other.v)):
            return text
        return (text + f" The same kernel keeps it {fmt.pct_vs(other.v.busiest_pct, BUSY_PCT)} busy "
                f"{masking(twin[5])}, where the rule names {escape.text(verdict_words(other.v))}: one behaviour "
                "either side of the line, not two different limits.")

    def barrier_design(self, step, head_dim) -> str:
        """Why a barrier stall is this kernel's schedule rather than lost time, where its recorded step takes turns
        at the tensor cores through named barriers; '' for any other kernel (its barriers are not known here)."""
        p = ws_partition(step, head_dim)
        if p is None or not p.named_turns:
            return ""
        release = ("the producer meets the consumers at named barriers before each refill of a K or V buffer"
                   if p.named_release else
                   "each consumer warpgroup synchronises its warps (`bar.sync`) before it hands a K or V buffer back "
                   "to the producer")
        return (f"Waiting at barriers is this kernel's schedule: its {count_word(p.consumers)} consumer "
                "warpgroups take turns at the tensor cores through hardware named barriers (`bar.sync`), so while one "
                "waits there for its turn another's matrix multiplies run (FlashAttention-3's ping-pong), and "
                f"{release}. Part of every turn is a warpgroup waiting at a barrier, so a large barrier share is what "
                "this schedule looks like when it works, not by itself a sign of synchronisation to remove.")

    def timed_clock(self, row) -> TimedClock | None:
        """A limiter row's busiest unit as profiled, beside the SM clock read before the same case's timed calls, where
        that reading lies more than CLOCK_GAP from the clock Nsight Compute read over the kernel
        (sm__cycles_elapsed.avg.per_second). Only for a unit counted in SM cycles, and a call of one kernel. The
        share is not carried to the reading: a reading is of the rest before a call, not of the call
        (vocab.clocks_apart). The reading is the Benchmarks page's where the bench phase timed the case, else the
        profile phase's clock check of the same call. None otherwise."""
        v = row["v"]
        if v is None or v.busiest_pct is None or v.busiest not in SM_CYCLE_UNITS:
            return None
        im = self.impls()
        im = im[im["case_id"] == row["case_id"]]
        k = self._case_kernels(row["case_id"])
        k = k[k["launch"] == row["launch"]] if not k.empty else k
        if im.empty or k.empty or im["kernels"].iloc[0] != 1 or "sm_clock_mhz" not in k:
            return None
        k_mhz = k["sm_clock_mhz"].iloc[0]
        timed = timed_reading(self.run, self._bench, row["impl"], row["shape"], row["case_id"])
        if timed is None or not (known(k_mhz) and k_mhz > 0):
            return None
        mhz, bench = timed
        if not clocks_apart(mhz, k_mhz):
            return None
        return TimedClock(v.busiest, v.busiest_pct, float(k_mhz), float(mhz), bench)

    @cached_property
    def _bench(self) -> BenchData:
        """The run's bench rows, built once: every limiter row's timed clock asks for them."""
        return BenchData(self.run)

    @staticmethod
    def _timed_where(ts: list[TimedClock]) -> str:
        """Who read the timed calls' clock: the Benchmarks page, or the profile phase's clock check (One clock)."""
        return ("the Benchmarks page" if all(t.bench for t in ts) else "our clock (One clock, above)"
                if not any(t.bench for t in ts) else "our timing")

    def timed_clock_words(self, rows, each: list[str] | None = None, who: str = "") -> str:
        """Sentences on busy shares said as profiled, for the rows (limiter rows) whose timed calls read another clock
        (timed_clock): that each is a share of the cycles at the clock the profiler read over the kernel, beside the
        reading taken before the timed calls, and why the share is not carried to it. `each`: per row, the masking
        that tells two rows apart; `who`: whose share it is, named with its figure, where the sentence before did not
        print it ('FlashAttention-4's'). '' where no row has one."""
        pairs = [(t, m) for t, m in zip((self.timed_clock(r) for r in rows), each or [""] * len(rows)) if t]
        if not pairs:
            return ""
        ts = [t for t, _ in pairs]
        two = len(ts) > 1
        named = len(rows) > 1  # the rows are told apart by their maskings wherever several were said
        mhz = lambda x: f"{fmt.num(x, 4)} MHz"  # noqa: E731
        of = lambda f: join(f(t) + (f" {m}" if named and m else "") for t, m in pairs)  # noqa: E731
        if who:
            subject = f"{who} {join(fmt.pct_vs(t.pct, BUSY_PCT) for t in ts)} {'are' if two else 'is'} likewise"
        else:
            subject = ("These shares are" if two else f"The {pairs[0][1]} share is" if named and pairs[0][1]
                       else "That share is")
        where = self._timed_where(ts)
        return (f"{subject} of the kernel as profiled: {'shares' if two else 'a share'} of the cycles "
                f"{'each' if two else 'it'} took at the SM clock Nsight Compute read over it "
                f"({of(lambda t: mhz(t.profiled_mhz))}). {where[0].upper()}{where[1:]} read "
                f"{of(lambda t: mhz(t.mhz))} before the timed call{'s' if two else ''} of the same case"
                f"{'s' if two else ''}, in the rest before each call rather than over it, so the "
                f"share{'s are' if two else ' is'} not carried to that reading.")

    def _unchecked_by_hotspots(self, row) -> str:
        """After barrier_design, where this run has no SASS hot spots for the kernel: the barrier waits are the
        schedule's by its design, which no instruction-level sample in this run checks (the profile phase skipped
        the hot spots, or collected none for this kernel)."""
        hs = self.run.frame("profile", "hotspots")
        if not hs.empty and ((hs["case_id"] == row["case_id"]) & (hs["launch"] == row["launch"])).any():
            return ""
        reason = str(self.data.reason or "") if self.data is not None else ""
        why = ("this run collected no SASS hot spots (the note at the top of the page says why)" if hs.empty and
               "hot spot" in reason.lower() else "this run collected no SASS hot spots" if hs.empty else
               "this run collected no SASS hot spots for this kernel")
        return (" That these barrier waits are those turns follows from the kernel's design; this run does not check "
                f"it instruction by instruction, since {why}.")

    def limiter_headline(self) -> str:
        """For the top of the page: our kernel's verdict per shape, the two maskings of a shape in one sentence,
        with the figure that decided and, near the line, that it is a near thing; then the rule, once."""
        shapes = self.limiter_shapes()
        if not shapes:
            return ""
        bases = list(dict.fromkeys(s[:5] for s in shapes))
        # The opening names the roofline's lowest roofs just before this: a share of a unit's peak is another
        # denominator than a share of a roof (an L2-bound call can sit at half its L2 peak), so say which this is.
        apart = (" (the peak Nsight Compute rates the unit at, not a roof of the roofline above)"
                 if self.headline is not None and self.binding_roofs(self.headline) else "")
        rule = (f"By its counters, a unit of our kernel counts as its limit at {BUSY_PCT:g}% of its peak or more{apart}, "
                "and below that line the largest share of stalls names what the warps wait for.")
        return " ".join([rule] + [self._headline_for(base, [s for s in shapes if s[:5] == base]) for base in bases])

    def _headline_for(self, base, shapes) -> str:
        """One sentence on our kernel at the maskings of one shape: the two maskings told apart only where their
        verdicts differ, and a verdict near the line said as the near thing it is."""
        rows = [self._ours(s) for s in shapes]
        where = f"At {shape_list([self.base_text(base)])}"
        each = [masking(s[5]) for s in shapes]
        who = "our kernel" + step_link(None, *zip([r.kernel_step for r in rows], each))
        vs = [r.v for r in rows]
        if any(v is None for v in vs):
            return f"{where}, {who} is limited by {join(escape.text(verdict_words(r.v)) for r in rows)}."
        said = self._verdicts_for(where, who, rows, vs, each)
        clock = self.timed_clock_words(rows, each) if any(_pipe_said(v) for v in vs) else ""
        return f"{said} {clock}" if clock else said

    def _verdicts_for(self, where: str, who: str, rows, vs, each) -> str:
        """_headline_for's sentence on the verdicts themselves."""
        if any(near_line(v) for v in vs) and len({v.busiest for v in vs}) == 1:
            one_kernel = len({r.kernel_step for r in rows}) == 1
            return f"{where}, {who} keeps the {vs[0].busiest} {self._near_words(vs, each, one_kernel)}."
        if len({v.word for v in vs}) > 1 or len(vs) == 1:
            parts = [escape.text(limits.verdict_phrase(v)) + (f" {m}" if len(vs) > 1 else "") for v, m in zip(vs, each)]
            return f"{where}, {who} is limited by {'; '.join(parts)}."
        word = escape.text(_shared_words(vs))
        if vs[0].word.startswith(STALL_PREFIX):
            top = max(v.busiest_pct for v in vs)
            return (f"{where}, {who} is limited by {word} in both maskings: no unit is busier than {fmt.pct(top)} of "
                    "its peak.")
        figs = join(f"{fmt.pct_vs(v.busiest_pct, BUSY_PCT)} {m}" for v, m in zip(vs, each))
        return f"{where}, {who} is limited by {word}, {figs} busy."

    @staticmethod
    def _near_words(vs, each, one_kernel: bool) -> str:
        """'80.03% busy non-causal and 75.7% busy causal, both within 5 points of the line: ...' for verdicts
        whose one busiest unit sits near the line at one masking or more."""
        figs = join(f"{fmt.pct_vs(v.busiest_pct, BUSY_PCT)} busy" + (f" {m}" if len(vs) > 1 else "")
                    for v, m in zip(vs, each))
        close = [m for v, m in zip(vs, each) if near_line(v)]
        if len(close) == len(vs):
            near = "both within" if len(vs) == 2 else "within"
        else:  # name the maskings that are near, so the figure of the far one is not read as near too
            near = f"the {join(close)} call within"
        if len({v.word for v in vs}) > 1:
            tail = f"the rule names {join(f'{_short(v)} {m}' for v, m in zip(vs, each))}"
            if one_kernel and len(close) == len(vs):  # one kernel both sides of the line: not two kinds of limit
                tail += ", but the calls are one behaviour either side of that line"
        elif vs[0].word.startswith(STALL_PREFIX):
            tail = f"just short of the limit, so the verdict is {_short(*vs)}"
        else:
            tail = "limited by it, but only just"
        return f"{figs}, {near} {NEAR_PTS:g} points of the line: {tail}"
