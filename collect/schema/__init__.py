"""The data contract, written once as standard-library dataclasses (no torch, no pydantic).

collect/ builds these objects and writes them; render/ validates JSON against them with pydantic.
Each phase owns one module here and one file in data/runs/<run-id>/; `registry.PHASES` lists them.
"""
from __future__ import annotations

import dataclasses
import typing

from .common import SCHEMA_VERSION, STATUSES, doc  # noqa: F401
from .registry import PHASES, PageRef, PhaseSpec, site_pages  # noqa: F401

# Kept under its older name: a phase's spec by name, in collect order.
FILE_SPECS: dict[str, PhaseSpec] = {s.name: s for s in PHASES}
# The variable that overrides each phase's time budget, for the phases that have one.
BUDGET_ENVS: dict[str, str] = {s.name: s.budget_env for s in PHASES if s.budget_env}


def records() -> list[type]:
    """Every dataclass the data files hold (the files, their rows and the records nested in them), each once."""
    out: list[type] = []
    todo = [s.dataclass() for s in PHASES]
    while todo:
        cls = todo.pop(0)
        if cls in out:
            continue
        out.append(cls)
        for hint in typing.get_type_hints(cls).values():
            todo += [a for arg in (hint, *typing.get_args(hint)) for a in (arg, *typing.get_args(arg))
                     if dataclasses.is_dataclass(a)]
    return out


def available_specs() -> list[PhaseSpec]:
    """Every phase's spec, in collect order (each schema module is imported by the registry)."""
    return list(PHASES)
