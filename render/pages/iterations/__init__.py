"""Kernel iterations (docs/iterations.md): each recorded version of our kernel against the fastest other
implementation and the matmul ceiling, with the prediction made before each was measured and what it turned out to be.

One module per section of the page, in its order: opening.py (what this run shows, how the versions were measured),
goal.py (against the fastest other implementation and the matmul ceiling), crosscheck.py (the bench phase's second
measurement), journey.py (the journey, prediction by prediction), compiled.py (what each compiled kernel uses).
common.py holds the goal cases and the lookups every section asks.
"""
from __future__ import annotations

from .compiled import CompiledKernels
from .crosscheck import Crosscheck
from .goal import Goal
from .journey import Journey
from .opening import Opening


class IterationsPage(Opening, Goal, Crosscheck, Journey, CompiledKernels):
    """The Kernel iterations page's context: each `{{ iterations.xxx() }}` in the template is a method of one section."""
