"""What limits a kernel, judged from its Nsight Compute counters: one rule both halves use.

collect/ stores the verdict beside the counters; render/ judges the counters again with the same
rule and refuses a file whose stored verdict disagrees. Standard library only.

The rule, in order:

1. **A unit at its limit.** Each unit's busy share of its own peak: the tensor, exponential (XU),
   FMA, ALU and load/store pipes, the instruction issue slots, and DRAM, L2 and L1/shared throughput (Nsight
   Compute's Speed-of-Light figures). A unit at or above :data:`BUSY_PCT` of its peak is the limit;
   where several are, the busiest. 80% is the level at which Nsight Compute's own Speed-of-Light
   rule calls a kernel compute- or memory-bound.
2. **Otherwise, waiting.** No unit is that busy, so warps spend their time waiting: the verdict is
   the stall reason with the largest share of stall samples, leaving out "selected" (a warp that
   is issuing is not stalled). Its share is part of the evidence, with the busiest unit's.

A verdict also carries the busiest unit and its share whatever the verdict, so a page can say how near
the line it sits: within :data:`NEAR_PTS` points of :data:`BUSY_PCT` a call is near-bound either way, and
a few points of clock or masking can move it across (near_line).

Occupancy is not in the rule: the kernels here that matter (TMA/WGMMA pipelines) are designed for
one or two resident blocks per SM and hide latency with asynchronous copies, not with more warps.
"""
from __future__ import annotations

from dataclasses import dataclass

BUSY_PCT = 80.0
# Percentage points either side of BUSY_PCT within which a verdict is read as "near the line": one profiled
# call of a kernel that keeps a unit 78% busy and one at 81% behave alike, though the rule names them apart.
NEAR_PTS = 5.0

# (verdict word, field of the kernel row, what the page calls the unit)
UNITS = (
    ("tensor-pipe", "pipe_tensor_pct", "tensor pipe"),
    ("exp-pipe", "pipe_xu_pct", "exponential (XU) pipe"),
    ("fma-pipe", "pipe_fma_pct", "FMA pipe"),
    ("alu-pipe", "pipe_alu_pct", "ALU pipe"),
    ("lsu-pipe", "pipe_lsu_pct", "load/store pipe"),
    ("issue", "issue_slots_pct", "instruction issue slots"),
    ("dram", "sol_dram_pct", "DRAM bandwidth"),
    ("l2", "sol_l2_pct", "L2 bandwidth"),
    ("l1", "sol_l1_pct", "L1/shared bandwidth"),
)
UNIT_FIELDS = tuple(f for _, f, _ in UNITS)
# Not a stall: the warp was issuing.
NOT_STALLED = ("selected",)
STALL_PREFIX = "stall-"


@dataclass(frozen=True)
class Verdict:
    word: str       # "tensor-pipe", "exp-pipe", ..., or "stall-<reason>"
    evidence: str   # the figures that chose it, in words
    busiest: str = ""                 # what the page calls the busiest unit ("tensor pipe"), whatever the verdict
    busiest_pct: float | None = None  # its busy share of its peak, percent
    stall_pct: float | None = None    # a stall verdict's reason's share of the stalls ('selected' left out), percent


def near_line(v: Verdict | None) -> bool:
    """Whether a verdict's busiest unit sits within NEAR_PTS of BUSY_PCT: on either side, the call is
    near-bound by that unit, and which side it falls is not a difference in kind."""
    return v is not None and v.busiest_pct is not None and abs(v.busiest_pct - BUSY_PCT) < NEAR_PTS


def _pct(pct: float) -> str:
    """A busy share to one decimal, or to as many more as tell it apart from BUSY_PCT: 80.03 is not 80.0."""
    digits = 1
    while digits < 4 and pct != BUSY_PCT and f"{pct:.{digits}f}" == f"{BUSY_PCT:.{digits}f}":
        digits += 1
    return f"{pct:.{digits}f}"


def stall_shares(stalls: dict[str, float]) -> dict[str, float]:
    """Each reason's share (percent) of the stall total, "selected" left out."""
    kept = {r: v for r, v in stalls.items() if r not in NOT_STALLED and v is not None and v > 0}
    total = sum(kept.values())
    return {r: 100.0 * v / total for r, v in kept.items()} if total > 0 else {}


def judge(units: dict[str, float | None], stalls: dict[str, float]) -> Verdict | None:
    """The verdict for one kernel: `units` maps UNIT_FIELDS to percent of peak (None: not measured),
    `stalls` maps stall reasons to any measure proportional to their share (warps per issued
    instruction, or samples). None when no unit was measured (an older run, published figures)."""
    measured = [(word, field, name, units.get(field)) for word, field, name in UNITS if units.get(field) is not None]
    if not measured:
        return None
    word, _, name, pct = max(measured, key=lambda m: m[3])
    if pct >= BUSY_PCT:
        return Verdict(word, f"{name} busy {_pct(pct)}% of its peak (at least {BUSY_PCT:.0f}%)", name, pct)
    shares = stall_shares(stalls)
    if not shares:
        return None
    reason, share = max(shares.items(), key=lambda kv: (kv[1], kv[0]))
    return Verdict(STALL_PREFIX + reason,
                   f"no unit at {BUSY_PCT:.0f}% of its peak (busiest: {name}, {_pct(pct)}%); the largest share of "
                   f"stalls is {reason} ({share:.1f}%, 'selected' left out)", name, pct, share)
