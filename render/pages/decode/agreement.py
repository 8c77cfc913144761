"""Do the variants predict the same tokens? Teacher-forced top-1 agreement against the reference loop."""
from __future__ import annotations

import pandas as pd

from collect.schema.decode import VARIANTS

from ... import escape, fmt
from ...tables import table_html
from ...vocab import join
from .data import DecodeData, _ok


class Agreement(DecodeData):
    """The agreement sentence, finding and table."""

    def _agreement_sentence(self) -> str:
        a = self.agreement[self.agreement["status"] == "ok"] if not self.agreement.empty else self.agreement
        a = a[a["agreement"].notna()] if not a.empty else a
        if a.empty:
            return ""
        return (f"Outside near-ties every variant picks the same next token as our CUDA-graph step at "
                f"{fmt.pct(100 * a['agreement'].min(), 4)} of positions or more.")

    def agreement_finding(self) -> str:
        a = self.agreement[self.agreement["status"] == "ok"] if not self.agreement.empty else self.agreement
        if a.empty:
            return "This run has no token-agreement measurement."
        out = []
        for model, g in a.groupby("model", sort=False):
            worst = g.loc[g["agreement"].idxmin()]
            lowest = join([escape.text(self.label(v)) for v in g[g["agreement"] == worst.agreement]["variant"]])
            ties = g["near_tie_fraction"].max()
            ref = self.label(str(g.iloc[0].reference))
            out.append(f"- **{escape.text(model)}**, {int(g.iloc[0].positions)} positions each, against "
                       f"{escape.text(ref)}: outside near-ties every variant agrees at "
                       f"{fmt.pct(100 * worst.agreement, 4)} or more (lowest: {lowest}). "
                       f"Near-ties are {fmt.pct(100 * ties)} of the positions at most.")
        return "\n".join(out) + "\n"

    def agreement_table(self) -> str:
        a = self.agreement
        if a.empty:
            return ""
        order = {v: i for i, v in enumerate(VARIANTS)}
        a = a.assign(_o=a["variant"].map(order)).sort_values(["model", "_o"])
        rows = []
        for r in a.itertuples():
            if r.status != "ok":
                rows.append({"model": r.model, "variant": self.label(r.variant), "status": f"{r.status}: {r.reason}"})
                continue
            first = "none" if not _ok(r.free_running_first_mismatch) else f"step {int(r.free_running_first_mismatch)}"
            rows.append({"model": r.model, "variant": self.label(r.variant), "positions": r.positions,
                         "agree": r.agreement, "ties": r.near_tie_fraction, "at_ties": r.agreement_at_near_ties,
                         "margin": r.max_margin_at_disagreement, "free": r.free_running_match, "first": first,
                         "status": "ok"})
        opt = lambda fn: (lambda x: "" if not _ok(x) else fn(x))  # noqa: E731
        return table_html(pd.DataFrame(rows), {
            "model": "Model", "variant": "Variant", "positions": "Positions",
            "agree": "Agreement outside near-ties", "ties": "Near-ties", "at_ties": "Agreement at near-ties",
            "margin": "Largest margin at a disagreement", "free": "Free-running match",
            "first": "First free-running difference", "status": "Status"},
            formats={"positions": opt(lambda x: str(int(x))), "agree": opt(lambda x: fmt.pct(100 * x, 4)),
                     "ties": opt(lambda x: fmt.pct(100 * x)), "at_ties": opt(lambda x: fmt.pct(100 * x)),
                     "margin": opt(fmt.num), "free": opt(lambda x: fmt.pct(100 * x))})
