"""Find runs under data/runs, validate every file, and hand out pandas frames of their rows."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from collect.schema import FILE_SPECS, available_specs
from collect.schema.manifest import Manifest

from .errors import DataError
from .validate import load_validated

RUN_ENV_VAR = "REPORT_RUN"


@dataclass
class Run:
    """One validated run: its manifest plus whichever phase files it has."""

    id: str
    path: Path
    manifest: Manifest
    phases: dict[str, Any] = field(default_factory=dict)

    def has(self, phase: str) -> bool:
        return phase == "env" or phase in self.phases

    def phase(self, name: str) -> Any | None:
        return self.manifest if name == "env" else self.phases.get(name)

    def frame(self, phase: str, table: str = "rows") -> pd.DataFrame:
        """A list field of a phase file as a tidy DataFrame (empty, with columns, when absent)."""
        obj = self.phase(phase)
        items = getattr(obj, table, None) if obj is not None else None
        if items:
            return pd.DataFrame([dataclasses.asdict(x) for x in items])
        return pd.DataFrame(columns=_row_columns(phase, table))

    @cached_property
    def device_name(self) -> str:
        return self.manifest.device.name if self.manifest.device else "unknown GPU"

    def phase_record(self, name: str):
        return next((p for p in self.manifest.phases if p.name == name), None)


def _row_columns(phase: str, table: str) -> list[str]:
    spec = FILE_SPECS.get(phase)
    if spec is None:
        return []
    try:
        cls = spec.dataclass()
    except ModuleNotFoundError:
        return []
    f = next((f for f in dataclasses.fields(cls) if f.name == table), None)
    if f is None:
        return []
    hint = _resolve_list_item(cls, table)
    return [x.name for x in dataclasses.fields(hint)] if hint else []


def _resolve_list_item(cls, name: str):
    import typing

    hints = typing.get_type_hints(cls)
    tp = hints.get(name)
    args = typing.get_args(tp)
    return args[0] if args and dataclasses.is_dataclass(args[0]) else None


def load_run(run_dir: Path) -> Run:
    """Validate a run folder; any bad file stops with a DataError naming it."""
    run_dir = Path(run_dir)
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.exists():
        raise DataError(f"{run_dir}: no manifest.json. Every run folder needs one; "
                        "run `python -m collect env` to create it, or remove the folder.")
    manifest = load_validated(manifest_path, Manifest)
    if manifest.run_id != run_dir.name:
        raise DataError(f"{manifest_path}: field run_id: value {manifest.run_id!r} does not match "
                        f"the folder name {run_dir.name!r}. Rename one of them.")
    run = Run(id=run_dir.name, path=run_dir, manifest=manifest)
    for spec in available_specs():
        if spec.phase == "env":
            continue
        path = run_dir / spec.filename
        if path.exists():
            run.phases[spec.phase] = load_validated(path, spec.dataclass())
    return run


def run_dirs(data_dir: Path) -> list[Path]:
    root = Path(data_dir) / "runs"
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def load_references(data_dir: Path) -> list[Run]:
    """Published figures in data/reference/<id>/, validated like runs; they must say they are published."""
    root = Path(data_dir) / "reference"
    refs = [load_run(d) for d in sorted(root.iterdir()) if d.is_dir()] if root.is_dir() else []
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
    runs = [load_run(d) for d in dirs]
    return sorted(runs, key=lambda r: (r.manifest.created_utc, r.id))


def select_run(runs: list[Run], wanted: str | None = None) -> Run:
    """The narrated run: $REPORT_RUN, else the configured id, else the newest."""
    wanted = os.environ.get(RUN_ENV_VAR) or wanted
    if wanted:
        for r in runs:
            if r.id == wanted:
                return r
        raise DataError(f"run {wanted!r} (from ${RUN_ENV_VAR} or mkdocs.yml extra.run) is not in data/runs; "
                        f"available: {', '.join(r.id for r in runs)}.")
    return runs[-1]
