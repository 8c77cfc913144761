"""Log axes whose every tick reads as its full value.

Plotly labels the 2 and 5 ticks inside a decade with the bare digit ("5" under 1000 reads as five, not
500). These helpers set the ticks explicitly at 1, 2 and 5 times each power of ten in the data's range
(decades alone when the range is wide) and write each one out in full.
"""
from __future__ import annotations

import math



def log_ticks(values, suffix: str = "", si: bool = False, max_ticks: int = 12) -> dict:
    """tickvals/ticktext for a log axis covering `values` (non-positive values ignored); si=True writes
    2e9 as '2 G' (then `suffix`, e.g. 'B')."""
    vals = [float(v) for v in values if v is not None and v == v and float(v) > 0]
    if not vals:
        return {}
    lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
    ticks = [m * 10.0**e for e in range(lo, hi + 1) for m in (1, 2, 5)]
    lo_v, hi_v = min(vals) / 1.5, max(vals) * 1.5
    inside = [t for t in ticks if lo_v <= t <= hi_v]
    if len(inside) > max_ticks or len(inside) < 2:
        decades = [10.0**e for e in range(lo, hi + 1)]
        inside = decades[:: max(1, -(-len(decades) // max_ticks))]
    return dict(tickmode="array", tickvals=inside, ticktext=[label(t, si) + suffix for t in inside])


_SI = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


def label(x: float, si: bool = False) -> str:
    """A tick value in full: 500, 2,000, 0.05; with si, 2 G or 500 M (no unit)."""
    if si:
        for p, f in _SI:
            if x >= f:
                return f"{x / f:g} {p}"
        return f"{x:g} "
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 1e-3:
        return f"{x:g}"
    exp = math.floor(math.log10(x))
    mant = round(x / 10**exp, 6)
    return (f"{mant:g}×" if mant != 1 else "") + f"10<sup>{exp}</sup>"

