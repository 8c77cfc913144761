"""Find runs under data/runs, validate every file, and hand out pandas frames of their rows.

A run folder arrives from someone else's GPU, so it is checked as a whole: it may hold only the
manifest, the phase files the schema knows, a README.md, the profiler's `ncu/` work folder and the
lock a collect holds while it writes; symlinks and anything else stop the build with the name of what
to remove. A data file is opened only if it is a regular file (collect/schema/reader.py). Only files that
validated are listed in `Run.files`, and only those are published.
"""
from __future__ import annotations

import dataclasses
import os
import re
import typing
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from collect.schema import FILE_SPECS, PHASES, available_specs, datasheets
from collect.schema.common import RUN_LOCK
from collect.schema.manifest import Manifest
from collect.schema.reader import GZIP_SUFFIX, DataFileError, shown, stored_path

from .errors import DataError
from .validate import load_checked

RUN_ENV_VAR = "REPORT_RUN"
# What else may sit in a run folder: notes for humans, the profile phase's raw reports (never published).
ALLOWED_EXTRA = {"README.md"}
ALLOWED_DIRS = {"ncu"}
# An interrupted atomic write (collect/jsonio.py) leaves `.<name>.<random>.tmp`: never data, never published.
_TEMP_FILE = re.compile(r"^\.[^/]+\.tmp$")
# Manifest statuses that mean the phase stopped before its end; its rows so far are data, but partial.
UNFINISHED = {"running", "partial"}


@dataclass
class Run:
    """One validated run: its manifest plus whichever phase files it has."""

    id: str
    path: Path
    manifest: Manifest
    phases: dict[str, Any] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)  # the files that validated: the only ones published
    texts: dict[Path, str] = field(default_factory=dict, repr=False)  # each one's text as it validated
    _frames: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict, repr=False)

    def published(self) -> list[tuple[str, str]]:
        """(name, text) of each file that validated, as the site publishes it: a file the repository keeps
        compressed under its plain name, holding the JSON it validated as; sorted by name."""
        return sorted((p.name.removesuffix(GZIP_SUFFIX), self.texts[p]) for p in self.files)

    def has(self, phase: str) -> bool:
        return phase == "env" or phase in self.phases

    def phase(self, name: str) -> Any | None:
        return self.manifest if name == "env" else self.phases.get(name)

    def frame(self, phase: str, table: str = "rows") -> pd.DataFrame:
        """A list field of a phase file as a tidy DataFrame (empty, with columns, when absent).

        Built once per run and table (pages ask for the same rows hundreds of times); each caller
        gets its own copy, so adding a column never changes what the next caller sees."""
        key = (phase, table)
        if key not in self._frames:
            obj = self.phase(phase)
            items = getattr(obj, table, None) if obj is not None else None
            self._frames[key] = _records_frame(items) if items else pd.DataFrame(columns=_row_columns(phase, table))
        return self._frames[key].copy()

    @property
    def device_name(self) -> str:
        return self.manifest.device.name if self.manifest.device else "unknown GPU"

    @property
    def created(self) -> datetime:
        """created_utc as a time (validation guarantees its offset), so runs from any time zone compare."""
        return datetime.fromisoformat(self.manifest.created_utc)

    @property
    def kernel_version(self) -> str | None:
        """The recorded version of our kernel this run's rows ran: the manifest's, else (runs before the field)
        the final version its iterations phase recorded."""
        if self.manifest.kernel_version:
            return self.manifest.kernel_version
        it = self.phase("iterations")
        return getattr(it, "final_version", None) or None

    def phase_record(self, name: str):
        return next((p for p in self.manifest.phases if p.name == name), None)

    def phase_state(self, name: str) -> str:
        """'complete', 'partial' (it stopped before its end; its saved rows are shown), 'failed',
        'unsupported' or 'missing': what every page says about a phase of this run."""
        rec = self.phase_record(name)
        if rec is None:
            return "complete" if name != "env" and name in self.phases else "missing"
        return rec.status if rec.status in ("complete", "partial", "failed", "unsupported") else "partial"

    def skipped_rows(self, name: str) -> tuple[int, int]:
        """(rows skipped for time, rows) in a phase's table, where its rows carry a status."""
        rows = getattr(self.phase(name), "rows", None) or []
        return sum(getattr(r, "status", None) == "skipped" for r in rows), len(rows)

    def phase_summary(self, name: str) -> str:
        """The phase's state in a few words, for tables that list phases."""
        rec, state = self.phase_record(name), self.phase_state(name)
        if state == "complete":
            text = (f"collected in {rec.duration_s:.0f} s" if rec is not None and rec.duration_s is not None
                    else "collected")
            skipped, rows = self.skipped_rows(name)
            # A phase ends complete when its time budget runs out: the rows it skipped are part of its state.
            return text + (f"; {skipped} of its {rows} rows skipped for time" if skipped else "")
        if state == "partial":
            rows = f"{rec.rows} rows saved" if rec is not None and rec.rows else "its saved rows shown"
            return f"partial: it did not finish ({rows})"
        return {"failed": "failed", "unsupported": "not supported on this GPU"}.get(state, "not collected")


def _records_frame(items: list) -> pd.DataFrame:
    """Rows of dataclasses as a frame, one level deep: nested records become dicts, like asdict,
    without asdict's deep copy of every value (the slow part for tens of thousands of rows)."""
    names = [f.name for f in dataclasses.fields(items[0])]
    first = items[0]
    nested = [n for n in names if dataclasses.is_dataclass(getattr(first, n)) or (
        isinstance(getattr(first, n), list) and any(dataclasses.is_dataclass(v) for v in getattr(first, n)))]
    if not nested:  # rows of plain values: their fields as they are
        return pd.DataFrame.from_records([{n: getattr(x, n) for n in names} for x in items], columns=names)
    flat = lambda v: (dataclasses.asdict(v) if dataclasses.is_dataclass(v)  # noqa: E731
                      else [dataclasses.asdict(x) if dataclasses.is_dataclass(x) else x for x in v]
                      if isinstance(v, list) else v)
    return pd.DataFrame([[flat(getattr(x, n)) for n in names] for x in items], columns=names)


def _row_columns(phase: str, table: str) -> list[str]:
    spec = FILE_SPECS.get(phase)
    if spec is None:
        return []
    cls = spec.dataclass()
    hint = typing.get_type_hints(cls).get(table)
    args = typing.get_args(hint)
    return [x.name for x in dataclasses.fields(args[0])] if args and dataclasses.is_dataclass(args[0]) else []


def _check_folder(run_dir: Path, known: set[str]) -> None:
    """Refuse symlinks and files the schema does not know, naming each one."""
    for p in sorted(run_dir.iterdir()):
        if p.is_symlink():
            raise DataError(f"{p}: a symlink in a run folder (pointing to {os.readlink(p)}); runs are published, so "
                            "only regular files are read. Replace it with the file itself or remove it.")
        if p.is_dir():
            if p.name in ALLOWED_DIRS:
                continue
            raise DataError(f"{p}: unknown folder in a run folder; a run holds {', '.join(sorted(known))}"
                            f"{', README.md' if ALLOWED_EXTRA else ''} and the profiler's ncu/ folder. Move it out.")
        if p.name in known or p.name in ALLOWED_EXTRA or _TEMP_FILE.match(p.name) or p.name == RUN_LOCK:
            continue
        raise DataError(f"{p}: unknown file in a run folder; a run holds only {', '.join(sorted(known))} and "
                        "README.md, each checked against the schema before it is published. Move it out or delete it.")


def load_run(run_dir: Path) -> Run:
    """Validate a run folder; any bad file stops with a DataError naming it."""
    run_dir = Path(run_dir)
    specs = [s for s in available_specs() if s.phase != "env"]
    if run_dir.is_symlink():
        raise DataError(f"{run_dir}: a run folder must not be a symlink; copy the run in instead.")
    _check_folder(run_dir, {"manifest.json"} | {s.filename for s in specs} | {s.filename + GZIP_SUFFIX for s in specs})
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.exists():
        raise DataError(f"{run_dir}: no manifest.json. Every run folder needs one; "
                        "run `python -m collect env` to create it, or remove the folder.")
    manifest, manifest_text = load_checked(manifest_path, Manifest)
    _datasheet_from_table(manifest, manifest_path)
    if manifest.run_id != run_dir.name:
        raise DataError(f"{manifest_path}: field run_id: value {manifest.run_id!r} does not match "
                        f"the folder name {run_dir.name!r}. Rename one of them.")
    run = Run(id=run_dir.name, path=run_dir, manifest=manifest, files=[manifest_path],
              texts={manifest_path: manifest_text})
    for spec in specs:
        try:
            path = stored_path(run_dir, spec.filename)
        except DataFileError as exc:
            raise DataError(str(exc)) from None
        if path is not None:
            data, run.texts[path] = load_checked(path, spec.dataclass())
            if data.run_id != run.id:
                raise DataError(f"{path}: field run_id: value {data.run_id!r}: this file belongs to another run, not "
                                f"{run.id!r}. Put it back in data/runs/{data.run_id}/ (or collect it again for this run).")
            run.phases[spec.phase] = data
            run.files.append(path)
    _mark_unfinished(run)
    return run


def _datasheet_from_table(manifest: Manifest, path: Path) -> None:
    """Replace the manifest's datasheet with the code's own entry for its key (collect/schema/datasheets.py): the
    figures are the vendor's, not the run's, so a file's own are not trusted; a key the code does not
    know, or one the device's name contradicts, is refused."""
    if manifest.datasheet is None:
        return
    key = manifest.datasheet.key
    entry = datasheets.by_key(key)
    name = manifest.device.name if manifest.device else None
    named = datasheets.lookup(name) if name is not None else entry
    if entry is None or named is None or named.key != key:
        whose = (f"the device is {shown(name)}, whose datasheet is {named.key!r}" if named is not None else
                 f"the device is {shown(name)}, which has no datasheet here" if entry is not None else
                 f"no datasheet has this key (known: {', '.join(datasheets.known_keys())})")
        raise DataError(f"{path}: field datasheet.key: value {key!r}: {whose}. The datasheet is looked up from the "
                        "device's name by collect/schema/datasheets.py; set datasheet to null, or to that entry.")
    manifest.datasheet = entry


def _mark_unfinished(run: Run) -> None:
    """A phase the manifest still calls running crashed (or is still collecting), and one recorded as
    failed after saving rows stopped midway: either way its rows are partial, and pages say so."""
    for rec in run.manifest.phases:
        saved = rec.name in run.phases
        if rec.status in UNFINISHED or (rec.status == "failed" and saved):
            was = rec.status
            rec.status = "partial" if saved or rec.name == "env" else "failed"
            if was == "running" and not rec.error:
                rec.error = ("the collect stopped before the phase's end (it was interrupted, or is still "
                             "collecting)")


def run_dirs(data_dir: Path) -> list[Path]:
    root = Path(data_dir) / "runs"
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p.is_dir() or p.is_symlink()) and not p.name.startswith("."))


def reference_dirs(data_dir: Path) -> list[Path]:
    root = Path(data_dir) / "reference"
    return sorted(d for d in root.iterdir() if d.is_dir()) if root.is_dir() else []


def load_references(data_dir: Path) -> list[Run]:
    """Published figures in data/reference/<id>/, validated like runs; they must say they are published."""
    refs = [load_run(d) for d in reference_dirs(data_dir)]
    for r in refs:
        if r.manifest.origin != "published" or not r.manifest.citation:
            raise DataError(f"{r.path / 'manifest.json'}: field origin: value {r.manifest.origin!r}: data/reference/ "
                            "holds published figures only; set origin to 'published' and give a citation.")
    return refs


def load_runs(data_dir: Path) -> list[Run]:
    """Every run under data/runs, oldest first by creation time; none at all is an error."""
    dirs = run_dirs(data_dir)
    if not dirs:
        raise DataError(f"{Path(data_dir) / 'runs'}: no runs found. Collect one on a GPU with `make collect`, "
                        "or restore the committed runs with `git checkout -- data/`.")
    published = {d.name: d for d in reference_dirs(data_dir)}
    for d in dirs:
        if d.name in published:
            raise DataError(f"{d} and {published[d.name]}: one run id names a measured run and published figures, "
                            "and pages tell runs apart by their id. Rename one of them (folder and run_id).")
    runs = [load_run(d) for d in dirs]
    return sorted(runs, key=lambda r: (r.created, r.id))


# A phase that does not apply to the GPU (the iterations phase on anything but Hopper) is as done as it can be there:
# counting it unfinished would leave every T4's run unnarrated behind the committed ones.
DONE = ("complete", "unsupported")


def is_complete(run: Run) -> bool:
    """Whether every phase of a collect ran to its end in this run, or does not apply to its GPU: a bench-only
    repeat, or a collect stopped partway, is a run the history shows but not one a whole report can narrate."""
    status = {p.name: p.status for p in run.manifest.phases}
    return all(status.get(spec.name) in DONE for spec in PHASES)


def select_run(runs: list[Run], wanted: str | None = None) -> Run:
    """The narrated run: $REPORT_RUN, else the configured id, else the newest run whose every phase completed
    (the newest of all where none did)."""
    wanted = os.environ.get(RUN_ENV_VAR) or wanted
    if wanted:
        for r in runs:
            if r.id == wanted:
                return r
        raise DataError(f"run {wanted!r} (from ${RUN_ENV_VAR} or mkdocs.yml extra.run) is not in data/runs; "
                        f"available: {', '.join(r.id for r in runs)}.")
    complete = [r for r in runs if is_complete(r)]
    return (complete or runs)[-1]
