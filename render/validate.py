"""Validate one JSON data file against its schema dataclass: types with pydantic, then the bounds,
patterns and case keys the schema declares beside each field (collect/schema/common.py `doc`)."""
from __future__ import annotations

import dataclasses
import re
import typing
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from collect.schema import SCHEMA_VERSION
from collect.schema.common import case_key
from collect.schema.reader import DataFileError, field_path, read_checked, shown

from .errors import DataError


@lru_cache(maxsize=None)
def _adapter(cls) -> TypeAdapter:
    return TypeAdapter(cls)


def _value_at(data: Any, loc: tuple) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return "(missing)"
    return data


def load_validated(path: Path, cls) -> Any:
    """Parse `path` and return an instance of `cls`, or raise DataError naming file, field and value."""
    path = Path(path)
    try:
        data, text = read_checked(path)
    except DataFileError as exc:
        raise DataError(str(exc)) from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object at the top level, found {type(data).__name__}.")
    version = data.get("schema_version", "(missing)")
    if version != SCHEMA_VERSION:
        raise DataError(f"{path}: field schema_version: value {version!r} is not supported; this code reads "
                        f"schema_version {SCHEMA_VERSION}. Re-collect the run or check out the code that wrote it.")
    try:  # the text again: pydantic's strict mode takes dataclasses from JSON, not from dicts
        obj = _adapter(cls).validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first.get("loc", ()))
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise DataError(f"{path}: field {field_path(loc)}: value {shown(_value_at(data, loc))}: "
                        f"{first['msg']}{more}.") from None
    problem = check_declared(obj)
    if problem is not None:
        raise DataError(f"{path}: {problem}")
    return obj


# --- what the schema declares beside each field -----------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How to check one dataclass: its constrained fields, and the records nested in it."""

    checks: tuple  # (name, bounds | None, pattern | None, utc_time)
    nested: tuple  # (name, is_list)


@lru_cache(maxsize=None)
def _plan(cls) -> _Plan:
    hints = typing.get_type_hints(cls)
    checks, nested = [], []
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if "bounds" in meta or "pattern" in meta or meta.get("utc_time"):
            pattern = re.compile(meta["pattern"]) if "pattern" in meta else None
            checks.append((f.name, meta.get("bounds"), pattern, bool(meta.get("utc_time"))))
        inner = _record_type(hints[f.name])
        if inner is not None:
            nested.append((f.name, inner[1]))
    return _Plan(tuple(checks), tuple(nested))


def _record_type(tp) -> tuple[type, bool] | None:
    """(dataclass, is a list of them) for a field holding records, else None."""
    if dataclasses.is_dataclass(tp):
        return tp, False
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) is list and args and dataclasses.is_dataclass(args[0]):
        return args[0], True
    if len(args) == 1 and dataclasses.is_dataclass(args[0]):
        return args[0], False
    return None


def _bounds_text(bounds) -> str:
    lo, hi, lo_open, hi_open = bounds
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {lo:g}")
    if hi is not None:
        parts.append(f"{'<' if hi_open else '<='} {hi:g}")
    return " and ".join(parts)


def _violation(value: Any, bounds, pattern, utc_time: bool) -> str | None:
    if value is None:
        return None
    if bounds is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi, lo_open, hi_open = bounds
        if (lo is not None and (value <= lo if lo_open else value < lo)) or (
                hi is not None and (value >= hi if hi_open else value > hi)):
            return f"out of range: it must be {_bounds_text(bounds)}"
    if pattern is not None and isinstance(value, str) and not pattern.match(value):
        return f"not of the allowed form {pattern.pattern}"
    if utc_time and isinstance(value, str):
        try:
            ok = datetime.fromisoformat(value).tzinfo is not None
        except ValueError:
            ok = False
        if not ok:
            return "not an ISO 8601 time with its UTC offset (e.g. 2026-11-29T08:00:00+00:00)"
    return None


def check_declared(obj: Any, where: str = "") -> str | None:
    """The first value outside its declared bounds or form, or the first case measured twice,
    as 'field <path>: value <v>: <why>'; None when the file is clean."""
    plan = _plan(type(obj))
    for name, bounds, pattern, utc_time in plan.checks:
        value = getattr(obj, name)
        why = _violation(value, bounds, pattern, utc_time)
        if why:
            return f"field {where}{name}: value {shown(value)}: {why}."
    for name, is_list in plan.nested:
        value = getattr(obj, name)
        if value is None:
            continue
        items = value if is_list else [value]
        for i, item in enumerate(items):
            problem = check_declared(item, f"{where}{name}[{i}]." if is_list else f"{where}{name}.")
            if problem:
                return problem
        if is_list and items:
            problem = _duplicate(items, f"{where}{name}")
            if problem:
                return problem
    return None


def _duplicate(items: list, table: str) -> str | None:
    """Two rows of one table with the same case key (the schema's CASE_KEY for that row type)."""
    cls = type(items[0])
    key_fields = getattr(cls, "CASE_KEY", None)
    if not key_fields:
        return None
    seen: dict[tuple, int] = {}
    for i, item in enumerate(items):
        key = case_key(item, cls)
        if key in seen:
            shown = ", ".join(f"{k}={v!r}" for k, v in zip(key_fields, key))
            return (f"field {table}[{i}]: duplicate case: {table}[{seen[key]}] and {table}[{i}] both measure "
                    f"{shown}. A case is measured once per run; remove one of them (or, for two conditions "
                    "of one case, record what differs in a field of the case key).")
        seen[key] = i
    return None


def allowed(f: dataclasses.Field) -> str:
    """What values a field accepts, in words, for the Data format page ('' when any of its type)."""
    meta, parts = f.metadata, []
    if "bounds" in meta:
        parts.append(_bounds_text(meta["bounds"]))
    if "pattern" in meta:
        choices = re.fullmatch(r"\^\(([\w|-]+)\)\$", meta["pattern"])
        parts.append("one of " + ", ".join(choices.group(1).split("|")) if choices else f"matches {meta['pattern']}")
    if meta.get("utc_time"):
        parts.append("an ISO 8601 time with its UTC offset")
    return "; ".join(parts)
