"""The diff of two validated runs for the pages: collect/diff.py's comparison, fed the runs render/ has
already validated and the GPU's noise floor from data/noise/ (validated here the same way). Each case's pace
(whether the host or the GPU set it, collect/pace.py) and its verdict against the floor of its class and pace
come with the diff, so the page shows what `python -m collect diff` prints."""
from __future__ import annotations

from pathlib import Path

from collect.diff import DiffConfig, compare, run_cases
from collect.noise import default_path
from collect.schema.diff import DIFF_PHASES, DiffFile, NoiseFloorFile

from .runs import Run
from .validate import load_validated


def predecessor(run: Run, runs: list[Run]) -> Run | None:
    """The newest run before `run` that shipped another version of our kernel: on the same GPU where one
    did, else on any (a diff across two GPUs is labelled as such)."""
    earlier = [r for r in runs if r.created < run.created and r.kernel_version and r.kernel_version != run.kernel_version]
    same = [r for r in earlier if r.device_name == run.device_name]
    pool = same or earlier
    return pool[-1] if pool else None


def noise_floor(data_dir: Path, device: str) -> NoiseFloorFile | None:
    path = default_path(data_dir, device)
    return load_validated(path, NoiseFloorFile) if path.is_file() else None


def _cases(run: Run):
    commits = {p.name: p.git_commit for p in run.manifest.phases}
    return run_cases(run.id, run.device_name, run.kernel_version, {p: run.phase(p) for p in DIFF_PHASES},
                     commits, run.manifest.git_dirty)


def diff_runs(a: Run, b: Run, data_dir: Path, cfg: DiffConfig = DiffConfig()) -> DiffFile:
    """B against A, as `python -m collect diff A B` computes it."""
    return compare(_cases(a), _cases(b), noise_floor(data_dir, a.device_name), cfg)
