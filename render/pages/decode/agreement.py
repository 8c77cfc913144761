"""Do the variants predict the same tokens? Teacher-forced top-1 agreement against the reference loop."""
from __future__ import annotations

import pandas as pd

from collect.schema.decode import VARIANTS

from ... import escape, fmt
from ...tables import table_html
from ...vocab import join, plural
from .data import AGREEMENT_TARGET, WHOLE_CALL_VARIANTS, DecodeData, _ok


class Agreement(DecodeData):
    """The agreement sentence, finding and table."""

    def _agreement_ok(self) -> pd.DataFrame:
        a = self.agreement[self.agreement["status"] == "ok"] if not self.agreement.empty else self.agreement
        return a[a["agreement"].notna()] if not a.empty else a

    def _agreement_sentence(self) -> str:
        a = self._agreement_ok()
        if a.empty:
            return ""
        return (f"Outside near-ties every variant compared picks the same next token as our CUDA-graph step at "
                f"{fmt.pct(100 * a['agreement'].min(), 4)} of positions or more{self._uncompared_words(a)}.")

    def uncompared(self, model: str, compared) -> list[str]:
        """The variants that ran for a model but were not compared with the reference: a verdict over the others is
        not theirs."""
        ran = set(self.ok[self.ok["model"] == model]["variant"])
        ref = set(self.agreement[self.agreement["model"] == model]["reference"]) if not self.agreement.empty else set()
        return [v for v in self.variants() if v in ran and v not in set(compared) and v not in ref]

    def uncompared_by_model(self, checked: pd.DataFrame) -> list[tuple[str, list[str]]]:
        """(model, the variants that ran on it but were not compared) for each model the check compared, where any
        were left out."""
        out = []
        for model in dict.fromkeys(checked["model"]):
            rest = self.uncompared(model, checked[checked["model"] == model]["variant"])
            if rest:
                out.append((model, rest))
        return out

    def _uncompared_words(self, a: pd.DataFrame) -> str:
        """' (model.generate not compared)' where every model left out the same variants; else, per model, which
        (' (not compared: model.generate on gpt2; … on gpt2-xl)'), so a verdict over all is not read as theirs."""
        parts = self.uncompared_by_model(a)
        if not parts:
            return ""
        if len(parts) == a["model"].nunique() and len({tuple(rest) for _, rest in parts}) == 1:
            return f" ({join(escape.text(self.named(v)) for v in parts[0][1])} not compared)"
        return (" (not compared: " + "; ".join(f"{join(escape.text(self.named(v)) for v in rest)} on "
                                               f"{escape.text(model)}" for model, rest in parts) + ")")

    def _not_compared_words(self, model: str, rest: list[str]) -> str:
        """' Not compared: …', each with why: a whole call (model.generate) cannot be fed the reference's tokens one
        position at a time; a variant with no agreement row at all was left out of this model's check by the plan,
        which compares only what the phase's time budget affords (a budget spent or an error would have left a row)."""
        if not rest:
            return ""
        tried = set(self.agreement[self.agreement["model"] == model]["variant"])
        whole = [v for v in rest if v in WHOLE_CALL_VARIANTS]
        unplanned = [v for v in rest if v not in whole and v not in tried]
        other = [v for v in rest if v not in whole and v not in unplanned]
        parts = []
        if whole:
            parts.append(f"{join(escape.text(self.named(v)) for v in whole)}, whose whole calls cannot be fed the "
                         "reference's tokens one position at a time")
        if unplanned:
            parts.append(f"{join(escape.text(self.named(v)) for v in unplanned)}, which this run's check left out for "
                         f"{escape.text(model)}, comparing only the loops the phase's time budget affords")
        if other:
            parts.append(join(escape.text(self.named(v)) for v in other))
        return f" Not compared: {'; '.join(parts)}."

    def agreement_finding(self) -> str:
        a = self._agreement_ok()
        if a.empty:
            return "This run has no token-agreement measurement."
        out = []
        for model, g in a.groupby("model", sort=False):
            worst = g.loc[g["agreement"].idxmin()]
            lowest = join([escape.text(self.named(v)) for v in g[g["agreement"] == worst.agreement]["variant"]])
            ties = g["near_tie_fraction"].max()
            ref = self.label(str(g.iloc[0].reference))
            rest = self.uncompared(model, g["variant"])
            unchecked = self._not_compared_words(model, rest)
            out.append(f"- **{escape.text(model)}**, {self._positions_words(g)}, against {escape.text(ref)}: outside "
                       f"near-ties the {plural(len(g), 'variant')} compared agree at "
                       f"{fmt.pct(100 * worst.agreement, 4)} or more (lowest: {lowest}){self._target_words(g)}. "
                       f"Near-ties are {fmt.pct(100 * ties)} of the positions at most.{unchecked}")
        noise = self._noise_words(a)
        return "\n".join(out) + "\n" + (f"\n{noise}\n" if noise else "")

    def _target_words(self, g: pd.DataFrame) -> str:
        """', under the 99% goal: X (12 disagreements)' for the variants of one model below AGREEMENT_TARGET; ', every
        one at or above the 99% goal' otherwise."""
        under = g[g["agreement"] < AGREEMENT_TARGET]
        goal = fmt.pct(100 * AGREEMENT_TARGET, 2)
        if under.empty:
            return f", every one at or above the {goal} goal"
        named = join(f"{escape.text(self.named(r.variant))} ({plural(int(r.disagreements), 'disagreement')})"
                     if _ok(r.disagreements) else escape.text(self.named(r.variant)) for r in under.itertuples())
        return f"; under the {goal} goal: {named}"

    @staticmethod
    def _positions_words(g: pd.DataFrame) -> str:
        """What was compared, where every row of a model compared the same: '4 sequences × 256 steps after a 767-token
        prompt (1,024 positions)'; the positions alone where the rows differ."""
        shapes = set(zip(g["batch"], g["positions"], g["prompt_len"]))
        if len(shapes) != 1:
            return f"{fmt.count(g['positions'].min())} to {fmt.count(g['positions'].max())} positions"
        b, n, prompt = (int(x) for x in shapes.pop())
        if b <= 0 or n % b:
            return f"{fmt.count(n)} positions after a {prompt}-token prompt"
        return (f"{plural(b, 'sequence')} × {plural(n // b, 'step')} after a {prompt}-token prompt "
                f"({fmt.count(n)} positions)")

    def _noise_words(self, a: pd.DataFrame) -> str:
        """Whether the disagreements outside near-ties lie within the rounding these computations show: each row's
        largest margin at a disagreement against the largest change of its top logit where it agreed."""
        d = a[(a["disagreements"].fillna(0) > 0) & a["max_margin_at_disagreement"].notna()
              & a["max_top1_logit_diff"].notna()]
        if d.empty:
            return ""
        within = d[d["max_margin_at_disagreement"] < d["max_top1_logit_diff"]]
        if len(within) == len(d):
            return (f"In every one of the {plural(len(d), 'row')} with disagreements outside near-ties, even the largest "
                    "margin at a disagreement is smaller than the largest change of the top logit at positions where the "
                    "variant agreed: no disagreement is wider than the rounding seen where it agreed. That compares two "
                    "maxima, so it hints at rounding rather than proves it"
                    + (", and a variant under the goal stays under it." if (a["agreement"] < AGREEMENT_TARGET).any()
                       else "."))
        beyond = d.drop(within.index)
        names = join(f"{escape.text(self.named(r.variant))} on {escape.text(r.model)}" for r in beyond.itertuples())
        return (f"Of the {plural(len(d), 'row')} with disagreements outside near-ties, {len(within)} have every "
                "disagreement's margin below the largest change of their top logit where they agreed (no wider than "
                f"the rounding seen where they agreed); {names} disagreed at a larger margin than that.")

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
                         "margin": r.max_margin_at_disagreement, "noise": r.max_top1_logit_diff,
                         "free": r.free_running_match, "free_n": getattr(r, "free_running_tokens", None),
                         "batch": r.batch,
                         "first": first, "status": "ok"})
        opt = lambda fn: (lambda x: "" if not _ok(x) else fn(x))  # noqa: E731
        # The free-running match is over the tokens each sequence generated on its own, not over the teacher-forced
        # positions beside it: the cell says over how many.
        frame = pd.DataFrame(rows)
        if "free" in frame:
            frame["free"] = [("" if not _ok(x) else fmt.pct(100 * x) + (f" of {int(n)} tokens" if _ok(n) else "")
                              + (f" ({int(b)} sequences × {int(n) // int(b)} steps)"
                                 if _ok(n) and _ok(b) and b > 0 and int(n) % int(b) == 0 else ""))
                             for x, n, b in zip(frame["free"], frame.get("free_n", [None] * len(frame)),
                                                frame.get("batch", [None] * len(frame)))]
        return table_html(frame, {
            "model": "Model", "variant": "Variant", "positions": "Positions (teacher-forced)",
            "agree": "Agreement outside near-ties", "ties": "Near-ties", "at_ties": "Agreement at near-ties",
            "margin": "Largest margin at a disagreement",
            "noise": "Largest top-logit change where both agree", "free": "Free-running match",
            "first": "First free-running difference", "status": "Status"},
            formats={"positions": opt(lambda x: str(int(x))), "agree": opt(lambda x: fmt.pct(100 * x, 4)),
                     "ties": opt(lambda x: fmt.pct(100 * x)), "at_ties": opt(lambda x: fmt.pct(100 * x)),
                     "margin": opt(fmt.num), "noise": opt(fmt.num)})
