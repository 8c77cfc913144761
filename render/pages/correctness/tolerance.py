"""Tolerance: the unit roundoff checked against torch.finfo, the pass rule, the tolerances and the reference."""
from __future__ import annotations

import pandas as pd

from ... import escape
from ...tables import table_html
from ...vocab import DTYPE_SHORT, join
from .common import CorrectnessSection, sci


class Tolerance(CorrectnessSection):
    """The tolerance rule and table, and the reference the errors are measured against."""

    def u_check(self) -> str:
        """Whether the collector's u (torch.finfo) and this page's u (bit counts) agree."""
        data = self.data
        if data is None or not data.tolerances:
            return ""
        same = [t for t in data.tolerances if self._u(t.dtype) == t.unit_roundoff]
        differ = [t for t in data.tolerances if t not in same]
        if not differ:
            return f"The two agree for {join([DTYPE_SHORT.get(t.dtype, t.dtype) for t in same])}."
        return "They **disagree** for " + join([
            f"{DTYPE_SHORT.get(t.dtype, t.dtype)} (collector {sci(t.unit_roundoff)}, page {sci(self._u(t.dtype))})"
            for t in differ]) + ": the tolerances were derived from a different u than this page assumes."

    def tolerance_rule(self) -> str:
        """The pass rule in words, with the factor from the data."""
        data = self.data
        factors = sorted({t.factor for t in data.tolerances}) if data is not None and data.tolerances else []
        f = join([f"{x:g}" for x in factors]) if factors else "a stated multiple of"
        return (f"A case passes when every output element satisfies |out − ref| ≤ tol_abs + tol_rel·|ref|, "
                f"with both tolerances {f} × u of the case's dtype. The relative error reported is normwise: "
                "max |out − ref| / max |ref| over the whole output, so elements where the reference is close to "
                "zero cannot blow it up.")

    def tolerance_table(self) -> str:
        data = self.data
        if data is None or not data.tolerances:
            return "_This run recorded no tolerances._"
        rows = []
        for t in data.tolerances:
            u = self._u(t.dtype)
            rows.append({"dtype": DTYPE_SHORT.get(t.dtype, t.dtype), "bits": t.mantissa_bits, "u": sci(t.unit_roundoff),
                         "u_render": sci(u), "factor": f"{t.factor:g}", "atol": sci(t.tol_abs), "rtol": sci(t.tol_rel)})
        return table_html(pd.DataFrame(rows), {
            "dtype": "dtype", "bits": "fraction bits", "u": "u (collect, from torch.finfo)",
            "u_render": "u (this page, from the bit count)", "factor": "factor", "atol": "tol_abs", "rtol": "tol_rel"})

    def reference_note(self) -> str:
        data = self.data
        if data is None:
            return ""
        out = f"Reference: {data.reference}." if data.reference else ""
        if data.config_policy:
            out += f" Tile configs: {data.config_policy}."
        return escape.text(out)
