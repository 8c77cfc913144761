"""Validate one JSON data file against its schema dataclass with pydantic."""
from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from collect.schema import SCHEMA_VERSION

from .errors import DataError


@lru_cache(maxsize=None)
def _adapter(cls) -> TypeAdapter:
    return TypeAdapter(cls)


def _nonfinite_path(data: Any, loc: tuple = ()) -> tuple | None:
    """Where a NaN or infinity hides (Python's json accepts them; our contract does not)."""
    if isinstance(data, float) and not math.isfinite(data):
        return loc
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        found = _nonfinite_path(value, loc + (key,))
        if found is not None:
            return found
    return None


def _field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _value_at(data: Any, loc: tuple) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return "(missing)"
    return data


def load_validated(path: Path, cls) -> Any:
    """Parse `path` and return an instance of `cls`, or raise DataError naming file, field and value."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{path}: cannot read it ({exc.strerror}).") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}. "
                        "Re-run the phase that wrote it, or restore it from git.") from exc
    bad = _nonfinite_path(data)
    if bad is not None:
        raise DataError(f"{path}: field {_field_path(bad)}: value {_value_at(data, bad)}: NaN and infinity are "
                        "not allowed; an unmeasured value is null, with the row's status and reason saying why.")
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object at the top level, found {type(data).__name__}.")
    version = data.get("schema_version", "(missing)")
    if version != SCHEMA_VERSION:
        raise DataError(f"{path}: field schema_version: value {version!r} is not supported; this code reads "
                        f"schema_version {SCHEMA_VERSION}. Re-collect the run or check out the code that wrote it.")
    try:
        return _adapter(cls).validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first.get("loc", ()))
        value = _value_at(data, loc)
        shown = repr(value)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise DataError(f"{path}: field {_field_path(loc)}: value {shown}: {first['msg']}{more}.") from None
