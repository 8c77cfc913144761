"""The data contract, written once as standard-library dataclasses (no torch, no pydantic).

collect/ builds these objects and writes them; render/ validates JSON against them with pydantic.
Each phase owns one module here and one file in data/runs/<run-id>/; `registry.PHASES` lists them.
"""
from __future__ import annotations

from .common import SCHEMA_VERSION, STATUSES, doc  # noqa: F401
from .registry import PHASES, PageRef, PhaseSpec, site_pages  # noqa: F401

# Kept under its older name: a phase's spec by name, in collect order.
FILE_SPECS: dict[str, PhaseSpec] = {s.name: s for s in PHASES}


def available_specs() -> list[PhaseSpec]:
    """Every phase's spec, in collect order (each schema module is imported by the registry)."""
    return list(PHASES)
