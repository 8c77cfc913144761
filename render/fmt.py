"""Number formatting for prose and tables: the units live here, the values come from data."""
from __future__ import annotations

import math

_MISSING = "n/a"


def known(x) -> bool:
    """Whether a value was recorded: pandas stores an absent one as None or NaN, depending on the column's dtype."""
    return x is not None and not (isinstance(x, float) and math.isnan(x))



def num(x, digits: int = 3) -> str:
    """Significant-figure formatting without scientific notation for everyday magnitudes."""
    if not known(x):
        return _MISSING
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    return f"{x:,.{decimals}f}"


def count(x) -> str:
    """An average count: whole numbers without decimals (20, not 20.0), others to one decimal."""
    if not known(x):
        return _MISSING
    return f"{x:,.0f}" if abs(x - round(x)) < 0.05 else f"{x:,.1f}"


BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
DECIMAL_UNITS = ("B", "kB", "MB", "GB", "TB")


def bytes_(x, binary: bool = True) -> str:
    if not known(x):
        return _MISSING
    base, units = (1024, BINARY_UNITS) if binary else (1000, DECIMAL_UNITS)
    v, i = float(x), 0
    while abs(v) >= base and i < len(units) - 1:
        v /= base
        i += 1
    return f"{num(v)} {units[i]}"


def rate(x, unit: str) -> str:
    """A per-second rate with an SI prefix: rate(4.1e12, 'B/s') -> '4.10 TB/s'."""
    if not known(x):
        return _MISSING
    for p, f in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= f:
            return f"{num(x / f)} {p}{unit}"
    return f"{num(x)} {unit}"


def bandwidth(x) -> str:
    return rate(x, "B/s")


def flops(x) -> str:
    return rate(x, "FLOP/s")


def ms(x) -> str:
    return _MISSING if not known(x) else f"{num(x)} ms"


def pct(x, digits: int = 3) -> str:
    return _MISSING if not known(x) else f"{num(x, digits)}%"


def ratio(x) -> str:
    return _MISSING if not known(x) else f"{num(x)}×"


def num_vs(x, target, digits: int = 3) -> str:
    """x beside a target it is judged against: with more figures where three would print it as the
    target itself ('1.60' for a 1.596 that misses 1.6), so a verdict never contradicts its number."""
    if not known(x) or not known(target):
        return num(x, digits)
    while digits < 6 and x != target and num(x, digits) == num(target, digits):
        digits += 1
    return num(x, digits)


def ratio_vs(x, target, digits: int = 3) -> str:
    return _MISSING if not known(x) else f"{num_vs(x, target, digits)}×"


def pct_vs(x, target, digits: int = 3) -> str:
    return _MISSING if not known(x) else f"{num_vs(x, target, digits)}%"


def span(lo, hi, f=num) -> str:
    """'f(lo) to f(hi)', or f(lo) alone where the two print the same: a range must not say one figure twice."""
    a, b = f(lo), f(hi)
    return a if a == b else f"{a} to {b}"
