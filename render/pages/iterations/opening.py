"""What this run shows and what it measured: the opening findings, the run's cases and where each version ran."""
from __future__ import annotations

from ... import escape, fmt
from ...vocab import DTYPE_SHORT as SHORT
from ...vocab import impl_label, join, plural
from .common import NOISE_BAND, IterationsSection, where_ran
from .journey import HELD, IN_SLACK, verdict


class Opening(IterationsSection):
    """The page's first paragraphs and the summary of the run's cases."""

    def findings_first(self) -> str:
        """A few sentences: the goal, the predictions, the largest step."""
        d = self.data
        final = d.final_version
        out = []
        measured = [r for r in (self.ratio(final, *c) for c in self.cases()) if r is not None]
        if measured:
            med, low, reached = self._goal_verdict(measured)
            out.append(f"The kernel as shipped, **{escape.text(final)}**, {'reaches' if reached else 'misses'} its goal "
                       f"on this page's timing: a median of {fmt.ratio_vs(med, d.goal_ratio)} the fastest other "
                       f"implementation's TFLOP/s over {len(measured)} goal cases (the goal: {fmt.ratio(d.goal_ratio)}), "
                       f"with {plural(len(low), 'case')} below {fmt.ratio(d.goal_ratio - NOISE_BAND)}.")
        verdicts, steps = [], []
        for v, pred, m in self.measured_predictions():
            if m is not None:
                verdicts.append(verdict(m, pred.low, pred.high))
                if v.baseline != "sdpa":
                    steps.append((m, v.name, pred.masking, v.baseline))
        if verdicts:
            counts = {w: verdicts.count(w) for w in (HELD, IN_SLACK, "better than predicted", "worse than predicted")}
            out.append(f"Of {len(verdicts)} predictions measured here, {counts[HELD] + counts[IN_SLACK]} held, "
                       f"{counts['better than predicted']} came out better and {counts['worse than predicted']} worse.")
        if steps:
            best = max(steps)
            worst = min(steps)
            out.append(f"The largest step was **{escape.text(best[1])}** ({best[2]}), at {fmt.ratio(best[0])} of "
                       f"{escape.text(best[3])}'s TFLOP/s; the largest setback was {escape.text(worst[1])} ({worst[2]}), "
                       f"at {fmt.ratio(worst[0])} of {escape.text(worst[3])}'s.")
        return " ".join(out) or "No version of our kernel was measured in this run."

    def summary(self) -> str:
        d = self.data
        counts = self.rows["status"].value_counts()
        status = join(f"{counts[s]} {s}" for s in ("ok", "oom", "unsupported", "error") if s in counts)
        shapes = dict.fromkeys(f"B={b}, H={h}, d={hd}" for b, h, hd in zip(self.rows["batch"], self.rows["heads"],
                                                                          self.rows["head_dim"]))
        ns = sorted(set(self.rows["seq_len"]))
        timed = set(self.rows[self.rows["kind"] == "version"]["impl"]) if "kind" in self.rows else set()
        untimed = [n for n in self.version_names() if n not in timed]
        # Every implementation beside ours: SDPA's backends and other projects' kernels (FlashAttention-4).
        others = self.rows[self.rows["kind"] != "version"]["impl"] if "kind" in self.rows else []
        text = (f"This run timed {len([n for n in self.version_names() if n in timed])} versions of our kernel and "
                f"{join(escape.text(impl_label(i)) for i in dict.fromkeys(others))} in {len(self.rows)} cases "
                f"({status}). Its shapes: {join(shapes)}; N = {join(ns)}; "
                f"{join(SHORT.get(x, x) for x in dict.fromkeys(self.rows['dtype']))}; causal and not.")
        if untimed:
            text += (f" {join(escape.text(u) for u in untimed)} {'is' if len(untimed) == 1 else 'are'} recorded with "
                     f"{'its' if len(untimed) == 1 else 'their'} story but not timed by this phase, which keeps to what "
                     "ships and the steps that led to it: each was superseded, lost to its baseline where it was "
                     "measured, or changes only shapes this phase does not time (a head size between the tiles). "
                     "The author's notes give what it measured then.")
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
            out.append(f"Every timed version ran at {where_ran(by_set[everyone])}.")
        for names, keys in by_set.items():
            if names != everyone:
                ran = [escape.text(v) for v in self.version_names() if v in names]
                missed = [escape.text(v) for v in self.version_names() if v in everyone and v not in names]
                if len(missed) < len(ran):  # name the shorter list
                    out.append(f"Every timed version but {join(missed)} ran at {where_ran(keys)}.")
                else:
                    out.append(f"Only {join(ran)} {'ran' if len(ran) > 1 else 'was timed'} beside the other implementations at "
                               f"{where_ran(keys)}.")
        return " ".join(out)
