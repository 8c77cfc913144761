"""Tolerance: the pass rule, why it is the multiple of u it is and the size of values it assumes, and the reference."""
from __future__ import annotations

import math

import pandas as pd

from ... import escape, fmt
from ...tables import table_html
from ...vocab import DTYPE_SHORT, facet_label, join
from .common import CorrectnessSection, sci
from .rounding import ROUNDINGS


class Tolerance(CorrectnessSection):
    """The tolerance rule and table, and the reference the errors are measured against."""

    def u_check(self) -> str:
        """Nothing where the collector's u (torch.finfo) is the one this page derives from the bit counts; a warning
        where it is not, since every figure in u below would then be off."""
        data = self.data
        if data is None or not data.tolerances:
            return ""
        differ = [t for t in data.tolerances if self._u(t.dtype) != t.unit_roundoff]
        if not differ:
            return ""
        return "The collector's u **disagrees** with the bit counts for " + join([
            f"{DTYPE_SHORT.get(t.dtype, t.dtype)} (collector {sci(t.unit_roundoff)}, page {sci(self._u(t.dtype))})"
            for t in differ]) + ": the tolerances were derived from a different u than this page assumes."

    def tolerance_rule(self) -> str:
        """The pass rule in words, with the factor from the data and why it is that multiple of u."""
        data = self.data
        factors = sorted({t.factor for t in data.tolerances}) if data is not None and data.tolerances else []
        f = join([f"{x:g}" for x in factors]) if factors else "a stated multiple of"
        rule = (f"A case passes when every output element satisfies |out − ref| ≤ tol_abs + tol_rel·|ref|, "
                f"with both tolerances {f} × u of the case's dtype. The relative error reported is normwise: "
                "max |out − ref| / max |ref| over the whole output, so elements where the reference is close to "
                "zero cannot blow it up.")
        if len(factors) != 1:
            return rule
        return rule + "\n\n" + self._why_factor(factors[0]) + " " + self._scale_assumption()

    @staticmethod
    def _why_factor(factor: float) -> str:
        return ("The kernel rounds twice: P to the input dtype before the P·V product, then the output. Each rounding "
                "moves an output by at most about u·Σⱼ pⱼ|vⱼ|, u times a weighted mean of the |v| that output "
                f"averages, so the two make at most about {ROUNDINGS}u of the values involved, and {factor:g}u leaves "
                f"a factor of {factor / ROUNDINGS:g} above that.")

    def _scale_assumption(self) -> str:
        """What tol_abs assumes about the size of the values, and whether this run's inputs meet it."""
        data = self.data
        inputs = data.inputs if data is not None else ""
        text = ("tol_abs is absolute, so the rule assumes values of about unit size: values v scaled by 100 scale "
                "every output and its error by 100 while tol_abs stays put, so the rule would fail a correct kernel "
                "wherever outputs are small; scaled down by 100, it would pass errors of many roundings.")
        if "standard normal" in inputs:
            return text + (f" This run's inputs are standard normal, for which the mean of |v| is √(2/π) ≈ "
                           f"{fmt.num(math.sqrt(2 / math.pi), 2)}: one rounding is about that many u.")
        return text + " This run does not describe its inputs as standard normal: check their scale before reading " \
                      "the tolerance."

    def tolerance_slack(self) -> str:
        """Where outputs are smallest, how many half-ulps of them the bound allows: the tolerance is a worst case set
        by the values averaged, so the comparison with half an ulp later on is the tighter check."""
        c = self.rounding_cases()
        data = self.data
        tols = {t.dtype: t for t in data.tolerances} if data is not None else {}
        c = c[c["dtype"].isin(list(tols))] if not c.empty else c
        if c.empty:
            return ""
        r = c.loc[c["max_abs_ref"].idxmin()]
        t = tols[r["dtype"]]
        bound = t.tol_abs + t.tol_rel * float(r["max_abs_ref"])
        return (f"Where outputs are smallest ({facet_label(r['dtype'], bool(r['causal']))}, N={int(r['seq_len'])}, "
                f"d={int(r['head_dim'])}, largest |output| {fmt.num(float(r['max_abs_ref']))}), the tolerance at the "
                f"largest output is {fmt.num(bound / float(r['half_ulp']), 2)} half-ulps of it. The tolerance is sized "
                "for values of about unit size, the values an output averages, not for the output itself, and "
                "roundings that add up at random stay far below it: this case's largest error is "
                f"{fmt.num(float(r['ulp_ratio']), 2)} half-ulps. So the comparison with half an ulp of each case's "
                "largest output, below, is the tighter check.")

    def tolerance_table(self) -> str:
        data = self.data
        if data is None or not data.tolerances:
            return "_This run recorded no tolerances._"
        rows = []
        for t in data.tolerances:
            rows.append({"dtype": DTYPE_SHORT.get(t.dtype, t.dtype), "bits": t.mantissa_bits, "u": sci(t.unit_roundoff),
                         "factor": f"{t.factor:g}", "atol": sci(t.tol_abs), "rtol": sci(t.tol_rel)})
        return table_html(pd.DataFrame(rows), {
            "dtype": "dtype", "bits": "fraction bits", "u": "u", "factor": "factor", "atol": "tol_abs",
            "rtol": "tol_rel"})

    def reference_note(self) -> str:
        data = self.data
        if data is None:
            return ""
        out = f"Reference: {data.reference}." if data.reference else ""
        if data.config_policy:
            out += f" Tile configs: {data.config_policy}."
        return escape.text(out)
