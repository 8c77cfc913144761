"""The noise floor of a GPU: how far repeat runs of one commit move a case's median, per class of case
(implementation x head size x mask). Runs of the same code on the same GPU are the null experiment:
whatever ratio they show is noise, so a diff calls a change only beyond it (collect/diff.py).

For every case measured ok in all the repeats, each pair of repeats gives a factor, the larger median
over the smaller; a class's floor is a high percentile of its factors. Pairs, not the spread around a
mean, because a diff compares exactly two runs.

Each class is also split by pace (collect/pace.py): a case is host-bound where it was in any repeat,
GPU-bound where it was in every repeat that recorded its pace. A host-bound call's time swings with the
host, so a floor pooled over both paces can be set by the host-bound lengths and hide a change of the
GPU-bound ones; the diff holds a case to the floor of its class and pace where the pace has FEW_PAIRS
pairs or more, else to the pooled one (host_bound null), which every class keeps.
"""
from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from .diff import RunCases, load_run_cases
from .pace import either_host_bound
from .runner import device_slug
from .schema import SCHEMA_VERSION
from .schema.diff import NoiseClass, NoiseFloorFile
from .timing import percentile

# Fewer repeats than this still give a floor, and the file says it is thin.
RECOMMENDED_REPEATS = 3
# A class with fewer pairs than this has a floor that is little more than its largest factor.
FEW_PAIRS = 10


@dataclass(frozen=True)
class NoiseConfig:
    """How the floor is read off the pairwise factors."""

    quantile: float = 95.0


class NotRepeats(ValueError):
    """Runs that are not repeats of one commit on one GPU."""


def check_repeats(runs: list[RunCases]) -> str:
    """The commit every run's timed phases ran, or NotRepeats saying which run differs and how."""
    if len(runs) < 2:
        raise NotRepeats(f"a noise floor needs at least two repeat runs ({RECOMMENDED_REPEATS} or more is the aim), "
                         f"got {len(runs)}.")
    devices = {r.device for r in runs}
    if len(devices) > 1:
        raise NotRepeats("repeat runs must share one GPU; these ran on " +
                         ", ".join(f"{r.run_id}: {r.device}" for r in runs) + ".")
    for r in runs:
        if r.git_dirty:
            raise NotRepeats(f"{r.run_id} ran from a tree with uncommitted changes: its commit does not say what code "
                             "ran, so it is no repeat of another run.")
    commits = {r.run_id: {c for c in r.git_commits.values() if c} for r in runs}
    every = set.union(*commits.values())
    if len(every) != 1 or any(len(c) != 1 for c in commits.values()):
        raise NotRepeats("repeat runs must all come from one commit; these ran " +
                         ", ".join(f"{rid}: {', '.join(sorted(c)) or 'unknown'}" for rid, c in commits.items()) + ".")
    return every.pop()


def measure(runs: list[RunCases], cfg: NoiseConfig = NoiseConfig()) -> NoiseFloorFile:
    """The noise floor per class from repeat runs (check_repeats first): pooled over both paces for every class, and
    per class and pace where that pace's cases give FEW_PAIRS pairs or more."""
    commit = check_repeats(runs)
    # (phase, impl, head_dim, causal, host_bound) -> factors; host_bound None: the class pooled over both paces
    factors: dict[tuple, list[float]] = defaultdict(list)
    cases: dict[tuple, int] = defaultdict(int)
    shared = set.intersection(*({k for k, c in r.cases.items() if c.median_ms is not None} for r in runs))
    for key in sorted(shared):
        klass = runs[0].cases[key].klass
        host = either_host_bound(r.cases[key].host_bound for r in runs)
        pairs = [max(x, y) / min(x, y) for x, y in itertools.combinations([r.cases[key].median_ms for r in runs], 2)]
        for bucket in {(*klass, None), (*klass, host)}:
            cases[bucket] += 1
            factors[bucket] += pairs
    out = NoiseFloorFile(schema_version=SCHEMA_VERSION, device=runs[0].device, git_commit=commit,
                         run_ids=[r.run_id for r in runs], quantile=cfg.quantile)
    split = 0
    for bucket in sorted(factors, key=lambda k: tuple("" if v is None else str(v) for v in k)):
        fs = sorted(factors[bucket])
        phase, impl, head_dim, causal, host = bucket
        if host is not None and len(fs) < FEW_PAIRS:
            continue  # too few for a floor of its own: the class's pooled floor holds these cases
        split += host is not None
        out.classes.append(NoiseClass(phase=phase, impl=impl, head_dim=head_dim, causal=causal, cases=cases[bucket],
                                      pairs=len(fs), median_factor=percentile(fs, 50),
                                      floor=percentile(fs, cfg.quantile), host_bound=host))
    if len(runs) < RECOMMENDED_REPEATS:
        out.notes.append(f"Only {len(runs)} repeat runs: {RECOMMENDED_REPEATS} or more, on different machine leases, "
                         "show the spread between leases better.")
    if split:
        out.notes.append(f"{split} records split a class by pace (host_bound true or false), each from {FEW_PAIRS} "
                         "pairs or more: a diff holds a case of that pace to it rather than to the class's floor pooled "
                         "over both paces (host_bound null), which a host-bound length's swings can set.")
    thin = [c for c in out.classes if c.host_bound is None and c.pairs < FEW_PAIRS]
    if thin:
        out.notes.append(f"{len(thin)} classes rest on fewer than {FEW_PAIRS} pairs: their floor is close to their "
                         "largest factor.")
    if not out.classes:
        out.notes.append("The repeat runs share no case measured ok in all of them.")
    return out


def default_path(data_dir: Path, device: str) -> Path:
    """Where a GPU's noise floor lives: one file per kind of GPU, replaced when measured again."""
    return Path(data_dir) / "noise" / f"{device_slug(device)}.json"


def repeat_sets(data_dir: Path) -> dict[tuple[str, str], list[RunCases]]:
    """Runs under data_dir/runs grouped by (GPU, commit), for groups of two runs or more."""
    groups: dict[tuple[str, str], list[RunCases]] = defaultdict(list)
    for run_dir in sorted(p for p in (Path(data_dir) / "runs").iterdir() if p.is_dir() and not p.is_symlink()):
        rc = load_run_cases(run_dir)
        commits = {c for c in rc.git_commits.values() if c}
        if len(commits) == 1 and not rc.git_dirty:
            groups[(rc.device, commits.pop())].append(rc)
    return {k: v for k, v in groups.items() if len(v) >= 2}

