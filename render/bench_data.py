"""The bench phase's rows as the pages ask for them: by shape, dtype and masking, ok rows only."""
from __future__ import annotations

import math
from functools import cached_property

import pandas as pd

from .runs import Run
from .vocab import IMPL_LABELS, is_rival


# The columns that name one case: the rows of a case share them and differ in impl.
CASE = ["batch", "heads", "head_dim", "dtype", "causal", "seq_len"]


def distinct_sdpa(rows: pd.DataFrame) -> pd.DataFrame:
    """The timed SDPA rows of `rows`, each kernel once per case.

    PyTorch's own choice ('sdpa') runs one of the backends the phase also forces; where that backend's
    forced row was timed in the same case, the two rows are two samples of one kernel, and letting the
    quicker sample stand for "the fastest other implementation" would tilt every comparison against ours. The
    forced row stands for the kernel then. Where the choice is unknown, or a backend whose forced run
    has no time here, PyTorch's choice is the only sample of its kernel and stays."""
    sdpa = rows[rows["impl"].astype(str).str.startswith("sdpa") & rows["latency_ms_median"].notna()]
    if "status" in sdpa:
        sdpa = sdpa[sdpa["status"] == "ok"]
    if "backend_used" not in sdpa or sdpa.empty:
        return sdpa
    forced = sdpa[sdpa["impl"] != "sdpa"]
    timed = set(zip(*(forced[c] for c in CASE), forced["impl"].str.removeprefix("sdpa-")))
    twice = [impl == "sdpa" and (*key, used) in timed
             for impl, used, *key in zip(sdpa["impl"], sdpa["backend_used"], *(sdpa[c] for c in CASE))]
    return sdpa[[not t for t in twice]]


def rivals(rows: pd.DataFrame) -> pd.DataFrame:
    """The timed rows of `rows` that ours is judged against (vocab.is_rival), each kernel once per case:
    FlashAttention-4 and the SDPA options but math, PyTorch's choice counted as distinct_sdpa counts it."""
    timed = rows[rows["latency_ms_median"].notna()]
    if "status" in timed:
        timed = timed[timed["status"] == "ok"]
    f = pd.concat([distinct_sdpa(timed), timed[timed["impl"] == "fa4"]])
    return f[f["impl"].map(is_rival).astype(bool)]


def spread(other, ours) -> tuple[float, float] | None:
    """The ratio of two rows' p10s and the ratio of their p90s (other's over ours), or None where either row lacks
    them (published figures carry none). The one reading of "the calls' spread" of a comparison every page uses:
    quick end against quick end, slow end against slow end, so each ratio compares like with like."""
    try:
        r = (other["latency_ms_p10"] / ours["latency_ms_p10"], other["latency_ms_p90"] / ours["latency_ms_p90"])
    except (KeyError, TypeError, ZeroDivisionError):
        return None
    return r if all(x == x and x > 0 and math.isfinite(x) for x in r) else None


class BenchData:
    """bench.json of one run, with the lookups the Benchmarks, Byte arithmetic and Home pages share."""

    def __init__(self, run: Run):
        self.run = run

    @cached_property
    def rows(self) -> pd.DataFrame:
        df = self.run.frame("bench", "rows")
        df["shape"] = list(zip(df["batch"], df["heads"], df["head_dim"]))
        return df

    @cached_property
    def ok(self) -> pd.DataFrame:
        return self.rows[self.rows["status"] == "ok"]

    def shapes(self) -> list[tuple]:
        return list(dict.fromkeys(self.rows["shape"]))

    def sweep_shapes(self) -> list[tuple]:
        """Shapes the run measured at several lengths: each gets its curves."""
        return [s for s in self.shapes() if len(self.seq_lens(s)) > 1]

    def point_shapes(self) -> list[tuple]:
        """Shapes measured at one length only (the inference shapes, other head sizes): a table row each."""
        return [s for s in self.shapes() if len(self.seq_lens(s)) == 1]

    def seq_lens(self, shape=None) -> list[int]:
        rows = self.rows if shape is None else self.rows[self.rows["shape"] == shape]
        return sorted(int(n) for n in set(rows["seq_len"]))

    def facets(self, shape) -> list[tuple[str, bool]]:
        sub = self.rows[self.rows["shape"] == shape]
        return [(dt, bool(c)) for dt in dict.fromkeys(sub["dtype"]) for c in sorted(set(sub["causal"]))]

    def impls(self) -> list[str]:
        present = set(self.rows["impl"])
        return [i for i in IMPL_LABELS if i in present] + sorted(present - set(IMPL_LABELS))

    def facet_rows(self, df: pd.DataFrame, shape, dtype: str, causal: bool) -> pd.DataFrame:
        """The rows of `df` at one shape and facet. The pages ask for thousands of these over the same frames: each
        frame is split once (a run with ten times the committed rows spent a fifth of its build filtering it again
        per call), and each answer is a copy of its part, so no caller can change another's."""
        cache = self.__dict__.setdefault("_facet_parts", {})
        hit = cache.get(id(df))
        if hit is None or hit[0] is not df:  # the frame itself is kept, so its id cannot be reused by another
            parts = ({} if df.empty or not {"shape", "dtype", "causal"} <= set(df.columns) else
                     {k: g for k, g in df.groupby(["shape", "dtype", "causal"], sort=False)})
            hit = cache[id(df)] = (df, parts)
        part = hit[1].get((shape, dtype, bool(causal)))
        return part.copy() if part is not None else df.iloc[0:0].copy()

    def series(self, shape, dtype: str, causal: bool, impl: str, column: str = "latency_ms_median") -> pd.Series:
        """One column of one implementation's ok rows by seq_len (missing values dropped)."""
        f = self.facet_rows(self.ok, shape, dtype, causal)
        f = f[f["impl"] == impl]
        if column not in f:
            return pd.Series(dtype=float)
        return f.set_index("seq_len")[column].dropna().sort_index()

    def by_n(self, shape, dtype: str, causal: bool, impl: str) -> pd.DataFrame:
        """One implementation's timed ok rows, indexed by seq_len: a comparison needs the spread and the
        loop time beside the median."""
        f = self.facet_rows(self.ok, shape, dtype, causal)
        f = f[(f["impl"] == impl) & f["latency_ms_median"].notna()]
        return f.set_index("seq_len").sort_index()

    def latency(self, shape, dtype: str, causal: bool, impl: str) -> pd.Series:
        """Median device time by seq_len, ok rows only."""
        return self.series(shape, dtype, causal, impl, "latency_ms_median")

    def fastest_rival(self, shape, dtype: str, causal: bool) -> pd.DataFrame:
        """Per seq_len, the quickest ok row among the rivals of ours (vocab.is_rival), each kernel once (see
        distinct_sdpa): FlashAttention-4, a forced SDPA backend, or PyTorch's choice where it ran none that was
        timed forced."""
        f = rivals(self.facet_rows(self.ok, shape, dtype, causal))
        if f.empty:
            return f
        return f.loc[f.groupby("seq_len")["latency_ms_median"].idxmin()].set_index("seq_len").sort_index()

    def status_at(self, shape, dtype: str, causal: bool, impl: str, n: int) -> str:
        f = self.facet_rows(self.rows, shape, dtype, causal)
        s = f[(f["impl"] == impl) & (f["seq_len"] == n)]["status"]
        return s.iloc[0] if len(s) else "not in sweep"

    def paths(self, shape, dtype: str, causal: bool, impl: str = "triton") -> dict[int, str]:
        """seq_len -> the kernel path flash_attention took ('gluon g5' where the run recorded the Gluon step);
        empty for runs that did not record paths."""
        f = self.facet_rows(self.ok, shape, dtype, causal)
        f = f[f["impl"] == impl]
        return {int(n): p + (f" {st}" if isinstance(st, str) else "")
                for n, p, st in zip(f["seq_len"], f["kernel_path"], f["kernel_step"]) if isinstance(p, str)}
