"""The cases that did not pass, the PyTorch implementations on the same yardstick, and every case."""
from __future__ import annotations

from ... import escape, fmt
from ...tables import table_html
from ...vocab import is_ours, join
from .common import CorrectnessSection, absent, as_text


class Cases(CorrectnessSection):
    """The failures table, the comparison rows and the table of every case."""

    def failures(self) -> str:
        """Every kernel case that did not pass, with why."""
        g = self.grid
        bad = g[g["passed"] != True] if not g.empty else g  # noqa: E712
        if g.empty:
            return "_No kernel cases._"
        if bad.empty:
            return "None."
        bad = bad.assign(reason=[self._why(r) for _, r in bad.iterrows()])
        cols = {k: v for k, v in self._COLS.items() if k not in ("impl", "config")}
        return table_html(self.with_kernel(bad), cols, self._FMT)

    def comparison(self) -> str:
        """The PyTorch implementations judged by the same reference, next to the kernel on the same cases."""
        rows = self.rows
        other = rows[~rows["impl"].map(is_ours).astype(bool)] if not rows.empty else rows
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
        sentence += self._backends(other)
        silent = _silent(other)
        cols = {k: v for k, v in self._COLS.items()
                if k not in ("config", "heads", "worst_query", "kernel") and k not in silent}
        if other["backend_used"].notna().any():
            cols["backend_used"] = "SDPA backend"
        return sentence + "\n\n" + table_html(other, cols, {**self._FMT, "backend_used": as_text})

    @staticmethod
    def _backends(other) -> str:
        """Which backend PyTorch's SDPA chose for its rows, as recorded (older runs did not record it)."""
        sdpa = other[other["impl"] == "sdpa"]
        if sdpa.empty:
            return ""
        used = sorted({str(b) for b in sdpa["backend_used"].dropna()})
        if not used:
            return " Which backend SDPA chose for these rows was not recorded in this run."
        mixed = sdpa["backend_used"].isna().any() or len(used) > 1
        return (f" SDPA chose its {escape.text(join(used))} backend{'s' if len(used) > 1 else ''} for "
                f"{'these rows (each row says which)' if mixed else f'all {len(sdpa)} of its rows'}.")

    def cases_table(self) -> str:
        g = self.grid
        if g.empty:
            return ""
        # The table must fit the page's column (Material gives every column at least 5 rem, so fifteen overflow
        # it): the columns that say nothing row by row go, and the kernel column where no row recorded one.
        drop = _silent(g) | {"impl"} | (set() if g["kernel_path"].notna().any() else {"kernel"})
        cols = {k: v for k, v in self._COLS.items() if k not in drop}
        # each case against the rounding of its largest output, so the cases above one half-ulp can be read off
        ratio = self.rounding_cases()["ulp_ratio"]
        items = list(cols.items())
        at = [k for k, _ in items].index("max_rel_err") + 1
        cols = dict(items[:at] + [("ulp_ratio", "÷ ½ ulp of max |ref|")] + items[at:])
        fmts = {**(self._FMT_WITH_KERNEL if "kernel" in cols else self._FMT),
                "ulp_ratio": lambda x: "n/a" if absent(x) else fmt.num(x)}
        return ("<details><summary>All " + str(len(g)) + " kernel cases</summary>\n"
                + table_html(self.with_kernel(g).join(ratio), cols, fmts) + "</details>\n")


def _silent(df) -> set[str]:
    """The columns that carry nothing row by row: a status of "ok" on every row (the pass column says the rest) and
    a reason column with none to give (the failures' own table gives theirs)."""
    out = set()
    if (df["status"] == "ok").all():
        out.add("status")
    if "reason" not in df or not any(as_text(r).strip() for r in df["reason"]):
        out.add("reason")
    return out
