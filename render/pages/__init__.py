"""Page contexts by name: each docs/*.md page uses one (e.g. `{{ hardware.device_table() }}`).

Which pages exist, in what order and under what title, comes from the phase registry
(collect.schema.registry: PageRef.context names the context); this module only says which class
narrates each of them. The registry cannot say it itself: collect imports it on GPU boxes, where
render's classes (pandas, plotly) are not installed.
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

# The registry's PageRef.context -> the class behind it.
_NARRATORS: dict[str, type[Page]] = {
    "home": HomePage, "hardware": HardwarePage, "correctness": CorrectnessPage, "bytes": ByteArithmeticPage,
    "bench": BenchPage, "iterations": IterationsPage, "profile": ProfilePage, "decode": DecodePage,
    "compare": ComparePage, "reproduce": ReproducePage, "dataformat": DataFormatPage,
    "glossary": GlossaryPage,
}

_missing = [p.context for p in site_pages() if p.context not in _NARRATORS]
_unused = sorted(set(_NARRATORS) - {p.context for p in site_pages()})
if _missing or _unused:
    raise ImportError(f"the phase registry and render/pages disagree: contexts with no class {_missing}, classes "
                      f"for no page of the registry {_unused}")
# In the registry's order.
PAGE_CLASSES: dict[str, type[Page]] = {p.context: _NARRATORS[p.context] for p in site_pages()}


def page_contexts(run: Run, runs: list[Run]) -> dict:
    return {p.context: PAGE_CLASSES[p.context](run, runs) for p in site_pages()}
