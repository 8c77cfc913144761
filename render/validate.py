"""Validate one JSON data file against its schema dataclass: types with pydantic, then the bounds,
patterns and case keys the schema declares beside each field (collect/schema/common.py `doc`)."""
from __future__ import annotations

import dataclasses
import math
import re
import typing
from datetime import datetime, timedelta, timezone
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
    return load_checked(path, cls)[0]


def _version_fix(path: Path, version: Any) -> str:
    """How to read a file of another schema version: an older one migrates (each version since the first adds
    what older runs lack, collect/schema/migrate.py), a newer one needs newer code."""
    if isinstance(version, int) and not isinstance(version, bool) and 1 <= version < SCHEMA_VERSION:
        return (f"Bring the run up to date with python -m collect.schema.migrate to_version_{SCHEMA_VERSION} "
                f"{path.parent}/*.json* (it rewrites the files in place; what it adds is marked missing for older "
                "runs), or re-collect it.")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        return "Newer code wrote it: update this checkout (git pull) to read it."
    return "Re-collect the run or check out the code that wrote it."


def load_checked(path: Path, cls) -> tuple[Any, str]:
    """(an instance of `cls`, the text it was validated from): the text is what gets published, never the
    path read again (by then it may be another file, or a FIFO that blocks whoever opens it)."""
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
                        f"schema_version {SCHEMA_VERSION}. {_version_fix(path, version)}")
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
    return obj, text


# --- what the schema declares beside each field -----------------------------------------------

# A run is collected before it is built: a time later than the build, past this allowance for two clocks
# that disagree a little, is no time the run was made (a run dated 2099 would be narrated on every page).
CLOCK_SKEW = timedelta(hours=1)
# How far a stored derived field may sit from the value recomputed from its inputs: the published
# figures in data/reference/ are rounded to three significant digits; collect stores the exact quotient.
DERIVED_REL_TOL = 0.01


@dataclasses.dataclass(frozen=True)
class _Check:
    """What the schema declares beside one field (collect/schema/common.py `doc`)."""

    name: str
    bounds: tuple | None
    pattern: re.Pattern | None
    choices: tuple | None
    max_len: int | None
    utc_time: bool
    at_most: str | None
    at_least: str | None
    derived: Any
    doc: str


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How to check one dataclass: its constrained fields, and the records nested in it."""

    checks: tuple  # _Check, for each field that declares anything
    nested: tuple  # (name, is_list)


_DECLARED = ("bounds", "pattern", "choices", "max_len", "utc_time", "at_most", "at_least", "derived")


@lru_cache(maxsize=None)
def _plan(cls) -> _Plan:
    hints = typing.get_type_hints(cls)
    checks, nested = [], []
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if any(k in meta for k in _DECLARED):
            checks.append(_Check(f.name, meta.get("bounds"), re.compile(meta["pattern"]) if "pattern" in meta else None,
                                 meta.get("choices"), meta.get("max_len"), bool(meta.get("utc_time")),
                                 meta.get("at_most"), meta.get("at_least"), meta.get("derived"), meta.get("doc", "")))
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


def _strings(value: Any):
    """Every string in a field's value: itself, a list's items, a mapping's keys and values."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)


def _outside(x: float, bounds) -> bool:
    lo, hi, lo_open, hi_open = bounds
    return (lo is not None and (x <= lo if lo_open else x < lo)) or (hi is not None and (x >= hi if hi_open else x > hi))


def _violation(value: Any, c: _Check, now: datetime) -> str | None:
    """Why `value` breaks what its own field declares (the record's other fields aside), or None."""
    if value is None:
        return None
    if c.bounds is not None:
        # A list of numbers (a row's samples) holds each of them to the field's bounds.
        numbers = value if isinstance(value, list) else [value]
        for i, x in enumerate(numbers):
            if isinstance(x, (int, float)) and not isinstance(x, bool) and _outside(x, c.bounds):
                at = f" (item {i}: {x!r})" if isinstance(value, list) else ""
                return f"out of range{at}: it must be {_bounds_text(c.bounds)}"
    if c.max_len is not None:
        longest = max((len(s) for s in _strings(value)), default=0)
        if longest > c.max_len:
            return (f"{longest} characters, longer than the {c.max_len} this field allows (a string is repeated on "
                    "many pages, so each has a bound)")
    if c.choices is not None and isinstance(value, str) and value not in c.choices:
        return f"not one of {', '.join(map(repr, c.choices))}"
    if c.pattern is not None and isinstance(value, str) and not c.pattern.match(value):
        return f"not of the allowed form {c.pattern.pattern}"
    if c.utc_time and isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            return "not an ISO 8601 time with its UTC offset (e.g. 2026-11-29T08:00:00+00:00)"
        if when > now + CLOCK_SKEW:
            return (f"in the future: this build runs at {now.replace(microsecond=0).isoformat()}, and a run is made "
                    "before it is built. Correct the collecting machine's clock and the time")
    return None


def _disagreement(obj: Any, c: _Check, value: Any, top: Any) -> str | None:
    """Why `value` contradicts another field of its record (or a derived field its inputs), or None."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    for other, above in ((c.at_most, False), (c.at_least, True)):
        limit = getattr(obj, other) if other else None
        if limit is not None and (value < limit if above else value > limit):
            return (f"{'below' if above else 'above'} {other} ({limit!r}): a 10th percentile or a least value is at "
                    "most the median, a 90th percentile or a largest value at least, and a part at most its whole")
    if c.derived is not None:
        try:
            expected = c.derived(obj, top)
        except (ArithmeticError, TypeError):
            expected = None
        if expected is not None and not math.isclose(value, expected, rel_tol=DERIVED_REL_TOL, abs_tol=1e-12):
            formula = re.split(r"[:;]|\.(?:\s|$)", c.doc)[0]  # each derived field's description opens with it
            return (f"recomputed from the record ({formula}) it is {expected!r}; a derived field must agree with the "
                    "fields it comes from (collect stores it for convenience, and pages may read either)")
    return None


def check_declared(obj: Any, where: str = "", top: Any = None, now: datetime | None = None) -> str | None:
    """The first value outside its declared bounds or form, contradicting its record, or the first case
    measured twice, as 'field <path>: value <v>: <why>'; None when the file is clean. `top`: the file
    object, which derived fields may read (a decode row's floor uses the file's bandwidth)."""
    top = obj if top is None else top
    now = now or datetime.now(timezone.utc)
    plan = _plan(type(obj))
    for c in plan.checks:
        value = getattr(obj, c.name)
        why = _violation(value, c, now) or _disagreement(obj, c, value, top)
        if why:
            return f"field {where}{c.name}: value {shown(value)}: {why}."
    for name, is_list in plan.nested:
        value = getattr(obj, name)
        if value is None:
            continue
        items = value if is_list else [value]
        for i, item in enumerate(items):
            problem = check_declared(item, f"{where}{name}[{i}]." if is_list else f"{where}{name}.", top, now)
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
            case = ", ".join(f"{k}={v!r}" for k, v in zip(key_fields, key))
            return (f"field {table}[{i}]: duplicate case: {table}[{seen[key]}] and {table}[{i}] both measure "
                    f"{case}. A case is measured once per run; remove one of them (or, for two conditions "
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
    if "choices" in meta:
        parts.append("one of " + ", ".join(repr(c) if not c or " " in c else c for c in meta["choices"]))
    if meta.get("utc_time"):
        parts.append("an ISO 8601 time with its UTC offset, no later than the build")
    elif "max_len" in meta and "pattern" not in meta:
        parts.append(f"at most {meta['max_len']} characters" + (" each" if "list" in str(f.type) or "dict" in str(f.type)
                                                                 else ""))
    for key, words in (("at_most", "at most"), ("at_least", "at least")):
        if key in meta:
            parts.append(f"{words} {meta[key]}")
    if "derived" in meta:
        parts.append("must agree with the fields it is computed from")
    return "; ".join(parts)
