"""Page contexts by name: each docs/*.md page uses one (e.g. `{{ hardware.device_table() }}`)."""
from __future__ import annotations

import importlib

from ..runs import Run

# name in templates -> "module:Class". A module not written yet is skipped, so pages land one by one.
PAGES = {
    "hardware": "render.pages.hardware:HardwarePage",
    "dataformat": "render.pages.dataformat:DataFormatPage",
    "correctness": "render.pages.correctness:CorrectnessPage",
    "bench": "render.pages.bench:BenchPage",
    "bytes": "render.pages.byte_arithmetic:ByteArithmeticPage",
    "profile": "render.pages.profile:ProfilePage",
    "decode": "render.pages.decode:DecodePage",
    "iterations": "render.pages.iterations:IterationsPage",
    "reproduce": "render.pages.reproduce:ReproducePage",
    "compare": "render.pages.compare:ComparePage",
    "home": "render.pages.home:HomePage",
}


def page_contexts(run: Run, runs: list[Run]) -> dict:
    out = {}
    for name, target in PAGES.items():
        mod_name, cls_name = target.split(":")
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as exc:
            if exc.name == mod_name:
                continue
            raise
        out[name] = getattr(mod, cls_name)(run, runs)
    return out
