"""The journey, prediction by prediction: each version's predicted factor beside what this run measured, the verdict
rule, each version's story, and the fewer-wider-loads fix the published study left open."""
from __future__ import annotations

import re

import pandas as pd

from ... import escape, fmt
from ...tables import table_html
from ...vocab import DTYPE_SHORT as SHORT
from ...vocab import join, masking, plural, version_kernel
from .common import NOISE_BAND, YARDSTICKS, IterationsSection, Measured, share

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

# The words by which a prediction against other implementations names its yardstick, widest first: the widest it
# names is the one it was written against. The predictions written before FlashAttention-4 was timed beside ours name
# cuDNN ("0.82-1.00x cuDNN") or "the fastest SDPA backend"; from v24 on they name "the fastest other implementation"
# or FlashAttention-4. iterations.json records only 'sdpa' for all three, so judging every one against the fastest
# other implementation would fail the older ones against a kernel their authors had not timed. A prediction that names
# none is judged against the goal's own yardstick.
YARDSTICK_WORDS = (("fastest-other", ("fastest other implementation", "flashattention-4")),
                   ("fastest-sdpa", ("fastest sdpa backend",)),
                   ("cudnn", ("cudnn",)))
# How a prediction's words say it was written after the version's first measurement (so it is weaker evidence).
POST_HOC = "written after, not before"

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


def prediction_baseline(v) -> str:
    """What a version's prediction was written against: an earlier version's name, or a YARDSTICKS key read from
    the prediction's words; '' where the version has no baseline."""
    if v.baseline != "sdpa":
        return v.baseline
    words = v.prediction.lower()
    return next((key for key, names in YARDSTICK_WORDS if any(n in words for n in names)), "fastest-other")


def baseline_label(baseline: str) -> str:
    """A baseline as the page names it: a version's name, or a yardstick's words."""
    return YARDSTICKS[baseline].label if baseline in YARDSTICKS else baseline


def written_after(v) -> bool:
    """Whether a version's prediction says it was written after the version was first measured."""
    return POST_HOC in v.prediction.lower()


# A routing version's prediction written once the kernels it routes to had been measured, before it ran itself
# ("Written after v9 was measured, before v10 itself ran"): its factors are those kernels' own, so it is weaker
# evidence too, though not written after a measurement of the version.
PARTS_MEASURED = re.compile(r"written after [^.]{0,80}measured, before \S+ itself ran")


def written_after_parts(v) -> bool:
    """Whether a version's prediction says it was written after the kernels it runs were measured."""
    return not written_after(v) and PARTS_MEASURED.search(v.prediction.lower()) is not None


def case_words(c) -> str:
    """A goal case without its masking (the journey table's cells say it first): 'fp16, N=4096, B=4, H=32, d=128'."""
    return f"{SHORT.get(c.dtype, c.dtype)}, N={c.n}, B={c.batch}, H={c.heads}, d={c.head_dim}"


def cases_label(only: dict) -> str:
    """'fp16, N=4096, d=128' for a prediction's cases."""
    parts = {"dtype": lambda x: SHORT.get(x, x), "n": lambda x: f"N={x}", "head_dim": lambda x: f"d={x}",
             "batch": lambda x: f"B={x}", "heads": lambda x: f"H={x}"}
    return ", ".join(parts[k](only[k]) for k in parts if k in only)


class Journey(IterationsSection):
    """The journey table, its verdict rule, the versions' stories and the wide-loads finding."""

    def journey_table(self) -> str:
        """Each timed version once: the factor predicted for it, what this run measured, and the verdict, per
        masking. The versions not timed keep their story in the table of notes."""
        data = []
        for v in self.timed_versions():
            base = prediction_baseline(v)
            ranges, measured, verdicts = [], [], []
            for pred in v.predicted:
                m = self.prediction_measure(v, pred)
                only = prediction_cases(v)
                at = f" at {cases_label(only)}" if only else ""
                ranges.append(f"{pred.masking}{at}: {fmt.span(pred.low, pred.high, fmt.ratio)}")
                measured.append(f"{pred.masking}: {self._measured_cell(m, pred, base)}")
                verdicts.append(f"{pred.masking}: {self._verdict_cell(v, pred, m)}")
            if written_after(v) and ranges:
                ranges.append("written after a first measurement")
            elif written_after_parts(v) and ranges:
                ranges.append("written after the kernels it runs were measured")
            data.append({"name": v.name, "kernel": version_kernel(v.path, v.features),
                         "base": baseline_label(base) if base else "none",
                         "range": "; ".join(ranges) or "none recorded",
                         "measured": "; ".join(measured) or "not measured", "verdict": "; ".join(verdicts) or "none"})
        if not data:
            return "No version of our kernel was timed in this run."
        return table_html(pd.DataFrame(data), {
            "name": "Version", "kernel": "Kernel", "base": "Against", "range": "Predicted TFLOP/s factor",
            "measured": "Measured here", "verdict": "Verdict"})

    def _measured_cell(self, m: Measured, pred, base: str) -> str:
        """The measured factor with the cases it rests on: the case itself where there is one, else how many (their
        geometric mean); and where the baseline has no row at a case the version ran, that it has none."""
        lacking = f"no {baseline_label(base)} row"
        if m.factor is None:
            return f"{lacking} where it ran" if m.unmatched else "not timed"
        n = len(m.cases)
        text = measured_text(m.factor, pred.low, pred.high)
        text += f" (1 case: {case_words(m.cases[0])})" if n == 1 else f" (geometric mean of {n} cases)"
        if m.unmatched:
            text += f"; {lacking} at {plural(len(m.unmatched), 'other case')} it ran"
        return text

    def _verdict_cell(self, v, pred, m: Measured) -> str:
        """The verdict, marked where it rests on fewer goal cases than the prediction covers."""
        word = verdict(m.factor, pred.low, pred.high)
        if not self.narrower(v, pred, m):
            return word
        note = f"narrower: on {len(m.cases)} of its {len(self.prediction_scope(v, pred))} goal cases"
        return f"{word[:-1]}; {note})" if word.endswith(")") else f"{word} ({note})"

    def narrower(self, v, pred, m: Measured) -> bool:
        """Whether a measured prediction rests on fewer goal cases than it covers."""
        return m.factor is not None and len(m.cases) < len(self.prediction_scope(v, pred))

    def verdict_rule(self) -> str:
        """How the verdicts pick their baseline, treat a factor just outside its range, and count their cases."""
        got = self.measured_predictions()
        n = sum(verdict(m.factor, p.low, p.high) == IN_SLACK for _, p, m in got)
        text = ("A prediction against other implementations is measured against the one its own words name: SDPA "
                "cuDNN, the fastest SDPA backend, or the fastest other implementation (FlashAttention-4 included), "
                "the goal's yardstick since FlashAttention-4 was first timed beside ours. "
                f"A factor within {share(SLACK)} beyond either end of its predicted range still counts as "
                f"predicted, for run-to-run noise; the verdict then reads *{IN_SLACK}*, and the measured factor is "
                "printed with the figures that place it between the range and that slack.")
        text += f" In this run, {plural(n, 'verdict')} {'reads' if n == 1 else 'read'} so." if n else ""
        text += self._slack_beside_band(got)
        text += (" A prediction covers every goal case of its masking (for a single step, at the head sizes the step "
                 "was timed at), unless its words name fewer; a verdict that rests on fewer is marked *narrower*, "
                 "with how many it rests on.")
        named = [v for v in self.timed_versions() if v.baseline and v.predicted and prediction_cases(v)]
        if named:
            text += (" Where a prediction's words name the cases it is about, it is measured there alone: "
                     f"{join(f'{escape.text(v.name)} at {cases_label(prediction_cases(v))}' for v in named)}.")
        return text

    def _slack_beside_band(self, got: list) -> str:
        """The slack beside the goal's noise band: two fixed sizes, neither measured, and how many verdicts of this run
        the wider one would turn."""
        def within_band(f, low, high):
            return f is not None and low * (1 - NOISE_BAND) <= f <= high * (1 + NOISE_BAND)

        turned = [(v, p) for v, p, m in got if verdict(m.factor, p.low, p.high) in ("better than predicted",
                  "worse than predicted") and within_band(m.factor, p.low, p.high)]
        text = (f" The slack is narrower than the goal's {share(NOISE_BAND)} noise band above; both are fixed choices, "
                "not measured in any run.")
        if not turned:
            return text + f" No verdict of this run misses its range by less than {share(NOISE_BAND)}."
        names = join(f"{escape.text(v.name)} ({p.masking})" for v, p in turned)
        return text + (f" {plural(len(turned), 'verdict')} of this run {'misses' if len(turned) == 1 else 'miss'} "
                       f"{'its' if len(turned) == 1 else 'their'} range by less than {share(NOISE_BAND)}, and would "
                       f"read as predicted under the band: {names}.")

    def measured_predictions(self) -> list:
        """(version, prediction, Measured) for every prediction of a timed version with a baseline."""
        return [(v, p, self.prediction_measure(v, p)) for v in self.timed_versions() if v.baseline
                for p in v.predicted]

    def measured_prediction(self, v, pred) -> float | None:
        """The factor this run measured for one prediction: over the goal cases of its masking that it covers."""
        return self.prediction_measure(v, pred).factor

    def prediction_measure(self, v, pred) -> Measured:
        """One prediction measured against the baseline it names, over the goal cases it covers."""
        if not v.baseline:
            return Measured(None, [], [])
        return self.measure(v.name, prediction_baseline(v), pred.masking == "causal", prediction_cases(v))

    def prediction_scope(self, v, pred) -> list:
        """The goal cases a prediction covers: those of its masking its words name (every one where they name none);
        a single step's only at the head sizes it was timed at, since the phase times a step where it changes the
        kernel. A per-shape version is what shipped, so its prediction covers every head size."""
        scope = self.scope(pred.masking == "causal", prediction_cases(v))
        if v.path == "per-shape":
            return scope
        ran = self.head_dims_ran(v.name)
        return [c for c in scope if c.head_dim in ran]

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
        name, base = escape.text(v.name), escape.text(baseline_label(prediction_baseline(v)))
        res = [(c, self.measure(v.name, prediction_baseline(v), c)) for c in (False, True)]
        res = [(c, m) for c, m in res if m.factor is not None]
        if not res:
            return f"{name}, the fewer-wider-loads version, did not run beside {base} in this run."
        cases = list(dict.fromkeys(case_words(c) for _, m in res for c in m.cases))
        where = f"at {join(cases)}" if len(cases) <= 2 else "as a geometric mean over the goal cases both ran"
        out = [f"The published T4 study ended with one fix left open: fewer, wider loads to relieve the pressure on "
               f"the shared-memory pipeline. Here that is **{name}** (its change is in the table above), measured "
               f"against {base} {where}."]
        for causal, m in res:
            x = m.factor
            pred = next((p for p in v.predicted if p.masking == masking(causal)), None)
            change = "faster" if x > 1 + SLACK else "slower" if x < 1 - SLACK else "no faster and no slower"
            shown = measured_text(x, pred.low, pred.high) if pred else fmt.ratio(x)
            text = f"{masking(causal).capitalize()}, it runs at {shown} of {base}'s TFLOP/s ({change})"
            if pred:
                text += (f" against a predicted {fmt.span(pred.low, pred.high, fmt.ratio)}: "
                         f"{verdict(x, pred.low, pred.high)}")
            out.append(text + ".")
        return " ".join(out)
