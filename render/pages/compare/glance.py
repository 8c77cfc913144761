"""What this page compares, at a glance: the banner that names every published reference, and one row per device."""
from __future__ import annotations

import pandas as pd

from collect.schema import PHASES

from ... import escape, fmt
from ...tables import table_html
from ...vocab import STUDY, speedup_words
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
