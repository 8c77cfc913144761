"""Read an existing manifest back into dataclasses without pydantic (the GPU box has none)."""
from __future__ import annotations

from pathlib import Path

from .jsonio import from_jsonable
from .schema import SCHEMA_VERSION
from .schema.manifest import Manifest
from .schema.reader import DataFileError, read_json


class ManifestError(RuntimeError):
    """An existing manifest this code must not write over; nothing was changed."""


def read_manifest(path: Path) -> Manifest:
    """Resume needs the phases recorded so far; a manifest this code cannot read is an error, not a reset.
    Keys this code does not know are kept and written back (jsonio.UNKNOWN)."""
    try:
        data = read_json(path)
    except DataFileError as exc:
        raise ManifestError(f"cannot read the existing manifest: {exc} Fix or move it, or collect into a new "
                            "--run-id; nothing was overwritten.") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: not a manifest (a JSON object). Move it, or collect into a new --run-id.")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        newer = isinstance(version, int) and version > SCHEMA_VERSION
        how = ("update this checkout to the code that wrote it" if newer else
               "migrate the run first (python -m collect.schema.migrate)")
        raise ManifestError(f"{path}: field schema_version: value {version!r}: this code writes schema_version "
                            f"{SCHEMA_VERSION}, so adding to this run would mix two formats. {how[0].upper()}{how[1:]}, "
                            "or collect into a new --run-id; nothing was overwritten.")
    try:
        return from_jsonable(Manifest, data)
    except (TypeError, KeyError, AttributeError) as exc:
        raise ManifestError(f"{path}: cannot read the existing manifest ({exc}). Fix or move it, "
                            "or collect into a new --run-id; nothing was overwritten.") from exc
