"""`python -m collect diff A B`, `python -m collect noise RUN...` and `python -m collect compact RUN...`: subcommands
that read runs and measure nothing, so they need no GPU and no torch. collect/cli.py hands them argv when its first word
names one (no phase may take these names: tests/test_diff.py checks the registry)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .bootstrap import BootstrapConfig
from .compact import compact_main
from .diff import DEFAULT_FLOOR, DiffConfig, compare, load_run_cases, read_file, resolve_run
from .diff_table import noise_table, table
from .jsonio import from_jsonable, write_json_atomic
from .noise import NoiseConfig, NotRepeats, default_path, measure, repeat_sets
from .runner import REPO_ROOT
from .schema.diff import DIFF_PHASES, NoiseFloorFile
from .schema.reader import DataFileError

SUBCOMMANDS = ("diff", "noise", "compact")  # first words of `python -m collect` that are not phases
DATA_DIR = REPO_ROOT / "data"


def read_noise(path: Path) -> NoiseFloorFile:
    """A noise-floor file through the validated reader, its floors checked (render/ validates the rest)."""
    noise = from_jsonable(NoiseFloorFile, read_file(path))
    for i, c in enumerate(noise.classes):
        if isinstance(c.floor, bool) or not isinstance(c.floor, (int, float)) or not 1.0 <= c.floor < 1e9:
            raise DataFileError(f"{path}: field classes[{i}].floor: value {c.floor!r}: a factor of at least 1.")
        if c.host_bound not in (None, True, False):
            raise DataFileError(f"{path}: field classes[{i}].host_bound: value {c.host_bound!r}: true, false or null.")
    return noise


def diff_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m collect diff",
                                 description="Compare run B against run A case by case: the ratio of B's median time "
                                             "to A's (below 1, B is faster), a bootstrap interval where both runs kept "
                                             "samples, and a verdict held to the GPU's noise floor.")
    ap.add_argument("run_a", metavar="RUN_A", help="the before: a run id under DATA/runs, or a run folder")
    ap.add_argument("run_b", metavar="RUN_B", help="the after")
    ap.add_argument("--data", type=Path, default=DATA_DIR, help="the data folder runs and noise floors live in "
                    "(default: data/)")
    ap.add_argument("--noise", type=Path, help="the noise-floor file (default: DATA/noise/<device-slug>.json for A's "
                    "GPU, where it exists)")
    ap.add_argument("--default-floor", type=float, default=DEFAULT_FLOOR,
                    help=f"the factor a change must exceed in a class no noise-floor file covers (default {DEFAULT_FLOOR})")
    ap.add_argument("--phases", nargs="+", choices=DIFF_PHASES, default=list(DIFF_PHASES),
                    help="the phases whose cases are compared (default: all three)")
    ap.add_argument("--resamples", type=int, default=BootstrapConfig.resamples, help="bootstrap resamples per case")
    ap.add_argument("--seed", type=int, default=BootstrapConfig.seed, help="seed of the resampling (the same seed, "
                    "the same intervals)")
    ap.add_argument("--json", type=Path, help="where to write the diff as JSON (default: DATA/diffs/A-vs-B.json; "
                    "'-' for none)")
    ap.add_argument("--all", action="store_true", help="list every case, not only the ones that changed")
    a = ap.parse_args(argv)
    if a.default_floor < 1 or a.resamples < 1:
        ap.error("--default-floor is a factor of at least 1, and --resamples at least 1")
    try:
        run_a, run_b = (load_run_cases(resolve_run(x, a.data)) for x in (a.run_a, a.run_b))
        noise_path = a.noise or default_path(a.data, run_a.device)
        noise = read_noise(noise_path) if noise_path.exists() else None
    except (DataFileError, FileNotFoundError) as exc:
        print(f"collect diff: {exc}", file=sys.stderr)
        return 2
    cfg = DiffConfig(bootstrap=BootstrapConfig(resamples=a.resamples, seed=a.seed), default_floor=a.default_floor,
                     phases=tuple(a.phases))
    d = compare(run_a, run_b, noise, cfg)
    print(table(d, show_all=a.all))
    if str(a.json) != "-":
        out = write_json_atomic(a.json or a.data / "diffs" / f"{d.run_a}-vs-{d.run_b}.json", d)
        print(f"\nwritten: {out}")
    return 0


def noise_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m collect noise",
                                 description="Measure a GPU's noise floor from repeat runs of one commit (at least "
                                             "two, three or more on different machine leases): per class of case, and "
                                             "per class and pace (host-bound or GPU-bound), a high percentile of how "
                                             "far two repeats' medians sit apart. Writes "
                                             "DATA/noise/<device-slug>.json, which `collect diff` then uses.")
    ap.add_argument("runs", nargs="*", metavar="RUN", help="the repeat runs (ids under DATA/runs, or folders); "
                    "none: every set of runs in DATA/runs that share a GPU and a commit")
    ap.add_argument("--data", type=Path, default=DATA_DIR, help="the data folder (default: data/)")
    ap.add_argument("--quantile", type=float, default=NoiseConfig.quantile,
                    help="the percentile of the pairwise factors each floor is (default: %(default)s)")
    ap.add_argument("--out", type=Path, help="where to write it (default: DATA/noise/<device-slug>.json); '-' for none")
    a = ap.parse_args(argv)
    if not 0 < a.quantile <= 100:
        ap.error("--quantile is a percentile, above 0 and at most 100")
    try:
        if a.runs:
            sets = [[load_run_cases(resolve_run(x, a.data)) for x in a.runs]]
        else:
            # One floor per GPU: where several commits were repeated on one, the largest set.
            best: dict[str, list] = {}
            for (device, _), runs in repeat_sets(a.data).items():
                if len(runs) > len(best.get(device, [])):
                    best[device] = runs
            sets = list(best.values())
            if not sets:
                print(f"collect noise: no two runs in {a.data / 'runs'} share a GPU and a commit (from a clean tree). "
                      "Collect repeats at one commit, e.g. `make collect PHASES='env bench' RUN_ID=<id>-r1` three "
                      "times, then run this again.", file=sys.stderr)
                return 1
        floors = [measure(runs, NoiseConfig(quantile=a.quantile)) for runs in sets]
    except (DataFileError, FileNotFoundError, NotRepeats) as exc:
        print(f"collect noise: {exc}", file=sys.stderr)
        return 2
    if a.out is not None and str(a.out) != "-" and len(floors) > 1:
        print("collect noise: --out names one file, and there are repeat sets on several GPUs; name the runs.",
              file=sys.stderr)
        return 2
    for n in floors:
        print(noise_table(n))
        if str(a.out) != "-":
            print(f"\nwritten: {write_json_atomic(a.out or default_path(a.data, n.device), n)}\n")
    return 0


def main(argv: list[str]) -> int:
    """argv[0] is the subcommand."""
    return {"diff": diff_main, "noise": noise_main, "compact": lambda a: compact_main(a, DATA_DIR)}[argv[0]](argv[1:])
