"""The phases `python -m collect` knows, in the order they run: read from the one registry."""
from __future__ import annotations

from types import ModuleType

from .schema import FILE_SPECS, PHASES

PHASE_ORDER = [p.name for p in PHASES]


def phase_module(name: str) -> ModuleType:
    """The phase's collector, imported now: a phase that cannot import fails alone, not the whole run."""
    return FILE_SPECS[name].collector()


def filename(name: str) -> str:
    return FILE_SPECS[name].filename
