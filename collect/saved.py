"""Rows a phase already saved: read back for --resume, and never dropped by a later write.

A phase file is written after every case (RunContext.checkpoint), so a crash keeps the rows measured
so far. `--resume` hands them back to the phase (RunContext.saved_cases) so it measures only the
cases still missing, and every write carries the saved rows this collect has not redone, so a file
never holds fewer rows than it did.
"""
from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any

from .jsonio import from_jsonable, to_jsonable, write_json_atomic
from .schema import FILE_SPECS, SCHEMA_VERSION
from .schema.reader import DataFileError, read_json

# A saved row with one of these statuses is a result; an `error` or `skipped` row is tried again.
KEPT_STATUSES = ("ok", "oom", "unsupported")


class SavedRowsError(RuntimeError):
    """A saved phase file this collect must not write over (unreadable, another run, another version)."""


def record_tables(file_cls) -> dict[str, type]:
    """The list fields of a phase file that hold rows, with their row dataclass."""
    hints = typing.get_type_hints(file_cls)
    out = {}
    for f in dataclasses.fields(file_cls):
        args = typing.get_args(hints[f.name])
        if typing.get_origin(hints[f.name]) is list and args and dataclasses.is_dataclass(args[0]):
            out[f.name] = args[0]
    return out


def _file_cls(phase: str):
    spec = FILE_SPECS.get(phase)
    return spec.dataclass() if spec is not None else None


def _key_of(row: dict, row_cls) -> tuple:
    defaults = {f.name: f.default for f in dataclasses.fields(row_cls) if f.default is not dataclasses.MISSING}
    return tuple(row.get(k, defaults.get(k)) for k in row_cls.CASE_KEY)


def read_saved(path: Path, run_id: str) -> dict | None:
    """The phase file at `path` as JSON, or None when there is none; refuses one it must not touch."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = read_json(path)
    except DataFileError as exc:
        raise SavedRowsError(f"cannot read the rows saved there: {exc} Nothing was overwritten; fix or move the "
                             "file, or collect into a new --run-id.") from None
    if not isinstance(data, dict):
        raise SavedRowsError(f"{path}: not a phase file (a JSON object); nothing was overwritten. Move it away.")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise SavedRowsError(f"{path}: written with schema_version {data.get('schema_version')!r}, this code writes "
                             f"{SCHEMA_VERSION}; nothing was overwritten. Migrate it (python -m collect.schema.migrate) "
                             "or collect into a new --run-id.")
    if data.get("run_id") != run_id:
        raise SavedRowsError(f"{path}: its run_id is {data.get('run_id')!r}, not {run_id!r}; nothing was overwritten. "
                             "Move it back to its own run.")
    return data


def saved_rows(saved: dict | None, row_cls, table: str = "rows") -> dict[tuple, Any]:
    """Rows of `table` in `saved` that hold a result, as `row_cls` objects keyed by the case key."""
    if not saved:
        return {}
    out = {}
    for row in saved.get(table) or []:
        if isinstance(row, dict) and row.get("status", "ok") in KEPT_STATUSES:
            out[_key_of(row, row_cls)] = from_jsonable(row_cls, row)
    return out


def merge_saved(new: dict, saved: dict | None, file_cls) -> dict:
    """`new` with every saved row it has not redone appended to its table (by case key)."""
    if not saved or file_cls is None:
        return new
    for table, row_cls in record_tables(file_cls).items():
        old = saved.get(table) or []
        if not old or not getattr(row_cls, "CASE_KEY", ()):
            continue
        current = new.get(table) or []
        have = {_key_of(r, row_cls) for r in current if isinstance(r, dict)}
        carried = [r for r in old if isinstance(r, dict) and _key_of(r, row_cls) not in have]
        if carried:
            new[table] = list(current) + carried
    return new


def write_phase_file(path: Path, result: Any, saved: dict | None, phase: str) -> dict:
    """Write `result` atomically with the saved rows it has not redone; returns what was written."""
    data = merge_saved(to_jsonable(result), saved, _file_cls(phase))
    write_json_atomic(path, data)
    return data
