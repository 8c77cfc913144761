"""Correctness (docs/correctness.md): the kernel against a float64 reference, the error by case, and the causal error
floor.

One module per section of the page, in its order: opening.py (what this run shows, what the page measures),
tolerance.py, errors.py (the error by case and against sequence length), causal_floor.py, ported.py (the code other
GPUs run), cases.py (cases that did not pass, the PyTorch implementations, every case). common.py holds the unit
roundoff, the error notation and the grid of cases every section reads.
"""
from __future__ import annotations

from .cases import Cases
from .causal_floor import CausalFloor
from .errors import Errors
from .opening import Opening
from .ported import Ported
from .tolerance import Tolerance


class CorrectnessPage(Opening, Tolerance, Errors, CausalFloor, Ported, Cases):
    """The Correctness page's context: each `{{ correctness.xxx() }}` in the template is a method of one section."""
