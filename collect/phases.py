"""The phases `python -m collect` knows, in the order they run."""
from __future__ import annotations

import importlib

from .schema import FILE_SPECS

# env first: every later phase reads its device facts and measured ceilings.
PHASE_ORDER = ["env", "correctness", "bench", "iterations", "profile", "decode"]


def phase_module(name: str):
    """Imported lazily, so a phase that cannot import fails alone instead of the whole run."""
    return importlib.import_module(f"collect.{name}")


def filename(name: str) -> str:
    return FILE_SPECS[name].filename
