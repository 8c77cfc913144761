"""Page contexts by name: each docs/*.md page uses one (e.g. `{{ hardware.device_table() }}`).

Which pages exist, and in what order, comes from the phase registry (collect.schema.registry); this
module only says which class narrates each of them.
"""
from __future__ import annotations

from collect.schema import site_pages

from ..runs import Run
from .base import Page
from .bench import BenchPage
from .byte_arithmetic import ByteArithmeticPage
from .compare import ComparePage
from .correctness import CorrectnessPage
from .dataformat import DataFormatPage
from .decode import DecodePage
from .glossary import GlossaryPage
from .hardware import HardwarePage
from .home import HomePage
from .iterations import IterationsPage
from .profile import ProfilePage
from .reproduce import ReproducePage

# Template name -> the class behind it; the names are the registry's PageRef.context.
PAGE_CLASSES: dict[str, type[Page]] = {
    "home": HomePage, "hardware": HardwarePage, "correctness": CorrectnessPage, "bytes": ByteArithmeticPage,
    "bench": BenchPage, "iterations": IterationsPage, "profile": ProfilePage, "decode": DecodePage,
    "compare": ComparePage, "reproduce": ReproducePage, "dataformat": DataFormatPage,
    "glossary": GlossaryPage,
}

_missing = [p.context for p in site_pages() if p.context not in PAGE_CLASSES]
if _missing:
    raise ImportError(f"the phase registry names page contexts with no class in render/pages: {_missing}; "
                      "add each to PAGE_CLASSES")


def page_contexts(run: Run, runs: list[Run]) -> dict:
    return {p.context: PAGE_CLASSES[p.context](run, runs) for p in site_pages()}
