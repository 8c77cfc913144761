"""What this run shows and what it measured: the opening findings, the run's cases and where each version ran."""
from __future__ import annotations

import pandas as pd

from ... import escape, fmt
from ...vocab import DTYPE_SHORT as SHORT
from ...vocab import impl_label, join, masking, plural
from .common import NOISE_BAND, YARDSTICKS, IterationsSection, goal_ratio_text, where_ran
from .journey import HELD, IN_SLACK, prediction_baseline, verdict, written_after, written_after_parts


class Opening(IterationsSection):
    """The page's first paragraphs and the summary of the run's cases."""

    def findings_first(self) -> str:
        """Three sentences at most: the goal, the predictions' tally, and the weaker evidence among them (the
        largest step and setback open the journey section: steps_sentence)."""
        d = self.data
        final = d.final_version
        out = []
        measured = [r for r in (self.ratio(final, *c) for c in self.cases()) if r is not None]
        if measured:
            med, low, reached = self._goal_verdict(measured)
            out.append(f"The kernel as shipped, **{escape.text(final)}**, {'reaches' if reached else 'misses'} its goal "
                       f"on this page's timing: a median of {goal_ratio_text(med, d.goal_ratio)} the fastest other "
                       f"implementation's TFLOP/s over {len(measured)} goal cases (the goal: {fmt.ratio(d.goal_ratio)}), "
                       f"with {plural(len(low), 'case', none=True)} below "
                       f"{fmt.ratio(d.goal_ratio - NOISE_BAND)}.")
        verdicts, narrow, after, parts = [], 0, [], []
        for v, pred, m in self.measured_predictions():
            if m.factor is not None:
                verdicts.append(verdict(m.factor, pred.low, pred.high))
                narrow += self.narrower(v, pred, m)
                if written_after(v):
                    after.append(verdicts[-1])
                elif written_after_parts(v):
                    parts.append(verdicts[-1])
        if verdicts:
            out.append(self._tally(verdicts, narrow, after, parts))
        return " ".join(out) or "No version of our kernel was measured in this run."

    def steps_sentence(self) -> str:
        """The largest step and the largest setback against the version each was built on, with the goal cases each
        ratio rests on; '' where no such step was measured."""
        steps = [(m.factor, v.name, pred.masking, v.baseline, len(m.cases)) for v, pred, m in self.measured_predictions()
                 if m.factor is not None and prediction_baseline(v) not in YARDSTICKS]
        if not steps:
            return ""
        best, worst = max(steps), min(steps)
        on = lambda k: plural(k, "goal case")  # noqa: E731  # what each ratio rests on
        return (f"The largest step was **{escape.text(best[1])}** ({best[2]}), at {fmt.ratio(best[0])} of "
                f"{escape.text(best[3])}'s TFLOP/s on {on(best[4])}; the largest setback was "
                f"{escape.text(worst[1])} ({worst[2]}), at {fmt.ratio(worst[0])} of {escape.text(worst[3])}'s on "
                f"{on(worst[4])}.")

    @staticmethod
    def _tally(verdicts: list[str], narrow: int, after: list[str], parts: list[str] = ()) -> str:
        """The predictions' verdicts counted, and how many rest on fewer cases than they cover or were written after
        a first measurement (weaker evidence, so the count says so)."""
        held = sum(w in (HELD, IN_SLACK) for w in verdicts)
        text = (f"Of {len(verdicts)} predictions measured here, each against the baseline its own words name, {held} "
                f"held, {verdicts.count('better than predicted')} came out better and "
                f"{verdicts.count('worse than predicted')} worse.")
        # The weaker evidence in one sentence, so the opening stays short: predictions that rest on fewer cases than
        # they cover, and those written after a first measurement.
        weak = []
        if narrow:
            weak.append(f"{narrow} of the {len(verdicts)} rest on fewer goal cases than the prediction covers (the "
                        "journey table marks them)")
        if after:
            n_held = sum(w in (HELD, IN_SLACK) for w in after)
            held_words = ("it held" if len(after) == 1 else "all of them held") if n_held == len(after) else \
                ("it did not hold" if len(after) == 1 else f"{n_held} of them held")
            weak.append(f"{plural(len(after), 'prediction')} {'was' if len(after) == 1 else 'were'} written after a "
                        f"first measurement of the version ({held_words})")
        if parts:
            one = len(parts) == 1
            weak.append(f"{plural(len(parts), 'prediction')} {'was' if one else 'were'} written after the kernels "
                        f"{'its version routes' if one else 'their versions route'} to were measured "
                        f"({sum(w in (HELD, IN_SLACK) for w in parts)} held)")
        if weak:
            text += f" Weaker evidence: {'; '.join(weak)}."
        return text

    def summary(self) -> str:
        d = self.data
        counts = self.rows["status"].value_counts()
        status = join(f"{counts[s]} {s}" for s in ("ok", "oom", "unsupported", "error") if s in counts)
        shapes = self.shape_lengths()
        untimed = len(self.versions) - len(self.timed_versions())
        # Every implementation beside ours: SDPA's backends and other projects' kernels (FlashAttention-4).
        others = self.rows[self.rows["kind"] != "version"]["impl"] if "kind" in self.rows else []
        text = (f"This run timed {len(self.timed_versions())} versions of our kernel and "
                f"{join(escape.text(impl_label(i)) for i in dict.fromkeys(others))}: {len(self.rows)} measurements "
                f"({status}) over {plural(len(self.cases()), 'goal case')}. Its shapes: {shapes}; "
                f"{join(SHORT.get(x, x) for x in dict.fromkeys(self.rows['dtype']))}; causal and not.")
        if untimed:
            # Named in the collapsed table of notes, not here: a list of tens of names says nothing a reader uses.
            text += (f" {plural(untimed, 'further version')} {'is' if untimed == 1 else 'are'} recorded with "
                     f"{'its' if untimed == 1 else 'their'} story but not timed by this phase, which keeps to what "
                     "ships and the steps that led to it: each was superseded, lost to its baseline where it was "
                     "measured, or changes only shapes this phase does not time (a head size between the tiles). "
                     "The tables below leave them out; the collapsed table of notes has each, with what its author "
                     "measured then.")
        coverage = self.coverage()
        if coverage:
            text += " " + coverage
        text += f'\n\n??? info "How each case was timed"\n    {escape.text(d.timing_method)}\n'
        if not d.hopper_available:
            text += (f"\n!!! note \"Hopper versions not run\"\n    This GPU could not run the Hopper versions: "
                     f"{escape.text(d.hopper_reason)}. Their rows are kept as unsupported; only the portable kernel "
                     "is compared here.\n")
        text += "".join(map(escape.note, d.notes))
        return text

    def coverage(self) -> str:
        """Which versions were timed where, when not every version was timed at every case: the phase
        runs the whole journey at some shapes and dtypes and only its endpoints at the others."""
        ok = self.ok[self.ok["kind"] == "version"] if "kind" in self.ok else self.ok.iloc[0:0]
        if ok.empty:
            return ""
        sets = {(int(hd), int(n), str(dt)): frozenset(g["impl"])
                for (hd, n, dt), g in ok.groupby(["head_dim", "seq_len", "dtype"])}
        everyone = frozenset().union(*sets.values())
        by_set: dict[frozenset, list] = {}
        for key, names in sets.items():
            by_set.setdefault(names, []).append(key)
        if len(by_set) == 1:
            return ""
        out = []
        if everyone in by_set:
            out.append(f"Every timed version ran at {where_ran(by_set[everyone])}." + self._one_masking(ok, everyone,
                                                                                                     by_set[everyone]))
        for names, keys in by_set.items():
            if names != everyone:
                ran = [escape.text(v) for v in self.version_names() if v in names]
                missed = [escape.text(v) for v in self.version_names() if v in everyone and v not in names]
                if len(missed) < len(ran):  # name the shorter list
                    out.append(f"Every timed version but {join(missed)} ran at {where_ran(keys)}.")
                else:
                    out.append(f"Only {join(ran)} {'ran' if len(ran) > 1 else 'was timed'} beside the other implementations at "
                               f"{where_ran(keys)}.")
                out[-1] += self._one_masking(ok, names, keys)
        return " ".join(out)

    def _one_masking(self, ok, names, keys) -> str:
        """The versions among `names` that ran in one masking only at `keys` ((head_dim, N, dtype)): "ran at" above
        counts a shape either masking ran, and the ratio table's "not run" cells must not contradict it."""
        keys = set(keys)
        at = ok[pd.Series([(int(h), int(n), str(d)) in keys for h, n, d in
                           zip(ok["head_dim"], ok["seq_len"], ok["dtype"])], index=ok.index, dtype=bool)]
        timed = set(at["causal"].astype(bool))  # a run that timed one masking there has nothing to say
        only: dict[bool, list] = {}
        for v in self.version_names():
            masks = set(at[at["impl"] == v]["causal"].astype(bool))
            if v in names and len(masks) == 1 and masks < timed:
                only.setdefault(masks.pop(), []).append(escape.text(v))
        parts = [f"{join(vs)}{' ran' if i == 0 else ''} {masking(c)} only" for i, (c, vs) in enumerate(sorted(only.items()))]
        return f" There {', and '.join(parts)}." if parts else ""
