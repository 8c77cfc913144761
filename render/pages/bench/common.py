"""What every section of the Benchmarks page reads: the run's bench rows (render/bench_data.py) in the order
the page shows them, and the facet grid its figures are drawn on."""
from __future__ import annotations

from functools import cached_property

import pandas as pd
from plotly.subplots import make_subplots

from ...bench_data import BenchData
from ...vocab import facet_label
from ..base import Page

# Loop time over device time above this: the calls are issued slower than the GPU runs them (host-bound).
HOST_BOUND = 1.25
FUSED = "triton"


class BenchSection(Page):
    """The bench rows and their shapes and facets; each section of the page is a subclass, BenchPage all of them."""

    slug = "bench"
    phase = "bench"

    @cached_property
    def b(self) -> BenchData:
        return BenchData(self.run)

    # the frames other code (tests, the templates) reads
    @property
    def rows(self) -> pd.DataFrame:
        return self.b.rows

    @property
    def ok(self) -> pd.DataFrame:
        return self.b.ok

    def shapes(self) -> list[tuple]:
        """The shapes swept over N, each with its own section; single shapes are in points.py's table."""
        return self.b.sweep_shapes()

    def shape_title(self, shape) -> str:
        return f"Batch {shape[0]}, {shape[1]} heads, head_dim {shape[2]}"

    def facets(self, shape) -> list[tuple[str, bool]]:
        return self.b.facets(shape)

    def impls(self) -> list[str]:
        return self.b.impls()

    def latency(self, shape, dtype: str, causal: bool, impl: str) -> pd.Series:
        return self.b.latency(shape, dtype, causal, impl)

    def _grid(self, shape):
        facets = self.facets(shape)
        dtypes = list(dict.fromkeys(d for d, _ in facets))
        causals = sorted({c for _, c in facets})
        fig = make_subplots(rows=len(dtypes), cols=len(causals), shared_xaxes=True, shared_yaxes="all",
                            subplot_titles=[facet_label(d, c) for d in dtypes for c in causals],
                            horizontal_spacing=0.06, vertical_spacing=0.14)
        # Facet titles centred above each panel, in the gap the vertical spacing leaves.
        fig.for_each_annotation(lambda a: a.update(font=dict(size=12), yshift=4))
        cells = [(d, c, i + 1, j + 1) for i, d in enumerate(dtypes) for j, c in enumerate(causals)]
        return fig, cells, len(dtypes)
