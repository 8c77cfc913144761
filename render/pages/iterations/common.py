"""What every section of the Kernel iterations page reads: the goal cases, the rows of each case (split once, so a
question is a lookup), TFLOP/s and ratios to the fastest other implementation, and the goal as the page judges it."""
from __future__ import annotations

import dataclasses
import math
from functools import cached_property
from typing import NamedTuple

import pandas as pd

from collect.schema.iterations import IterationRow

from ...frames import index_by
from ...vocab import DTYPE_SHORT as SHORT
from ...vocab import clock_gap, join, masking
from ..base import Page

CEILINGS = {"float16": "matmul_fp16", "bfloat16": "matmul_bf16"}
# No goal case may fall more than this below the goal ratio: the run-to-run noise band of this data.
NOISE_BAND = 0.03


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

    def _goal_verdict(self, ratios: list[float]) -> tuple[float, list[float], bool]:
        """(median, the ratios below the noise floor, reached): the goal as goal_finding states it."""
        goal = self.data.goal_ratio
        med = float(pd.Series(ratios).median())
        low = [r for r in ratios if r < goal - NOISE_BAND]
        return med, low, med >= goal and not low
