"""What every section of the Benchmarks page reads: the run's bench rows (render/bench_data.py) in the order
the page shows them, each case of ours against the fastest other implementation (the speedup table and the
single shapes' table alike), and the facet grid its figures are drawn on."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import pandas as pd
from plotly.subplots import make_subplots

from ... import escape, fmt
from ...bench_data import BenchData
from ...vocab import HOST_BOUND, SPREAD_WORDS, facet_label, impl_label, shape_label  # noqa: F401  (HOST_BOUND: sections read it here)
from ..base import Page
from .words import band_words, case_side, case_words, spread

# Loop time over device time above this, with a host time to explain it: host-bound (vocab.host_bound).
FUSED = "triton"


def host_ms(row) -> float | None:
    """A row's median host time in ms, or None where the run did not record it."""
    us = row.get("host_us_median")
    return us / 1e3 if fmt.known(us) else None


@dataclass
class Versus:
    """Ours against the fastest other implementation in one case (a length of one facet of one shape)."""

    ours: float | None = None  # our median device time; None where ours has no timed ok row
    fast: float | None = None  # the fastest other implementation's; None where none ran
    who: str | None = None  # its name
    ratio: float | None = None  # fast / ours, where both ran: above 1, ours is faster
    spread: tuple[float, float] | None = None  # the calls' spread of that ratio (words.spread)

    @property
    def side(self) -> str | None:
        return case_side(self.ratio, self.spread) if self.ratio is not None else None

    @property
    def words(self) -> str:
        return case_words(self.ratio, self.spread) if self.ratio is not None else "n/a"


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

    def shape_short(self, shape) -> str:
        """A shape in a heading: two sections of the same title would share one anchor."""
        return shape_label(shape)

    def band_sentence(self) -> str:
        """Which band the verdicts on this page use, stated once; the Comparison page's before-and-after verdicts
        answer another question and use another."""
        return (f"Two medians {band_words()} are *on par*; a case whose medians fall past that band while "
                f"{SPREAD_WORDS} both fall inside it is *on par at the edge*. The Comparison page's before-and-after "
                "verdicts weigh one case between two runs against the noise measured between repeat runs instead.")

    def facets(self, shape) -> list[tuple[str, bool]]:
        return self.b.facets(shape)

    def impls(self) -> list[str]:
        return self.b.impls()

    def latency(self, shape, dtype: str, causal: bool, impl: str) -> pd.Series:
        return self.b.latency(shape, dtype, causal, impl)

    def versus_fastest(self, shape, dtype: str, causal: bool) -> dict[int, Versus]:
        """Per length of the shape, ours against the fastest other implementation: what the speedup table and the
        single shapes' table show of each case."""
        tri = self.b.by_n(shape, dtype, causal, FUSED)
        fast = self.b.fastest_rival(shape, dtype, causal)
        out = {}
        for n in self.b.seq_lens(shape):
            v = out[n] = Versus(ours=tri.loc[n, "latency_ms_median"] if n in tri.index else None)
            if n in fast.index:
                f = fast.loc[n]
                v.fast, v.who = f["latency_ms_median"], self._sdpa_label(f)
                if v.ours:
                    v.ratio, v.spread = v.fast / v.ours, spread(f, tri.loc[n])
        return out

    @staticmethod
    def _sdpa_label(row) -> str:
        """An SDPA row's name; PyTorch's choice with the backend it ran, where known, since it stands in a
        comparison only when that backend has no forced row of its own there."""
        used = row.get("backend_used")
        if row["impl"] == "sdpa" and isinstance(used, str) and used != "unknown":
            return f"SDPA (PyTorch's choice: {escape.text(used)})"
        return impl_label(row["impl"])

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
