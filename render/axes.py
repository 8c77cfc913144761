"""Log axes whose every tick reads as its full value.

Plotly labels the 2 and 5 ticks inside a decade with the bare digit ("5" under 1000 reads as five, not
500). These helpers set the ticks explicitly at 1, 2 and 5 times each power of ten in the data's range
(decades alone when the range is wide) and write each one out in full.
"""
from __future__ import annotations

import math

from render import fmt


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


def byte_ticks(values, max_ticks: int = 10) -> dict:
    """tickvals/ticktext for a log axis of byte counts, at powers of two and labelled in the binary units the
    pages' prose writes bytes in (fmt.bytes_: 4 MiB, 1 GiB), so that a figure and its sentence agree."""
    vals = [float(v) for v in values if v is not None and v == v and float(v) > 0]
    if not vals:
        return {}
    lo, hi = math.floor(math.log2(min(vals) / 1.5)), math.ceil(math.log2(max(vals) * 1.5))
    step = 1
    while (hi - lo) // step + 1 > max_ticks:
        step += 1
    inside = [2.0**e for e in range(lo, hi + 1) if e % step == 0 and min(vals) / 1.5 <= 2.0**e <= max(vals) * 1.5]
    if len(inside) < 2:
        inside = [2.0**e for e in range(lo, hi + 1) if e % step == 0][:2]
    return dict(tickmode="array", tickvals=inside, ticktext=[_power_of_two_bytes(t) for t in inside])


def _power_of_two_bytes(x: float) -> str:
    """2**e bytes in whole binary units, fmt.bytes_'s: 4 MiB, 512 KiB (a tick is exact, so no decimals)."""
    e = round(math.log2(x))
    i = min(max(e, 0) // 10, len(fmt.BINARY_UNITS) - 1)
    return f"{2.0 ** (e - 10 * i):g} {fmt.BINARY_UNITS[i]}"


def byte_hover(values) -> list[str]:
    """Each value as fmt.bytes_ writes it, for a trace's customdata: Plotly's own '%{y:.3s}' would print 150G
    where the prose says 140 GiB."""
    return [fmt.bytes_(v) for v in values]
