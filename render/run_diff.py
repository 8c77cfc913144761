"""The diff of two validated runs for the pages: collect/diff.py's comparison, fed the runs render/ has
already validated and the GPU's noise floor from data/noise/ (validated here the same way), and the same
comparison read with each case's pace: whether the host or the GPU set it (vocab.host_bound)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from collect.diff import DiffConfig, case_id, compare, run_cases, verdict
from collect.noise import FEW_PAIRS, default_path
from collect.schema.diff import DIFF_PHASES, DiffCase, DiffFile, NoiseFloorFile

from .fmt import known
from .runs import Run
from .validate import load_validated
from .vocab import host_bound


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


# --- each case's pace ----------------------------------------------------------------------------------


def case_paces(run: Run) -> dict[str, bool | None]:
    """Case id -> whether the host set its pace: a timed call whose loop ran past its device time with a host time
    to explain it, or a decode step whose kernels kept the GPU busy for too little of it (the step is the loop
    time, the kernels' busy time its device time); None where the run recorded neither."""
    out: dict[str, bool | None] = {}
    for phase in DIFF_PHASES:
        for row in getattr(run.phase(phase), "rows", None) or []:
            if phase == "decode":
                paced = host_bound(getattr(row, "kernel_ms_per_step", None), getattr(row, "step_ms_median", None))
            else:
                host = getattr(row, "host_us_median", None)
                paced = host_bound(getattr(row, "latency_ms_median", None), getattr(row, "loop_ms_median", None),
                                   host / 1e3 if known(host) else None)
            out[case_id(phase, row)] = paced
    return out


@dataclass(frozen=True)
class PacedCase:
    """A case of the diff with its pace and the verdict held to the noise floor of its class and pace."""

    case: DiffCase
    host: bool | None  # host-bound in either run; None where neither run recorded the pace
    floor: float
    floor_source: str  # 'paced' (the repeats' cases of this class and pace), else the diff's own source
    verdict: str


def paced_floors(noise: NoiseFloorFile | None, runs: list[Run]) -> dict[tuple, float]:
    """(phase, impl, head_dim, causal, host-bound) -> noise floor: the noise file's own repeat runs re-read with each
    class split by pace. Pooled over a class, a floor is set by its host-bound lengths, whose time swings with the
    host, and hides a change of the GPU-bound ones. A bucket with fewer than FEW_PAIRS pairs gets none (its class
    floor stands); so does every case where the repeats are not all committed."""
    if noise is None:
        return {}
    by_id = {r.id: r for r in runs}
    if any(i not in by_id for i in noise.run_ids):
        return {}
    repeats = [_cases(by_id[i]) for i in noise.run_ids]
    paces = [case_paces(by_id[i]) for i in noise.run_ids]
    shared = set.intersection(*({k for k, c in r.cases.items() if c.median_ms is not None} for r in repeats))
    factors: dict[tuple, list[float]] = {}
    for key in sorted(shared):
        bucket = (*repeats[0].cases[key].klass, any(p.get(key) for p in paces))
        meds = [r.cases[key].median_ms for r in repeats]
        factors.setdefault(bucket, []).extend(max(x, y) / min(x, y) for x, y in itertools.combinations(meds, 2))
    # The same percentile as collect/noise.py's, linear interpolation (numpy's default).
    return {k: float(np.percentile(fs, noise.quantile)) for k, fs in factors.items() if len(fs) >= FEW_PAIRS}


def paced_cases(d: DiffFile, a: Run, b: Run, floors: dict[tuple, float]) -> list[PacedCase]:
    """Each case of the diff with its pace in either run and its verdict against the floor of its class and pace,
    where the repeats measured one (else the diff's own floor and verdict)."""
    pa, pb = case_paces(a), case_paces(b)
    out = []
    for c in d.cases:
        seen = [p[c.case] for p in (pa, pb) if p.get(c.case) is not None]
        host = any(seen) if seen else None
        floor = floors.get((c.phase, c.impl, c.head_dim, c.causal, bool(host)))
        if floor is None:
            out.append(PacedCase(c, host, c.floor, c.floor_source, c.verdict))
            continue
        interval = (c.ratio_low, c.ratio_high) if c.ratio_low is not None else None
        out.append(PacedCase(c, host, floor, "paced", verdict(c.ratio, interval, floor, d.same_device)))
    return out
