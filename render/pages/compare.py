"""Device comparison: every run in data/runs and every published reference in data/reference, with
the same charts overlaid per device.

References are figures transcribed from a write-up, not re-measured here. They are drawn grey,
dashed and with open markers, and the legend, every caption and a banner say they are published.
Line charts carry a device selector. Past MAX_SHOWN devices, only the narrated run, the references
and the newest runs are drawn at first, so the page stays readable as runs accumulate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from .. import escape, fmt
from ..axes import log_ticks
from ..bench_data import rivals
from ..decode_memory import memory_is_own, own_decode_rows
from ..figures import PALETTE, figure_id, styled
from ..run_diff import diff_runs, predecessor
from ..runs import Run, load_references
from ..tables import table_html
from collect.schema import PHASES

from ..vocab import DECODE_VARIANTS, EVEN, STUDY, decode_float, decode_words, join, plural, speedup_words
from .base import Page

# Bench and profile charts compare devices at the published study's shape (vocab.STUDY), and only at it.
PROFILE_N = 2048
MAX_SHOWN = 6
MEASURED_COLORS = [PALETTE[i] for i in (0, 3, 2, 1, 4, 5, 6)]
PUBLISHED_COLOR = PALETTE[7]
PUBLISHED_DASHES = ["dash", "dot", "dashdot", "longdash"]
PUBLISHED_WORDS = "published, not re-measured here"
BENCH_PANELS = [("naive", "naive PyTorch"), ("triton", "Triton (ours)"), ("sdpa-fastest", "fastest other implementation")]
INT8_VARIANTS = ("int8-dequant", "int8-graph", "int8-kernel")
# The diff chart: one colour per verdict (collect/schema/diff.py VERDICTS), drawn in this order.
VERDICT_COLORS = {"faster": PALETTE[2], "slower": PALETTE[3], "no change": PALETTE[7], "ratio only": PALETTE[0]}
# The cases the diff's sentence names: the ones that changed most, either way.
DIFF_NAMED = 3


def _ok(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _short(n: int) -> str:
    """Tick text for a power-of-two-ish length: 8192 -> '8k', 1000 -> '1000'."""
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def _esc(text) -> str:
    """A data string for Plotly text (legend, hover, selector); Markdown and HTML get escape.text."""
    return escape.plot(text)


@dataclass
class Device:
    """One column of the comparison: a measured run or a published reference, and how it is drawn."""

    run: Run
    published: bool
    label: str
    color: str
    dash: str

    @property
    def name(self) -> str:
        return _esc(self.label)

    def marker(self, size: int = 8) -> dict:
        if self.published:
            return dict(size=size, symbol="circle-open", color=self.color, line=dict(width=2, color=self.color))
        return dict(size=size, color=self.color)


class ComparePage(Page):
    slug = "compare"
    phase = "env"

    def __init__(self, run: Run, runs: list[Run], references: list[Run] | None = None):
        super().__init__(run, runs)
        self._references = references

    # --- who is compared ---------------------------------------------------------------------

    @cached_property
    def references(self) -> list[Run]:
        """Published figures beside data/runs (runs live in <data>/runs/<id>); loaded only when asked."""
        if self._references is not None:
            return self._references
        return load_references(self.run.path.parent.parent)

    @cached_property
    def devices(self) -> list[Device]:
        out = []
        for i, r in enumerate(self.runs):
            out.append(Device(r, False, f"{r.device_name} ({r.id})", MEASURED_COLORS[i % len(MEASURED_COLORS)], "solid"))
        names = [r.device_name for r in self.references]
        for i, r in enumerate(self.references):
            tag = f" ({r.id})" if names.count(r.device_name) > 1 else ""
            out.append(Device(r, True, f"{r.device_name}{tag}: {PUBLISHED_WORDS}", PUBLISHED_COLOR,
                              PUBLISHED_DASHES[i % len(PUBLISHED_DASHES)]))
        return out

    @cached_property
    def shown(self) -> set[int]:
        """Devices drawn at first: all of them up to MAX_SHOWN, else the narrated run, references, newest runs."""
        idx = list(range(len(self.devices)))
        if len(idx) <= MAX_SHOWN:
            return set(idx)
        keep = {i for i, d in enumerate(self.devices) if d.published or d.run is self.run}
        for i in reversed([i for i, d in enumerate(self.devices) if not d.published]):
            if len(keep) >= MAX_SHOWN:
                break
            keep.add(i)
        return keep

    def _memo(self, key: tuple, make):
        """Per-page cache of frames and filters: each chart asks for the same device's rows several times."""
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            cache[key] = make()
        return cache[key]

    def _frames(self, dev: Device, phase: str, table: str) -> pd.DataFrame:
        return self._memo((id(dev.run), phase, table), lambda: dev.run.frame(phase, table))

    def conditions(self) -> str:
        runs = [f"{r.id} ({r.device_name})" for r in self.runs]
        if len(runs) > 6:
            runs = runs[:2] + [f"{len(runs) - 4} more"] + runs[-2:]
        text = f"Measured runs: {', '.join(runs)}"
        if self.references:
            text += (f"; {PUBLISHED_WORDS}: " + ", ".join(f"{r.id} ({r.device_name})" for r in self.references)
                     + " (lines grey and dashed with open markers, bars cross-hatched)")
        return text

    # --- before and after: the narrated run against the run of the previous kernel version ------

    @cached_property
    def before(self) -> Run | None:
        return predecessor(self.run, self.runs)

    @cached_property
    def diff(self):
        return diff_runs(self.before, self.run, self.run.path.parent.parent) if self.before else None

    def _changed(self) -> list:
        d = self.diff
        return sorted((c for c in d.cases if c.verdict in ("faster", "slower")), key=lambda c: -abs(math.log(c.ratio)))

    def diff_summary(self) -> str:
        """What changed between the previous kernel version's run and this one, in sentences from the diff."""
        d, before = self.diff, self.before
        if d is None:
            return (f"No earlier run shipped another version of our kernel than `{escape.text(self.run.id)}`, so "
                    "there is no before to compare with yet.")
        a, b = escape.text(before.id), escape.text(self.run.id)
        va, vb = escape.text(d.kernel_version_a), escape.text(d.kernel_version_b)
        out = [f"The narrated run `{b}` ships kernel version `{vb}`; the newest earlier run with another version is "
               f"`{a}` (`{va}`)."]
        if not d.same_device:
            out.append(f"It ran on {escape.text(d.device_a)}, this run on {escape.text(d.device_b)}: the ratios below "
                       "compare two GPUs, not a change of code, so no case is called faster or slower.")
        elif not d.cases:
            out.append("The two runs share no case measured in both.")
        else:
            n = {v: sum(c.verdict == v for c in d.cases) or "none" for v in ("faster", "slower", "no change")}
            out.append(f"Of the {plural(len(d.cases), 'case')} both measured, {n['faster']} ran faster in `{b}`, "
                       f"{n['slower']} slower, and {n['no change']} showed no change beyond the noise.")
            top = self._changed()[:DIFF_NAMED]
            if top:
                named = join([f"{escape.text(c.label)} ({fmt.ratio(c.ratio)} the time)" for c in top])
                out.append(f"The {'case' if len(top) == 1 else 'cases'} that changed most: {named}.")
        only = len(d.only_a) + len(d.only_b)
        if only:
            out.append(f"{plural(only, 'case')} measured in one of the two runs only "
                       f"{'is' if only == 1 else 'are'} left out.")
        return " ".join(out) + "\n" + "".join(escape.note(x) for x in d.notes)

    def diff_figure(self) -> str:
        d = self.diff
        if d is None or not d.cases:
            return ""
        rows = sorted(d.cases, key=lambda c: c.ratio)
        fig = go.Figure()
        for verdict, color in VERDICT_COLORS.items():
            idx = [i for i, c in enumerate(rows) if c.verdict == verdict]
            if not idx:
                continue
            cs = [rows[i] for i in idx]
            has = [c.ratio_low is not None for c in cs]
            fig.add_trace(go.Scatter(
                x=[i + 1 for i in idx], y=[c.ratio for c in cs], mode="markers", name=verdict,
                marker=dict(color=color, size=6),
                error_y=dict(type="data", symmetric=False, color=color, thickness=1, width=0,
                             array=[c.ratio_high - c.ratio if h else 0 for c, h in zip(cs, has)],
                             arrayminus=[c.ratio - c.ratio_low if h else 0 for c, h in zip(cs, has)]),
                text=[_esc(c.label) for c in cs],
                customdata=[[f"[{c.ratio_low:.3f}, {c.ratio_high:.3f}]" if h else "no interval (no samples)",
                             f"{c.floor:.3f} ({c.floor_source})"] for c, h in zip(cs, has)],
                hovertemplate="%{text}<br>ratio %{y:.3f}, interval %{customdata[0]}<br>noise floor "
                              "%{customdata[1]}<extra>%{fullData.name}</extra>"))
        fig.add_hline(y=1.0, line=dict(color="grey", width=1, dash="dot"))
        floors = {c.floor for c in rows}
        if len(floors) == 1 and d.same_device:
            f = floors.pop()
            fig.add_hrect(y0=1 / f, y1=f, fillcolor="grey", opacity=0.12, line_width=0)
        fig.update_xaxes(title_text="case, sorted by ratio")
        fig.update_yaxes(title_text=f"time in {_esc(d.run_b)} / time in {_esc(d.run_a)} (below 1: faster)", type="log")
        band = (" The grey band is the noise floor every case was held to." if len(
            {c.floor for c in rows}) == 1 and d.same_device else "")
        return self.figure("diff", fig, f"Each case both runs measured: the median time in {d.run_b} over the median "
                           f"time in {d.run_a}, sorted, with its {d.confidence:.0%} bootstrap interval where both runs "
                           f"kept their samples, coloured by verdict.{band} Runs {d.run_a} ({d.device_a}) and "
                           f"{d.run_b} ({d.device_b})", height=460)

    # --- banner and summary ------------------------------------------------------------------

    def banner(self) -> str:
        """What is being compared, and a loud note on every published reference."""
        n_dev = len({r.device_name for r in self.runs})
        out = [f"This page compares {len(self.runs)} measured run{'s' if len(self.runs) != 1 else ''} "
               f"on {n_dev} device{'s' if n_dev != 1 else ''}"
               + (f" with {len(self.references)} set{'s' if len(self.references) != 1 else ''} of published figures."
                  if self.references else ". No published figures are in `data/reference/`.")]
        if len(self.devices) > MAX_SHOWN:
            out.append(f"With {len(self.devices)} series to draw (one per run and per set of published figures), "
                       f"the line charts first draw "
                       f"{len(self.shown)} of them: the narrated run `{self.run.id}`, the published figures and the "
                       "newest runs. Use the selector above each chart, or click a legend entry, to show the others.")
        elif len(self.devices) > 1:
            out.append("The selector above each line chart shows one device at a time; clicking a legend entry hides "
                       "or shows that device.")
        for r in self.references:
            notes = [*r.manifest.notes]
            for phase in ("bench", "profile", "decode"):
                obj = r.phase(phase)
                notes += [f"{phase}: {n}" for n in getattr(obj, "notes", None) or []]
            body = "\n".join(f"        - {escape.text(n)}" for n in notes)
            out.append(
                f'!!! warning "{escape.text(r.device_name)}: published figures, not re-measured here"\n'
                f"    These figures come from {escape.text(r.manifest.citation)}. They were copied into "
                f"{escape.code(f'data/reference/{r.id}/')}, not measured by this project, under that write-up's own conditions "
                "(clocks, software, timing method). Wherever they appear, the legend says *published* and they are "
                "drawn grey and dashed with open markers in line charts and cross-hatched in bar charts.\n\n"
                f'    ??? note "What the transcription assumed where the write-up is silent"\n{body}\n')
        return "\n\n".join(out) + "\n"

    # --- the run history ----------------------------------------------------------------------

    # The cases the history follows: the headline ones (Home's), fp16 without a mask at the longest N both ran.
    HISTORY_CASES = (("d64", STUDY["batch"], STUDY["heads"], 64), ("d128", 4, 32, 128))

    def _history_ratio(self, run: Run, batch: int, heads: int, head_dim: int):
        """(ours against the fastest other implementation by median device time, the lowest and highest ratio the calls'
        p10 and p90 allow, N) at one shape, fp16 without a mask, at the longest N both ran; None where not."""
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
        lo = s["latency_ms_p10"] / t["latency_ms_p90"] if _ok(s["latency_ms_p10"]) and _ok(t["latency_ms_p90"]) else None
        hi = s["latency_ms_p90"] / t["latency_ms_p10"] if _ok(s["latency_ms_p90"]) and _ok(t["latency_ms_p10"]) else None
        return float(s["latency_ms_median"] / t["latency_ms_median"]), lo, hi, int(n)

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
                            f"{key}_hi": got[2] if got else None, f"{key}_n": got[3] if got else None})
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
        return (f"At d={d} (B={b}, H={h}, N={n}, fp16, non-causal) ours ran at "
                f"{fmt.span(first[key].min(), first[key].max(), fmt.ratio)} the fastest other implementation's speed with "
                f"{escape.text(versions[0])} and at {fmt.span(last[key].min(), last[key].max(), fmt.ratio)} with "
                f"{escape.text(versions[-1])}" + (f" ({plural(len(versions), 'kernel version')} in all)." if count
                                                    else "."))

    def history_table(self) -> str:
        f = self.history
        if f.empty:
            return "No measured run is committed."
        opt = lambda k: (lambda r: "not measured" if not _ok(r[k]) else  # noqa: E731
                         fmt.ratio(r[k]) + (f" ({fmt.span(r[k + '_lo'], r[k + '_hi'], fmt.ratio)})"
                                            if _ok(r[k + "_lo"]) and _ok(r[k + "_hi"]) else ""))
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
            hover = [_esc(f"{run} ({dev}), {ver}: {fmt.ratio(v)}") for run, dev, ver, v in
                     zip(g["run"], g["device"], g["version"], g[key])]
            fig.add_trace(go.Scatter(x=x, y=g[key], mode="markers", name=f"d={d} (B={b}, H={h})", error_y=err,
                                     marker=dict(size=9, color=PALETTE[j * 3]), hovertext=hover, hoverinfo="text"))
        fig.add_hline(y=1, line_dash="dash", line_color=PALETTE[7], line_width=1)
        fig.update_xaxes(tickvals=list(range(len(versions))), ticktext=[_esc(v) for v in versions],
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

    def _bench_ok(self, dev: Device) -> pd.DataFrame:
        return self._memo((id(dev.run), "bench-ok"), lambda: self._study_rows(dev))

    def _study_rows(self, dev: Device) -> pd.DataFrame:
        df = self._frames(dev, "bench", "rows")
        if df.empty:
            return df
        m = (df["status"] == "ok") & df["latency_ms_median"].notna()
        for k, v in STUDY.items():
            m &= df[k] == v
        return df[m]

    def _bench_series(self, dev: Device, panel: str) -> pd.DataFrame:
        """Rows for one panel by seq_len; 'sdpa-fastest' is the quickest rival's row at each length (vocab.is_rival)."""
        return self._memo((id(dev.run), "bench", panel), lambda: self._panel_rows(dev, panel))

    def _panel_rows(self, dev: Device, panel: str) -> pd.DataFrame:
        df = self._bench_ok(dev)
        if df.empty:
            return df
        if panel == "sdpa-fastest":
            df = rivals(df)  # PyTorch's choice counted once, as the Benchmarks page counts it
            if df.empty:
                return df
            df = df.loc[df.groupby("seq_len")["latency_ms_median"].idxmin()]
        else:
            df = df[df["impl"] == panel]
        return df.sort_values("seq_len")

    def _speedups(self, dev: Device) -> tuple[str, str]:
        """Triton against naive and against the fastest other, each at the longest N both ran."""
        tri = self._bench_series(dev, "triton").set_index("seq_len")["latency_ms_median"]
        out = []
        for panel in ("naive", "sdpa-fastest"):
            other = self._bench_series(dev, panel).set_index("seq_len")["latency_ms_median"]
            common = [n for n in tri.index if n in other.index]
            out.append(f"{speedup_words(other[common[-1]] / tri[common[-1]])} (N={common[-1]})" if common else "n/a")
        return out[0], out[1]

    def summary_table(self) -> str:
        rows = []
        for d in self.devices:
            r = d.run
            copy = next((c.per_s_median for c in r.manifest.measured_ceilings
                         if c.name == "copy_bandwidth" and c.status == "ok"), None)
            sheet = r.manifest.datasheet
            vs_naive, vs_sdpa = self._speedups(d) if r.has("bench") else ("not collected", "not collected")
            phases = [p.name + (" (partial)" if r.phase_state(p.name) == "partial" else "") for p in PHASES
                      if (r.has(p.name) if p.name != "env" else
                          getattr(r.phase_record("env"), "status", None) == "complete")]
            rows.append({"device": r.device_name, "source": f"published: {r.id}" if d.published else f"run {r.id}",
                         "profile": r.manifest.profile, "phases": ", ".join(phases) or "none",
                         "copy": fmt.bandwidth(copy) if copy else "not measured",
                         "sheet": fmt.bandwidth(sheet.memory_bandwidth_bytes_per_s) if sheet else "not in the table",
                         "vs_naive": vs_naive, "vs_sdpa": vs_sdpa})
        return table_html(pd.DataFrame(rows), {
            "device": "Device", "source": "Source", "profile": "Profile", "phases": "Phases",
            "copy": "Copy bandwidth (measured)", "sheet": "DRAM bandwidth (datasheet)",
            "vs_naive": "Triton vs naive", "vs_sdpa": "Triton vs fastest other"},
            caption=f"Triton's standing at the study shape (B={STUDY['batch']}, H={STUDY['heads']}, "
                    f"d={STUDY['head_dim']}, fp16, non-causal), at the longest N both ran.")

    # --- line charts with a device selector --------------------------------------------------

    def _selector(self, owners: list[int | None]) -> list[dict]:
        present = list(dict.fromkeys(o for o in owners if o is not None))
        if len(present) < 2:
            return []
        refs = {i for i in present if self.devices[i].published}

        def vis(keep: set[int]) -> list:
            return [True if o is None or o in keep else "legendonly" for o in owners]

        buttons = [dict(label="Devices drawn first", method="restyle", args=[{"visible": vis(self.shown)}]),
                   dict(label="All devices", method="restyle", args=[{"visible": vis(set(present))}])]
        for i in present:
            d = self.devices[i]
            keep = {i} | (refs if not d.published else set())
            extra = " and published figures" if keep != {i} else ""
            buttons.append(dict(label=_esc(d.label + extra), method="restyle", args=[{"visible": vis(keep)}]))
        return [dict(type="dropdown", buttons=buttons, active=0, showactive=True, direction="down", pad=dict(b=6),
                     bgcolor="rgba(127,127,127,0.12)", bordercolor="rgba(127,127,127,0.5)", font=dict(size=12))]

    def _line_figure(self, name: str, panels: list[tuple[str, str]], series, x: str, y: str, xtitle: str,
                     ytitle: str, hover: str, caption: str, ylog: bool = True, xlog: bool = True,
                     scale: float = 1.0) -> str:
        """One panel per entry of `panels`, one line per device; series(dev, key) -> rows or None."""
        cols = min(3, len(panels))
        nrows = -(-len(panels) // cols)
        # One y scale for every panel, so panels compare with each other as well as devices within a panel.
        fig = make_subplots(rows=nrows, cols=cols, subplot_titles=[t for _, t in panels], shared_yaxes="all",
                            horizontal_spacing=0.04, vertical_spacing=0.16)
        # Plain trace dicts, checked by plotly once as a whole figure would be too slow at 20 runs x 5 panels.
        traces, owners, missing, legend_done, xs, ys = [], [], [], set(), set(), []
        for i, d in enumerate(self.devices):
            drew = False
            for j, (key, _) in enumerate(panels):
                g = series(d, key)
                if g is None or g.empty:
                    continue
                g = g[g[y].notna()]
                if g.empty:
                    continue
                axis = "" if j == 0 else str(j + 1)  # make_subplots numbers a plain grid's axes row by row
                hover_rows = list(g["hover"]) if "hover" in g else [""] * len(g)
                traces.append(dict(
                    type="scatter", x=[int(v) for v in g[x]], y=[float(v) * scale for v in g[y]], xaxis=f"x{axis}",
                    yaxis=f"y{axis}", mode="lines+markers", name=d.name, legendgroup=f"d{i}",
                    showlegend=i not in legend_done, visible=True if i in self.shown else "legendonly",
                    line=dict(color=d.color, dash=d.dash, width=2), marker=d.marker(),
                    customdata=[_esc(h) for h in hover_rows],
                    hovertemplate=f"<b>{d.name}</b><br>{hover}%{{customdata}}<extra></extra>"))
                legend_done.add(i)
                owners.append(i)
                xs |= set(int(v) for v in g[x])
                ys += [float(v) * scale for v in g[y] if v and v > 0]
                drew = True
            if not drew:
                missing.append(d.label)
        if not owners:
            return f"_No device has data for this chart ({escape.text(caption.split('.')[0].lower())})._\n"
        ticks = dict(tickvals=sorted(xs), ticktext=[_short(v) for v in sorted(xs)]) if len(xs) <= 8 else {}
        # Every tick written out in full: Plotly's own log ticks label 2 and 5 inside a decade with the bare digit.
        decades = log_ticks(ys) if ylog else {}
        for j in range(len(panels)):
            r, c = j // cols + 1, j % cols + 1
            fig.update_xaxes(type="log" if xlog else "linear", title_text=xtitle if r == nrows else None, row=r, col=c,
                             **ticks)
            fig.update_yaxes(type="log" if ylog else "linear", title_text=ytitle if c == 1 else None, row=r, col=c,
                             **decades)
        legend_rows = -(-len(legend_done) // 2)
        top, bottom = 84, 70 + 24 * legend_rows
        height = 300 * nrows + top + bottom
        plot_h = height - top - bottom
        menus = self._selector(owners)
        for m in menus:  # in the top margin, above the panel titles
            m.update(x=0, xanchor="left", y=1 + (top - 4) / plot_h, yanchor="top")
        layout = dict(margin=dict(t=top, b=bottom),
                      legend=dict(orientation="h", xref="container", yref="container", x=0.01, xanchor="left",
                                  y=0.01, yanchor="bottom", groupclick="togglegroup"))
        html_out = self._render(name, fig, caption, height, layout, traces, menus)
        if missing:
            html_out += f"\n_Not in this chart (no data for it): {escape.text('; '.join(missing))}._\n"
        return html_out

    def _render(self, name: str, fig: go.Figure, caption: str, height: int, layout: dict,
                traces: list[dict] | None = None, menus: list[dict] | None = None) -> str:
        """Like Page.figure, with layout that must win over the shared style (legend below, selector above),
        and traces and selector menus as plain dicts (validating hundreds of them is what made 20 runs slow)."""
        styled(fig, height)
        fig.update_layout(**layout)
        spec = fig.to_dict()
        spec["data"] = list(spec.get("data", [])) + list(traces or [])
        if menus:
            spec["layout"]["updatemenus"] = menus
        fid = figure_id(self.slug, name)
        body = pio.to_html(spec, full_html=False, include_plotlyjs=False, div_id=fid, validate=False,
                           config={"displaylogo": False, "responsive": True})
        return (f'\n<figure class="report-figure" id="{fid}-figure">\n{body}\n'
                f"<figcaption>{escape.text(f'{caption} {self.conditions()}.')}</figcaption>\n</figure>\n")

    def bench_figure(self, metric: str = "tflops") -> str:
        """TFLOP/s, latency or peak memory against N per implementation, one line per device."""
        spec = {
            "tflops": ("tflops", "TFLOP/s", "%{y:.3g} TFLOP/s", 1.0,
                       "Throughput against sequence length: 4·B·H·N²·d FLOP per call over the median latency"),
            "latency": ("latency_ms_median", "latency (ms)", "%{y:.3g} ms (median)", 1.0,
                        "Median forward latency against sequence length"),
            "memory": ("peak_mem_bytes", "peak memory (MiB)", "%{y:.4g} MiB", 1 / 2**20,
                       "Peak memory of one forward call against sequence length; measured runs count it above the "
                       "inputs, and the published figures may include them (see the note above)"),
        }
        if metric not in spec:
            raise ValueError(f"metric must be one of {', '.join(spec)}, got {metric!r}")
        column, ytitle, fmt_hover, scale, what = spec[metric]

        def series(d: Device, key: str):
            g = self._bench_series(d, key)
            if g.empty:
                return g
            return g.assign(hover=[f" ({i}, backend {b})" if str(i).startswith("sdpa") and b else
                                   (f" ({i})" if str(i).startswith("sdpa") else "")
                                   for i, b in zip(g["impl"], g["backend_used"])])

        s = STUDY
        return self._line_figure(
            f"bench-{metric}", BENCH_PANELS, series, "seq_len", column, "seq_len N", ytitle,
            f"N=%{{x}}<br>{fmt_hover}", f"{what}, log-log, at the study shape B={s['batch']}, H={s['heads']}, "
                                       f"d={s['head_dim']}, fp16, non-causal; the third panel takes the quickest other "
                                       "implementation at each N (hover to see which).", scale=scale)

    def _decode_rows(self, dev: Device) -> pd.DataFrame:
        return self._memo((id(dev.run), "decode-rows"), lambda: self._model_rows(dev))

    def _model_rows(self, dev: Device) -> pd.DataFrame:
        """ok decode rows of the one model every device has run: gpt2 where present, its memory figures
        its own loops' where the run says what the other models held (render/decode_memory.py)."""
        df, _ = own_decode_rows(dev.run)
        if df.empty:
            return df
        df = df[(df["status"] == "ok")]
        models = list(dict.fromkeys(df["model"]))
        if not models:
            return df
        model = "gpt2" if "gpt2" in models else models[0]
        return df[df["model"] == model]

    def _sweep_batch(self, df: pd.DataFrame) -> int | None:
        f = df[df["step_ms_median"].notna()]
        if f.empty:
            return None
        counts = f.groupby("batch")["context"].nunique().sort_values(kind="stable", ascending=False)
        return int(counts.index[0])

    def decode_figure(self) -> str:
        present = set()
        for d in self.devices:
            df = self._decode_rows(d)
            if not df.empty:
                present |= set(df[df["step_ms_median"].notna()]["variant"])
        # The cache's float type as each run's decode.json names it (fp16 on a T4), once per type compared.
        f = " or ".join(dict.fromkeys(decode_float(d.run.phase("decode").dtype) for d in self.devices
                                   if not self._decode_rows(d).empty))
        panels = [(v, decode_words(v, "panel", f)) for v in DECODE_VARIANTS
                  if v in present and decode_words(v, "panel") is not None]
        if not panels:
            return "_No device has decode step times._\n"

        def sweep(d: Device) -> dict:
            df = self._decode_rows(d)
            if df.empty:
                return {}
            b = self._sweep_batch(df)
            g = df[(df["batch"] == b) & df["step_ms_median"].notna()].sort_values("context")
            g = g.assign(hover=[f"<br>{m}, batch {b}" for m in g["model"]])
            return {v: rows.drop_duplicates("context") for v, rows in g.groupby("variant")}

        def series(d: Device, variant: str):
            return self._memo((id(d.run), "decode-sweep"), lambda: sweep(d)).get(variant)

        return self._line_figure(
            "decode-step", panels, series, "context", "step_ms_median", "context (prompt tokens)", "step time (ms)",
            "context %{x}<br>%{y:.3g} ms per step", "Median time of one decode step against context, log-log, per "
            "decode variant, at each device's sweep batch (hover for the model and batch).", xlog=True)

    # --- bar charts, one bar group per device ------------------------------------------------

    def _bars(self, name: str, fig: go.Figure, caption: str, n_devices: int, n_series: int) -> str:
        """Horizontal grouped bars, one group per device (first on top), legend below the plot."""
        fig.update_layout(barmode="group", bargap=0.25)
        fig.update_yaxes(autorange="reversed")
        legend_rows = -(-n_series // 2)
        top, bottom = 50, 60 + 24 * legend_rows
        height = top + bottom + max(120, 16 * n_series * n_devices + 24 * n_devices)
        layout = dict(margin=dict(t=top, b=bottom),
                      legend=dict(orientation="h", xref="container", yref="container", x=0.01, xanchor="left",
                                  y=0.01, yanchor="bottom"))
        return self._render(name, fig, caption, height, layout)

    def _device_ticks(self, devs: list[Device]) -> list[str]:
        return [_esc(d.label if not d.published else f"{d.run.device_name} (published)") for d in devs]

    @staticmethod
    def _hatch(devs: list[Device]) -> list[str]:
        """Published bars are cross-hatched, so they read as different even in greyscale."""
        return ["x" if d.published else "" for d in devs]

    def ceilings_figure(self) -> str:
        """Measured copy bandwidth and fp16 matmul against the datasheet, per device."""
        devs = list(self.devices)
        ticks = self._device_ticks(devs)
        fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                            subplot_titles=["DRAM bandwidth (TB/s)", "fp16 tensor (TFLOP/s)"])
        for col, (mname, sheet_field) in enumerate((("copy_bandwidth", "memory_bandwidth_bytes_per_s"),
                                                    ("matmul_fp16", "fp16_tensor_flops_per_s")), start=1):
            meas, sheet = [], []
            for d in devs:
                m = d.run.manifest
                meas.append(next((c.per_s_median / 1e12 for c in m.measured_ceilings
                                  if c.name == mname and c.status == "ok" and c.per_s_median), None))
                v = getattr(m.datasheet, sheet_field, None) if m.datasheet else None
                sheet.append(v / 1e12 if v else None)
            unit = "TB/s" if col == 1 else "TFLOP/s"
            fig.add_bar(y=ticks, x=meas, orientation="h", name="measured", marker_color=PALETTE[0], showlegend=col == 1,
                        legendgroup="measured", hovertemplate=f"%{{y}}<br>measured %{{x:.3g}} {unit}<extra></extra>",
                        row=1, col=col)
            fig.add_bar(y=ticks, x=sheet, orientation="h", name="datasheet", marker_color=PALETTE[7],
                        marker_pattern_shape="/", showlegend=col == 1, legendgroup="sheet",
                        hovertemplate=f"%{{y}}<br>datasheet %{{x:.3g}} {unit}<extra></extra>", row=1, col=col)
        return self._bars("ceilings", fig, "Measured ceilings (a large device-to-device copy counting bytes read plus "
                                           "written; a large fp16 matmul) beside the datasheet's (hatched), per device. "
                                           "Published references carry only the datasheet: the write-up measured no "
                                           "ceilings.", len(devs), 2)

    def _profile_rows(self, dev: Device) -> pd.DataFrame:
        return self._memo((id(dev.run), "profile-rows"), lambda: self._profile_study(dev))

    def _profile_study(self, dev: Device) -> pd.DataFrame:
        df = self._frames(dev, "profile", "impls")
        if df.empty:
            return df
        m = (df["status"] == "ok") & (df["group"] == "main") & (df["seq_len"] == PROFILE_N)
        for k, v in STUDY.items():
            m &= df[k] == v
        return df[m]

    @staticmethod
    def _dram(row) -> float | None:
        """Read + written bytes; a published total (dram_bytes, where the schema has it) when the split is unknown."""
        total = row.get("dram_bytes") if hasattr(row, "get") else None
        if _ok(total):
            return float(total)
        if _ok(row.get("dram_read_bytes")):
            return float(row["dram_read_bytes"]) + (float(row["dram_write_bytes"]) if _ok(row.get("dram_write_bytes")) else 0.0)
        return None

    def _triton_kernel(self, dev: Device):
        rows = self._profile_rows(dev)
        k = self._frames(dev, "profile", "kernels")
        tri = rows[rows["impl"] == "triton"] if not rows.empty else rows
        if tri.empty or k.empty:
            return None
        k = k[k["case_id"].isin(set(tri["case_id"]))]
        if k.empty:
            return None
        return k.sort_values("duration_ms", ascending=False, na_position="last").iloc[0]

    def profile_figure(self) -> str:
        """DRAM bytes of one call (naive, Triton) and the Triton kernel's occupancy, per device."""
        devs = [d for d in self.devices if not self._profile_rows(d).empty]
        if not devs:
            return "_No device has a profile at the study shape._\n"
        ticks = self._device_ticks(devs)
        fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                            subplot_titles=["DRAM bytes per call", "Triton kernel occupancy (%)"])
        for impl, color in (("naive", PALETTE[7]), ("triton", PALETTE[3])):
            vals = []
            for d in devs:
                g = self._profile_rows(d)
                g = g[g["impl"] == impl]
                vals.append(self._dram(g.iloc[0]) if not g.empty else None)
            fig.add_bar(y=ticks, x=vals, orientation="h", name=f"{impl} DRAM bytes", marker_color=color,
                        marker_pattern_shape=self._hatch(devs),
                        hovertemplate=f"%{{y}}<br>{impl}: %{{x:.4s}}B<extra></extra>", row=1, col=1)
        for field, label, color in (("theoretical_occupancy_pct", "theoretical", PALETTE[5]),
                                    ("achieved_occupancy_pct", "achieved", PALETTE[0])):
            vals = []
            for d in devs:
                k = self._triton_kernel(d)
                vals.append(float(k[field]) if k is not None and _ok(k[field]) else None)
            fig.add_bar(y=ticks, x=vals, orientation="h", name=f"occupancy, {label}", marker_color=color,
                        marker_pattern_shape=self._hatch(devs),
                        hovertemplate=f"%{{y}}<br>{label} occupancy %{{x:.3g}}%<extra></extra>", row=1, col=2)
        dram = [v for d in devs for v in [self._dram(r) for _, r in self._profile_rows(d).iterrows()] if v]
        fig.update_xaxes(type="log", title_text="bytes", row=1, col=1, **log_ticks(dram, "B", si=True, max_ticks=5))
        fig.update_xaxes(title_text="% of warp slots", row=1, col=2)
        fig.update_xaxes(range=[0, 100], row=1, col=2)
        s = STUDY
        text = self._bars("profile", fig, "Nsight Compute's DRAM bytes (read plus written) for one call of naive "
                                          "PyTorch and of the Triton kernel, and the Triton kernel's theoretical and "
                                          f"achieved occupancy, at B={s['batch']}, H={s['heads']}, N={PROFILE_N}, "
                                          f"d={s['head_dim']}, fp16, non-causal; published figures are cross-hatched.",
                          len(devs), 2)
        gaps = [d.label for d in devs if all(self._dram(r) is None for _, r in self._profile_rows(d).iterrows())]
        if gaps:
            text += (f"\n_No DRAM byte counts in this data for: {escape.text('; '.join(gaps))}. For published figures, the "
                     "current schema cannot yet hold a total without its read/write split (see "
                     "`data/reference/*/README.md`)._\n")
        return text

    def _int8(self, dev: Device) -> dict | None:
        """At the shape with the largest bf16 cache where an int8 variant ran too: sizes and peaks."""
        df = self._decode_rows(dev)
        if df.empty:
            return None
        df = df[df["kv_cache_bytes"].notna() & df["peak_mem_bytes"].notna()]
        best = None
        for (b, c), g in df.groupby(["batch", "context"]):
            e = g[g["variant"] == "eager"]
            q = g[g["variant"].isin(INT8_VARIANTS)]
            if e.empty or q.empty:
                continue
            e = e.iloc[0]
            if best is None or e["kv_cache_bytes"] > best["eager"]["kv_cache_bytes"]:
                best = {"batch": int(b), "context": int(c), "eager": e,
                        **{v: q[q["variant"] == v].iloc[0] for v in INT8_VARIANTS if v in set(q["variant"])}}
        return best

    def int8_figure(self) -> str:
        """The int8 cache's size and peak memory as a share of the bf16 cache's, per device."""
        data = [(d, self._int8(d)) for d in self.devices]
        data = [(d, x) for d, x in data if x is not None]
        if not data:
            return "_No device ran a bf16 and an int8 cache at one shape._\n"
        ticks = self._device_ticks([d for d, _ in data])
        fig = go.Figure()
        series = [("cache", None, "KV cache size", PALETTE[0]),
                  ("peak", "int8-dequant", "peak memory, int8 dequantized each step", PALETTE[3]),
                  ("peak", "int8-kernel", "peak memory, int8 read by a kernel", PALETTE[1]),
                  ("peak", "int8-graph", "peak memory, int8 read by a kernel in a CUDA graph", PALETTE[2])]
        for kind, variant, name, color in series:
            vals, hover = [], []
            for d, x in data:
                e = x["eager"]
                if kind == "cache":
                    q = next((x[v] for v in INT8_VARIANTS if v in x), None)
                    num, den = (q["kv_cache_bytes"], e["kv_cache_bytes"]) if q is not None else (None, None)
                else:
                    q = x.get(variant)
                    num, den = (q["peak_mem_bytes"], e["peak_mem_bytes"]) if q is not None else (None, None)
                vals.append(100 * num / den if num is not None and den else None)
                hover.append(f"batch {x['batch']}, context {x['context']}: "
                             f"{fmt.bytes_(num)} against bf16's {fmt.bytes_(den)}" if num is not None else "")
            if all(v is None for v in vals):
                continue
            fig.add_bar(y=ticks, x=vals, orientation="h", name=name, marker_color=color, customdata=[_esc(h) for h in hover],
                        marker_pattern_shape=self._hatch([d for d, _ in data]),
                        hovertemplate=f"%{{y}}<br>{name}: %{{x:.3g}}% of bf16<br>%{{customdata}}<extra></extra>")
        fig.add_vline(x=100, line_dash="dash", line_color=PALETTE[7], line_width=1)
        fig.update_layout(xaxis_title="% of the bf16 cache's figure (100 = the same)")
        return self._bars("int8", fig, "The int8 KV cache against the bf16 cache at each device's largest shape where "
                                       "both ran: cache size, and peak memory over the timed steps for each int8 "
                                       "variant, as a percentage of the bf16 figure (hover for the bytes); beyond the "
                                       "dashed line the int8 variant needs more than bf16; published figures are "
                                       f"cross-hatched.{self._memory_basis([d for d, _ in data])}", len(data), 3)

    def _memory_basis(self, devices: list[Device]) -> str:
        """A caption's note on the runs whose peaks also hold another model's weights."""
        mixed = []
        for d in devices:
            decode = d.run.phase("decode")
            if decode is not None and not memory_is_own(decode.models):
                mixed.append(d.run.id)
        if not mixed:
            return ""
        runs = join(mixed) if len(mixed) <= 3 else f"{len(mixed)} runs ({mixed[0]} to {mixed[-1]})"
        return (f" The peaks of {runs} also hold the other models their decode phase kept loaded (those runs do not "
                "say how much), which brings their int8 peaks closer to 100%.")
