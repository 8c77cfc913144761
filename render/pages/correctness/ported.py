"""The code other GPUs run: builds for older GPUs run here through their PTX, and strided-view inputs."""
from __future__ import annotations

import pandas as pd

from ... import escape, fmt
from ...tables import table_html
from ...vocab import plural
from .common import CorrectnessSection, as_text, sci

# The correctness phase's ported rows: code built for an older GPU, run here through its PTX.
PORTED_WORDS = {
    "triton-portable-sm75": "portable kernel, a T4's build (sm75)",
    "triton-turing-sm75": "Turing tensor-core kernel, a T4's build (sm75)",
    "triton-portable-sm80": "portable kernel, an A100's build (sm80)",
}


class Ported(CorrectnessSection):
    """The ported builds' results and notes, and the strided-view cases."""

    def ported(self) -> pd.DataFrame:
        """Rows whose code was built for another GPU generation and run here through its PTX."""
        df = self.rows
        if df.empty or "built_for" not in df:
            return df.iloc[0:0]
        return df[df["built_for"].notna()].copy()

    def ported_summary(self) -> str:
        """What the ported builds showed: per build, cases passed, worst error against the tolerance, tensor
        cores, cases its GPU cannot run and builds that would not fit that GPU."""
        pt = self.ported()
        if pt.empty:
            return ("This run holds no rows of code built for older GPUs (they run on a GPU newer than the target: "
                    "sm75 and sm80 code on compute capability 8.6 or newer).")
        rows = []
        for impl, g in pt.groupby("impl", sort=False):
            ok = g[g["status"] == "ok"]
            passed = int((ok["passed"] == True).sum())  # noqa: E712
            worst = ok.loc[ok["tol_usage"].idxmax()] if ok["tol_usage"].notna().any() else None
            tc = set(ok["tensor_cores"].dropna())
            rows.append(dict(
                code=PORTED_WORDS.get(impl, impl), built=g["built_for"].iloc[0], ran=as_text(g["ran_on"].dropna().iloc[0])
                if g["ran_on"].notna().any() else "", tc="yes" if tc == {True} else "no" if tc == {False} else "mixed"
                if tc else "unknown", ran_n=len(ok), passed=f"{passed} of {len(ok)}",
                usage=worst["tol_usage"] if worst is not None else None,
                err=worst["max_abs_err"] if worst is not None else None,
                skipped=len(g) - len(ok), misfit=int((g["fits_target"] == False).sum())))  # noqa: E712
        t = pd.DataFrame(rows)
        table = table_html(t, {"code": "Code", "built": "Built for", "ran": "Ran on", "tc": "Tensor cores in its code",
                               "passed": "Cases passed", "usage": "Worst share of the tolerance", "err": "Its absolute error",
                               "skipped": "Cases not run (why below)", "misfit": "Builds too big for that GPU"},
                           {"usage": lambda v: fmt.num(v, 3), "err": sci})
        all_pass = all(r["passed"] == f"{r['ran_n']} of {r['ran_n']}" for r in rows)
        lead = ("Every case the ported builds ran passed the same tolerance as the native rows." if all_pass else
                "Some cases of the ported builds failed: see the table and the cases below.")
        return lead + "\n\n" + table

    def ported_notes(self) -> str:
        """Why cases were not run, and which builds would not fit their GPU, from the rows' reasons."""
        pt = self.ported()
        if pt.empty:
            return ""
        out = []
        skipped = pt[pt["status"] == "unsupported"]
        for reason, g in skipped.groupby("reason", sort=False):
            out.append(f"{plural(len(g), 'case')} not run: {escape.text(reason)}.")
        misfit = pt[pt["fits_target"] == False]  # noqa: E712
        for _, r in misfit.iterrows():
            why = as_text(r["reason"]) or (f"its build needs {fmt.bytes_(r['target_shared_bytes'])} of shared memory "
                                         "per block" if pd.notna(r["target_shared_bytes"]) else "it does not fit")
            out.append(f"The {escape.text(PORTED_WORDS.get(r['impl'], r['impl']))} at d={int(r['head_dim'])} "
                       f"{'passes here' if r['passed'] == True else 'ran here'} but would not launch on its GPU: "  # noqa: E712
                       f"{escape.text(why)}.")
        return " ".join(out)

    def views_summary(self) -> str:
        """The strided-view cases of every kernel row kind."""
        df = self.rows
        if df.empty:
            return ""
        v = df[df["layout"] != "contiguous"]
        if v.empty:
            return "This run has no strided-view cases."
        ok = v[v["status"] == "ok"]
        passed = int((ok["passed"] == True).sum())  # noqa: E712
        verdict = f"all {len(ok)} pass" if passed == len(ok) else f"{passed} of {len(ok)} pass"
        return (f"On inputs that are views of a (batch, N, heads, d) tensor, whose head and sequence strides are "
                f"swapped against a contiguous one, {plural(len(v), 'case')} ran across {v['impl'].nunique()} kernel "
                f"row kinds: {verdict}.")
