"""The phases `python -m collect` knows, in the order they run (from the one registry), and the
collector module that runs each.

Each collector is imported on first use, so a phase that cannot import (no GPU stack, a broken
dependency) fails alone instead of the whole run; and the registry (collect/schema/registry.py),
which render/ imports, depends on no collector.
"""
from __future__ import annotations

from types import ModuleType
from typing import Callable

from .schema import FILE_SPECS, PHASES

PHASE_ORDER = [p.name for p in PHASES]


def _env():
    from . import env
    return env


def _correctness():
    from . import correctness
    return correctness


def _bench():
    from . import bench
    return bench


def _iterations():
    from . import iterations
    return iterations


def _profile():
    from . import profile
    return profile


def _decode():
    from . import decode
    return decode


COLLECTORS: dict[str, Callable[[], ModuleType]] = {
    "env": _env, "correctness": _correctness, "bench": _bench, "iterations": _iterations, "profile": _profile,
    "decode": _decode,
}


def phase_module(name: str) -> ModuleType:
    """The phase's collector, imported now: a phase that cannot import fails alone, not the whole run."""
    return COLLECTORS[name]()


def filename(name: str) -> str:
    return FILE_SPECS[name].filename
