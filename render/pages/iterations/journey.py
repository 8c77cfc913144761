"""The journey, prediction by prediction: each version's predicted factor beside what this run measured, the verdict
rule, each version's story, and the fewer-wider-loads fix the published study left open."""
from __future__ import annotations

import pandas as pd

from ... import escape, fmt
from ...tables import table_html
from ...vocab import DTYPE_SHORT as SHORT
from ...vocab import join, masking, plural, version_kernel
from .common import IterationsSection, share

# A measured factor within this much of a predicted range's edge still "holds": run-to-run noise.
SLACK = 0.01
# The goal cases a prediction covers, where its words name fewer than all of them; a prediction not listed
# covers every goal case of its masking. iterations.json (schema 5) has no field for this, and adding one means a
# new schema version and a migration of every committed run, so the cases live here, keyed to the dated
# prediction whose words name them. v0-portable's restates what its first H200 run measured at fp16, N=4096
# (d=128, where cuDNN ran at the 656 TFLOP/s its outcome quotes): a geometric mean over every goal case, most of
# them at d=64 where the portable kernel runs nearer cuDNN, would test a claim it never made.
PREDICTION_CASES: dict[tuple[str, str], dict] = {
    ("v0-portable", "2026-11-29"): {"dtype": "float16", "n": 4096, "head_dim": 128},
}

HELD = "as predicted"
# A factor outside its printed range that still counts as held says so: the row must not read as a plain hit.
IN_SLACK = f"{HELD} (within the {share(SLACK)} slack)"


def verdict(measured: float | None, low: float, high: float) -> str:
    """How a measured factor sits against the range predicted for it."""
    if measured is None:
        return "not measured"
    if measured > high * (1 + SLACK):
        return "better than predicted"
    if measured < low * (1 - SLACK):
        return "worse than predicted"
    if measured > high or measured < low:
        return IN_SLACK
    return HELD


def measured_text(measured: float | None, low: float, high: float) -> str:
    """A measured factor with the figures that place it against its range and the slack around it: 1.0068
    beside a range ending at 1.00 prints as 1.007, not as 1.01, the slack's own edge."""
    if measured is None:
        return "not measured"
    edges = (low, high, low * (1 - SLACK), high * (1 + SLACK))
    return max((fmt.ratio_vs(measured, e) for e in edges), key=len)


def prediction_cases(v) -> dict:
    """The GoalCase fields a version's prediction is limited to; empty where it covers every goal case."""
    return PREDICTION_CASES.get((v.name, v.predicted_at), {})


def cases_label(only: dict) -> str:
    """'fp16, N=4096, d=128' for a prediction's cases."""
    parts = {"dtype": lambda x: SHORT.get(x, x), "n": lambda x: f"N={x}", "head_dim": lambda x: f"d={x}",
             "batch": lambda x: f"B={x}", "heads": lambda x: f"H={x}"}
    return ", ".join(parts[k](only[k]) for k in parts if k in only)


class Journey(IterationsSection):
    """The journey table, its verdict rule, the versions' stories and the wide-loads finding."""

    def journey_table(self) -> str:
        """Each version once: the factor predicted for it, what this run measured, and the verdict, per masking."""
        data = []
        for v in self.versions:
            base = "the fastest other implementation" if v.baseline == "sdpa" else v.baseline
            ranges, measured, verdicts = [], [], []
            for pred in v.predicted:
                m = self.measured_prediction(v, pred)
                only = prediction_cases(v)
                at = f" at {cases_label(only)}" if only else ""
                ranges.append(f"{pred.masking}{at}: {fmt.span(pred.low, pred.high, fmt.ratio)}")
                measured.append(f"{pred.masking}: {measured_text(m, pred.low, pred.high)}")
                verdicts.append(f"{pred.masking}: {verdict(m, pred.low, pred.high)}")
            data.append({"name": v.name, "kernel": version_kernel(v.path, v.features), "base": base,
                         "range": "; ".join(ranges) or "none recorded",
                         "measured": "; ".join(measured) or "not measured", "verdict": "; ".join(verdicts)})
        return table_html(pd.DataFrame(data), {
            "name": "Version", "kernel": "Kernel", "base": "Against", "range": "Predicted TFLOP/s factor",
            "measured": "Measured here (geometric mean)", "verdict": "Verdict"})

    def verdict_rule(self) -> str:
        """How the verdicts treat a factor just outside its range, and how many rows of this run that is."""
        n = sum(verdict(m, p.low, p.high) == IN_SLACK for _, p, m in self.measured_predictions())
        text = (f"A factor within {share(SLACK)} beyond either end of its predicted range still counts as "
                f"predicted, for run-to-run noise; the verdict then reads *{IN_SLACK}*, and the measured factor is "
                "printed with the figures that place it between the range and that slack.")
        text += f" In this run, {plural(n, 'verdict')} {'reads' if n == 1 else 'read'} so." if n else ""
        named = [v for v in self.versions if v.baseline and v.predicted and prediction_cases(v)]
        if named:
            text += (" Where a prediction's words name the cases it is about, it is measured there alone: "
                     f"{join(f'{escape.text(v.name)} at {cases_label(prediction_cases(v))}' for v in named)}.")
        return text

    def measured_predictions(self) -> list:
        """(version, prediction, measured factor or None) for every prediction of a version with a baseline."""
        return [(v, p, self.measured_prediction(v, p)) for v in self.versions if v.baseline for p in v.predicted]

    def measured_prediction(self, v, pred) -> float | None:
        """The factor this run measured for one prediction: over the goal cases of its masking that it covers."""
        if not v.baseline:
            return None
        return self.speedup(v.name, v.baseline, pred.masking == "causal", prediction_cases(v))

    def story_table(self) -> str:
        """Each version's change, its prediction as written (and when), and its author's notes after measuring."""
        data = [{"name": v.name, "change": v.change, "prediction": f"{v.prediction} (written {v.predicted_at})",
                 "notes": v.outcome or "no notes recorded"} for v in self.versions]
        return table_html(pd.DataFrame(data), {"name": "Version", "change": "What changed", "prediction": "Prediction",
                                               "notes": "Author's notes, written after measuring"})

    def wide_loads_finding(self) -> str:
        """What the T4 study's open fix (fewer, wider loads) did here."""
        v = next((v for v in self.versions if v.role == "t4-fix"), None)
        if v is None:
            return "No version in this run tries the fewer-wider-loads fix."
        name, base = escape.text(v.name), escape.text(v.baseline)
        res = [(c, self.speedup(v.name, v.baseline, c)) for c in (False, True)]
        res = [(c, x) for c, x in res if x is not None]
        if not res:
            return f"{name}, the fewer-wider-loads version, did not run beside {base} in this run."
        out = [f"The published T4 study ended with one fix left open: fewer, wider loads to relieve the pressure on "
               f"the shared-memory pipeline. Here that is **{name}** (its change is in the table above), measured "
               f"against {base} as a geometric mean over the goal cases."]
        for causal, x in res:
            pred = next((p for p in v.predicted if p.masking == masking(causal)), None)
            change = "faster" if x > 1 + SLACK else "slower" if x < 1 - SLACK else "no faster and no slower"
            shown = measured_text(x, pred.low, pred.high) if pred else fmt.ratio(x)
            text = f"{masking(causal).capitalize()}, it runs at {shown} of {base}'s TFLOP/s ({change})"
            if pred:
                text += (f" against a predicted {fmt.span(pred.low, pred.high, fmt.ratio)}: "
                         f"{verdict(x, pred.low, pred.high)}")
            out.append(text + ".")
        return " ".join(out)
