"""Correctness (docs/correctness.md): the kernel against a float64 reference, the error by case, and the errors held
to the rounding of the output.

One module per section of the page, in its order: opening.py (what this run shows, what the page measures, the cases
added to reach every kernel route), tolerance.py, errors.py (the error by case and against sequence length),
rounding.py (the error floor: largest errors against half an ulp of the largest output), ported.py (the code other
GPUs run), cases.py (cases that did not pass, the PyTorch implementations, every case). common.py holds the unit
roundoff and half an ulp, the error notation and the grid of cases every section reads.
"""
from __future__ import annotations

from .cases import Cases
from .errors import Errors
from .opening import Opening
from .ported import Ported
from .rounding import Rounding
from .tolerance import Tolerance


class CorrectnessPage(Opening, Tolerance, Errors, Rounding, Ported, Cases):
    """The Correctness page's context: each `{{ correctness.xxx() }}` in the template is a method of one section."""
