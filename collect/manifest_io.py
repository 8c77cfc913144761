"""Read an existing manifest back into dataclasses without pydantic (the GPU box has none)."""
from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

from .schema.manifest import Manifest


def _build(tp, value):
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if value is None:
        return None
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        known = {f.name for f in dataclasses.fields(tp)}
        return tp(**{k: _build(hints[k], v) for k, v in value.items() if k in known})
    if origin is list:
        return [_build(args[0], v) for v in value]
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        for a in args:
            if a is type(None):
                continue
            if dataclasses.is_dataclass(a):
                return _build(a, value)
        return value
    return value


def read_manifest(path: Path) -> Manifest:
    """Resume needs the phases recorded so far; a manifest this code cannot read is an error, not a reset."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return _build(Manifest, data)
    except (OSError, json.JSONDecodeError, TypeError, KeyError) as exc:
        raise SystemExit(f"{path}: cannot read the existing manifest ({exc}). Fix or move it, "
                         "or collect into a new --run-id; nothing was overwritten.") from exc
