"""The phases `python -m collect` knows, in the order they run (from the one registry), and the
collector module that runs each.

Each collector is imported on first use, so a phase that cannot import (no GPU stack, a broken
dependency) fails alone instead of the whole run; and the registry (collect/schema/registry.py),
which render/ imports, depends on no collector. So the registry names the phases, and this module
holds one loader per phase, `_<phase>()`, a plain import a reader can follow; COLLECTORS is built from
the registry, and a phase added there without its loader here stops the import, naming it.
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


def _loader(phase: str) -> Callable[[], ModuleType]:
    load = globals().get(f"_{phase}")
    if load is None:
        raise ImportError(f"the phase registry names {phase!r}, but collect/phases.py has no _{phase}() to import "
                          "its collector")
    return load


COLLECTORS: dict[str, Callable[[], ModuleType]] = {p.name: _loader(p.name) for p in PHASES}


def phase_module(name: str) -> ModuleType:
    """The phase's collector, imported now: a phase that cannot import fails alone, not the whole run."""
    return COLLECTORS[name]()


def filename(name: str) -> str:
    return FILE_SPECS[name].filename
