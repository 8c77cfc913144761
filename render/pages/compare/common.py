"""What every section of the Device comparison page reads: the devices compared (measured runs and published
references) and how each is drawn, a per-page cache of their frames, and their rows at the study shape."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import pandas as pd

from ... import escape
from ...bench_data import rivals
from ...figures import PALETTE
from ...fmt import known
from ...runs import Run, load_references
from ...vocab import STUDY
from ..base import Page

MAX_SHOWN = 6
MEASURED_COLORS = [PALETTE[i] for i in (0, 3, 2, 1, 4, 5, 6)]
PUBLISHED_COLOR = PALETTE[7]
PUBLISHED_DASHES = ["dash", "dot", "dashdot", "longdash"]
PUBLISHED_WORDS = "published, not re-measured here"


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
        return escape.plot(self.label)

    def marker(self, size: int = 8) -> dict:
        if self.published:
            return dict(size=size, symbol="circle-open", color=self.color, line=dict(width=2, color=self.color))
        return dict(size=size, color=self.color)


class CompareSection(Page):
    """The devices and their rows; each section of the page is a subclass, ComparePage all of them."""

    slug = "compare"
    phase = "env"

    def __init__(self, run: Run, runs: list[Run], references: list[Run] | None = None):
        super().__init__(run, runs)
        self._references = references

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
