"""What this page compares, at a glance: the banner that names every published reference, and one row per device."""
from __future__ import annotations

import dataclasses

import pandas as pd

from collect.schema import PHASES

from ... import escape, fmt
from ...tables import table_html
from ...vocab import STUDY, impl_label, join, speedup_words
from .common import MAX_SHOWN, CompareSection, Device


class Glance(CompareSection):
    """The banner and the summary table."""

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

    def unfinished_runs(self) -> str:
        """Each compared run, the narrated one aside (its pages warn at the top), that stopped partway through a
        phase: what that phase's file lacks next to a complete run of the same phase on the same device, counted
        table by table, and the phases after it the collect never reached. A generic "the cases after them are
        missing" would misdescribe a phase that saved every row of one table and none of another."""
        out = []
        for run in self.runs:
            if run is self.run:
                continue
            for rec in run.manifest.phases:
                if run.phase_state(rec.name) == "partial" and run.has(rec.name):
                    out.append(self._unfinished(run, rec))
        return "\n\n".join(out) + ("\n" if out else "")

    def _unfinished(self, run, rec) -> str:
        why = (rec.error or "").strip().splitlines()
        text = (f"Run `{escape.text(run.id)}` stopped during its {rec.name} phase"
                + (f", recorded as {escape.text(why[0][:300])}" if why else "") + ".")
        ref = next((r for r in reversed(self.runs) if r is not run and r.device_name == run.device_name
                    and r.phase_state(rec.name) == "complete" and r.manifest.profile == run.manifest.profile), None)
        if ref is None:
            text += " No complete run of that phase on the same device is here to tell what it lacks."
        else:
            short = [(t, n, len(getattr(ref.phase(rec.name), t))) for t, n in _tables(run.phase(rec.name)).items()
                     if n < len(getattr(ref.phase(rec.name), t, None) or [])]
            if short:
                said = join(f"{escape.code(t)} table holds {n or 'none'} of the {m} rows that run's does"
                            for t, n, m in short)
                text += (f" Against run `{escape.text(ref.id)}`, whose {rec.name} phase completed, its {said}; every "
                         "other table of the phase holds as many rows.")
            else:
                text += (f" Its file holds as many rows in every table as run `{escape.text(ref.id)}`'s, whose "
                         f"{rec.name} phase completed.")
        order = [p.name for p in PHASES]
        after = [p for p in order[order.index(rec.name) + 1:] if not run.has(p)] if rec.name in order else []
        if after:
            text += f" It has no {join(after)} phase: the collect stopped before {'it' if len(after) == 1 else 'them'}."
        return text

    def _speedups(self, dev: Device) -> tuple[str, str]:
        """Triton against naive and against the fastest other, each at the longest N both ran."""
        tri = self._bench_series(dev, "triton").set_index("seq_len")["latency_ms_median"]
        out = []
        for panel in ("naive", "sdpa-fastest"):
            rows = self._bench_series(dev, panel).set_index("seq_len")
            other = rows["latency_ms_median"] if not rows.empty else rows
            common = [n for n in tri.index if n in other.index]
            if not common:
                out.append("n/a")
                continue
            n = common[-1]
            # The fastest other implementation differs from run to run (what each could install): name it.
            who = f" against {impl_label(rows.loc[n, 'impl'])}" if panel == "sdpa-fastest" else ""
            out.append(f"{speedup_words(other[n] / tri[n])}{who} (N={n})")
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


def _tables(obj) -> dict[str, int]:
    """A phase file's tables (its list fields of records) and their row counts."""
    return {f.name: len(getattr(obj, f.name)) for f in dataclasses.fields(obj)
            if isinstance(getattr(obj, f.name), list) and f.name not in ("notes",)}
