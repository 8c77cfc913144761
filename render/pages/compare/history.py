"""The page's opening: what moved with the kernel versions and across devices, and the run history table and figure."""
from __future__ import annotations

from functools import cached_property

import pandas as pd
import plotly.graph_objects as go

from ... import escape, fmt
from ...bench_data import rivals, spread
from ...figures import PALETTE
from ...runs import Run
from ...tables import table_html
from ...vocab import EVEN, SPREAD_WORDS, STUDY, impl_label, join, plural
from .common import CompareSection, known


class History(CompareSection):
    """The opening findings and the history of our kernel against the fastest other implementation, run by run."""

    # The cases the history follows: the headline ones (Home's), fp16 without a mask at the longest N both ran.
    HISTORY_CASES = (("d64", STUDY["batch"], STUDY["heads"], 64), ("d128", 4, 32, 128))

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

    def _history_ratio(self, run: Run, batch: int, heads: int, head_dim: int):
        """(ours against the fastest other implementation by median device time, the spread's two ends, N,
        the fastest other implementation, and ours against the yardstick with its spread) at one shape, fp16 without
        a mask, at the longest N both ran; None where not."""
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
        return (*self._versus(s, t), int(n), str(s["impl"]), *versus_yard)

    @cached_property
    def yardstick(self) -> str | None:
        """The one implementation ours is also followed against across the runs: ranked by the fastest other
        implementation alone, the history mixes opponents (FlashAttention-4 where a run installed it, an SDPA
        backend where not) and reads a change of opponent as a change of our kernel. It is the rival every run of
        the narrated device timed at every history case's longest length (PyTorch's own choice aside, which is
        whichever backend it picked), the quickest of them in the narrated run; None where no rival is in every run."""
        every, quick = None, {}
        for r in self.runs:
            if r.device_name != self.run.device_name or not r.has("bench"):
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
        fastest other implementation and against the yardstick at each history case."""
        rows = []
        parts = ("", "_p10", "_p90", "_n", "_who", "_yard", "_yard_p10", "_yard_p90")
        for r in sorted(self.runs, key=lambda r: r.created):
            row = {"run": r.id, "device": r.device_name, "version": r.kernel_version or "not recorded",
                   "date": r.created.strftime("%Y-%m-%d %H:%M")}
            for key, b, h, d in self.HISTORY_CASES:
                got = self._history_ratio(r, b, h, d) if r.has("bench") else None
                row.update({key + p: got[i] if got else None for i, p in enumerate(parts)})
            rows.append(row)
        return pd.DataFrame(rows)

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
        elif whos == {self.yardstick}:
            against = f"the speed of {yard}" + (", the fastest other implementation in every run," if count else "")
        else:
            against = f"the speed of {yard}" + (", which every run timed," if count else "")
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

        def cell(r, k: str, who: bool) -> str:
            if not known(r[k]):
                return "not measured"
            text = fmt.ratio(r[k])
            if known(r[k + "_p10"]) and known(r[k + "_p90"]):
                text += f" (p10s {fmt.ratio(r[k + '_p10'])}, p90s {fmt.ratio(r[k + '_p90'])})"
            return text + (f", against {impl_label(r[k + '_who'])}" if who else "")

        out = []
        for _, r in f.iterrows():
            row = {"version": r["version"], "run": r["run"] + (" (narrated)" if r["run"] == self.run.id else ""),
                   "device": r["device"], "date": r["date"]}
            for k, *_ in self.HISTORY_CASES:
                row[k] = cell(r, k, True)
                if self._yard_columns:
                    row[k + "_yard"] = cell(r, k + "_yard", False)
            out.append(row)
        cols = {"version": "Kernel version", "run": "Run", "device": "Device", "date": "Collected (UTC)"}
        for k, b, h, d in self.HISTORY_CASES:
            cols[k] = f"Ours vs fastest other, d={d} (B={b}, H={h})"
            if self._yard_columns:
                cols[k + "_yard"] = f"Ours vs {impl_label(self.yardstick)}, d={d}"
        return table_html(pd.DataFrame(out), cols,
                          caption="Median device time of the other implementation over ours, fp16, non-causal, at the "
                                  f"longest N both ran; in brackets {SPREAD_WORDS}, which need not bracket the medians' "
                                  "ratio"
                                  + (f". Every run timed {impl_label(self.yardstick)} (the quickest of the opponents "
                                     "that every run timed), so its columns follow our kernel alone"
                                     if self._yard_columns else ""))

    # One marker per opponent the fastest other implementation was, so a change of opponent shows as one.
    SYMBOLS = ("circle", "diamond", "square", "triangle-up", "cross", "star")

    def history_figure(self) -> str:
        f = self.history
        f = f[f[[k for k, *_ in self.HISTORY_CASES]].notna().any(axis=1)] if not f.empty else f
        if f.empty:
            return ""
        versions = list(dict.fromkeys(f["version"]))
        whos = list(dict.fromkeys(w for k, *_ in self.HISTORY_CASES for w in f[f"{k}_who"].dropna()))
        fig = go.Figure()
        for j, (key, b, h, d) in enumerate(self.HISTORY_CASES):
            g = f[f[key].notna()]
            if g.empty:
                continue
            # Runs of one version side by side: a small offset each, in order of collection.
            rank = g.groupby("version").cumcount()
            g = g.assign(x=[versions.index(v) + 0.12 * (j - 0.5) + 0.04 * k for v, k in zip(g["version"], rank)])
            series = [(col, w, g[g[f"{key}_who"] == w]) for col, w in ((key, w) for w in whos)]
            if self._yard_columns:
                series.append((f"{key}_yard", None, g[g[f"{key}_yard"].notna()]))
            for col, who, s in series:
                if s.empty:
                    continue
                name = (f"d={d} (B={b}, H={h}), against the fastest other: {impl_label(who)}" if who else
                        f"d={d} (B={b}, H={h}), against {impl_label(self.yardstick)} (every run)")
                marker = (dict(size=9, color=PALETTE[j * 3], symbol=self.SYMBOLS[whos.index(who) % len(self.SYMBOLS)])
                          if who else dict(size=14, color=PALETTE[j * 3], symbol="circle-open", line=dict(width=1.5)))
                ends = s[[f"{col}_p10", f"{col}_p90"]].astype(float)
                err = dict(type="data", symmetric=False, thickness=1, width=3,
                           array=(ends.max(axis=1) - s[col]).clip(lower=0).fillna(0).tolist(),
                           arrayminus=(s[col] - ends.min(axis=1)).clip(lower=0).fillna(0).tolist())
                opponent = impl_label(who or self.yardstick)
                hover = [escape.plot(f"{run} ({dev}), {ver}: {fmt.ratio(v)} against {opponent}") for run, dev, ver, v in
                         zip(s["run"], s["device"], s["version"], s[col])]
                fig.add_trace(go.Scatter(x=s["x"].tolist(), y=s[col].astype(float).tolist(), mode="markers", name=escape.plot(name), error_y=err,
                                         marker=marker, hovertext=hover, hoverinfo="text"))
        fig.add_hline(y=1, line_dash="dash", line_color=PALETTE[7], line_width=1)
        fig.update_xaxes(tickvals=list(range(len(versions))), ticktext=[escape.plot(v) for v in versions],
                         title_text="kernel version, in the order the runs were collected")
        fig.update_yaxes(title_text="other's time over ours (×)")
        yard = (f"; open rings: against {impl_label(self.yardstick)}, which every run timed" if self._yard_columns
                else "")
        return self.figure("history", fig, "Our kernel against the fastest other implementation, one marker per committed "
                                           "run, grouped by the kernel version it ran, its shape telling which "
                                           f"implementation was the fastest other{yard}; bars span {SPREAD_WORDS}; "
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

    def _device_sentences(self) -> list[str]:
        """Across the devices: who streams fastest, and where Triton stands on each."""
        out = []
        measured = [d for d in self.devices if not d.published]
        copies = [(c.per_s_median, d) for d in measured for c in d.run.manifest.measured_ceilings
                  if c.name == "copy_bandwidth" and c.status == "ok" and c.per_s_median]
        if copies:
            best = max(copies, key=lambda x: x[0])
            names = {d.run.manifest.device.name for _, d in copies}
            if len(names) == 1:  # one GPU measured several times: the spread is noise, not a ranking
                lo = min(c for c, _ in copies)
                out.append(f"The {plural(len(copies), 'measured run')} of the {escape.text(next(iter(names)))} copy "
                           f"memory at {fmt.span(lo, best[0], fmt.bandwidth)}.")
            else:
                out.append(f"Of {plural(len(measured), 'measured run')}, {escape.text(best[1].label)} copies memory "
                           f"fastest, at {fmt.bandwidth(best[0])}.")
        wins = total = 0
        for d in self.devices:
            if not d.run.has("bench") or self._bench_series(d, "triton").empty or self._bench_series(d, "naive").empty:
                continue
            tri = self._bench_series(d, "triton").set_index("seq_len")["latency_ms_median"]
            naive = self._bench_series(d, "naive").set_index("seq_len")["latency_ms_median"]
            common = [n for n in tri.index if n in naive.index]
            if common:
                total += 1
                wins += naive[common[-1]] / tri[common[-1]] >= EVEN
        if total:
            out.append(f"At the study shape, our Triton kernel beats naive PyTorch at the longest length both ran in "
                       f"{wins} of {plural(total, 'run')} with data (published figures included).")
        return out
