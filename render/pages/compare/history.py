"""The page's opening: what moved with the kernel versions and across devices, and the run history table and figure."""
from __future__ import annotations

from functools import cached_property

import pandas as pd
import plotly.graph_objects as go

from ... import escape, fmt
from ...bench_data import rivals
from ...figures import PALETTE
from ...runs import Run
from ...tables import table_html
from ...vocab import EVEN, STUDY, impl_label, join, plural
from .common import CompareSection, known


class History(CompareSection):
    """The opening findings and the history of our kernel against the fastest other implementation, run by run."""

    # The cases the history follows: the headline ones (Home's), fp16 without a mask at the longest N both ran.
    HISTORY_CASES = (("d64", STUDY["batch"], STUDY["heads"], 64), ("d128", 4, 32, 128))

    def _history_ratio(self, run: Run, batch: int, heads: int, head_dim: int):
        """(ours against the fastest other implementation by median device time, the lowest and highest ratio the calls'
        p10 and p90 allow, N, the fastest other implementation) at one shape, fp16 without a mask, at the longest N
        both ran; None where not."""
        df = run.frame("bench", "rows")
        if df.empty:
            return None
        df = df[(df["status"] == "ok") & df["latency_ms_median"].notna() & (df["batch"] == batch)
                & (df["heads"] == heads) & (df["head_dim"] == head_dim) & (df["dtype"] == "float16")
                & (df["causal"] == False)]  # noqa: E712
        tri, sdpa = df[df["impl"] == "triton"], rivals(df)
        common = sorted(set(tri["seq_len"]) & set(sdpa["seq_len"]))
        if not common:
            return None
        n = common[-1]
        t = tri[tri["seq_len"] == n].iloc[0]
        s = sdpa[sdpa["seq_len"] == n].sort_values("latency_ms_median").iloc[0]
        lo = s["latency_ms_p10"] / t["latency_ms_p90"] if known(s["latency_ms_p10"]) and known(t["latency_ms_p90"]) else None
        hi = s["latency_ms_p90"] / t["latency_ms_p10"] if known(s["latency_ms_p90"]) and known(t["latency_ms_p10"]) else None
        return float(s["latency_ms_median"] / t["latency_ms_median"]), lo, hi, int(n), str(s["impl"])

    @cached_property
    def history(self) -> pd.DataFrame:
        """One row per measured run, oldest first: its device, the kernel version it ran, and ours against the
        fastest other implementation at each history case."""
        rows = []
        for r in sorted(self.runs, key=lambda r: r.created):
            row = {"run": r.id, "device": r.device_name, "version": r.kernel_version or "not recorded",
                   "date": r.created.strftime("%Y-%m-%d %H:%M")}
            for key, b, h, d in self.HISTORY_CASES:
                got = self._history_ratio(r, b, h, d) if r.has("bench") else None
                row.update({key: got[0] if got else None, f"{key}_lo": got[1] if got else None,
                            f"{key}_hi": got[2] if got else None, f"{key}_n": got[3] if got else None,
                            f"{key}_who": got[4] if got else None})
            rows.append(row)
        return pd.DataFrame(rows)

    def _history_sentence(self, key: str, b: int, h: int, d: int, count: bool = True) -> str:
        """How ours against the fastest other implementation moved from the first kernel version to the last on the narrated
        run's device, each version's range over its runs."""
        f = self.history
        f = f[(f["device"] == self.run.device_name) & f[key].notna()] if not f.empty else f
        versions = list(dict.fromkeys(f["version"])) if not f.empty else []
        if len(versions) < 2:
            return ""
        first, last = f[f["version"] == versions[0]], f[f["version"] == versions[-1]]
        n = int(f[f["version"] == versions[-1]][f"{key}_n"].iloc[-1])
        # The rival changes where a run measured one the others did not (FlashAttention-4): say against whom.
        who = last[f"{key}_who"].dropna()
        against = ""
        if who.nunique() > 1:
            groups = {w: list(last[last[f"{key}_who"] == w]["run"]) for w in dict.fromkeys(who)}
            against = ", against " + join([f"{impl_label(w)} in " + (join(escape.text(r) for r in rs) if len(rs) <= 2
                                                                      else plural(len(rs), "run"))
                                           for w, rs in groups.items()])
        return (f"At d={d} (B={b}, H={h}, N={n}, fp16, non-causal) ours ran at "
                f"{fmt.span(first[key].min(), first[key].max(), fmt.ratio)} the fastest other implementation's speed with "
                f"{escape.text(versions[0])} and at {fmt.span(last[key].min(), last[key].max(), fmt.ratio)} with "
                f"{escape.text(versions[-1])}{against}" + (f" ({plural(len(versions), 'kernel version')} in all)."
                                                           if count else "."))

    def history_table(self) -> str:
        f = self.history
        if f.empty:
            return "No measured run is committed."
        opt = lambda k: (lambda r: "not measured" if not known(r[k]) else  # noqa: E731
                         fmt.ratio(r[k]) + (f" ({fmt.span(r[k + '_lo'], r[k + '_hi'], fmt.ratio)})"
                                            if known(r[k + "_lo"]) and known(r[k + "_hi"]) else "")
                         + f", against {impl_label(r[k + '_who'])}")
        out = [{"version": r["version"], "run": r["run"] + (" (narrated)" if r["run"] == self.run.id else ""),
                "device": r["device"], "date": r["date"], **{k: opt(k)(r) for k, *_ in self.HISTORY_CASES}}
               for _, r in f.iterrows()]
        cols = {"version": "Kernel version", "run": "Run", "device": "Device", "date": "Collected (UTC)"}
        cols.update({k: f"Ours vs fastest other, d={d} (B={b}, H={h})" for k, b, h, d in self.HISTORY_CASES})
        return table_html(pd.DataFrame(out), cols,
                          caption="Median device time of the fastest other implementation over ours, fp16, non-causal, at the "
                                  "longest N both ran; in brackets the range the two calls' p10 and p90 allow")

    def history_figure(self) -> str:
        f = self.history
        f = f[f[[k for k, *_ in self.HISTORY_CASES]].notna().any(axis=1)] if not f.empty else f
        if f.empty:
            return ""
        versions = list(dict.fromkeys(f["version"]))
        fig = go.Figure()
        for j, (key, b, h, d) in enumerate(self.HISTORY_CASES):
            g = f[f[key].notna()]
            if g.empty:
                continue
            # Runs of one version side by side: a small offset each, in order of collection.
            rank = g.groupby("version").cumcount()
            x = [versions.index(v) + 0.12 * (j - 0.5) + 0.04 * k for v, k in zip(g["version"], rank)]
            err = dict(type="data", symmetric=False, thickness=1, width=3,
                       array=(g[f"{key}_hi"] - g[key]).fillna(0).tolist(),
                       arrayminus=(g[key] - g[f"{key}_lo"]).fillna(0).tolist())
            hover = [escape.plot(f"{run} ({dev}), {ver}: {fmt.ratio(v)}") for run, dev, ver, v in
                     zip(g["run"], g["device"], g["version"], g[key])]
            fig.add_trace(go.Scatter(x=x, y=g[key], mode="markers", name=f"d={d} (B={b}, H={h})", error_y=err,
                                     marker=dict(size=9, color=PALETTE[j * 3]), hovertext=hover, hoverinfo="text"))
        fig.add_hline(y=1, line_dash="dash", line_color=PALETTE[7], line_width=1)
        fig.update_xaxes(tickvals=list(range(len(versions))), ticktext=[escape.plot(v) for v in versions],
                         title_text="kernel version, in the order the runs were collected")
        fig.update_yaxes(title_text="ours vs fastest other (×)")
        return self.figure("history", fig, "Our kernel against the fastest other implementation, one marker per committed run, "
                                           "grouped by the kernel version it ran; bars span the ratio the two calls' "
                                           "p10 and p90 allow; above the dashed line ours is faster. fp16, "
                                           "non-causal, the longest N both ran.", height=380)

    def findings_first(self) -> str:
        """At most three sentences: how ours against SDPA moved with the kernel versions, and the devices."""
        out = []
        for c in self.HISTORY_CASES:  # the number of versions is said once
            if sentence := self._history_sentence(*c, count=not out):
                out.append(sentence)
        out += self._device_sentences()
        return " ".join(out[:3]) or "No device here has a measured ceiling or a benchmark at the study shape."

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
