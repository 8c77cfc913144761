"""Correctness: the kernel against a float64 reference, the error by case, and the causal error floor."""
from __future__ import annotations

import math
import re
from functools import cached_property

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import escape, fmt
from ..axes import log_ticks
from ..figures import PALETTE
from ..tables import table_html
from ..vocab import DTYPE_SHORT, facet_label, join, kernel_name, plural
from .base import Page

# Stored fraction bits of each format: IEEE 754 binary16 has 1 sign, 5 exponent and 10 fraction bits;
# bfloat16 keeps float32's 8 exponent bits and the top 7 of its fraction bits.
MANTISSA_BITS = {"float16": 10, "bfloat16": 7}
PORTABLE = "triton-portable"  # the grid again on the portable path (where another path is the default)
# The correctness phase's ported rows: code built for an older GPU, run here through its PTX.
PORTED_WORDS = {
    "triton-portable-sm75": "portable kernel, a T4's build (sm75)",
    "triton-turing-sm75": "Turing tensor-core kernel, a T4's build (sm75)",
    "triton-portable-sm80": "portable kernel, an A100's build (sm80)",
}

# A measured floor "matches" u when it lies within this factor of it either way (two bits): round-to-
# nearest gives up to u relative to the value rounded, so a max over many elements normalised by the
# largest |output| lands between about u/2 and u per rounding, and the kernel rounds twice.
MATCH_FACTOR = 4.0
# Queries this early see so few keys that their outputs are still the size of one V value.
EARLY_QUERIES = 32
# A ratio between two measurements "stays flat" inside this factor, else it grows or shrinks.
TREND_FACTOR = 2.0

# The published T4 study (part 2, correctness and benchmarks): its constant causal maximum absolute error per
# dtype, as it reported them (2^-9 and 2^-6). Cited, not measured here.
T4_STUDY_CAUSAL_MAX_ABS_ERR = {"float16": 2.0**-9, "bfloat16": 2.0**-6}


def unit_roundoff(dtype: str) -> float:
    """u = 2^-(p) with p = fraction bits + 1 (the implicit leading bit): the largest relative error of one rounding."""
    if dtype not in MANTISSA_BITS:
        raise ValueError(f"unknown dtype {dtype!r}; the correctness page knows {sorted(MANTISSA_BITS)}")
    return 2.0 ** -(MANTISSA_BITS[dtype] + 1)


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def sci(x) -> str:
    """3 significant figures in powers of ten, e.g. 4.88×10⁻⁴ (errors span too many decades for fixed point)."""
    if _missing(x):
        return "n/a"
    if x == 0:
        return "0"
    exp = math.floor(math.log10(abs(x)))
    mant = x / 10**exp
    if round(abs(mant), 2) >= 10:  # 9.996 rounds up a decade
        mant, exp = mant / 10, exp + 1
    if -2 <= exp <= 2:  # rounded to three figures first, then printed with all three ('0.0100', not '0.01')
        return fmt.num(float(f"{x:.3g}"))
    sup = str(exp).translate(_SUPERSCRIPT)
    return f"{mant:.2f}×10{sup}"


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


def _short(x: float) -> str:
    """Two significant figures, for a heatmap cell: 1.8e-4."""
    mant, exp = f"{x:.1e}".split("e")
    return f"{mant}e{int(exp)}"


def _pow2(n: int) -> str:
    return "2" + str(n).translate(_SUPERSCRIPT)


def in_u(x, u: float) -> str:
    return "n/a" if _missing(x) else f"{x / u:.2g} u"


def _missing(x) -> bool:
    """None or NaN: pandas stores an absent value as either, depending on the column's dtype."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def _text(x) -> str:
    return "" if _missing(x) else str(x)


class CorrectnessPage(Page):
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
        heads = sorted(set(self.grid["heads"])) if not self.grid.empty else []
        return f"heads {join(heads)}" if heads else "heads n/a"

    def _cond(self) -> str:
        """Conditions every figure shares (the caption adds run and device)."""
        data = self.data
        return self._heads() + (f"; inputs: {data.inputs}" if data is not None and data.inputs else "")

    # --- summary ---------------------------------------------------------------------------

    def findings_first(self) -> str:
        """Two to four sentences: how many cases pass, the closest call, and whether the causal floor is u."""
        g = self.grid
        if g.empty:
            return "This run's correctness file has no kernel cases."
        n, passed = len(g), int((g["passed"] == True).sum())  # noqa: E712
        out = [f"The fused kernel passes {passed} of {n} cases against a float64 reference."]
        used = g[g["tol_usage"].notna()] if "tol_usage" in g else g.iloc[0:0]
        if not used.empty:
            r = used.loc[used["tol_usage"].idxmax()]
            out.append(f"The closest call used {fmt.pct(100 * r['tol_usage'])} of its tolerance "
                       f"({facet_label(r['dtype'], bool(r['causal']))}, N={int(r['seq_len'])}, d={int(r['head_dim'])}).")
        f = self.floors()
        if not f.empty:
            match = [DTYPE_SHORT.get(d, d) for d, m in zip(f["dtype"], f["matches"]) if m]
            miss = [DTYPE_SHORT.get(d, d) for d, m in zip(f["dtype"], f["matches"]) if not m]
            if match and not miss:
                text = (f"The causal error floor sits at the unit roundoff u of {join(match)}: a floor set by the "
                        "number format, not by the kernel")
                # The few-keys account of why the causal maximum holds still is what the causal section tests;
                # where some maxima sit past the early queries the headline must not claim it covers them all.
                late = [(f"{k} of {n_c} {DTYPE_SHORT.get(d, d)} causal maxima", k)
                        for d, k, n_c in zip(f["dtype"], f["worst_q_late"], f["cases"]) if k]
                if late:
                    verb = "sits" if len(late) == 1 and late[0][1] == 1 else "sit"
                    text += (f", though {join([w for w, _ in late])} {verb} past the first {EARLY_QUERIES} queries, "
                             "where the few-keys explanation below does not reach")
                out.append(text + ".")
            elif miss:
                out.append(f"The causal error floor does **not** match the unit roundoff u for {join(miss)}, so the "
                           "number format alone does not explain it there.")
        return " ".join(out)

    def summary(self) -> str:
        """What the grid covered and how many cases passed."""
        g = self.grid
        if g.empty:
            return "This run's correctness file has no kernel cases."
        axes = [f"seq_len {join(sorted(set(g['seq_len'])))}", f"head_dim {join(sorted(set(g['head_dim'])))}",
                f"batch {join(sorted(set(g['batch'])))}", "causal and non-causal" if g["causal"].nunique() > 1
                else ("causal only" if bool(g["causal"].iloc[0]) else "non-causal only"),
                join([DTYPE_SHORT.get(d, d) for d in self.dtypes])]
        n = len(g)
        passed = int((g["passed"] == True).sum())  # noqa: E712 - the column holds None too
        failed = int(((g["status"] == "ok") & (g["passed"] == False)).sum())  # noqa: E712
        not_run = g[g["status"] != "ok"]["status"].value_counts()
        main = set(self._main_dims())
        by_lengths: dict[tuple, list] = {}
        for d, grp in g.groupby("head_dim"):
            if d not in main:
                by_lengths.setdefault(tuple(sorted(set(grp["seq_len"]))), []).append(d)
        partial = [f"head_dim {join(dims)} only at seq_len {join(ns)}" for ns, dims in by_lengths.items()]
        parts = [f"The kernel was checked on **{n} cases** ({'; '.join(axes + partial)}; {self._heads()})."]
        if passed == n:
            parts.append(f"**All {n} pass** the tolerance below.")
        else:
            detail = [f"{failed} ran and exceeded the tolerance"] if failed else []
            detail += [f"{c} {s}" for s, c in not_run.items()]
            parts.append(f"**{passed} of {n} pass**; {join(detail)} (each is listed under *Cases that did not pass*).")
        return " ".join(parts)

    def paths_summary(self) -> str:
        """Which kernel path the grid ran, and how the portable path did on the same cases."""
        g, p = self.grid, self.portable
        if g.empty:
            return ""
        paths = {m.group(1) for m in (re.match(r"(\w+) path", _text(c)) for c in g["config"]) if m}
        if not paths:
            return ""
        names = [kernel_name(p) for p in sorted(paths)]
        ran = (f"These rows ran flash_attention as it ships, which chose the **{join(names)}** "
               f"on this GPU (the [glossary](glossary.md#our-kernels) names each).")
        if p.empty:
            return ran + (" The portable path is what runs on every GPU without the Hopper path, so no second "
                          "grid was needed here.") if paths == {"portable"} else ran
        n, passed = len(p), int((p["passed"] == True).sum())  # noqa: E712 - the column holds None too
        worst = []
        for dt, grp in p[p["status"] == "ok"].groupby("dtype"):
            if grp["max_abs_err"].notna().any():
                r = grp.loc[grp["max_abs_err"].idxmax()]
                worst.append(f"{DTYPE_SHORT.get(dt, dt)} {sci(r['max_abs_err'])} (N={int(r['seq_len'])}, "
                             f"d={int(r['head_dim'])}{', causal' if r['causal'] else ''})")
        verdict = f"**all {n} pass**" if passed == n else f"**{passed} of {n} pass**"
        text = (f"{ran} The same {n} cases held to the portable path (`{PORTABLE}` rows): {verdict}"
                + (f"; worst absolute errors {join(worst)}" if worst else "") + ".")
        bad = p[p["passed"] != True]  # noqa: E712
        if not bad.empty:
            bad = bad.assign(reason=[self._why(r) for _, r in bad.iterrows()])
            cols = {k: v for k, v in self._COLS.items() if k not in ("impl", "config")}
            text += "\n\n" + table_html(bad, cols, self._FMT)
        return text

    # ------------------------------------------------------------------ code built for other GPUs

    def ported(self) -> pd.DataFrame:
        """Rows whose code was built for another GPU generation and run here through its PTX."""
        df = self.rows
        if df.empty or "built_for" not in df:
            return df.iloc[0:0]
        return df[df["built_for"].notna()].copy()

    def ported_summary(self) -> str:
        """What the ported builds proved: per build, cases passed, worst error against the tolerance, tensor
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
                code=PORTED_WORDS.get(impl, impl), built=g["built_for"].iloc[0], ran=_text(g["ran_on"].dropna().iloc[0])
                if g["ran_on"].notna().any() else "", tc="yes" if tc == {True} else "no" if tc == {False} else "mixed"
                if tc else "unknown", ran_n=len(ok), passed=f"{passed} of {len(ok)}",
                usage=worst["tol_usage"] if worst is not None else None,
                err=worst["max_abs_err"] if worst is not None else None,
                skipped=len(g) - len(ok), misfit=int((g["fits_target"] == False).sum())))  # noqa: E712
        t = pd.DataFrame(rows)
        table = table_html(t, {"code": "Code", "built": "Built for", "ran": "Ran on", "tc": "Tensor cores in its code",
                               "passed": "Cases passed", "usage": "Worst share of the tolerance", "err": "Its absolute error",
                               "skipped": "Cases its GPU cannot run", "misfit": "Builds too big for that GPU"},
                           {"usage": lambda v: fmt.num(v, 3), "err": sci})
        all_pass = all(r["passed"] == f"{r['ran_n']} of {r['ran_n']}" for r in rows)
        lead = (f"Every case the ported builds ran passed the same tolerance as the native rows." if all_pass else
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
            why = _text(r["reason"]) or (f"its build needs {fmt.bytes_(r['target_shared_bytes'])} of shared memory "
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

    def ragged_lengths(self) -> str:
        """The grid's lengths that no tile divides (every tile size is a power of two of at least 16)."""
        g = self.grid
        odd = sorted(n for n in set(g["seq_len"]) if n % 16) if not g.empty else []
        if not odd:
            return ("Every length in this run's grid is a multiple of 16, so the masked tail tile may never have run: "
                    "this grid does not test it.")
        return (f"The lengths {join(odd)} in this run's grid are not multiples of 16, the smallest tile, so no tile "
                "size divides them and the masked tail tile runs in every one of those cases.")

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

    def all_passed(self) -> bool:
        g = self.grid
        return not g.empty and bool((g["passed"] == True).all())  # noqa: E712

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

    def tolerance_rule(self) -> str:
        """The pass rule in words, with the factor from the data."""
        data = self.data
        factors = sorted({t.factor for t in data.tolerances}) if data is not None and data.tolerances else []
        f = join([f"{x:g}" for x in factors]) if factors else "a stated multiple of"
        return (f"A case passes when every output element satisfies |out − ref| ≤ tol_abs + tol_rel·|ref|, "
                f"with both tolerances {f} × u of the case's dtype. The relative error reported is normwise: "
                "max |out − ref| / max |ref| over the whole output, so elements where the reference is close to "
                "zero cannot blow it up.")

    def reference_note(self) -> str:
        data = self.data
        if data is None:
            return ""
        out = f"Reference: {data.reference}." if data.reference else ""
        if data.config_policy:
            out += f" Tile configs: {data.config_policy}."
        return escape.text(out)

    # --- figures ---------------------------------------------------------------------------

    def _cell_frame(self) -> pd.DataFrame:
        """One cell per (dtype, causal, head_dim, seq_len): the worst batch; a non-ok status wins."""
        g = self.grid
        cells = []
        for key, grp in g.groupby(["dtype", "causal", "head_dim", "seq_len"], sort=True):
            bad = grp[grp["status"] != "ok"]
            if not bad.empty:
                r = bad.iloc[0]
            elif grp["max_abs_err"].notna().any():
                r = grp.loc[grp["max_abs_err"].idxmax()]
            else:
                r = grp.iloc[0]
            cells.append(r)
        return pd.DataFrame(cells)

    def heatmap_figure(self) -> str:
        """Max |error| per case, faceted by dtype (rows) and causal (columns)."""
        g = self.grid
        if g.empty:
            return "_No kernel cases to plot._"
        cells = self._cell_frame()
        dtypes, causals = self.dtypes, sorted(set(g["causal"]))
        seqs = [str(n) for n in sorted(set(g["seq_len"]))]
        dims = [str(d) for d in sorted(set(g["head_dim"]))]
        fig = make_subplots(rows=len(dtypes), cols=len(causals), shared_xaxes=True, shared_yaxes=True,
                            subplot_titles=[facet_label(d, c) for d in dtypes for c in causals],
                            vertical_spacing=0.12, horizontal_spacing=0.06)
        positive = cells["max_abs_err"][cells["max_abs_err"] > 0] if "max_abs_err" in cells else pd.Series(dtype=float)
        zmin = math.floor(math.log10(positive.min())) if not positive.empty else -6
        zmax = math.ceil(math.log10(positive.max())) if not positive.empty else 0
        zmax = max(zmax, zmin + 1)
        for i, dt in enumerate(dtypes):
            for j, causal in enumerate(causals):
                sub = cells[(cells["dtype"] == dt) & (cells["causal"] == causal)]
                fails: list[tuple[int, int]] = []
                z = [[None] * len(seqs) for _ in dims]
                text = [[""] * len(seqs) for _ in dims]
                hover = [[""] * len(seqs) for _ in dims]
                for _, r in sub.iterrows():
                    y, x = dims.index(str(r["head_dim"])), seqs.index(str(r["seq_len"]))
                    err = r["max_abs_err"]
                    if r["status"] != "ok":
                        text[y][x] = str(r["status"])
                        hover[y][x] = escape.plot(f"{r['status']}: {_text(r['reason'])}"[:200])
                        continue
                    if _missing(err):
                        text[y][x] = "no value"
                        hover[y][x] = escape.plot(_text(r["reason"]))
                        continue
                    z[y][x] = math.log10(err) if err > 0 else zmin
                    text[y][x] = "exact" if err == 0 else _short(float(err))
                    if not r["passed"]:
                        fails.append((x, y))
                    hover[y][x] = escape.plot(
                        f"N={r['seq_len']}, d={r['head_dim']}, batch {r['batch']}: max |err| {sci(float(err))}, "
                        f"normwise {sci(r['max_rel_err'])}, tolerance used {r['tol_usage']:.2f}, "
                        f"{'pass' if r['passed'] else 'FAIL'}; config {_text(r['config']) or 'n/a'}")
                fig.add_trace(go.Heatmap(
                    x=seqs, y=dims, z=z, text=text, texttemplate="%{text}", customdata=hover,
                    hovertemplate="%{customdata}<extra></extra>", zmin=zmin, zmax=zmax, coloraxis="coloraxis",
                    textfont=dict(size=10), xgap=2, ygap=2), row=i + 1, col=j + 1)
                if fails:
                    fig.add_trace(go.Scatter(
                        x=[seqs[x] for x, _ in fails], y=[dims[y] for _, y in fails], mode="markers",
                        marker=dict(symbol="square-open", size=30, line=dict(width=3, color=PALETTE[3])),
                        name="failed", showlegend=False, hoverinfo="skip"), row=i + 1, col=j + 1)
        ticks = list(range(zmin, zmax + 1))
        fig.update_layout(coloraxis=dict(colorscale="Viridis", cmin=zmin, cmax=zmax, colorbar=dict(
            title="max |error|", tickvals=ticks, ticktext=[f"1e{t}" for t in ticks])))
        fig.update_xaxes(type="category", title_text="seq_len", row=len(dtypes))
        fig.update_yaxes(type="category", title_text="head_dim", col=1)
        return self.figure("error-heatmap", fig,
                           "Largest absolute error against the float64 reference for each case (worst batch size; "
                           "a framed cell marks a failed case, 'exact' an error of zero, a status word a case that did "
                           "not run); "
                           f"colour on a log scale; {self._cond()}.", height=260 * len(dtypes) + 80)

    def _main_dims(self) -> list[int]:
        """Head dims present at every seq_len, so each line compares like with like across N."""
        g = self.grid
        all_n = set(g["seq_len"])
        dims = [d for d, grp in g.groupby("head_dim") if set(grp["seq_len"]) == all_n]
        return dims or sorted(set(g["head_dim"]))

    def _lines(self) -> pd.DataFrame:
        """Per dtype, causal and seq_len: the largest errors over batch and the main head dims."""
        ok = self.ok
        if ok.empty:
            return ok
        ok = ok[ok["head_dim"].isin(self._main_dims())]
        return (ok.groupby(["dtype", "causal", "seq_len"], as_index=False)
                  .agg(max_abs_err=("max_abs_err", "max"), max_rel_err=("max_rel_err", "max"),
                       max_abs_ref=("max_abs_ref", "max")))

    def error_vs_seq_figure(self) -> str:
        lines = self._lines()
        if lines.empty:
            return "_No measured kernel cases to plot._"
        fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.17)
        drawn = lines[lines["max_rel_err"] > 0]["seq_len"]
        n_lo, n_hi = (float(drawn.min()), float(drawn.max())) if not drawn.empty else (1.0, 1.0)
        for i, dt in enumerate(self.dtypes):
            colour = PALETTE[i % len(PALETTE)]
            for causal in (False, True):
                sub = lines[(lines["dtype"] == dt) & (lines["causal"] == causal)].sort_values("seq_len")
                name = facet_label(dt, causal)
                for col, field in ((1, "max_abs_err"), (2, "max_rel_err")):
                    pts = sub[sub[field] > 0]  # log axis: an exact 0 has no place on it
                    if pts.empty:
                        continue
                    fig.add_trace(go.Scatter(x=list(pts["seq_len"]), y=list(pts[field]), mode="lines+markers",
                                             name=name, legendgroup=name, showlegend=col == 1,
                                             line=dict(color=colour, dash="solid" if causal else "dot"),
                                             hovertemplate=f"{escape.plot(name)}: N=%{{x}}, %{{y:.3g}}<extra></extra>"),
                                  row=1, col=col)
            u = self._u(dt)
            if u is not None:  # a trace, not a shape: annotations on log axes misplace themselves
                label = f"u ({DTYPE_SHORT.get(dt, dt)})"
                fig.add_trace(go.Scatter(x=[n_lo, n_hi], y=[u, u], mode="lines", name=label,
                                         line=dict(color=colour, dash="dash", width=1),
                                         hovertemplate=f"{label} = {u:.3g}<extra></extra>"), row=1, col=2)
        fig.update_xaxes(type="log", title_text="seq_len N", **log_ticks(lines["seq_len"] if not lines.empty else []))
        for col, field in ((1, "max_abs_err"), (2, "max_rel_err")):
            vals = list(lines[field]) if not lines.empty else []
            if col == 2:
                vals += [self._u(dt) for dt in self.dtypes if self._u(dt)]
            fig.update_yaxes(type="log", row=1, col=col, **log_ticks(vals))
        fig.update_yaxes(title_text="max |out − ref| (absolute)", row=1, col=1)
        fig.update_yaxes(title_text="max |out − ref| / max |ref| (normwise)", row=1, col=2)
        dims = join(self._main_dims())
        # Counted among the plotted points (the largest error at one length), not among all cases: a zero
        # hidden under another case's error at that length, or at a head_dim not drawn, is not left out here.
        exact = int((lines["max_abs_err"] == 0).sum())
        note = (f" {exact} point{'s' if exact != 1 else ''} whose largest error is exactly zero cannot sit on the "
                "log axis and are left out.") if exact else ""
        return self.figure("error-vs-seq", fig,
                           f"Largest error over batch sizes and head_dim {dims} at each sequence length; solid lines "
                           f"causal, dotted non-causal; dashed lines mark each dtype's unit roundoff u.{note} "
                           f"{self._cond()}.", height=440)

    def seq_trend_finding(self) -> str:
        """How error moves with N for each dtype and masking, in words chosen by the data."""
        lines = self._lines()
        if lines.empty:
            return ""
        out = []
        for dt in self.dtypes:
            for causal in (False, True):
                sub = lines[(lines["dtype"] == dt) & (lines["causal"] == causal) & (lines["seq_len"] > 1)
                            & (lines["max_abs_err"] > 0)].sort_values("seq_len")
                if len(sub) < 2:
                    continue
                a, b = sub.iloc[0], sub.iloc[-1]
                ratio = b["max_abs_err"] / a["max_abs_err"]
                if ratio < 1 / TREND_FACTOR:
                    move = f"**shrinks {fmt.ratio(1 / ratio)}**"
                elif ratio > TREND_FACTOR:
                    move = f"**grows {fmt.ratio(ratio)}**"
                else:
                    move = f"**stays within a factor of {TREND_FACTOR:g}** (×{fmt.num(ratio)})"
                ref_ratio = b["max_abs_ref"] / a["max_abs_ref"] if a["max_abs_ref"] else float("nan")
                out.append(f"- {facet_label(dt, causal)}: the largest error {move} from N={a['seq_len']} "
                           f"({sci(a['max_abs_err'])}) to N={b['seq_len']} ({sci(b['max_abs_err'])}). Over the same "
                           f"range the largest |output| goes from {fmt.num(a['max_abs_ref'])} to "
                           f"{fmt.num(b['max_abs_ref'])} (×{fmt.num(ref_ratio)}).")
        return "\n".join(out)

    # --- the causal floor ------------------------------------------------------------------

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
            row0=[("0 (exact)" if (m == 0 and e == n) else in_u(m, u)) if not _missing(m) else "n/a"
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
            if _missing(r0):
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

    # --- tables ----------------------------------------------------------------------------

    _COLS = {"impl": "impl", "dtype": "dtype", "causal": "causal", "batch": "B", "heads": "H", "seq_len": "N",
             "head_dim": "d", "status": "status", "max_abs_err": "max |err|", "max_rel_err": "normwise",
             "tol_usage": "tolerance used", "passed": "pass", "worst_query": "worst query", "config": "tile config",
             "reason": "reason"}
    _FMT = {"max_abs_err": sci, "max_rel_err": sci, "dtype": lambda d: DTYPE_SHORT.get(d, d),
            "causal": lambda c: "yes" if c else "no",
            "tol_usage": lambda x: "n/a" if _missing(x) else f"{x:.2f}",
            "passed": lambda p: "n/a" if _missing(p) else ("yes" if p else "NO"),
            "worst_query": lambda q: "n/a" if _missing(q) else str(int(q)),
            "reason": lambda r: _text(r)[:300], "config": _text}

    def failures(self) -> str:
        """Every kernel case that did not pass, with why."""
        g = self.grid
        bad = g[g["passed"] != True] if not g.empty else g  # noqa: E712
        if g.empty:
            return "_No kernel cases._"
        if bad.empty:
            return f"None: all {len(g)} kernel cases ran and passed."
        bad = bad.assign(reason=[self._why(r) for _, r in bad.iterrows()])
        cols = {k: v for k, v in self._COLS.items() if k not in ("impl", "config")}
        return table_html(bad, cols, self._FMT)

    @staticmethod
    def _why(r) -> str:
        """A failed row's explanation: the recorded reason, else where the error broke the tolerance."""
        if r["status"] != "ok" or not _missing(r["reason"]):
            return _text(r["reason"])
        if _missing(r["worst_query"]):
            return "error exceeded the tolerance"
        return (f"error reached {r['tol_usage']:.2f}× the tolerance at query {int(r['worst_query'])} "
                f"({int(r['worst_query_keys'])} keys visible)")

    def comparison(self) -> str:
        """The PyTorch implementations judged by the same reference, next to the kernel on the same cases."""
        rows = self.rows
        other = rows[~rows["impl"].str.startswith("triton")] if not rows.empty else rows
        if other.empty:
            return "_This run has no comparison rows (they are collected with `--profile full`)._"
        key = ["dtype", "causal", "batch", "seq_len", "head_dim"]
        mine = self.grid[key + ["max_rel_err"]].rename(columns={"max_rel_err": "triton"})
        merged = other.merge(mine, on=key, how="left")
        parts = []
        for impl, grp in merged[merged["status"] == "ok"].groupby("impl"):
            both = grp.dropna(subset=["max_rel_err", "triton"])
            both = both[both["triton"] > 0]
            if both.empty:
                continue
            ratios = both["max_rel_err"] / both["triton"]
            r = float(ratios.median())
            passed = int((grp["passed"] == True).sum())  # noqa: E712 - the column holds None too
            if (both["max_rel_err"] == both["triton"]).all():
                rel = f"identical to the kernel's in all {len(both)} shared cases"
            else:
                rel = f"{r:.2g}× the kernel's (median over {len(both)} shared cases)"
            parts.append(f"{escape.text(impl)}'s normwise error is {rel}; {passed} of {len(grp)} pass")
        sentence = ("On the same inputs, " + "; ".join(parts) + ".") if parts else ""
        cols = {k: v for k, v in self._COLS.items() if k not in ("config", "heads", "worst_query")}
        return sentence + "\n\n" + table_html(other, cols, self._FMT)

    def cases_table(self) -> str:
        g = self.grid
        if g.empty:
            return ""
        return ("<details><summary>All " + str(len(g)) + " kernel cases</summary>\n"
                + table_html(g, {k: v for k, v in self._COLS.items() if k != "impl"}, self._FMT) + "</details>\n")
