"""The phases of the study, once: the only list of them that collect order, schema files, pages, the
Home table and the site's navigation are built from.

A phase is a vertical slice: a collector module in collect/, one data file with its dataclass here,
and the page or pages of the report that narrate it. Adding a phase means adding those pieces and
one entry in PHASES. Derived from it:
- collect/phases.py: the collect order and COLLECTORS, one loader `_<phase>()` per entry (collectors
  import torch, and this module, which render/ imports too, depends on none of them);
- render/pages/__init__.py: PAGE_CLASSES, in this order, from its table of which class narrates each
  PageRef.context (render's classes cannot be named here);
- the site's navigation: render/mkdocs_hook.py gives MkDocs site_pages(); mkdocs.yml lists no pages;
- the Home page's phase table and the Data format page.
"""
from __future__ import annotations

from dataclasses import dataclass

from .bench import BenchFile
from .correctness import CorrectnessFile
from .decode import DecodeFile
from .diff import DiffFile, NoiseFloorFile
from .iterations import IterationsFile
from .manifest import Manifest
from .profile import ProfileFile


@dataclass(frozen=True)
class PageRef:
    """A page of the report: its Markdown file in docs/, its title in the navigation, and the name
    its Jinja2 context object has in templates (`{{ bench.summary() }}`)."""

    doc: str
    title: str
    context: str


@dataclass(frozen=True)
class PhaseSpec:
    """One phase: name, data file, schema dataclass, what its table of rows is called, title, pages, and the
    variable that overrides its time budget (which rows a run holds depends on it, so the pages name it)."""

    name: str
    filename: str
    schema: type
    title: str
    rows_field: str
    pages: tuple[PageRef, ...]
    budget_env: str | None = None

    @property
    def phase(self) -> str:
        return self.name

    def dataclass(self) -> type:
        return self.schema

    def row_count(self, obj) -> int:
        """Rows of a phase file, loaded or as written (a dict): its main table only (never its notes)."""
        rows = obj.get(self.rows_field) if isinstance(obj, dict) else getattr(obj, self.rows_field, None)
        return len(rows or [])


# Collect order, which is also the report's order. env runs first: every later phase reads its device
# facts and measured ceilings.
PHASES: tuple[PhaseSpec, ...] = (
    PhaseSpec("env", "manifest.json", Manifest, "Manifest (env phase and provenance)", "measured_ceilings",
              (PageRef("hardware.md", "Hardware & ceilings", "hardware"),)),
    PhaseSpec("correctness", "correctness.json", CorrectnessFile, "Correctness grid", "rows",
              (PageRef("correctness.md", "Correctness", "correctness"),)),
    PhaseSpec("bench", "bench.json", BenchFile, "Benchmark sweeps", "rows",
              (PageRef("byte-arithmetic.md", "Byte arithmetic", "bytes"),
               PageRef("benchmarks.md", "Benchmarks", "bench")), "BENCH_BUDGET_S"),
    PhaseSpec("iterations", "iterations.json", IterationsFile, "Kernel iterations", "rows",
              (PageRef("iterations.md", "Kernel iterations", "iterations"),), "ITERATIONS_BUDGET_S"),
    PhaseSpec("profile", "profile.json", ProfileFile, "Nsight Compute profiles", "impls",
              (PageRef("profiling.md", "Profiling", "profile"),), "PROFILE_BUDGET_S"),
    PhaseSpec("decode", "decode.json", DecodeFile, "KV-cache decode", "rows",
              (PageRef("decode.md", "Decode", "decode"),), "DECODE_BUDGET_S"),
)

@dataclass(frozen=True)
class DerivedSpec:
    """A file computed from runs rather than measured: where it lives, its title, its dataclass."""

    path: str
    title: str
    schema: type


# Not phases (nothing collects them, and a run folder holds none): the Data format page documents them too.
DERIVED: tuple[DerivedSpec, ...] = (
    DerivedSpec("data/noise/<device-slug>.json", "Noise floor (python -m collect noise)", NoiseFloorFile),
    DerivedSpec("data/diffs/<run-a>-vs-<run-b>.json", "Diff of two runs (python -m collect diff)", DiffFile),
)

# Pages about the whole run rather than one phase: Home first, the rest after the phases' pages.
HOME = PageRef("index.md", "Home", "home")
RUN_PAGES: tuple[PageRef, ...] = (
    PageRef("compare.md", "Device comparison", "compare"),
    PageRef("reproduce.md", "Reproduce", "reproduce"),
    PageRef("data-format.md", "Data format", "dataformat"),
    PageRef("glossary.md", "Glossary", "glossary"),
)


def site_pages() -> list[PageRef]:
    """Every page in navigation order: Home, each phase's pages in collect order, then the run pages."""
    return [HOME, *(p for spec in PHASES for p in spec.pages), *RUN_PAGES]
