"""What this run shows and what the page measures: the opening findings, the grid covered, the path it ran."""
from __future__ import annotations

import re

from ... import fmt
from ...tables import table_html
from ...vocab import DTYPE_SHORT, facet_label, join, kernel_name
from .causal_floor import EARLY_QUERIES
from .common import PORTABLE, CorrectnessSection, as_text, sci


class Opening(CorrectnessSection):
    """The opening findings, the grid's summary, the path it ran and its ragged lengths."""

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
        paths = {m.group(1) for m in (re.match(r"(\w+) path", as_text(c)) for c in g["config"]) if m}
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

    def ragged_lengths(self) -> str:
        """The grid's lengths that no tile divides (every tile size is a power of two of at least 16)."""
        g = self.grid
        odd = sorted(n for n in set(g["seq_len"]) if n % 16) if not g.empty else []
        if not odd:
            return ("Every length in this run's grid is a multiple of 16, so the masked tail tile may never have run: "
                    "this grid does not test it.")
        return (f"The lengths {join(odd)} in this run's grid are not multiples of 16, the smallest tile, so no tile "
                "size divides them and the masked tail tile runs in every one of those cases.")
