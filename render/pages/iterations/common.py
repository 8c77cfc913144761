"""What every section of the Kernel iterations page reads: the goal cases, the rows of each case (split once, so a
question is a lookup), TFLOP/s and ratios to the fastest other implementation (or to the yardstick a prediction
names), and the goal as the page judges it."""
from __future__ import annotations

import dataclasses
import math
from functools import cached_property
from typing import NamedTuple

import pandas as pd

from collect.schema.iterations import IterationRow

from ... import fmt
from ...frames import index_by
from ...vocab import DTYPE_SHORT as SHORT
from ...vocab import clock_gap, is_rival, join, masking
from ..base import Page

CEILINGS = {"float16": "matmul_fp16", "bfloat16": "matmul_bf16"}
# No goal case may fall more than this below the goal ratio: a run-to-run noise band fixed for every run, not
# measured in each; the page says so.
NOISE_BAND = 0.03


class Yardstick(NamedTuple):
    """What a ratio can be taken against besides another version: the fastest of some other implementations."""

    key: str
    label: str
    kinds: tuple[str, ...]  # the row kinds it takes the fastest of
    impls: tuple[str, ...] = ()  # and, where given, only these implementations among them


# Widest first. "fastest-other" is the goal's yardstick: every other implementation that keeps the scores on chip,
# FlashAttention-4 included. The narrower two are what the predictions written before FlashAttention-4 was timed
# beside ours compared with.
YARDSTICKS = {y.key: y for y in (
    Yardstick("fastest-other", "the fastest other implementation", ("sdpa", "baseline")),
    Yardstick("fastest-sdpa", "the fastest SDPA backend", ("sdpa",)),
    Yardstick("cudnn", "SDPA cuDNN", ("sdpa",), ("sdpa-cudnn",)),
)}
# A version's baseline 'sdpa' (the data's word for "other implementations") read without its prediction's words.
YARDSTICKS["sdpa"] = YARDSTICKS["fastest-other"]


class Measured(NamedTuple):
    """A ratio over goal cases: its geometric mean, the cases it covers, and the cases the measured implementation ran
    where the baseline has no row to divide by."""

    factor: float | None
    cases: list
    unmatched: list


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


def goal_ratio_text(r: float | None, goal: float) -> str:
    """A ratio with the figures that place it against the goal and the noise floor below it: a 0.9697 counted below a
    0.970 floor prints as 0.9697, not as the floor itself."""
    return max((fmt.ratio_vs(r, t) for t in (goal, goal - NOISE_BAND)), key=len)


def share(x: float) -> str:
    """A band given as a fraction, as a reader writes it: 0.01 -> '1%'."""
    return f"{100 * x:g}%"


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


class IterationsSection(Page):
    """The iterations rows and the questions every section asks of them; IterationsPage's sections subclass it."""

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
    def _timed(self) -> frozenset:
        """Names of the versions this run has rows of, whatever their status: a row that failed is a result too."""
        r = self.rows
        return frozenset(r[r["kind"] == "version"]["impl"]) if "kind" in r else frozenset()

    def timed_versions(self) -> list:
        """The versions this run timed, in journey order; the others are recorded for their story alone."""
        return [v for v in self.versions if v.name in self._timed]

    def head_dims_ran(self, name: str) -> set[int]:
        """The head sizes an implementation has rows at."""
        r = self.rows
        return {int(x) for x in r[r["impl"] == name]["head_dim"]}

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

    def shape_lengths(self) -> str:
        """'B=2, H=8, d=64 at N=2048 and 4096; B=4, H=32, d=128 at N=4096': each shape with its own lengths, which
        the shapes need not share (the d=128 goal skips N=2048 and 8192), in order of N."""
        lens: dict[str, set] = {}
        for b, h, hd, n in zip(self.rows["batch"], self.rows["heads"], self.rows["head_dim"], self.rows["seq_len"]):
            lens.setdefault(f"B={b}, H={h}, d={hd}", set()).add(int(n))
        return "; ".join(f"{s} at N={join(sorted(ns))}" for s, ns in lens.items())

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
    def _tflops(self) -> dict:
        """(impl, case key) -> TFLOP/s of the first ok row, for the full and the shape-free key."""
        out: dict = {}
        for key, f in self._ok_cases.items():
            for impl, t in zip(f["impl"], f["tflops"]):
                out.setdefault((impl, key), float(t))
        return out

    @cached_property
    def _fastest(self) -> dict:
        """(yardstick key, case key) -> (impl, TFLOP/s) of the fastest row the yardstick takes (the first of equals),
        full and shape-free keys."""
        out: dict = {}
        for key, f in self._ok_cases.items():
            for y in set(YARDSTICKS.values()):
                s = f[f["kind"].isin(y.kinds) & f["impl"].map(is_rival).astype(bool)]
                if y.impls:
                    s = s[s["impl"].isin(y.impls)]
                if not s.empty:
                    best = s.loc[s["tflops"].idxmax()]
                    out[(y.key, key)] = (str(best["impl"]), float(best["tflops"]))
        return out

    def _case_rows(self, index: dict, dtype: str, causal: bool, n: int, batch=None, heads=None,
                   head_dim=None) -> pd.DataFrame:
        """One case's rows from an index built by cases_index (every shape at this N where head_dim is None)."""
        return index.get(case_key(dtype, causal, n, batch, heads, head_dim), index.get(None))

    def tflops(self, impl: str, dtype: str, causal: bool, n: int, batch=None, heads=None, head_dim=None) -> float | None:
        return self._tflops.get((impl, case_key(dtype, causal, n, batch, heads, head_dim)))

    def fastest_rival(self, dtype: str, causal: bool, n: int, batch=None, heads=None,
                     head_dim=None, yardstick: str = "fastest-other") -> tuple[str, float] | None:
        """(impl, TFLOP/s) of the fastest implementation the yardstick takes at one case (by default the fastest
        other implementation, the goal's)."""
        return self._fastest.get((YARDSTICKS[yardstick].key, case_key(dtype, causal, n, batch, heads, head_dim)))

    def ratio(self, impl: str, dtype: str, causal: bool, n: int, batch=None, heads=None,
              head_dim=None) -> float | None:
        """TFLOP/s of impl over the fastest other implementation's, same case."""
        t = self.tflops(impl, dtype, causal, n, batch, heads, head_dim)
        s = self.fastest_rival(dtype, causal, n, batch, heads, head_dim)
        return t / s[1] if t is not None and s else None

    def clock(self, impl: str, case: GoalCase) -> float | None:
        """The median SM clock (MHz) of impl's first ok row at one goal case, where it was recorded."""
        if "sm_clock_mhz" not in self.ok:
            return None
        f = self._case_rows(self._ok_cases, *case)
        a = f[f["impl"] == impl]["sm_clock_mhz"].dropna()
        return None if a.empty else float(a.iloc[0])

    def case_clock_gap(self, impl: str, case: GoalCase) -> tuple[float, float, float, str] | None:
        """(|ours / theirs - 1|, our median SM clock, theirs, their impl) for impl and the fastest other implementation at
        one goal case, where both clocks were recorded."""
        s = self.fastest_rival(*case)
        if s is None:
            return None
        a, b = self.clock(impl, case), self.clock(s[0], case)
        if (gap := clock_gap(a, b)) is None:
            return None
        return gap, a, b, s[0]

    def _ceiling(self, dtype: str):
        name = CEILINGS.get(dtype)
        return next((c for c in self.run.manifest.measured_ceilings if c.name == name and c.status == "ok"), None)

    def ceiling(self, dtype: str) -> float | None:
        """The measured matmul rate of this dtype (FLOP/s), from the env phase."""
        c = self._ceiling(dtype)
        return c.per_s_median if c else None

    def ceiling_clock(self, dtype: str) -> float | None:
        """The median SM clock (MHz) the matmul ceiling of this dtype was measured at, where recorded."""
        c = self._ceiling(dtype)
        return getattr(c, "sm_clock_mhz", None) if c else None

    def speedup(self, name: str, baseline: str, causal: bool, only: dict | None = None) -> float | None:
        """Geometric mean over the goal cases of this masking (and of `only`'s GoalCase fields, when given) of
        name's TFLOP/s over the baseline's: a version's name, or a YARDSTICKS key ('sdpa': the fastest other
        implementation of each case). Only cases both ran count."""
        return self.measure(name, baseline, causal, only).factor

    def measure(self, name: str, baseline: str, causal: bool, only: dict | None = None) -> Measured:
        """speedup, with the cases it rests on and those name ran where the baseline has no row."""
        out, cases, unmatched = [], [], []
        for case in self.scope(causal, only):
            t = self.tflops(name, *case)
            if t is None:
                continue
            if baseline in YARDSTICKS:
                s = self.fastest_rival(*case, yardstick=baseline)
                b = s[1] if s else None
            else:
                b = self.tflops(baseline, *case)
            if b:
                out.append(t / b)
                cases.append(case)
            else:
                unmatched.append(case)
        return Measured(geomean(out), cases, unmatched)

    def scope(self, causal: bool, only: dict | None = None) -> list[GoalCase]:
        """The goal cases of one masking, limited to `only`'s GoalCase fields where given."""
        return [c for c in self.cases()
                if c.causal == causal and all(getattr(c, k) == x for k, x in (only or {}).items())]

    def _goal_verdict(self, ratios: list[float]) -> tuple[float, list[float], bool]:
        """(median, the ratios below the noise floor, reached): the goal as goal_finding states it."""
        goal = self.data.goal_ratio
        med = float(pd.Series(ratios).median())
        low = [r for r in ratios if r < goal - NOISE_BAND]
        return med, low, med >= goal and not low
