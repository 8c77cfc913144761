"""Atomic JSON writes of schema dataclasses, and reading them back (standard library only)."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
import types
import typing
from pathlib import Path
from typing import Any

from .schema.chars import visible

# Keys a file held that this code's dataclass does not know (written by newer code, or by hand):
# kept on the object under this attribute and written back, so reading and saving loses nothing.
UNKNOWN = "_unknown_keys"
# Ends a text clipped to its field's length bound, so a reader knows there was more.
CLIPPED = " [...]"


def fit_text(value: Any, max_len: int) -> Any:
    """A tool's text (an error, a kernel name, a note) as the schema lets render/ read it: each character a
    reader cannot see written as its code point, and clipped to the field's bound. Applies to every string
    in the value (a list's items, a mapping's keys and values)."""
    if isinstance(value, str):
        value = visible(value)
        return value if len(value) <= max_len else value[:max_len - len(CLIPPED)] + CLIPPED
    if isinstance(value, list):
        return [fit_text(v, max_len) for v in value]
    if isinstance(value, dict):
        return {fit_text(k, max_len): fit_text(v, max_len) for k, v in value.items()}
    return value


def _field_value(obj: Any, f: dataclasses.Field) -> Any:
    value = to_jsonable(getattr(obj, f.name))
    free_text = "max_len" in f.metadata and "pattern" not in f.metadata and "choices" not in f.metadata
    return fit_text(value, f.metadata["max_len"]) if free_text else value


def to_jsonable(obj: Any) -> Any:
    """Dataclasses to plain dicts; a NaN or infinite float becomes null (JSON has neither); free text fit
    to its field (fit_text)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {f.name: _field_value(obj, f) for f in dataclasses.fields(obj)}
        for k, v in (getattr(obj, UNKNOWN, None) or {}).items():
            out.setdefault(k, v)
        return out
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if hasattr(obj, "item") and callable(obj.item):  # numpy / torch scalars
        return to_jsonable(obj.item())
    return obj


def from_jsonable(tp: Any, value: Any) -> Any:
    """JSON back into the schema's dataclasses, without pydantic (the GPU box has none). Values are
    taken as they are (render/ validates them); keys the dataclass lacks are kept (see UNKNOWN)."""
    if value is None:
        return None
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        known = {f.name for f in dataclasses.fields(tp)}
        obj = tp(**{k: from_jsonable(hints[k], v) for k, v in value.items() if k in known})
        unknown = {k: v for k, v in value.items() if k not in known}
        if unknown:
            setattr(obj, UNKNOWN, unknown)
        return obj
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and args:
        return [from_jsonable(args[0], v) for v in value]
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if dataclasses.is_dataclass(a)]
        return from_jsonable(inner[0], value) if inner and isinstance(value, dict) else value
    return value


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable: a crash right after os.replace must not bring back the old file."""
    if not hasattr(os, "O_DIRECTORY"):  # pragma: no cover - Windows has no directory fsync
        return
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write to a temp file in the same folder, fsync, rename, fsync the folder: a crash leaves the old
    file or the new one, never half of one. The file is readable like any other (0644 under umask 022;
    mkstemp alone would make it 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(to_jsonable(obj), indent=1, allow_nan=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def remove_stale_temp_files(folder: Path) -> list[Path]:
    """Temp files an interrupted write left (`.<name>.<random>.tmp`): never data, so removed."""
    gone = []
    for p in Path(folder).glob(".*.tmp"):
        if p.is_file() and not p.is_symlink():
            p.unlink(missing_ok=True)
            gone.append(p)
    return gone
