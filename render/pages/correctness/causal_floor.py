"""The causal error floor: where it sits against the unit roundoff, what query 0 shows, and the published study."""
from __future__ import annotations

import pandas as pd

from ...tables import table_html
from ...vocab import DTYPE_SHORT
from .common import MANTISSA_BITS, SUPERSCRIPT, TREND_FACTOR, CorrectnessSection, absent, sci, unit_roundoff

# A measured floor "matches" u when it lies within this factor of it either way (two bits): round-to-
# nearest gives up to u relative to the value rounded, so a max over many elements normalised by the
# largest |output| lands between about u/2 and u per rounding, and the kernel rounds twice.
MATCH_FACTOR = 4.0
# Queries this early see so few keys that their outputs are still the size of one V value.
EARLY_QUERIES = 32

# The published T4 study (part 2, correctness and benchmarks): its constant causal maximum absolute error per
# dtype, as it reported them (2^-9 and 2^-6). Cited, not measured here.
T4_STUDY_CAUSAL_MAX_ABS_ERR = {"float16": 2.0**-9, "bfloat16": 2.0**-6}


def _worst_query_spread(q: pd.Series) -> dict:
    """Where the causal cases' largest errors sit: a query index is a place, so the middle is the lower median
    (an even count's mean of two positions names no query), with how many sit there or earlier, the latest, and
    how many lie past the queries that see only a few keys."""
    q = sorted(int(x) for x in q.dropna())
    if not q:
        return dict(worst_q_lower=None, worst_q_upto=0, worst_q_max=None, worst_q_late=0)
    lower = q[(len(q) - 1) // 2]
    return dict(worst_q_lower=lower, worst_q_upto=sum(x <= lower for x in q), worst_q_max=q[-1],
                worst_q_late=sum(x >= EARLY_QUERIES for x in q))


def _pow2(n: int) -> str:
    return "2" + str(n).translate(SUPERSCRIPT)


def in_u(x, u: float) -> str:
    return "n/a" if absent(x) else f"{x / u:.2g} u"


class CausalFloor(CorrectnessSection):
    """The floor per dtype, in a table and in words, the row-0 probe and the published study's constant."""

    def floors(self) -> pd.DataFrame:
        """Per dtype, from the causal kernel cases with more than one key: the floor and the row-0 probe."""
        ok = self.ok
        rows = []
        for dt in self.dtypes:
            u = self._u(dt)
            c = ok[(ok["dtype"] == dt) & (ok["causal"] == True) & (ok["seq_len"] > 1)]  # noqa: E712
            if c.empty or u is None:
                continue
            row0 = c[c["first_row_max_abs_v"] > 0]
            r0 = row0["first_row_max_abs_err"] / row0["first_row_max_abs_v"]
            floor = float(c["max_rel_err"].median())
            rows.append(dict(
                dtype=dt, u=u, cases=len(c),
                abs_min=float(c["max_abs_err"].min()), abs_max=float(c["max_abs_err"].max()),
                floor=floor, floor_max=float(c["max_rel_err"].max()), floor_in_u=floor / u,
                matches=u / MATCH_FACTOR <= floor <= u * MATCH_FACTOR,
                row0_max=float(r0.max()) if not r0.empty else None, row0_exact=int((r0 == 0).sum()), row0_cases=len(r0),
                **_worst_query_spread(c["worst_query"])))
        return pd.DataFrame(rows)

    def floor_table(self) -> str:
        f = self.floors()
        if f.empty:
            return "_No measured causal cases with more than one key in this run._"
        df = f.assign(
            dtype=f["dtype"].map(lambda d: DTYPE_SHORT.get(d, d)), u=f["u"].map(sci),
            abs_range=[f"{sci(a)} – {sci(b)}" for a, b in zip(f["abs_min"], f["abs_max"])],
            floor=[f"{sci(x)} ({x / u:.2g} u)" for x, u in zip(f["floor"], f["u"])],
            verdict=f["matches"].map(lambda m: "matches u" if m else "does not match u"),
            row0=[("0 (exact)" if (m == 0 and e == n) else in_u(m, u)) if not absent(m) else "n/a"
                  for m, e, n, u in zip(f["row0_max"], f["row0_exact"], f["row0_cases"], f["u"])],
            worst=[f"{int(m)} (latest {int(x)})" for m, x in zip(f["worst_q_lower"], f["worst_q_max"])])
        return table_html(df, {"dtype": "dtype", "u": "u", "cases": "causal cases",
                               "abs_range": "max |error| over N", "floor": "floor: median normwise error",
                               "verdict": f"within {MATCH_FACTOR:g}× of u?", "row0": "query 0: max error / max |v|",
                               "worst": "query of the largest error: lower median (latest)"})

    def floor_finding(self) -> str:
        """Whether each dtype's measured floor matches its unit roundoff, and the ratio between dtypes."""
        f = self.floors()
        if f.empty:
            return "The run has no measured causal cases, so the floor cannot be compared with u here."
        out = []
        for _, r in f.iterrows():
            verdict = "matches" if r["matches"] else "does not match"
            out.append(f"For {DTYPE_SHORT.get(r['dtype'], r['dtype'])}, the causal floor (the median normwise error over "
                       f"{r['cases']} causal cases) is {sci(r['floor'])}, {r['floor_in_u']:.2g} u: it **{verdict}** "
                       f"the unit roundoff u = {_pow2(-(MANTISSA_BITS[r['dtype']] + 1))} = {sci(r['u'])} (a match means "
                       f"within a factor of {MATCH_FACTOR:g}).")
        ok = self.ok
        for _, r in f.iterrows():
            nc = ok[(ok["dtype"] == r["dtype"]) & (ok["causal"] == False) & (ok["seq_len"] > 1)]["max_rel_err"]  # noqa: E712
            if nc.empty or not r["floor"]:
                continue
            med = float(nc.median())
            name = DTYPE_SHORT.get(r["dtype"], r["dtype"])
            # The normwise error is each output's rounding to the format; the mask only decides whether the
            # largest absolute error can shrink with N (the trend above).
            if 1 / TREND_FACTOR <= med / r["floor"] <= TREND_FACTOR:
                out.append(f"Non-causal {name} cases sit at the same level, a median of {sci(med)} ({med / r['u']:.2g} u): "
                           "the floor is the rounding of the output to the format with or without the mask. What the mask "
                           "changes is the size of the outputs, so a causal case's largest absolute error does not shrink "
                           "with N.")
            else:
                out.append(f"Non-causal {name} cases sit {'lower' if med < r['floor'] else 'higher'}, a median of "
                           f"{sci(med)} ({med / r['u']:.2g} u).")
        if {"float16", "bfloat16"} <= set(f["dtype"]):
            a = f[f["dtype"] == "float16"].iloc[0]
            b = f[f["dtype"] == "bfloat16"].iloc[0]
            expect = 2.0 ** (MANTISSA_BITS["float16"] - MANTISSA_BITS["bfloat16"])
            ratio = b["floor"] / a["floor"] if a["floor"] else float("nan")
            close = expect / TREND_FACTOR <= ratio <= expect * TREND_FACTOR
            out.append(f"The bf16 floor is {ratio:.2g}× the fp16 floor; the formats' fraction bits differ by "
                       f"{MANTISSA_BITS['float16'] - MANTISSA_BITS['bfloat16']}, which predicts {expect:g}×: "
                       f"{'consistent with it' if close else '**not consistent** with it'} (allowing a factor of "
                       f"{TREND_FACTOR:g} either way).")
        return "\n\n".join(out)

    def row0_finding(self) -> str:
        """What query 0 itself did, and where the largest causal errors sit instead or as well."""
        f = self.floors()
        if f.empty:
            return ""
        out = []
        for _, r in f.iterrows():
            name, u, r0 = DTYPE_SHORT.get(r["dtype"], r["dtype"]), r["u"], r["row0_max"]
            if absent(r0):
                first = f"For {name} the run holds no query-0 measurement."
            elif r0 == 0:
                first = (f"For {name}, query 0 comes out **exact** in all {r['row0_cases']} causal cases: its one "
                         f"weight is exactly 1 and its V row is already representable in {name}, so copying it "
                         "involves no rounding at all, and query 0 cannot be what sets the floor.")
            elif r0 <= u:
                first = (f"For {name}, query 0's error is at most {in_u(r0, u)} of max |v|: no more than one rounding "
                         "of a V value, as the explanation predicts.")
            else:
                first = (f"For {name}, query 0's error reaches {in_u(r0, u)} of max |v|: **more than one rounding**, "
                         "which copying a V value cannot explain; the kernel's first tile deserves a look.")
            where = (f"The largest error of a causal case sits at query {int(r['worst_q_lower'])} or earlier in "
                     f"{int(r['worst_q_upto'])} of {r['cases']} cases, and never later than query {int(r['worst_q_max'])}")
            if r["worst_q_max"] < EARLY_QUERIES:
                where += (f", a query that sees at most {int(r['worst_q_max']) + 1} keys. Such a query averages only a few "
                          "V rows, with weights rounded to the input dtype, so its output stays the size of a V value "
                          "and rounding costs about u·|v| there at every sequence length: that is the floor.")
            else:
                late = int(r["worst_q_late"])
                where += (f": not confined to the first {EARLY_QUERIES} queries ({late} of {r['cases']} cases "
                          f"{'sits' if late == 1 else 'sit'} past them), so the few-keys explanation does not account "
                          "for every causal maximum on this run.")
            out.append(f"{first} {where}")
        return "\n\n".join(out)

    def study_comparison(self) -> str:
        """What the published T4 study saw, next to this run: a sentence for the finding, a table for the figures."""
        f = self.floors()
        rows, inside = [], []
        for dt, theirs in T4_STUDY_CAUSAL_MAX_ABS_ERR.items():
            u = unit_roundoff(dt)
            mine = f[f["dtype"] == dt] if not f.empty else f
            r = {"dtype": DTYPE_SHORT[dt], "theirs": f"{sci(theirs)} ({theirs / u:g} u)", "ours": "not measured",
                 "ratio": "n/a"}
            if not mine.empty:
                lo, hi = mine.iloc[0]["abs_min"], mine.iloc[0]["abs_max"]
                r["ours"] = f"{sci(lo)} – {sci(hi)}"
                r["ratio"] = f"{lo / theirs:.2g}× – {hi / theirs:.2g}×"
                inside.append(hi <= theirs)
            rows.append(r)
        verdict = ("" if not inside else " This run's causal maxima all stay at or below the published constants."
                   if all(inside) else " This run's causal maxima exceed the published constant in at least one dtype.")
        text = ("The published four-part study of a Triton fused-attention kernel on a Tesla T4 (its part on "
                "correctness) reported a causal maximum absolute error that did not move with sequence length, while "
                "the non-causal error fell as N grew, and attributed the constant to the first query copying one V "
                "value through a rounding. Its yardstick was a plain PyTorch implementation checked with "
                "`torch.allclose`; ours is float64 on the same rounded inputs, so our errors need not equal theirs."
                + verdict)
        return text + "\n\n" + table_html(pd.DataFrame(rows), {
            "dtype": "dtype", "theirs": "published causal max |error| (T4)", "ours": "this run: causal max |error| over N",
            "ratio": "this run / published"})
