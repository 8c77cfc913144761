"""What the block count says about one causal row, and what the mask did to FlashAttention-2 (SDPA): the verdict
words of the causal section and the rules behind them."""
from __future__ import annotations

import pandas as pd

from ... import fmt
from ...vocab import CLOCK_GAP, clock_gap

# measured / predicted causal speedup within this band either way "matches" the block count.
MATCH = 1.05
# Skipping the tiles above the diagonal at most halves the work: no mask can make a call more than this much
# faster, whatever T is.
MASK_MAX = 2.0
# Where the causal and non-causal calls ran different kernels (the path rules choose by length and
# mask), their ratio is not the mask's saving, and the block count is not asked about it.
DIFFERENT_KERNELS = "different kernels with and without the mask"
# A call's time can follow its SM clock (read in the rest before the call, never set): where the two calls' readings
# lie more than CLOCK_GAP apart, their ratio may carry that gap, and the count is not asked about it.
CLOCKS_APART = "at SM clocks too far apart to compare"
VERDICTS = ("as predicted", "short of the block count", "within the timing spread", "slower with the mask",
            "beats the block count", DIFFERENT_KERNELS, CLOCKS_APART)


def compare_calls(full: pd.Series, caus: pd.Series) -> tuple:
    """Unmasked over masked median time, whether the two p10-p90 spreads overlap (the difference is then inside
    the run-to-run spread), and the two calls' median SM clocks (None where not recorded)."""
    overlap = (full["latency_ms_p10"] <= caus["latency_ms_p90"] and caus["latency_ms_p10"] <= full["latency_ms_p90"])
    clk = [float(x) if x is not None and x == x else None for x in (full["sm_clock_mhz"], caus["sm_clock_mhz"])]
    return full["latency_ms_median"] / caus["latency_ms_median"], bool(overlap), clk[0], clk[1]


def mask_clock_gap(unmasked: float | None, masked: float | None) -> float | None:
    """The masked call's clock against the unmasked one's, the call its ratio is taken over."""
    return clock_gap(masked, unmasked)


def too_far_apart(gap: float | None) -> bool:
    return gap is not None and gap > CLOCK_GAP


def flash_verdict(measured: float | None, overlap: bool, apart: bool) -> str | None:
    """What the mask did to FlashAttention-2 (SDPA) at one length: the same questions as Triton's rows, without a tile
    count to hold it to (flash's tiles are not recorded)."""
    if measured is None or measured != measured:
        return None
    if apart:
        return CLOCKS_APART
    if overlap:
        return "within the timing spread"
    if measured < 1:
        return "slower with the mask"
    if measured > MASK_MAX:
        return f"above the {fmt.ratio(MASK_MAX)} a mask can give"
    return "faster with the mask"


def causal_verdict(measured: float, predicted: float | None, overlap: bool, same_kernel: bool = True,
                    clocks_apart: bool = False) -> str | None:
    """What the block count says about one row: explained (as predicted, or short of it for the reasons it
    leaves out) or not (slower with less work, or faster than skipping tiles allows); not asked at all when
    the masked and unmasked calls ran different kernels, or at SM clocks too far apart."""
    if predicted is None:
        return None
    if not same_kernel:
        return DIFFERENT_KERNELS
    if clocks_apart:
        return CLOCKS_APART
    if measured < 1:
        return "within the timing spread" if overlap else "slower with the mask"
    if measured > predicted * MATCH:
        return "beats the block count"
    if measured >= predicted / MATCH:
        return "as predicted"
    return "short of the block count"
