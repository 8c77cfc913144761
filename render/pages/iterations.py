"""Kernel iterations: each recorded version of our kernel against SDPA's fastest backends and the
matmul ceiling, with the prediction made before each was measured and what it turned out to be."""
from __future__ import annotations

import dataclasses
import math
from functools import cached_property
from typing import NamedTuple

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from collect.schema.iterations import IterationRow

from .. import escape, fmt
from ..bench_data import rivals
from ..figures import PALETTE
from ..frames import index_by
from ..tables import table_html
from ..vocab import DTYPE_SHORT as SHORT
from ..vocab import CLOCK_GAP, clock_gap, impl_label, is_rival, join, masking, plural, version_kernel
from .base import Page

CEILINGS = {"float16": "matmul_fp16", "bfloat16": "matmul_bf16"}
# No goal case may fall more than this below the goal ratio: the run-to-run noise band of this data.
NOISE_BAND = 0.03
# A measured factor within this much of a predicted range's edge still "holds": run-to-run noise.
SLACK = 0.01
# The goal cases a prediction covers, where its words name fewer than all of them; a prediction not listed
# covers every goal case of its masking. iterations.json (schema 5) has no field for this, and adding one means a
# new schema version and a migration of every committed run, so the cases live here, keyed to the dated
# prediction whose words name them. v0-portable's restates what its first H200 run measured at fp16, N=4096
# (d=128, where cuDNN ran at the 656 TFLOP/s its outcome quotes): a geometric mean over every goal case, most of
# them at d=64 where the portable kernel runs nearer cuDNN, would test a claim it never made.
PREDICTION_CASES: dict[tuple[str, str], dict] = {
    ("v0-portable", "2026-11-29"): {"dtype": "float16", "n": 4096, "head_dim": 128},
}
# Two timing methods whose ratios differ by more than this in some case are worth a word.
MATERIAL = 0.03


class GoalCase(NamedTuple):
    """One goal case: the rows of every implementation that share it are compared."""

    dtype: str
    causal: bool
    n: int
    batch: int
    heads: int
    head_dim: int


def case_label(dtype: str, causal: bool, n: int, batch: int | None = None, heads: int | None = None,
               head_dim: int | None = None) -> str:
    """'fp16, causal, N=4096', with the shape appended when it is given."""
    shape = f", B={batch}, H={heads}, d={head_dim}" if head_dim is not None else ""
    return f"{SHORT.get(dtype, dtype)}, {masking(causal)}, N={n}{shape}"


# What tells two goal cases apart; a question that gives no shape takes every shape at its N.
CASE_FIELDS = ("dtype", "causal", "seq_len", "batch", "heads", "head_dim")


def case_key(dtype: str, causal: bool, n: int, batch=None, heads=None, head_dim=None) -> tuple:
    return (dtype, causal, n) if head_dim is None else (dtype, causal, n, batch, heads, head_dim)


def cases_index(frame: pd.DataFrame) -> dict:
    """case_key -> the frame's rows of that case (both key forms); None -> no rows, with the frame's columns."""
    return {**index_by(frame, CASE_FIELDS), **index_by(frame, CASE_FIELDS[:3]), None: frame.iloc[0:0]}


def geomean(xs) -> float | None:
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def share(x: float) -> str:
    """A band given as a fraction, as a reader writes it: 0.01 -> '1%'."""
    return f"{100 * x:g}%"


HELD = "as predicted"
# A factor outside its printed range that still counts as held says so: the row must not read as a plain hit.
IN_SLACK = f"{HELD} (within the {share(SLACK)} slack)"


def verdict(measured: float | None, low: float, high: float) -> str:
    """How a measured factor sits against the range predicted for it."""
    if measured is None:
        return "not measured"
    if measured > high * (1 + SLACK):
        return "better than predicted"
    if measured < low * (1 - SLACK):
        return "worse than predicted"
    if measured > high or measured < low:
        return IN_SLACK
    return HELD


def measured_text(measured: float | None, low: float, high: float) -> str:
    """A measured factor with the figures that place it against its range and the slack around it: 1.0068
    beside a range ending at 1.00 prints as 1.007, not as 1.01, the slack's own edge."""
    if measured is None:
        return "not measured"
    edges = (low, high, low * (1 - SLACK), high * (1 + SLACK))
    return max((fmt.ratio_vs(measured, e) for e in edges), key=len)


def where_ran(keys) -> str:
    """(head_dim, N, dtype) keys in words: 'N=2048 and 4096 (d=64, fp16 and bf16)'."""
    order = {d: i for i, d in enumerate(SHORT)}
    parts = []
    for hd in sorted({k[0] for k in keys}, reverse=True):
        dts_by_n: dict[int, list] = {}
        for _, n, dt in sorted((k for k in keys if k[0] == hd), key=lambda k: (k[1], order.get(k[2], 9))):
            dts_by_n.setdefault(n, []).append(SHORT.get(dt, dt))
        ns_by_dts: dict[tuple, list] = {}
        for n, dts in dts_by_n.items():
            ns_by_dts.setdefault(tuple(dts), []).append(n)
        parts += [f"N={join(ns)} (d={hd}, {join(dts)})" for dts, ns in ns_by_dts.items()]
    return join(parts)


def prediction_cases(v) -> dict:
    """The GoalCase fields a version's prediction is limited to; empty where it covers every goal case."""
    return PREDICTION_CASES.get((v.name, v.predicted_at), {})


def cases_label(only: dict) -> str:
    """'fp16, N=4096, d=128' for a prediction's cases."""
    parts = {"dtype": lambda x: SHORT.get(x, x), "n": lambda x: f"N={x}", "head_dim": lambda x: f"d={x}",
             "batch": lambda x: f"B={x}", "heads": lambda x: f"H={x}"}
    return ", ".join(parts[k](only[k]) for k in parts if k in only)


class IterationsPage(Page):
    slug = "iterations"
    phase = "iterations"

    # --- frames ----------------------------------------------------------------------------

    @cached_property
    def rows(self) -> pd.DataFrame:
        df = self.run.frame("iterations", "rows")
        if df.empty:  # keep the columns, so every method below works on a run with no rows
            df = pd.DataFrame(columns=[f.name for f in dataclasses.fields(IterationRow)])
        return df

    @cached_property
    def ok(self) -> pd.DataFrame:
        r = self.rows
        return self._borrow_resources(r[(r["status"] == "ok") & r["tflops"].notna()].copy())

    RESOURCES = ("registers_per_thread", "spilled_registers", "shared_mem_bytes", "warps_per_block", "blocks_per_sm",
                 "occupancy_pct", "occupancy_limiter")

    def _borrow_resources(self, ok: pd.DataFrame) -> pd.DataFrame:
        """Rows of a per-shape version whose compiled kernel was not read (runs before 2026-12-03 replayed the
        launch of the version it routes to) take the resources of the row at the same case that ran the same
        kernel and config: a version of the Gluon step the bench phase saw flash_attention run there, else the
        latest version with that config. `resources_from` names it."""
        ok["resources_from"] = None
        if ok.empty or "registers_per_thread" not in ok:
            return ok
        steps = {}
        b = self.run.frame("bench", "rows")
        if not b.empty and "kernel_step" in b:
            for r in b[(b["impl"] == "triton") & (b["status"] == "ok")].itertuples():
                steps[(r.dtype, bool(r.causal), int(r.seq_len), int(r.batch), int(r.heads), int(r.head_dim))] = \
                    r.kernel_step if isinstance(r.kernel_step, str) else None
        order = {n: i for i, n in enumerate(self.version_names())}
        per_shape = {v.name for v in self.versions if v.path in (None, "per-shape")}
        feats = {v.name: str(v.features or "") for v in self.versions}
        case_cols = ["dtype", "causal", "seq_len", "batch", "heads", "head_dim"]
        for i, row in ok[ok["impl"].isin(per_shape) & ok["registers_per_thread"].isna()].iterrows():
            same = ok[ok["registers_per_thread"].notna() & (ok["config"] == row["config"])
                      & (ok["warp_specialized"] == row["warp_specialized"]) & ~ok["impl"].isin(per_shape)]
            for c in case_cols:
                same = same[same[c] == row[c]]
            if same.empty:
                continue
            step = steps.get(tuple(row[c] for c in case_cols))
            best = max(same.itertuples(), key=lambda x: (bool(step) and feats.get(x.impl, "").endswith(f" {step}"),
                                                         order.get(x.impl, -1)))
            for col in self.RESOURCES:
                ok.at[i, col] = getattr(best, col)
            ok.at[i, "resources_from"] = best.impl
        return ok

    @cached_property
    def versions(self) -> list:
        return list(self.data.versions)

    def version_names(self) -> list[str]:
        return [v.name for v in self.versions]

    def version(self, name: str):
        return next((v for v in self.versions if v.name == name), None)

    @cached_property
    def _cases(self) -> list[GoalCase]:
        keys = {GoalCase(d, bool(c), int(n), int(b), int(h), int(hd)) for d, c, n, b, h, hd in zip(
            self.rows["dtype"], self.rows["causal"], self.rows["seq_len"], self.rows["batch"], self.rows["heads"],
            self.rows["head_dim"])}
        order = {d: i for i, d in enumerate(SHORT)}
        return sorted(keys, key=lambda k: (-k.head_dim, k.n, order.get(k.dtype, 9), k.causal))

    def cases(self) -> list[GoalCase]:
        """The goal cases of the rows: larger head_dim first, then N ascending, fp16 before bf16, non-causal first.
        Two shapes can share an N (d=64 and d=128 at N=4096), so the shape is part of the case."""
        return list(self._cases)

    @property
    def several_shapes(self) -> bool:
        return len({(c.batch, c.heads, c.head_dim) for c in self._cases}) > 1

    def label(self, c: GoalCase) -> str:
        """A case's label: the shape is named only where the run has more than one."""
        return case_label(*c) if self.several_shapes else case_label(c.dtype, c.causal, c.n)

    def facets(self) -> list[tuple[str, bool]]:
        return list(dict.fromkeys((c.dtype, c.causal) for c in self.cases()))

    # Pages ask for one case's rows tens of thousands of times (every version x case x table): each frame is
    # split by case once, so a question costs a lookup, not a pass over the frame (the page grew with rows²).
    @cached_property
    def _ok_cases(self) -> dict:
        return cases_index(self.ok)

    @cached_property
    def _status(self) -> dict:
        """(impl, full case key) -> the status of its first row."""
        out: dict = {}
        for key, f in index_by(self.rows, CASE_FIELDS).items():
            for impl, status in zip(f["impl"], f["status"]):
                out.setdefault((impl, key), status)
        return out

    @cached_property
    def _bench_ok(self) -> pd.DataFrame:
        b = self.run.frame("bench", "rows")
        return b[(b["status"] == "ok") & b["tflops"].notna()] if not b.empty else b

    @cached_property
    def _bench_cases(self) -> dict:
        return cases_index(self._bench_ok) if not self._bench_ok.empty else {}

    @cached_property
    def _tflops(self) -> dict:
        """(impl, case key) -> TFLOP/s of the first ok row, for the full and the shape-free key."""
        out: dict = {}
        for key, f in self._ok_cases.items():
            for impl, t in zip(f["impl"], f["tflops"]):
                out.setdefault((impl, key), float(t))
        return out

    @cached_property
    def _fastest(self) -> dict:
        """case key -> (impl, TFLOP/s) of the fastest rival (an SDPA backend or FlashAttention-4; the first of
        equals), full and shape-free keys."""
        out: dict = {}
        for key, f in self._ok_cases.items():
            s = f[f["kind"].isin(("sdpa", "baseline"))]
            if not s.empty:
                best = s.loc[s["tflops"].idxmax()]
                out[key] = (str(best["impl"]), float(best["tflops"]))
        return out

    def _case_rows(self, index: dict, dtype: str, causal: bool, n: int, batch=None, heads=None,
                   head_dim=None) -> pd.DataFrame:
        """One case's rows from an index built by cases_index (every shape at this N where head_dim is None)."""
        return index.get(case_key(dtype, causal, n, batch, heads, head_dim), index.get(None))

    def tflops(self, impl: str, dtype: str, causal: bool, n: int, batch=None, heads=None, head_dim=None) -> float | None:
        return self._tflops.get((impl, case_key(dtype, causal, n, batch, heads, head_dim)))

    def fastest_rival(self, dtype: str, causal: bool, n: int, batch=None, heads=None,
                     head_dim=None) -> tuple[str, float] | None:
        return self._fastest.get(case_key(dtype, causal, n, batch, heads, head_dim))

    def ratio(self, impl: str, dtype: str, causal: bool, n: int, batch=None, heads=None,
              head_dim=None) -> float | None:
        """TFLOP/s of impl over the fastest other implementation's, same case."""
        t = self.tflops(impl, dtype, causal, n, batch, heads, head_dim)
        s = self.fastest_rival(dtype, causal, n, batch, heads, head_dim)
        return t / s[1] if t is not None and s else None

    def case_clock_gap(self, impl: str, case: GoalCase) -> tuple[float, float, float, str] | None:
        """(|ours / theirs - 1|, our median SM clock, theirs, their impl) for impl and the fastest other implementation at
        one goal case, where both clocks were recorded."""
        s = self.fastest_rival(*case)
        if s is None or "sm_clock_mhz" not in self.ok:
            return None
        f = self._case_rows(self._ok_cases, *case)
        a, b = f[f["impl"] == impl]["sm_clock_mhz"].dropna(), f[f["impl"] == s[0]]["sm_clock_mhz"].dropna()
        if a.empty or b.empty or (gap := clock_gap(a.iloc[0], b.iloc[0])) is None:
            return None
        return gap, float(a.iloc[0]), float(b.iloc[0]), s[0]

    def bench_clock_gap(self, case: GoalCase) -> float | None:
        """The same gap as the bench phase saw it: `triton` against the rival row bench_ratio divides by."""
        b = self.run.frame("bench", "rows")
        if b.empty or "sm_clock_mhz" not in b:
            return None
        f = self._case_rows(self._bench_cases, *case)
        ours, sdpa = f[f["impl"] == "triton"]["sm_clock_mhz"].dropna(), rivals(f)
        if ours.empty or sdpa.empty:
            return None
        theirs = sdpa.loc[sdpa["tflops"].idxmax(), "sm_clock_mhz"]
        return clock_gap(ours.iloc[0], theirs)

    def clock_gap_finding(self) -> str:
        """Where the final version and the fastest other implementation ran at median SM clocks more than CLOCK_GAP apart
        (clocks are read, never set): how many goal cases, and the widest."""
        final = self.data.final_version
        gaps = [(g, c) for c in self.cases() if (g := self.case_clock_gap(final, c)) is not None]
        apart = [(g, c) for g, c in gaps if g[0] > CLOCK_GAP]
        if not apart:
            return ""
        (_, a, b, sdpa), c = max(apart, key=lambda x: x[0][0])
        return (f"In {len(apart)} of {plural(len(gaps), 'goal case')} {escape.text(final)} and the fastest other "
                f"implementation ran at median SM clocks more than {share(CLOCK_GAP)} apart (clocks are read, never set). "
                f"The widest gap is at {self.label(c)}: ours at {fmt.num(a, 4)} MHz, "
                f"{escape.text(impl_label(sdpa))} at {fmt.num(b, 4)} MHz. A compute-bound call's time scales about "
                "inversely with its clock, so those ratios carry the gap.")

    def ceiling(self, dtype: str) -> float | None:
        """The measured matmul rate of this dtype (FLOP/s), from the env phase."""
        name = CEILINGS.get(dtype)
        c = next((c for c in self.run.manifest.measured_ceilings if c.name == name and c.status == "ok"), None)
        return c.per_s_median if c else None

    def speedup(self, name: str, baseline: str, causal: bool, only: dict | None = None) -> float | None:
        """Geometric mean over the goal cases of this masking (and of `only`'s GoalCase fields, when given) of
        name's TFLOP/s over the baseline's ('sdpa': the fastest other implementation of each case). Only cases both ran
        count."""
        out = []
        for case in self.cases():
            if case.causal != causal or any(getattr(case, k) != x for k, x in (only or {}).items()):
                continue
            t = self.tflops(name, *case)
            if baseline == "sdpa":
                s = self.fastest_rival(*case)
                b = s[1] if s else None
            else:
                b = self.tflops(baseline, *case)
            if t is not None and b:
                out.append(t / b)
        return geomean(out)

    # --- prose -----------------------------------------------------------------------------

    def summary(self) -> str:
        d = self.data
        counts = self.rows["status"].value_counts()
        status = join(f"{counts[s]} {s}" for s in ("ok", "oom", "unsupported", "error") if s in counts)
        shapes = dict.fromkeys(f"B={b}, H={h}, d={hd}" for b, h, hd in zip(self.rows["batch"], self.rows["heads"],
                                                                          self.rows["head_dim"]))
        ns = sorted(set(self.rows["seq_len"]))
        timed = set(self.rows[self.rows["kind"] == "version"]["impl"]) if "kind" in self.rows else set()
        untimed = [n for n in self.version_names() if n not in timed]
        text = (f"This run timed {len([n for n in self.version_names() if n in timed])} versions of our kernel and "
                f"{join(escape.text(impl_label(i)) for i in dict.fromkeys(self.rows[self.rows['kind'] == 'sdpa']['impl']))} "
                f"in {len(self.rows)} cases ({status}): {join(shapes)}; N = {join(ns)}; "
                f"{join(SHORT.get(x, x) for x in dict.fromkeys(self.rows['dtype']))}; causal and not.")
        if untimed:
            text += (f" {join(escape.text(u) for u in untimed)} {'is' if len(untimed) == 1 else 'are'} recorded with "
                     f"{'its' if len(untimed) == 1 else 'their'} story but not timed by this phase: superseded, and left "
                     "out to keep the phase short. The author's notes give what it measured when it was current.")
        coverage = self.coverage()
        if coverage:
            text += " " + coverage
        text += f'\n\n??? info "How each case was timed"\n    {escape.text(d.timing_method)}\n'
        if not d.hopper_available:
            text += (f"\n!!! note \"Hopper versions not run\"\n    This GPU could not run the Hopper versions: "
                     f"{escape.text(d.hopper_reason)}. Their rows are kept as unsupported; only the portable kernel "
                     "is compared here.\n")
        text += "".join(map(escape.note, d.notes))
        return text

    def coverage(self) -> str:
        """Which versions were timed where, when not every version was timed at every case: the phase
        runs the whole journey at some shapes and dtypes and only its endpoints at the others."""
        ok = self.ok[self.ok["kind"] == "version"] if "kind" in self.ok else self.ok.iloc[0:0]
        if ok.empty:
            return ""
        sets = {(int(hd), int(n), str(dt)): frozenset(g["impl"])
                for (hd, n, dt), g in ok.groupby(["head_dim", "seq_len", "dtype"])}
        everyone = frozenset().union(*sets.values())
        by_set: dict[frozenset, list] = {}
        for key, names in sets.items():
            by_set.setdefault(names, []).append(key)
        if len(by_set) == 1:
            return ""
        out = []
        if everyone in by_set:
            out.append(f"Every timed version ran at {where_ran(by_set[everyone])}.")
        for names, keys in by_set.items():
            if names != everyone:
                ran = [escape.text(v) for v in self.version_names() if v in names]
                missed = [escape.text(v) for v in self.version_names() if v in everyone and v not in names]
                if len(missed) < len(ran):  # name the shorter list
                    out.append(f"Every timed version but {join(missed)} ran at {where_ran(keys)}.")
                else:
                    out.append(f"Only {join(ran)} {'ran' if len(ran) > 1 else 'was timed'} beside the other implementations at "
                               f"{where_ran(keys)}.")
        return " ".join(out)

    def findings_first(self) -> str:
        """A few sentences: the goal, the predictions, the largest step."""
        d = self.data
        final = d.final_version
        out = []
        measured = [r for r in (self.ratio(final, *c) for c in self.cases()) if r is not None]
        if measured:
            med, low, reached = self._goal_verdict(measured)
            out.append(f"The kernel as shipped, **{escape.text(final)}**, {'reaches' if reached else 'misses'} its goal "
                       f"on this page's timing: a median of {fmt.ratio_vs(med, d.goal_ratio)} the fastest other "
                       f"implementation's TFLOP/s over {len(measured)} goal cases (the goal: {fmt.ratio(d.goal_ratio)}), "
                       f"with {plural(len(low), 'case')} below {fmt.ratio(d.goal_ratio - NOISE_BAND)}.")
        verdicts, steps = [], []
        for v, pred, m in self.measured_predictions():
            if m is not None:
                verdicts.append(verdict(m, pred.low, pred.high))
                if v.baseline != "sdpa":
                    steps.append((m, v.name, pred.masking, v.baseline))
        if verdicts:
            counts = {w: verdicts.count(w) for w in (HELD, IN_SLACK, "better than predicted", "worse than predicted")}
            out.append(f"Of {len(verdicts)} predictions measured here, {counts[HELD] + counts[IN_SLACK]} held, "
                       f"{counts['better than predicted']} came out better and {counts['worse than predicted']} worse.")
        if steps:
            best = max(steps)
            worst = min(steps)
            out.append(f"The largest step was **{escape.text(best[1])}** ({best[2]}), at {fmt.ratio(best[0])} of "
                       f"{escape.text(best[3])}'s TFLOP/s; the largest setback was {escape.text(worst[1])} ({worst[2]}), "
                       f"at {fmt.ratio(worst[0])} of {escape.text(worst[3])}'s.")
        return " ".join(out) or "No version of our kernel was measured in this run."

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
        out = [f"The goal: over the goal cases, a median of {goal} or more of the fastest other implementation's TFLOP/s, "
               f"and no case below {fmt.ratio(floor)} (the noise band of this data). The final version, "
               f"**{escape.text(final)}**, has a median of {fmt.ratio_vs(med, d.goal_ratio)} with "
               f"{plural(len(low), 'case')} below {fmt.ratio(floor)}: the goal is {'reached' if reached else 'missed'}. "
               f"It reaches {goal} in {len(met)} of {len(measured)} cases"]
        # A case that clears the goal by less than the noise band could fall under it on another measurement.
        close = [r for _, r in met if r < d.goal_ratio + NOISE_BAND]
        out[-1] += (f", {len(close)} of them by less than the {share(NOISE_BAND)} noise band." if close else ".")
        missed = [self.label(c) for c, r in measured if r < d.goal_ratio]
        if 0 < len(missed) <= 3:  # a longer list belongs to the table below, not to a sentence
            out.append(f"It falls short at {join(missed)}.")
        out.append(f"Its ratio runs from {fmt.ratio(worst[1])} ({self.label(worst[0])}) to {fmt.ratio(best[1])} "
                   f"({self.label(best[0])}); the table below has every case.")
        beats = [c for c, r in measured if r >= 1.0]
        if beats and d.goal_ratio != 1.0:  # at a goal of 1.0 the count above says the same
            out.append(f"It is at least as fast as every other implementation measured in {len(beats)} of {len(measured)} cases.")
        out.append(self.clock_gap_finding())
        return " ".join(x for x in out if x)

    def _goal_verdict(self, ratios: list[float]) -> tuple[float, list[float], bool]:
        """(median, the ratios below the noise floor, reached): the goal as goal_finding states it."""
        goal = self.data.goal_ratio
        med = float(pd.Series(ratios).median())
        low = [r for r in ratios if r < goal - NOISE_BAND]
        return med, low, med >= goal and not low

    def bench_ratio(self, dtype: str, causal: bool, n: int, batch: int, heads: int, head_dim: int) -> float | None:
        """The bench phase's ratio at one goal case: `triton` (flash_attention as shipped) over the fastest
        SDPA backend, same shape."""
        if not self._bench_cases or self.rows.empty:
            return None
        key = case_key(dtype, causal, n, batch, heads, head_dim)
        ours, sdpa = self._bench_triton.get(key), self._bench_fastest_rival.get(key)
        return ours / sdpa if ours is not None and sdpa else None

    @cached_property
    def _bench_triton(self) -> dict:
        """case key -> the bench phase's first `triton` TFLOP/s there."""
        ok = self._bench_ok
        return {k: float(f["tflops"].iloc[0]) for k, f in cases_index(ok[ok["impl"] == "triton"]).items()
                if k is not None}

    @cached_property
    def _bench_fastest_rival(self) -> dict:
        """case key -> the bench phase's fastest other TFLOP/s there, PyTorch's choice counted once, as the
        Benchmarks page counts it (distinct_sdpa decides row by row, so once for the whole frame)."""
        return {k: float(f["tflops"].max()) for k, f in cases_index(rivals(self._bench_ok)).items()
                if k is not None and not f.empty}

    def bench_crosscheck(self) -> str:
        """The same goal cases as the bench phase measured them, with its own timing method."""
        bench = self.run.phase("bench")
        got = [(c, self.bench_ratio(*c)) for c in self.cases()]
        got = [(c, r) for c, r in got if r is not None]
        if bench is None or not got:
            return ("The bench phase did not measure these shapes in this run, so this page's ratios have no second "
                    "measurement to be checked against.")
        goal = self.data.goal_ratio
        final = self.data.final_version
        met = sum(r >= goal for _, r in got)
        mine = sum((self.ratio(final, *c) or 0) >= goal for c, _ in got)
        text = (f"The bench phase timed `flash_attention` as shipped at the same shapes, in a measurement of its "
                f"own, and finds it at "
                f"{fmt.ratio(goal)} or more of the fastest other implementation in {met} of {len(got)} cases, against this "
                f"page's {mine} of {len(got)}.")
        diffs = [(c, r - self.ratio(final, *c)) for c, r in got if self.ratio(final, *c) is not None]
        if diffs:
            far = max(diffs, key=lambda x: abs(x[1]))
            text += (f" The two measurements' ratios differ by at most {abs(far[1]):.3f}, at {self.label(far[0])}; the "
                     "table below has both.")
            gap = self.case_clock_gap(final, far[0])
            clocked = gap is not None and gap[0] > CLOCK_GAP
            if clocked:  # the widest difference of the two measurements comes with a clock gap in one of them
                _, a, b, sdpa = gap
                there = self.bench_clock_gap(far[0])
                text += (f" There this page's two calls ran at median SM clocks {fmt.pct(100 * gap[0], 2)} apart "
                         f"(ours at {fmt.num(a, 4)} MHz, {escape.text(impl_label(sdpa))} at {fmt.num(b, 4)} MHz)")
                text += (f", the bench phase's {fmt.pct(100 * there, 2)} apart." if there is not None else ".")
            if max(abs(x) for _, x in diffs) > MATERIAL:
                text += (" Both phases time each call on the same clock (collect/timing.py): the difference is "
                         "between two measurements of the same calls, minutes apart"
                         f"{' and, at that case, at different SM clocks' if clocked else ''}, not between two methods.")
            # The goal is a median and a floor, not a count of cases: judge it under both measurements.
            mine_verdict = self._goal_verdict([self.ratio(final, *c) for c, _ in diffs])[2]
            bench_verdict = self._goal_verdict([r for c, r in got if self.ratio(final, *c) is not None])[2]
            flips = [c for c, _ in diffs if (self.bench_ratio(*c) >= goal) != (self.ratio(final, *c) >= goal)]
            if mine_verdict != bench_verdict:
                spread = max(abs(x) for _, x in diffs)
                why = ("so the verdict above is within the noise of measuring twice" if spread <= NOISE_BAND else
                       f"the two measurements differ by more than the noise band of {fmt.num(NOISE_BAND)}")
                text += (f" On the bench phase's measurement the goal is {'reached' if bench_verdict else 'missed'}, "
                         f"on this page's {'reached' if mine_verdict else 'missed'}: {why}.")
            elif flips:
                text += (f" Whether a single case reaches {fmt.ratio(goal)} differs between the two at "
                         f"{join(self.label(c) for c in flips)}; the goal itself (its median and its floor) is "
                         f"{'reached' if mine_verdict else 'missed'} on both.")
        return text

    def crosscheck_table(self) -> str:
        """Both phases' ratio to the fastest other implementation, case by case."""
        final = self.data.final_version
        rows = []
        for c in self.cases():
            a, b = self.ratio(final, *c), self.bench_ratio(*c)
            if a is None and b is None:
                continue
            rows.append({"case": self.label(c), "here": a, "bench": b,
                         "diff": f"{b - a:+.3f}" if a is not None and b is not None else "n/a"})
        if not rows or all(r["bench"] is None for r in rows):
            return ""
        r = lambda v: "n/a" if v is None else fmt.ratio(v)  # noqa: E731
        return table_html(pd.DataFrame(rows), {"case": "Case", "here": f"{final} (this page)",
                                               "bench": "flash_attention (bench phase)", "diff": "bench − this page"},
                          {"here": r, "bench": r}, caption="Ratio to the fastest other implementation's TFLOP/s")

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
            bit = f"In {SHORT.get(dtype, dtype)} at N={case.n}{shape}, "
            bit += (f"{escape.text(final)} reaches {fmt.pct(100 * t * 1e12 / ceil)}" if t is not None
                    else f"{escape.text(final)} did not run")
            if s:
                bit += f" and {escape.text(impl_label(s[0]))} {fmt.pct(100 * s[1] * 1e12 / ceil)}"
            parts.append(bit + f" of the measured {fmt.flops(ceil)} matmul rate.")
        if not parts:
            return "No measured matmul ceiling (or no non-causal case) in this run to set the attention rates against."
        return ("The FLOPs counted for attention are those of two matmuls per score tile, with a softmax between them "
                "that the tensor cores do not do, so the measured rate of one large matmul (Hardware page) is the "
                "natural roof to compare against. " + " ".join(parts))

    def wide_loads_finding(self) -> str:
        """What the T4 study's open fix (fewer, wider loads) did here."""
        v = next((v for v in self.versions if v.role == "t4-fix"), None)
        if v is None:
            return "No version in this run tries the fewer-wider-loads fix."
        name, base = escape.text(v.name), escape.text(v.baseline)
        res = [(c, self.speedup(v.name, v.baseline, c)) for c in (False, True)]
        res = [(c, x) for c, x in res if x is not None]
        if not res:
            return f"{name}, the fewer-wider-loads version, did not run beside {base} in this run."
        out = [f"The published T4 study ended with one fix left open: fewer, wider loads to relieve the pressure on "
               f"the shared-memory pipeline. Here that is **{name}** (its change is in the table above), measured "
               f"against {base} as a geometric mean over the goal cases."]
        for causal, x in res:
            pred = next((p for p in v.predicted if p.masking == masking(causal)), None)
            change = "faster" if x > 1 + SLACK else "slower" if x < 1 - SLACK else "no faster and no slower"
            shown = measured_text(x, pred.low, pred.high) if pred else fmt.ratio(x)
            text = f"{masking(causal).capitalize()}, it runs at {shown} of {base}'s TFLOP/s ({change})"
            if pred:
                text += (f" against a predicted {fmt.span(pred.low, pred.high, fmt.ratio)}: "
                         f"{verdict(x, pred.low, pred.high)}")
            out.append(text + ".")
        return " ".join(out)

    def limits_finding(self) -> str:
        """Where the final version stands and what its compiled kernel says about why."""
        d = self.data
        final = d.final_version
        r = self.ok[self.ok["impl"] == final]
        if r.empty:
            return f"{escape.text(final)} did not run in this run."
        row = r.iloc[0]
        ratios = [x for x in (self.ratio(final, *c) for c in self.cases()) if x is not None]
        # Short of the goal as goal_finding defines it (median and floor), not a single case within the noise.
        below = bool(ratios) and not self._goal_verdict(ratios)[2]
        res = []
        if pd.notna(row.get("blocks_per_sm")):
            res.append(f"{plural(int(row['blocks_per_sm']), 'block')} of {int(row['warps_per_block'])} warps per SM, "
                       f"{fmt.pct(row['occupancy_pct'])} theoretical occupancy set by "
                       f"{escape.text(row['occupancy_limiter'])}")
        if pd.notna(row.get("registers_per_thread")):
            res.append(f"{int(row['registers_per_thread'])} registers a thread")
        if pd.notna(row.get("shared_mem_bytes")):
            res.append(f"{fmt.bytes_(row['shared_mem_bytes'])} of shared memory a block")
        spills = r["spilled_registers"].dropna()
        spill_txt = (f" The compiler spilled registers in {int((spills > 0).sum())} of {len(spills)} cases."
                     if len(spills) and (spills > 0).any() else " No case spilled registers." if len(spills) else "")
        facts = (f"{escape.text(final)}'s compiled kernel, config {escape.code(row['config'])}, runs {join(res)}."
                 if res else "")
        if res and len({tuple(self._resources(x).items()) for _, x in r.iterrows()}) > 1:
            # A per-shape version's first row describes one of its kernels, not the version.
            where = case_label(row["dtype"], bool(row["causal"]), int(row["seq_len"]), int(row["batch"]),
                               int(row["heads"]), int(row["head_dim"]))
            facts = (f"{escape.text(final)} compiles a different kernel at different shapes (the table above has "
                     f"each); at {where}, config {escape.code(row['config'])}, it runs {join(res)}.")
        if not below:
            return facts + spill_txt
        return " ".join(x for x in ("Where it falls short, the compiled kernel alone cannot name the bottleneck.",
                                    (facts + spill_txt).strip(),
                                    self.stall_comparison()) if x)

    def stall_comparison(self) -> str:
        """Nsight Compute's stall reasons for our kernel against the fastest other implementation's, at the causal goal
        shape the profile phase adds, when this run has it."""
        impls, stalls = self.run.frame("profile", "impls"), self.run.frame("profile", "stalls")
        if impls.empty or stalls.empty:
            return "This run has no profile of a goal shape to say where the time goes."
        goal = impls[(impls["status"] == "ok") & (impls["causal"] == True) & (impls["group"] == "main")]  # noqa: E712
        ours = goal[goal["impl"] == "triton"]
        theirs = goal[goal["impl"].map(is_rival).astype(bool)]
        if ours.empty or theirs.empty:
            return "This run has no profile of a causal goal shape beside another implementation."

        def top(case_id):
            s = stalls[stalls["case_id"] == case_id].groupby("reason")["warps_per_issue"].sum().sort_values(ascending=False)
            return float(s.sum()), s

        o = ours.iloc[0]
        t = theirs.iloc[0]
        o_tot, o_s = top(o["case_id"])
        t_tot, t_s = top(t["case_id"])
        if o_s.empty or t_s.empty:
            return ""
        lead = o_s.index[0]
        shape = f"B={o['batch']}, H={o['heads']}, N={o['seq_len']}, d={o['head_dim']}, {SHORT.get(o['dtype'], o['dtype'])}, causal"
        pace = ""
        if pd.notna(o.get("duration_ms")) and pd.notna(t.get("duration_ms")):
            x = float(t["duration_ms"]) / float(o["duration_ms"])
            pace = (f" (there ours runs at {fmt.ratio(x)} of their speed under Nsight Compute, so this shape is not "
                    f"where the goal is missed)" if x >= 1.0 else f" (there ours runs at {fmt.ratio(x)} of their speed "
                    f"under Nsight Compute)")
        text = (f"The Profiling page has both kernels at {shape}{pace}: our kernel's warps spend {o_tot:.2f} cycles per "
                f"issued instruction, {escape.text(impl_label(t['impl']))}'s {t_tot:.2f} (issuing included). Our "
                f"largest stall reason is **{escape.text(lead)}** ({o_s.iloc[0]:.2f}; theirs "
                f"{float(t_s.get(lead, 0.0)):.2f})")
        if o_s.index[0] != t_s.index[0]:
            text += f", where theirs is {escape.text(t_s.index[0])} ({t_s.iloc[0]:.2f})"
        text += "."
        if lead == "long_scoreboard" and "_ws" in str(o.get("kernel_name", "")) + " ".join(
                self.run.frame("profile", "kernels").query("case_id == @o.case_id")["kernel_name"].astype(str)):
            text += (" In the sm90 SASS of the warp-specialized kernel (Triton 3.6) the consumer loop has no global "
                     "loads, so these waits are on the mbarriers through which the producer's TMA copies arrive: the "
                     "consumers wait for K and V tiles, which the two-stage pipeline, restarted for each query "
                     "tile, does not fetch early enough.")
        return text

    # --- tables ----------------------------------------------------------------------------

    def ratio_table(self) -> str:
        """Each implementation by shape class (head_dim and masking): its ratio to the fastest other implementation over
        the cases of that class it ran, and how many it ran; the per-case TFLOP/s are in the figure's hover."""
        impls = [*self.version_names(), *dict.fromkeys(self.rows[self.rows["kind"].isin(("sdpa", "baseline"))]["impl"])]
        classes = list(dict.fromkeys((c.head_dim, c.causal) for c in self.cases()))
        cols = {"impl": "Implementation", "kernel": "Kernel"}
        data = []
        for impl in impls:
            v = self.version(impl)
            r = {"impl": impl_label(impl), "kernel": version_kernel(v.path, v.features) if v else "SDPA"}
            for j, (hd, causal) in enumerate(classes):
                cases = [c for c in self.cases() if c.head_dim == hd and c.causal == causal]
                ratios = [x for x in (self.ratio(impl, *c) for c in cases) if x is not None]
                r[f"k{j}"] = (f"{fmt.span(min(ratios), max(ratios), fmt.ratio)} ({len(ratios)} of {len(cases)})"
                              if ratios else "not run")
                cols[f"k{j}"] = f"d={hd}, {masking(causal)}"
            data.append(r)
        return table_html(pd.DataFrame(data), cols,
                          caption="Lowest to highest ratio of TFLOP/s to the fastest other implementation of the same case, over "
                                  "the cases of each class the implementation ran (how many, of the class's); "
                                  "hover the figure above for each case's TFLOP/s")

    def journey_table(self) -> str:
        """Each version once: the factor predicted for it, what this run measured, and the verdict, per masking."""
        data = []
        for v in self.versions:
            base = "the fastest other implementation" if v.baseline == "sdpa" else v.baseline
            ranges, measured, verdicts = [], [], []
            for pred in v.predicted:
                m = self.measured_prediction(v, pred)
                only = prediction_cases(v)
                at = f" at {cases_label(only)}" if only else ""
                ranges.append(f"{pred.masking}{at}: {fmt.span(pred.low, pred.high, fmt.ratio)}")
                measured.append(f"{pred.masking}: {measured_text(m, pred.low, pred.high)}")
                verdicts.append(f"{pred.masking}: {verdict(m, pred.low, pred.high)}")
            data.append({"name": v.name, "kernel": version_kernel(v.path, v.features), "base": base,
                         "range": "; ".join(ranges) or "none recorded",
                         "measured": "; ".join(measured) or "not measured", "verdict": "; ".join(verdicts)})
        return table_html(pd.DataFrame(data), {
            "name": "Version", "kernel": "Kernel", "base": "Against", "range": "Predicted TFLOP/s factor",
            "measured": "Measured here (geometric mean)", "verdict": "Verdict"})

    def verdict_rule(self) -> str:
        """How the verdicts treat a factor just outside its range, and how many rows of this run that is."""
        n = sum(verdict(m, p.low, p.high) == IN_SLACK for _, p, m in self.measured_predictions())
        text = (f"A factor within {share(SLACK)} beyond either end of its predicted range still counts as "
                f"predicted, for run-to-run noise; the verdict then reads *{IN_SLACK}*, and the measured factor is "
                "printed with the figures that place it between the range and that slack.")
        text += f" In this run, {plural(n, 'verdict')} {'reads' if n == 1 else 'read'} so." if n else ""
        named = [v for v in self.versions if v.baseline and v.predicted and prediction_cases(v)]
        if named:
            text += (" Where a prediction's words name the cases it is about, it is measured there alone: "
                     f"{join(f'{escape.text(v.name)} at {cases_label(prediction_cases(v))}' for v in named)}.")
        return text

    def measured_predictions(self) -> list:
        """(version, prediction, measured factor or None) for every prediction of a version with a baseline."""
        return [(v, p, self.measured_prediction(v, p)) for v in self.versions if v.baseline for p in v.predicted]

    def measured_prediction(self, v, pred) -> float | None:
        """The factor this run measured for one prediction: over the goal cases of its masking that it covers."""
        if not v.baseline:
            return None
        return self.speedup(v.name, v.baseline, pred.masking == "causal", prediction_cases(v))

    def story_table(self) -> str:
        """Each version's change, its prediction as written (and when), and its author's notes after measuring."""
        data = [{"name": v.name, "change": v.change, "prediction": f"{v.prediction} (written {v.predicted_at})",
                 "notes": v.outcome or "no notes recorded"} for v in self.versions]
        return table_html(pd.DataFrame(data), {"name": "Version", "change": "What changed", "prediction": "Prediction",
                                               "notes": "Author's notes, written after measuring"})

    @staticmethod
    def _resources(row) -> dict:
        """A compiled kernel's resources as the table prints them."""
        def opt(col, f=lambda x: str(int(x))):
            return f(row[col]) if pd.notna(row.get(col)) else "n/a"

        return {"config": row.get("config") or "n/a", "ws": "yes" if row.get("warp_specialized") is True else "no",
                "regs": opt("registers_per_thread"), "spills": opt("spilled_registers"),
                "smem": opt("shared_mem_bytes", fmt.bytes_), "warps": opt("warps_per_block"),
                "blocks": opt("blocks_per_sm"), "occ": opt("occupancy_pct", fmt.pct),
                "lim": row.get("occupancy_limiter") or "n/a"}

    def kernels(self, rows: pd.DataFrame) -> list[tuple[dict, list, pd.Series]]:
        """The distinct compiled kernels among rows of one version and masking: (resources, the (head_dim, N,
        dtype) cases that ran it, its first row), in case order. A per-shape version runs several."""
        found: dict[tuple, tuple[list, pd.Series]] = {}
        for _, row in rows.iterrows():
            key = (int(row["head_dim"]), int(row["seq_len"]), str(row["dtype"]))
            found.setdefault(tuple(self._resources(row).items()), ([], row))[0].append(key)
        out = [(dict(res), keys, row) for res, (keys, row) in found.items()]
        return sorted(out, key=lambda k: min((-hd, n) for hd, n, _ in k[1]))

    def resources_table(self) -> str:
        """Compiled-kernel resources per version and masking: one row per distinct kernel, with where it ran."""
        data = []
        for name in self.version_names():
            for causal in (False, True):
                r = self.ok[(self.ok["impl"] == name) & (self.ok["causal"] == causal)]
                if r.empty:
                    continue
                kernels = self.kernels(r)
                for res, keys, first in kernels:
                    src = first.get("resources_from")
                    data.append({"name": name + (f" (compiled as {src})" if isinstance(src, str) else ""),
                                 "masking": masking(causal),
                                 "where": where_ran(keys) if len(kernels) > 1 else "every case it ran", **res})
        if not data:
            return "No version ran, so there are no compiled kernels to describe."
        return table_html(pd.DataFrame(data), {
            "name": "Version", "masking": "Mask", "where": "Cases", "config": "Tile config", "ws": "Warp-specialized",
            "regs": "Registers / thread", "spills": "Spilled", "smem": "Shared memory / block", "warps": "Warps / block",
            "blocks": "Blocks / SM", "occ": "Theoretical occupancy", "lim": "Limited by"})

    # --- figure ----------------------------------------------------------------------------

    def tflops_figure(self) -> str:
        """Versions along x, TFLOP/s up; one line per N; dashed: fastest other; dotted: matmul ceiling."""
        facets = self.facets()
        names = self.version_names()
        ticks = [n.split("-")[0] for n in names]  # 'v20': the full name and kernel are in the hover and the tables
        if len(set(ticks)) < len(ticks):
            ticks = names
        kernel = {v.name: version_kernel(v.path, v.features) for v in self.versions}
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
        cases = join(dict.fromkeys(f"N={c.n}" for c in self.cases()))
        shape = join(dict.fromkeys(f"B={b}, H={h}, d={hd}" for b, h, hd in
                                   zip(self.rows["batch"], self.rows["heads"], self.rows["head_dim"])))
        caption = (f"TFLOP/s of each kernel version (solid, in journey order) against the fastest other implementation of the "
                   f"same case (dashed) and the measured matmul rate (dotted); {shape}; {cases}; "
                   f"4·B·H·N²·d FLOP per call, halved when causal.")
        return self.figure("tflops", fig, caption, height=300 * len(dtypes) + 120)
