"""The data contract, written once as standard-library dataclasses (no torch, no pydantic).

collect/ builds these objects and writes them; render/ validates JSON against them with pydantic.
Each phase owns one module here and one file in data/runs/<run-id>/.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from .common import SCHEMA_VERSION, STATUSES, doc  # noqa: F401


@dataclass(frozen=True)
class PhaseFileSpec:
    """Where a phase's data lives and which dataclass describes it."""

    phase: str
    filename: str
    module: str
    cls_name: str
    title: str

    def dataclass(self):
        return getattr(importlib.import_module(self.module), self.cls_name)


# Order is the report's order; `env` lives in the manifest.
FILE_SPECS: dict[str, PhaseFileSpec] = {
    s.phase: s
    for s in [
        PhaseFileSpec("env", "manifest.json", "collect.schema.manifest", "Manifest", "Manifest (env phase and provenance)"),
        PhaseFileSpec("correctness", "correctness.json", "collect.schema.correctness", "CorrectnessFile", "Correctness grid"),
        PhaseFileSpec("bench", "bench.json", "collect.schema.bench", "BenchFile", "Benchmark sweeps"),
        PhaseFileSpec("profile", "profile.json", "collect.schema.profile", "ProfileFile", "Nsight Compute profiles"),
        PhaseFileSpec("decode", "decode.json", "collect.schema.decode", "DecodeFile", "KV-cache decode"),
        PhaseFileSpec("iterations", "iterations.json", "collect.schema.iterations", "IterationsFile", "Kernel iterations"),
    ]
}


def available_specs() -> list[PhaseFileSpec]:
    """Specs whose schema module exists in this checkout."""
    out = []
    for spec in FILE_SPECS.values():
        try:
            spec.dataclass()
        except ModuleNotFoundError as exc:
            if exc.name != spec.module:
                raise
            continue
        out.append(spec)
    return out
