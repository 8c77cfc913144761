"""What every section of the Correctness page reads: the unit roundoff of each format, how errors are written, and
the kernel's grid of cases with the columns its tables show."""
from __future__ import annotations

import math
import re
from functools import cached_property

import pandas as pd

from ... import fmt
from ...fmt import known
from ...vocab import DTYPE_SHORT, join, kernel_name
from ..base import Page

# Stored fraction bits of each format: IEEE 754 binary16 has 1 sign, 5 exponent and 10 fraction bits;
# bfloat16 keeps float32's 8 exponent bits and the top 7 of its fraction bits.
MANTISSA_BITS = {"float16": 10, "bfloat16": 7}
PORTABLE = "triton-portable"  # the grid again on the portable path (where another path is the default)
# A ratio between two measurements "stays flat" inside this factor, else it grows or shrinks.
TREND_FACTOR = 2.0


def unit_roundoff(dtype: str) -> float:
    """u = 2^-(p) with p = fraction bits + 1 (the implicit leading bit): the largest relative error of one rounding."""
    if dtype not in MANTISSA_BITS:
        raise ValueError(f"unknown dtype {dtype!r}; the correctness page knows {sorted(MANTISSA_BITS)}")
    return 2.0 ** -(MANTISSA_BITS[dtype] + 1)


def half_ulp(x: float, dtype: str) -> float:
    """Half a unit in the last place of |x| in the format, the most that rounding x to nearest moves it: u·2^e
    for |x| in [2^e, 2^(e+1)) (outputs here lie far above the subnormals, where the step stops shrinking)."""
    _, exp = math.frexp(abs(x))  # |x| = m·2^exp with m in [0.5, 1)
    return unit_roundoff(dtype) * 2.0 ** (exp - 1)


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def sci(x) -> str:
    """3 significant figures in powers of ten, e.g. 4.88×10⁻⁴ (errors span too many decades for fixed point)."""
    if absent(x):
        return "n/a"
    if x == 0:
        return "0"
    exp = math.floor(math.log10(abs(x)))
    mant = x / 10**exp
    if round(abs(mant), 2) >= 10:  # 9.996 rounds up a decade
        mant, exp = mant / 10, exp + 1
    if -2 <= exp <= 2:  # rounded to three figures first, then printed with all three ('0.0100', not '0.01')
        return fmt.num(float(f"{x:.3g}"))
    sup = str(exp).translate(SUPERSCRIPT)
    return f"{mant:.2f}×10{sup}"


def absent(x) -> bool:
    return not known(x)


def as_text(x) -> str:
    return "" if absent(x) else str(x)


class CorrectnessSection(Page):
    """The correctness rows and the grid of kernel cases; each section of the page is a subclass."""

    slug = "correctness"
    phase = "correctness"

    # --- frames ----------------------------------------------------------------------------

    @cached_property
    def rows(self) -> pd.DataFrame:
        return self.run.frame("correctness", "rows")

    @cached_property
    def grid(self) -> pd.DataFrame:
        """The kernel's cases on contiguous inputs (comparison implementations and strided views excluded)."""
        df = self.rows
        return df[(df["impl"] == "triton") & (df["layout"] == "contiguous")].copy() if not df.empty else df

    @cached_property
    def regular(self) -> pd.DataFrame:
        """The grid without the cases added to reach the large-shape kernel routes (their shapes are not on its
        axes: they get a table of their own)."""
        g = self.grid
        return g[g["route_case"] != True].copy() if not g.empty else g  # noqa: E712 - the column holds None too

    @cached_property
    def added(self) -> pd.DataFrame:
        """The cases added to reach a kernel route no regular case takes (none in runs before they were added)."""
        g = self.grid
        return g[g["route_case"] == True].copy() if not g.empty else g  # noqa: E712

    @cached_property
    def portable(self) -> pd.DataFrame:
        """The same grid held to the portable path (collected on Hopper GPUs only)."""
        df = self.rows
        return df[(df["impl"] == PORTABLE) & (df["layout"] == "contiguous")].copy() if not df.empty else df

    @cached_property
    def ok(self) -> pd.DataFrame:
        g = self.grid
        return g[(g["status"] == "ok") & g["max_abs_err"].notna()].copy() if not g.empty else g

    @property
    def dtypes(self) -> list[str]:
        present = set(self.grid["dtype"]) if not self.grid.empty else set()
        return [d for d in MANTISSA_BITS if d in present] + sorted(present - set(MANTISSA_BITS))

    def _u(self, dtype: str) -> float | None:
        return unit_roundoff(dtype) if dtype in MANTISSA_BITS else None

    def _heads(self) -> str:
        heads = sorted(set(self.regular["heads"])) if not self.regular.empty else []
        return f"heads {join(heads)}" if heads else "heads n/a"

    def _cond(self) -> str:
        """Conditions every figure shares (the caption adds run and device)."""
        data = self.data
        return self._heads() + (f"; inputs: {data.inputs}" if data is not None and data.inputs else "")


    def _main_dims(self) -> list[int]:
        """Head dims present at every seq_len, so each line compares like with like across N."""
        g = self.regular
        all_n = set(g["seq_len"])
        dims = [d for d, grp in g.groupby("head_dim") if set(grp["seq_len"]) == all_n]
        return dims or sorted(set(g["head_dim"]))

    _COLS = {"impl": "impl", "dtype": "dtype", "causal": "causal", "batch": "B", "heads": "H", "seq_len": "N",
             "head_dim": "d", "status": "status", "max_abs_err": "max |err|", "max_rel_err": "normwise",
             "tol_usage": "tolerance used", "passed": "pass", "worst_query": "worst query", "kernel": "kernel",
             "config": "tile config", "reason": "reason"}
    _FMT = {"max_abs_err": sci, "max_rel_err": sci, "dtype": lambda d: DTYPE_SHORT.get(d, d),
            "causal": lambda c: "yes" if c else "no",
            "tol_usage": lambda x: "n/a" if absent(x) else f"{x:.2f}",
            "passed": lambda p: "n/a" if absent(p) else ("yes" if p else "NO"),
            "worst_query": lambda q: "n/a" if absent(q) else str(int(q)),
            "reason": lambda r: as_text(r)[:300], "config": as_text}
    # Beside a kernel column, which names the path, a tile config drops its "<path> path, ", so the table fits.
    _FMT_WITH_KERNEL = {**_FMT, "config": lambda c: re.sub(r"^[\w-]+ path, ", "", as_text(c))}

    @staticmethod
    def with_kernel(df: pd.DataFrame) -> pd.DataFrame:
        """`df` with a `kernel` column: the kernel and, on the Gluon path, the step each row recorded."""
        def name(r) -> str:
            if absent(r.get("kernel_path")):
                return "not recorded"
            step = as_text(r.get("kernel_step"))
            return kernel_name(r["kernel_path"], step or None) + (f" ({step})" if step else "")

        return df.assign(kernel=[name(r) for _, r in df.iterrows()]) if not df.empty else df.assign(kernel=[])

    @staticmethod
    def _why(r) -> str:
        """A failed row's explanation: the recorded reason, else where the error broke the tolerance."""
        if r["status"] != "ok" or not absent(r["reason"]):
            return as_text(r["reason"])
        if absent(r["worst_query"]):
            return "error exceeded the tolerance"
        return (f"error reached {r['tol_usage']:.2f}× the tolerance at query {int(r['worst_query'])} "
                f"({int(r['worst_query_keys'])} keys visible)")
