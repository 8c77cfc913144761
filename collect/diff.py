"""Compare two runs case by case: B's median time over A's, a bootstrap interval, and a verdict held to
the noise floor of its class. Torch-free and pandas-free: `python -m collect diff` runs it on the GPU
image, and the report's Comparison page runs it on the runs it has validated.

A change counts only when two tests agree, as in pyperf's compare_to and asv's compare: the interval
of the ratio excludes 1 (the samples of one run cannot explain it), and the ratio is further from 1
than the noise floor (repeat runs of one commit on one GPU, collect/noise.py, do not move that much).
The floor is that of the case's class and pace (collect/pace.py: whether the host set it, in either run)
where the noise file has one, else the class's floor pooled over both paces: pooled, a class's floor can
be set by its host-bound lengths, whose time swings with the host, and hide a change of the GPU-bound ones.
A run without samples (schema before 6) leaves only the second test; two GPUs leave neither.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .bootstrap import BootstrapConfig, ratio_interval
from .pace import PACE_FIELDS, either_host_bound, row_host_bound
from .schema import SCHEMA_VERSION
from .schema.bench import BenchRow
from .schema.decode import DecodeRow
from .schema.diff import DIFF_PHASES, DiffCase, DiffFile, NoiseFloorFile, UnmatchedCase
from .schema.iterations import IterationRow
from .schema.migrate import LATEST
from .schema.reader import DataFileError, read_json, shown, stored_path
from .timing import percentile

# The factor a change must exceed where no repeat runs measured the class's noise: the H200 moved a
# call by several percent between machine leases, so a smaller default would call noise a change.
DEFAULT_FLOOR = 1.05
# Stored samples are rounded to 0.1 µs: their median may sit that far from the stored median.
SAMPLE_ROUNDING_MS = 1e-4


@dataclass(frozen=True)
class PhaseTable:
    """Where one phase keeps its timed cases: the row type (its case key), the median and samples fields,
    the count of samples behind the median, and the fields naming the class of a case."""

    row_type: type
    median: str
    samples: str
    count: str
    impl: str
    head_dim: str | None
    causal: str | None


TABLES: dict[str, PhaseTable] = {
    "bench": PhaseTable(BenchRow, "latency_ms_median", "latency_samples_ms", "n_timed_runs", "impl", "head_dim", "causal"),
    "iterations": PhaseTable(IterationRow, "latency_ms_median", "latency_samples_ms", "n_timed_runs", "impl", "head_dim",
                             "causal"),
    "decode": PhaseTable(DecodeRow, "step_ms_median", "step_samples_ms", "loops_timed", "variant", None, None),
}


@dataclass(frozen=True)
class Case:
    """One row of a run, as the diff sees it."""

    case: str
    label: str
    phase: str
    impl: str
    head_dim: int | None
    causal: bool | None
    status: str
    median_ms: float | None
    samples: tuple[float, ...] | None  # None: none stored, or they disagree with the stored median
    host_bound: bool | None = None  # whether the host set its pace (collect/pace.py); None where unrecorded

    @property
    def klass(self) -> tuple:
        return (self.phase, self.impl, self.head_dim, self.causal)


@dataclass
class RunCases:
    """A run's identity and its timed cases, keyed by case id."""

    run_id: str
    device: str
    kernel_version: str | None
    cases: dict[str, Case] = field(default_factory=dict)
    git_commits: dict[str, str | None] = field(default_factory=dict)  # phase -> commit of the code that ran it
    git_dirty: bool | None = None


@dataclass(frozen=True)
class DiffConfig:
    """How two runs are compared."""

    bootstrap: BootstrapConfig = BootstrapConfig()
    default_floor: float = DEFAULT_FLOOR
    phases: tuple[str, ...] = DIFF_PHASES


def _get(row: Any, name: str) -> Any:
    return row.get(name) if isinstance(row, dict) else getattr(row, name, None)


def case_id(phase: str, row: Any) -> str:
    keys = TABLES[phase].row_type.CASE_KEY
    return phase + "/" + "/".join(f"{k}={_get(row, k)}" for k in keys if _get(row, k) not in (None, ""))


def case_label(phase: str, row: Any) -> str:
    g = lambda k: _get(row, k)  # noqa: E731
    if phase == "decode":
        series = f" {g('series')}" if g("series") else ""
        return f"decode {g('model')} {g('variant')} B{g('batch')} ctx{g('context')}{series}"
    dtype = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}.get(g("dtype"), str(g("dtype")))
    backend = f"[{g('backend_requested')}]" if phase == "bench" and g("backend_requested") and \
        not str(g("impl")).endswith(str(g("backend_requested"))) else ""
    where = "" if phase == "bench" else f"{phase} "
    return (f"{where}{g('impl')}{backend} {dtype} {'causal' if g('causal') else 'full'} "
            f"B{g('batch')} H{g('heads')} N{g('seq_len')} d{g('head_dim')}")


def _usable_samples(median: float, samples: Any, count: Any) -> tuple[float, ...] | None:
    """The stored samples, when they are the ones behind the stored median: as many as its count says,
    with a median that agrees to their rounding. Others (a hand-edited file) are not resampled."""
    if not isinstance(samples, list) or len(samples) < 2:
        return None
    xs = tuple(float(x) for x in samples)
    if isinstance(count, int) and count != len(xs):
        return None
    if not math.isclose(percentile(sorted(xs), 50), median, rel_tol=1e-3, abs_tol=SAMPLE_ROUNDING_MS):
        return None
    return xs


def cases_of(phase: str, rows: Iterable[Any]) -> dict[str, Case]:
    """The cases of one phase's rows (dataclasses or dicts); a row not ok has no median but keeps its status."""
    t = TABLES[phase]
    out = {}
    for row in rows:
        status = _get(row, "status") or "ok"
        median = _get(row, t.median)
        ok = status == "ok" and isinstance(median, (int, float)) and not isinstance(median, bool) and median > 0
        cid = case_id(phase, row)
        out[cid] = Case(cid, case_label(phase, row), phase, str(_get(row, t.impl)),
                        _get(row, t.head_dim) if t.head_dim else None, _get(row, t.causal) if t.causal else None,
                        status, float(median) if ok else None,
                        _usable_samples(float(median), _get(row, t.samples), _get(row, t.count)) if ok else None,
                        row_host_bound(phase, row) if ok else None)
    return out


def run_cases(run_id: str, device: str, kernel_version: str | None, phases: dict[str, Any],
              phase_commits: dict[str, str | None] | None = None, git_dirty: bool | None = None) -> RunCases:
    """A run's cases from its phase files, loaded (render/) or as parsed JSON (the CLI)."""
    rc = RunCases(run_id, device, kernel_version, git_commits=dict(phase_commits or {}), git_dirty=git_dirty)
    for phase in DIFF_PHASES:
        data = phases.get(phase)
        if data is not None:
            rc.cases.update(cases_of(phase, _get(data, "rows") or []))
    return rc


# --- reading runs from disk (the CLI: no pydantic on the GPU image) ----------------------------------


def read_file(path: Path) -> dict:
    """One data file through the validated reader, brought to this schema version (older files gain only
    optional fields), or DataFileError naming file, field and value."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise DataFileError(f"{path}: expected a JSON object at the top level.")
    data = LATEST(data)
    if data.get("schema_version") != SCHEMA_VERSION:
        raise DataFileError(f"{path}: field schema_version: value {shown(data.get('schema_version'))} is not one this "
                            f"code reads (version {SCHEMA_VERSION} and the ones before it).")
    return data


def _check_rows(path: Path, phase: str, data: dict) -> list[dict]:
    """The fields the diff reads, held to the types and bounds the schema gives them (render/ checks the rest)."""
    rows = data.get("rows")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise DataFileError(f"{path}: field rows: expected a list of objects.")
    t = TABLES[phase]
    seen: dict[str, int] = {}
    for i, r in enumerate(rows):
        for name in (t.median, *(f for f in PACE_FIELDS[phase] if f)):  # the time it compares, and its pace's
            v, unit = r.get(name), "µs" if name.endswith("_us_median") else "ms"
            hour = 3.6e9 if unit == "µs" else 3.6e6
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < hour):
                raise DataFileError(f"{path}: field rows[{i}].{name}: value {shown(v)}: a time in {unit} above 0 and "
                                    "below an hour.")
        xs = r.get(t.samples)
        if xs is not None and (not isinstance(xs, list) or any(
                isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x < 3.6e6 for x in xs)):
            raise DataFileError(f"{path}: field rows[{i}].{t.samples}: value {shown(xs)}: a list of times in ms, "
                                "each above 0 and below an hour.")
        cid = case_id(phase, r)
        if cid in seen:
            raise DataFileError(f"{path}: field rows[{i}]: duplicate case: rows[{seen[cid]}] measures {cid} too.")
        seen[cid] = i
    return rows


def load_run_cases(run_dir: Path) -> RunCases:
    """A run folder's cases, read as the CLI reads them: the validated reader, no pydantic."""
    run_dir = Path(run_dir)
    manifest = read_file(run_dir / "manifest.json")
    if manifest.get("run_id") != run_dir.name:
        raise DataFileError(f"{run_dir / 'manifest.json'}: field run_id: value {shown(manifest.get('run_id'))} does not "
                            f"match the folder name {run_dir.name!r}.")
    device = (manifest.get("device") or {}).get("name") or "unknown GPU"
    phases, commits = {}, {}
    records = {p.get("name"): p for p in manifest.get("phases") or [] if isinstance(p, dict)}
    for phase in DIFF_PHASES:
        path = stored_path(run_dir, f"{phase}.json")
        if path is None:
            continue
        data = read_file(path)
        if data.get("run_id") != run_dir.name:
            raise DataFileError(f"{path}: field run_id: value {shown(data.get('run_id'))}: this file belongs to another run.")
        phases[phase] = {"rows": _check_rows(path, phase, data)}
        commits[phase] = (records.get(phase) or {}).get("git_commit") or manifest.get("git_commit")
    iterations = stored_path(run_dir, "iterations.json")
    version = manifest.get("kernel_version") or (read_file(iterations).get("final_version") if iterations else None)
    return run_cases(run_dir.name, device, version or None, phases, commits, manifest.get("git_dirty"))


def resolve_run(name: str, data_dir: Path) -> Path:
    """A run named by its folder or by its id under data_dir/runs."""
    path = Path(name)
    if path.is_dir():
        return path
    under = Path(data_dir) / "runs" / name
    if under.is_dir():
        return under
    known = sorted(p.name for p in (Path(data_dir) / "runs").glob("*") if p.is_dir())
    raise FileNotFoundError(f"no run {name!r}: neither a folder nor a run in {Path(data_dir) / 'runs'} "
                            f"(there: {', '.join(known) or 'none'}).")


# --- the comparison -------------------------------------------------------------------------------


def floors_by_class(noise: NoiseFloorFile | None) -> dict[tuple, float]:
    """(phase, impl, head_dim, causal, host_bound) -> floor: host_bound None for a class pooled over both paces
    (the only records of a noise file before schema version 8)."""
    if noise is None:
        return {}
    return {(c.phase, c.impl, c.head_dim, c.causal, c.host_bound): c.floor for c in noise.classes}


def case_floor(floors: dict[tuple, float], klass: tuple, host: bool | None) -> tuple[float | None, str]:
    """A case's floor and its source: its class and pace's where the noise file measured one ('paced'), else its
    class's pooled over both paces ('measured'), else (None, 'default')."""
    if host is not None and (*klass, host) in floors:
        return floors[(*klass, host)], "paced"
    if (*klass, None) in floors:
        return floors[(*klass, None)], "measured"
    return None, "default"


def verdict(ratio: float, interval: tuple[float, float] | None, floor: float, same_device: bool) -> str:
    """faster / slower only when the interval (where there is one) excludes 1 and the ratio is beyond the floor."""
    if not same_device:
        return "ratio only"
    beyond = abs(math.log(ratio)) > math.log(floor)
    excludes = interval is None or interval[1] < 1.0 or interval[0] > 1.0
    if beyond and excludes:
        return "faster" if ratio < 1 else "slower"
    return "no change"


def compare(a: RunCases, b: RunCases, noise: NoiseFloorFile | None = None, cfg: DiffConfig = DiffConfig()) -> DiffFile:
    """Run B against run A, case by case. `noise`: the GPU's noise floor (ignored across two GPUs or
    when measured on another GPU)."""
    same = a.device == b.device
    if noise is not None and noise.device != a.device:
        noise = None
    floors = floors_by_class(noise)
    out = DiffFile(schema_version=SCHEMA_VERSION, run_a=a.run_id, run_b=b.run_id, device_a=a.device, device_b=b.device,
                   same_device=same, kernel_version_a=a.kernel_version, kernel_version_b=b.kernel_version,
                   confidence=cfg.bootstrap.confidence, resamples=cfg.bootstrap.resamples, seed=cfg.bootstrap.seed,
                   default_floor=cfg.default_floor, noise_floor_runs=list(noise.run_ids) if noise else [])
    ok_a = {k: c for k, c in a.cases.items() if c.median_ms is not None and c.phase in cfg.phases}
    ok_b = {k: c for k, c in b.cases.items() if c.median_ms is not None and c.phase in cfg.phases}
    defaulted = 0
    for key in sorted(ok_a.keys() & ok_b.keys()):
        ca, cb = ok_a[key], ok_b[key]
        ratio = cb.median_ms / ca.median_ms
        interval = None
        if ca.samples and cb.samples:
            lo, hi = ratio_interval(ca.samples, cb.samples, cfg.bootstrap, key)
            interval = (min(lo, ratio), max(hi, ratio))  # percentiles of resamples may miss the point estimate by a hair
        host = either_host_bound((ca.host_bound, cb.host_bound))
        floor, source = case_floor(floors, ca.klass, host)
        defaulted += floor is None
        out.cases.append(DiffCase(
            case=key, label=cb.label, phase=cb.phase, impl=cb.impl, head_dim=cb.head_dim, causal=cb.causal,
            a_ms=ca.median_ms, b_ms=cb.median_ms, ratio=ratio, ratio_low=interval[0] if interval else None,
            ratio_high=interval[1] if interval else None, basis="samples" if interval else "medians",
            floor=floor or cfg.default_floor, floor_source=source,
            verdict=verdict(ratio, interval, floor or cfg.default_floor, same), host_bound=host))
    both = ok_a.keys() & ok_b.keys()
    for mine, other, dest in ((ok_a, b.cases, out.only_a), (ok_b, a.cases, out.only_b)):
        for key in sorted(mine.keys() - both):
            theirs = other.get(key)
            dest.append(UnmatchedCase(case=key, label=mine[key].label, phase=mine[key].phase,
                                      median_ms=mine[key].median_ms, other_status=theirs.status if theirs else None))
    out.notes = _notes(out, a, b, noise, defaulted)
    return out


def _notes(d: DiffFile, a: RunCases, b: RunCases, noise: NoiseFloorFile | None, defaulted: int) -> list[str]:
    notes = []
    if not d.same_device:
        notes.append(f"{a.run_id} ran on {a.device} and {b.run_id} on {b.device}: the ratios compare two GPUs, and "
                     "carry any change of code between the two runs as well, so no case is called faster or slower.")
    medians = sum(c.basis == "medians" for c in d.cases)
    if medians:
        which = [r.run_id for r in (a, b) if not any(c.samples for c in r.cases.values())]
        why = f" ({' and '.join(which)} kept none: runs before schema version 6)" if which else ""
        notes.append(f"{medians} of {len(d.cases)} cases have no samples in one run or both{why}: their ratio is of "
                     "medians, without an interval, and their verdict rests on the noise floor alone.")
    if d.same_device and noise is None:
        notes.append(f"No noise floor has been measured for {a.device}: every class is held to the default factor "
                     f"{d.default_floor:g} (python -m collect noise measures one from repeat runs).")
    elif d.same_device and defaulted:
        notes.append(f"The noise floor was measured from {len(noise.run_ids)} repeat runs ({', '.join(noise.run_ids)}); "
                     f"{defaulted} cases are of classes it does not cover and are held to the default factor "
                     f"{d.default_floor:g}.")
    elif d.same_device:
        notes.append(f"The noise floor was measured from {len(noise.run_ids)} repeat runs ({', '.join(noise.run_ids)}).")
    paced = sum(c.floor_source == "paced" for c in d.cases)
    if d.same_device and paced:
        pooled = sum(c.floor_source == "measured" for c in d.cases)
        notes.append(f"{paced} of {len(d.cases)} cases are held to the floor of their class and pace (GPU-bound, or "
                     "host-bound in either run), measured from the repeats' cases of that pace"
                     + (f"; {pooled} to their class's floor pooled over both paces, their pace unrecorded or too "
                        "rare in the repeats for a floor of its own" if pooled else "")
                     + ". Pooled, a class's floor can be set by its host-bound lengths, whose time swings with the "
                     "host, and hide a change of the GPU-bound ones.")
    return notes


def counts(d: DiffFile) -> dict[str, int]:
    """Cases per verdict, every verdict present (0 where none)."""
    from .schema.diff import VERDICTS

    return {v: sum(c.verdict == v for c in d.cases) for v in VERDICTS}
