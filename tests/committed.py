"""The newest run committed under data/runs/, for tests that check a sentence against real data."""
from __future__ import annotations

from pathlib import Path

RUNS = Path(__file__).resolve().parent.parent / "data" / "runs"


def latest_run(phase_file: str = "manifest.json", prefix: str = ""):
    """The newest committed run (run ids sort by date) that has `phase_file`, loaded as render sees it: the newest
    whose every phase completed, as the report narrates (render.runs.select_run), where one has the file."""
    from render.runs import load_run

    from render.runs import is_complete
    from collect.schema.reader import stored_path

    runs = [load_run(p) for p in sorted(p for p in RUNS.iterdir()
                                        if p.name.startswith(prefix) and stored_path(p, phase_file) is not None)]
    complete = [r for r in runs if is_complete(r)]
    return (complete or runs)[-1]
