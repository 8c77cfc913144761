"""The page's opening: what moved with the kernel versions and across devices, and the run history table and figure."""
from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ... import escape, fmt
from ...bench_data import rivals, spread
from ...clock_reading import overshoot
from ...figures import PALETTE
from ...runs import Run
from ...tables import table_html
from ...vocab import CLOCK_GAP, EVEN, SPREAD_WORDS, STUDY, clock_caveat, impl_label, join, plural
from .common import CompareSection, known


class History(CompareSection):
    """The opening findings and the history of our kernel against the fastest other implementation, run by run."""

    # The cases the history follows: the headline ones (Home's), fp16 without a mask at the longest N both ran.
    HISTORY_CASES = (("d64", STUDY["batch"], STUDY["heads"], 64), ("d128", 4, 32, 128))
    # What the history keeps of each case, each a column suffix: ours against the fastest other implementation (the
    # ratio, its spread's two ends, N, who it was and its median SM clock), ours' clock, then ours against the yardstick.
    HISTORY_PARTS = ("", "_p10", "_p90", "_n", "_who", "_mhz", "_mhz_ours", "_yard", "_yard_p10", "_yard_p90",
                     "_yard_mhz")

    def _case_rows(self, run: Run, batch: int, heads: int, head_dim: int) -> pd.DataFrame:
        """A run's timed ok rows at one history case's shape, fp16 without a mask."""
        df = run.frame("bench", "rows")
        if df.empty:
            return df
        return df[(df["status"] == "ok") & df["latency_ms_median"].notna() & (df["batch"] == batch)
                  & (df["heads"] == heads) & (df["head_dim"] == head_dim) & (df["dtype"] == "float16")
                  & (df["causal"] == False)]  # noqa: E712

    @staticmethod
    def _versus(other, ours) -> tuple[float, float | None, float | None]:
        """Other's median device time over ours, then the ratio of their p10s and that of their p90s
        (bench_data.spread, the one reading every page gives the calls' spread)."""
        sp = spread(other, ours) or (None, None)
        return float(other["latency_ms_median"] / ours["latency_ms_median"]), *sp

    @staticmethod
    def _clock(row) -> float | None:
        v = row.get("sm_clock_mhz")
        return float(v) if known(v) else None

    def _history_ratio(self, run: Run, batch: int, heads: int, head_dim: int) -> dict | None:
        """HISTORY_PARTS at one shape, fp16 without a mask, at the longest N both ran; None where not."""
        df = self._case_rows(run, batch, heads, head_dim)
        if df.empty:
            return None
        tri, others = df[df["impl"] == "triton"], rivals(df)
        common = sorted(set(tri["seq_len"]) & set(others["seq_len"]))
        if not common:
            return None
        n = common[-1]
        t = tri[tri["seq_len"] == n].iloc[0]
        at = others[others["seq_len"] == n]
        s = at.sort_values("latency_ms_median").iloc[0]
        yard = at[at["impl"] == self.yardstick]
        versus_yard = self._versus(yard.iloc[0], t) if len(yard) else (None, None, None)
        return dict(zip(self.HISTORY_PARTS, (*self._versus(s, t), int(n), str(s["impl"]), self._clock(s),
                                             self._clock(t), *versus_yard,
                                             self._clock(yard.iloc[0]) if len(yard) else None)))

    @cached_property
    def yardstick(self) -> str | None:
        """The one implementation ours is also followed against across the runs: ranked by the fastest other
        implementation alone, the history mixes opponents (FlashAttention-4 where a run installed it, an SDPA
        backend where not) and reads a change of opponent as a change of our kernel. It is the rival every run the
        history shows timed at every history case's longest length (PyTorch's own choice aside, which is whichever
        backend it picked), the quickest of them in the narrated run; None where no rival is in every run. Every run
        of every device, not the narrated device's alone: the table and figure show them all and say "every run"
        (with one H100 run among thirty H200 ones, FlashAttention-4 was the H100's choice and missing from nine H200
        runs)."""
        every, quick = None, {}
        for r in self.runs:
            if not r.has("bench"):
                continue
            for _, b, h, d in self.HISTORY_CASES:
                df = self._case_rows(r, b, h, d)
                tri = set(df[df["impl"] == "triton"]["seq_len"]) if not df.empty else set()
                others = rivals(df) if not df.empty else df
                common = sorted(tri & set(others["seq_len"])) if not df.empty else []
                if not common:
                    continue
                at = others[(others["seq_len"] == common[-1]) & (others["impl"] != "sdpa")]
                every = set(at["impl"]) if every is None else every & set(at["impl"])
                if r is self.run:
                    for impl, ms in zip(at["impl"], at["latency_ms_median"]):
                        quick[impl] = quick.get(impl, 0.0) + ms
        if not every:
            return None
        return min(sorted(every), key=lambda i: quick.get(i, float("inf")))

    @cached_property
    def history(self) -> pd.DataFrame:
        """One row per measured run, oldest first: its device, the kernel version it ran, and ours against the
        fastest other implementation and against the yardstick at each history case, with the clocks each ran at."""
        rows = []
        for r in sorted(self.runs, key=lambda r: r.created):
            row = {"run": r.id, "device": r.device_name, "version": r.kernel_version or "not recorded",
                   "date": r.created.strftime("%Y-%m-%d %H:%M")}
            for key, b, h, d in self.HISTORY_CASES:
                got = (self._history_ratio(r, b, h, d) if r.has("bench") else None) or {}
                row.update({key + p: got.get(p) for p in self.HISTORY_PARTS})
            rows.append(row)
        return pd.DataFrame(rows)

    def _every_run(self) -> str:
        """Who "every run" is where the yardstick is named: the runs with a history case measured, which the
        yardstick is chosen over, naming the rest where the table holds runs without one."""
        f = self.history
        measured = int(f[[k for k, *_ in self.HISTORY_CASES]].notna().any(axis=1).sum()) if not f.empty else 0
        return "every run" if measured == len(f) else "every run with a case measured"

    @staticmethod
    def _clock_mark(r, key: str, col: str) -> str:
        """Where ours and the opponent of column `col` had median SM clock readings more than CLOCK_GAP apart, the cell
        says which was higher, as Home's headline table does (vocab.clock_caveat), so that a ratio between clocks is not
        read as one between kernels without a warning (run h200-20261203i at d=128: ours read 1899 MHz,
        FlashAttention-4 1677)."""
        if not known(r[col]):
            return ""
        # "ours": after "against X", a bare "at a higher clock reading" would read as X's
        words = clock_caveat(r[f"{key}_mhz_ours"], r[f"{col}_mhz"], who="ours")
        return f";{words}" if words else ""

    def _clock_marked(self) -> bool:
        return bool(self._marked_runs)

    @cached_property
    def _marked_runs(self) -> list[str]:
        """The runs with a cell that carries a clock mark (cached: the table's caption and its overshoot clause both
        ask)."""
        f = self.history
        cols = [c for k, *_ in self.HISTORY_CASES for c in ((k, k + "_yard") if self._yard_columns else (k,))]
        return [r["run"] for _, r in f.iterrows()
                if any(self._clock_mark(r, c.removesuffix("_yard"), c) for c in cols)]

    def _marked_overshoot(self) -> str:
        """Where a marked run's clock readings pass its device's maximum: by how much at most, and in which run, so
        that a mark no wider than the rest's own swing is read as such (clock_reading)."""
        by_id, marked = {r.id: r for r in self.runs}, self._marked_runs
        worst = []
        for rid in marked:
            run = by_id[rid]
            rows = run.frame("bench", "rows")
            o = overshoot(rows[rows["status"] == "ok"], run.manifest.device) if not rows.empty else None
            if o:
                worst.append((o[0] / o[1] - 1, rid, len(worst)))
        if not worst:
            return ""
        share, rid, _ = max(worst)
        which = ("both marked runs" if len(worst) == len(marked) == 2 else
                 f"all {len(marked)} marked runs" if len(worst) == len(marked) > 1 else
                 f"{len(worst)} of the {plural(len(marked), 'marked run')}")
        return (f". The clock readings are of the rest before each call, not of the call: in {which} some read "
                f"above the device's reported maximum SM clock, by up to {fmt.pct(100 * share, 2)} (run "
                f"{escape.text(rid)}), so there a gap of that size or less need not be one between the calls' own "
                "clocks")

    @property
    def _yard_columns(self) -> bool:
        """Whether the yardstick gets columns and markers of its own: not where it was the fastest other
        implementation in every run, whose own columns then say the same."""
        if not self.yardstick:
            return False
        f = self.history
        whos = {w for k, *_ in self.HISTORY_CASES for w in f[f"{k}_who"].dropna()} if not f.empty else set()
        return whos != {self.yardstick}

    def _on_device(self) -> pd.DataFrame:
        f = self.history
        return f[f["device"] == self.run.device_name] if not f.empty else f

    def _history_sentence(self, key: str, b: int, h: int, d: int, count: bool = True) -> str:
        """How ours moved from the first kernel version to the last on the narrated run's device, each version's
        range over its runs: against the yardstick (an opponent every run timed), where there is one."""
        col = f"{key}_yard" if self.yardstick else key
        f = self._on_device()
        f = f[f[col].notna()] if not f.empty else f
        versions = list(dict.fromkeys(f["version"])) if not f.empty else []
        if len(versions) < 2:
            return ""
        first, last = f[f["version"] == versions[0]], f[f["version"] == versions[-1]]
        n = int(last[f"{key}_n"].iloc[-1])
        whos = set(f[f"{key}_who"].dropna())
        yard = impl_label(self.yardstick) if self.yardstick else ""
        if not self.yardstick:
            against = "the fastest other implementation's speed"
        elif whos == {self.yardstick}:  # said of the narrated device's runs, which the sentence follows
            here = ("every run" if set(self.history["device"]) == {self.run.device_name}
                    else f"every run on the {escape.text(self.run.device_name)}")
            against = f"the speed of {yard}" + (f", the fastest other implementation in {here}," if count else "")
        else:
            against = f"the speed of {yard}" + (f", which {self._every_run()} timed," if count else "")
        return (f"At d={d} (B={b}, H={h}, N={n}, fp16, non-causal) ours ran at "
                f"{fmt.span(first[col].min(), first[col].max(), fmt.ratio)} {against} with "
                f"{escape.text(versions[0])} and at {fmt.span(last[col].min(), last[col].max(), fmt.ratio)} with "
                f"{escape.text(versions[-1])}" + (f" ({plural(len(versions), 'kernel version')} in all)."
                                                  if count else "."))

    def _opponent_sentences(self) -> list[str]:
        """Where the fastest other implementation changed from run to run: which it was, from which run on, and ours
        against it with the last kernel version. Without this, a run that measured a faster opponent reads as a
        slower kernel."""
        f = self._on_device()
        cases = [c for c in self.HISTORY_CASES if not f.empty and f[c[0]].notna().any()]
        if not cases:
            return []
        whos = list(dict.fromkeys(w for c in cases for w in f[f"{c[0]}_who"].dropna()))
        if len(whos) < 2 and (not self.yardstick or whos == [self.yardstick]):
            return []
        out = []
        if len(whos) > 1:
            parts = []
            for w in whos:
                runs = f[(f[[f"{c[0]}_who" for c in cases]] == w).any(axis=1)]["run"]
                parts.append(f"{impl_label(w)} in {plural(len(runs), 'run')} (the first {escape.text(runs.iloc[0])})")
            out.append("The fastest other implementation changed with what each run could measure: "
                       f"{join(parts)}.")
        last = f[f["version"] == f["version"].iloc[-1]]
        said = [f"{fmt.span(last[k].min(), last[k].max(), fmt.ratio)} at d={d}" for k, _, _, d in cases
                if last[k].notna().any()]
        if said:
            out.append(f"Against the fastest other implementation, ours ran at {join(said)} with "
                       f"{escape.text(last['version'].iloc[-1])}.")
        return out

    def history_table(self) -> str:
        f = self.history
        if f.empty:
            return "No measured run is committed."

        def cell(r, key: str, col: str) -> str:
            if not known(r[col]):
                return "not measured"
            if col != key and r[key + "_who"] == self.yardstick:
                return "as beside: it was the fastest other"  # the same calls: their figures once is enough
            text = fmt.ratio(r[col])
            if known(r[col + "_p10"]) and known(r[col + "_p90"]):
                text += f" (p10s {fmt.ratio(r[col + '_p10'])}, p90s {fmt.ratio(r[col + '_p90'])})"
            text += f", against {impl_label(r[key + '_who'])}" if col == key else ""
            return text + self._clock_mark(r, key, col)

        out = []
        for _, r in f.iterrows():
            row = {"version": r["version"], "run": r["run"] + (" (narrated)" if r["run"] == self.run.id else ""),
                   "device": r["device"], "date": r["date"]}
            for k, *_ in self.HISTORY_CASES:
                row[k] = cell(r, k, k)
                if self._yard_columns:
                    row[k + "_yard"] = cell(r, k, k + "_yard")
            out.append(row)
        cols = {"version": "Kernel version", "run": "Run", "device": "Device", "date": "Collected (UTC)"}
        for k, b, h, d in self.HISTORY_CASES:
            cols[k] = f"Ours vs fastest other, d={d} (B={b}, H={h})"
            if self._yard_columns:
                cols[k + "_yard"] = f"Ours vs {impl_label(self.yardstick)}, d={d}"
        caption = ("Median device time of the other implementation over ours, fp16, non-causal, at the longest N both "
                   f"ran; in brackets {SPREAD_WORDS}, which need not bracket the medians' ratio")
        if self._yard_columns:
            yard, every = impl_label(self.yardstick), self._every_run()
            caption += (f". {every.capitalize()} timed {yard}, the quickest in the narrated run of the opponents "
                        f"{every} timed, so its columns follow our kernel while the fastest other changes; where "
                        f"{yard} was itself the fastest other, its cell points to the one beside")
        if self._clock_marked():
            caption += (f"; at a higher (lower) clock reading: ours had a median SM clock reading more than "
                        f"{fmt.pct(100 * CLOCK_GAP, 0)} above (below) the other's, a lean the verdict may owe to the "
                        "clock; a reading is of the rest before each call, so it does not say by how much (Hardware "
                        f"page; on par: within {fmt.pct(100 * (EVEN - 1), 0)} either way), as on Home")
            caption += self._marked_overshoot()
        return table_html(pd.DataFrame(out), cols, caption=caption)

    # One marker per opponent the fastest other implementation was, so a change of opponent shows as one.
    SYMBOLS = ("circle", "diamond", "square", "triangle-up", "cross", "star")

    def history_figure(self) -> str:
        f = self.history
        f = f[f[[k for k, *_ in self.HISTORY_CASES]].notna().any(axis=1)] if not f.empty else f
        if f.empty:
            return ""
        versions = list(dict.fromkeys(f["version"]))
        whos = list(dict.fromkeys(w for k, *_ in self.HISTORY_CASES for w in f[f"{k}_who"].dropna()))
        # Runs on a GPU other than most runs' are outlined: a version's markers on two GPUs are not run-to-run spread.
        usual = f["device"].mode().iloc[0] if f["device"].nunique() > 1 else None
        fig = go.Figure()
        for j, (key, b, h, d) in enumerate(self.HISTORY_CASES):
            g = f[f[key].notna()]
            if g.empty:
                continue
            # Runs of one version side by side: a small offset each, in order of collection.
            rank = g.groupby("version").cumcount()
            g = g.assign(x=[versions.index(v) + 0.12 * (j - 0.5) + 0.04 * k for v, k in zip(g["version"], rank)])
            series = [(col, w, g[g[f"{key}_who"] == w]) for col, w in ((key, w) for w in whos)]
            if self._yard_columns:  # a ring only where the yardstick was not the filled marker's opponent already
                series.append((f"{key}_yard", None, g[g[f"{key}_yard"].notna() & (g[f"{key}_who"] != self.yardstick)]))
            for col, who, s in series:
                if s.empty:
                    continue
                name = (f"d={d} (B={b}, H={h}), against the fastest other: {impl_label(who)}" if who else
                        f"d={d} (B={b}, H={h}), against {impl_label(self.yardstick)} ({self._every_run()} timed it)")
                marker = (dict(size=9, color=PALETTE[j * 3], symbol=self.SYMBOLS[whos.index(who) % len(self.SYMBOLS)],
                               line=dict(color=PALETTE[7], width=[2 if usual and dv != usual else 0
                                                                  for dv in s["device"]]))
                          if who else dict(size=14, color=PALETTE[j * 3], symbol="circle-open", line=dict(width=1.5)))
                ends = s[[f"{col}_p10", f"{col}_p90"]].astype(float)
                err = dict(type="data", symmetric=False, thickness=1, width=3,
                           array=(ends.max(axis=1) - s[col]).clip(lower=0).fillna(0).tolist(),
                           arrayminus=(s[col] - ends.min(axis=1)).clip(lower=0).fillna(0).tolist())
                opponent = impl_label(who or self.yardstick)
                hover = [escape.plot(f"{r['run']} ({r['device']}), {r['version']}: {fmt.ratio(r[col])} against "
                                     f"{opponent}{self._clock_mark(r, key, col)}") for _, r in s.iterrows()]
                fig.add_trace(go.Scatter(x=s["x"].tolist(), y=s[col].astype(float).tolist(), mode="markers", name=escape.plot(name), error_y=err,
                                         marker=marker, hovertext=hover, hoverinfo="text"))
        fig.add_hline(y=1, line_dash="dash", line_color=PALETTE[7], line_width=1)
        fig.update_xaxes(tickvals=list(range(len(versions))), ticktext=[escape.plot(v) for v in versions],
                         title_text="kernel version, in the order the runs were collected")
        fig.update_yaxes(title_text="other's time over ours (×)")
        yard = (f"; open rings: against {impl_label(self.yardstick)}, which {self._every_run()} timed, where it was "
                "not the fastest other" if self._yard_columns else "")
        # Raw text: figure_html escapes the caption once.
        others = (f"; outlined: runs on another GPU than most runs' ({usual}): "
                  f"{join(sorted(set(f.loc[f['device'] != usual, 'device'])))}" if usual else "")
        return self.figure("history", fig, "Our kernel against the fastest other implementation, one marker per committed "
                                           "run, grouped by the kernel version it ran, its shape telling which "
                                           f"implementation was the fastest other{yard}{others}; bars span {SPREAD_WORDS}; "
                                           "above the dashed line ours is faster. fp16, non-causal, the longest N "
                                           "both ran.", height=420)

    def findings_first(self) -> str:
        """An opening paragraph of three sentences at most, the rest in a second: how ours moved with the kernel
        versions against the yardstick, what the fastest other implementation was, and the devices."""
        out = []
        for c in self.HISTORY_CASES:  # the number of versions is said once
            if sentence := self._history_sentence(*c, count=not out):
                out.append(sentence)
        # After the history, what the fastest other implementation was, then one sentence on the devices (up to three
        # where there is no history). The opening paragraph holds three sentences; the rest follow in a second one.
        said = out + (self._opponent_sentences() if out else []) + self._device_sentences()[:1 if out else 3]
        rest = said[3:]
        first = " ".join(said[:3]) or "No device here has a measured ceiling or a benchmark at the study shape."
        return first + ("\n\n" + " ".join(rest) if rest else "")

    # The most measured figures one sentence carries; devices past them are named in order without figures.
    MOST_FIGURES = 4

    def _device_sentences(self) -> list[str]:
        """Across the devices: how fast each copies memory, and where Triton beats naive PyTorch."""
        out = [self._copy_sentence()]
        wins, total, published = 0, 0, {True: [], False: []}
        for d in self.devices:
            if not d.run.has("bench") or self._bench_series(d, "triton").empty or self._bench_series(d, "naive").empty:
                continue
            tri = self._bench_series(d, "triton").set_index("seq_len")["latency_ms_median"]
            naive = self._bench_series(d, "naive").set_index("seq_len")["latency_ms_median"]
            common = [n for n in tri.index if n in naive.index]
            if not common:
                continue
            win = bool(naive[common[-1]] / tri[common[-1]] >= EVEN)
            if d.published:  # a reference is a write-up's figures, not a run: named apart from the runs
                published[win].append(f"the {escape.text(d.run.device_name)} ({escape.text(d.run.id)})")
            else:
                total += 1
                wins += win
        beats = "At the study shape, our Triton kernel beats naive PyTorch at the longest length both ran"
        where = []
        if total:
            runs = plural(total, "measured run")
            share = (f"all {runs}" if wins == total > 1 else f"none of the {runs}" if not wins and total > 1
                     else f"{wins} of {runs}")
            where.append(f"in {share} with data")
        if published[True]:
            where.append(f"in the published figures for {join(published[True])}")
        lost = f"the published figures for {join(published[False])}" if published[False] else ""
        if where:
            some = bool(wins or published[True])
            out.append(f"{beats} {' and '.join(where)}" + (f"{', but not' if some else ' nor'} in {lost}" if lost else "")
                       + ".")
        elif lost:
            out.append(f"{beats.replace('beats', 'does not beat')} in {lost}.")
        return [x for x in out if x]

    def _copy_sentence(self) -> str:
        """Copy bandwidth by device, fastest first, each device as the range of its runs' medians. Ranking single runs
        ranks one GPU's runs within their own noise (twelve H200 runs lie within 0.1% of one another); an order is
        claimed only where the devices' runs do not overlap, their p10s to p90s taken in."""
        by: dict[str, list] = {}
        for d in self.devices:
            if d.published:
                continue
            for c in d.run.manifest.measured_ceilings:
                if c.name == "copy_bandwidth" and c.status == "ok" and c.per_s_median:
                    by.setdefault(d.run.manifest.device.name, []).append(
                        (c.per_s_median, c.per_s_p10 or c.per_s_median, c.per_s_p90 or c.per_s_median))
        if not by:
            return ""

        def runs(name: str) -> str:
            n = len(by[name])
            return "in its one run" if n == 1 else f"over its {n} runs"

        def at(name: str) -> str:
            meds = [m for m, _, _ in by[name]]
            return fmt.span(min(meds), max(meds), fmt.bandwidth)

        if len(by) == 1:
            name = next(iter(by))
            return f"The {escape.text(name)} copies memory at {at(name)} {runs(name)}."
        order = sorted(by, key=lambda n: -float(np.median([m for m, _, _ in by[n]])))
        parts, figures = [], 0
        for name in order:
            cost = 1 + (" to " in at(name))
            if figures + cost > self.MOST_FIGURES:
                break
            figures += cost
            parts.append(f"the {escape.text(name)} at {at(name)} {runs(name)}")
        rest = [f"the {escape.text(n)}" for n in order[len(parts):]]
        if rest:
            parts.append(f"then {join(rest)}")
        lo = {n: min(p10 for _, p10, _ in by[n]) for n in order}
        hi = {n: max(p90 for _, _, p90 in by[n]) for n in order}
        tied = [f"the {escape.text(a)} and the {escape.text(b)}" for a, b in zip(order, order[1:]) if lo[a] <= hi[b]]
        return (f"Copy bandwidth by device, fastest first: {join(parts)}"
                + (f"; the runs of {join(tied)} overlap, so their order is no ranking" if tied else "") + ".")
