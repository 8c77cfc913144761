"""Benchmarks (docs/benchmarks.md): latency, TFLOP/s and peak memory over seq_len, where our kernel wins or
loses, and what sets the pace at small sizes (the host or the GPU).

One module per section of the page, in its order: opening.py (what this run shows), cases.py (what was
measured), offset.py (device time's fixed offset, which points.py and per_shape.py build on), small_sizes.py
(the host or the GPU), points.py (single shapes, one row each), power.py (the power case: energy per call at
the power limit), per_shape.py (a section per shape), failures.py
(cases that did not run). words.py turns speedups into sentences; common.py holds the rows every section reads.
"""
from __future__ import annotations

from .cases import Cases
from .failures import Failures
from .opening import Opening
from .per_shape import PerShape
from .points import Points
from .power import Power
from .small_sizes import SmallSizes


class BenchPage(Opening, Cases, SmallSizes, Points, Power, PerShape, Failures):
    """The Benchmarks page's context: each `{{ bench.xxx() }}` in the template is a method of one section."""
