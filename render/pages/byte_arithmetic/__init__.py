"""Byte arithmetic (docs/byte-arithmetic.md): the traffic model of attention evaluated for this run's GPU, beside
what was measured.

One module per section of the page, in its order: opening.py (what this run shows), traffic.py (the model and its
traffic, evaluated), score_fit.py (where the score matrix stops fitting), intensity.py (arithmetic intensity against
the ridge point), causal.py (causal masking, predicted and measured; its verdict rules are causal_verdicts.py).
common.py holds the rows, ceilings and device facts every section reads.
"""
from __future__ import annotations

from .causal import Causal
from .intensity import Intensity
from .opening import Opening
from .score_fit import ScoreFit
from .traffic import Traffic


class ByteArithmeticPage(Opening, Traffic, ScoreFit, Intensity, Causal):
    """The Byte arithmetic page's context: each `{{ bytes.xxx() }}` in the template is a method of one section."""
