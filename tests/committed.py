"""The newest run committed under data/runs/, for tests that check a sentence against real data."""
from __future__ import annotations

from pathlib import Path

RUNS = Path(__file__).resolve().parent.parent / "data" / "runs"


def latest_run(phase_file: str = "manifest.json", prefix: str = ""):
    """The newest committed run (run ids sort by date) that has `phase_file`, loaded as render sees it."""
    from render.runs import load_run

    runs = sorted(p for p in RUNS.iterdir() if p.name.startswith(prefix) and (p / phase_file).exists())
    return load_run(runs[-1])
