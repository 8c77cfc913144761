"""The bench phase's power case: each implementation at one long case, run back to back at the power limit.

At N=16384 a call lasts tens of milliseconds, long enough for the board to reach its power limit inside
it; the driver then lowers the SM clock until the board draws no more. There the kernels rank by the
energy each spends per call as much as by the cycles it needs (collect/energy.py), and the rested device
time of the case loop cannot tell the two apart. So after that loop, the phase runs a few implementations
at the plan's largest non-causal float16 case for a few seconds each, and records on their rows the
board's power, its limit, the SM clock and the energy per call (collect/schema/bench.py).

The choice of case and the bookkeeping are plain functions, tested on the CPU with a fake meter.
"""
from __future__ import annotations

import time
from typing import Callable, Iterable

from .energy import EnergyReading, EnergyUnavailable
from .schema.bench import BenchRow
from .schema.common import case_key
from .shapes import AttentionCase

# Ours and the fastest others on Hopper; an implementation without an ok row at the case is left out.
POWER_IMPLS = ("triton", "fa4", "sdpa-cudnn", "sdpa-flash")
# Measured only where none of the others ran (a T4 has neither FlashAttention build nor cuDNN's fused kernel), so
# that ours is never alone in the comparison while a Hopper run does not pay for a slow backend.
FALLBACK_IMPLS = ("sdpa-efficient",)
POWER_DTYPE = "float16"
WINDOW_S = 2.5  # per implementation; with its warm-up and first call, about 3.5 s of the phase's budget


def power_case(rows: Iterable[BenchRow]) -> BenchRow | None:
    """Our kernel's ok row with the most FLOPs among the non-causal float16 cases: the longest, heaviest call the
    plan times, the one most surely at the power limit. None where there is no such row."""
    ours = [r for r in rows if r.impl == "triton" and r.status == "ok" and not r.causal and r.dtype == POWER_DTYPE]
    return max(ours, key=lambda r: (r.flops or 0.0, r.seq_len), default=None)


def measure_power(rows: list[BenchRow], measure: Callable[[AttentionCase], EnergyReading],
                  on_update: Callable[[], None], *, deadline: float | None = None,
                  clock: Callable[[], float] = time.monotonic) -> list[str]:
    """Fill the power fields of each POWER_IMPLS row at the power case; returns the notes for the phase's file.
    A failure stays with its implementation (noted, its row otherwise unchanged); no meter at all (no NVML, a GPU
    without an energy counter) is one note; the phase's deadline ends the pass with a note."""
    target = power_case(rows)
    if target is None:
        return ["Power at the limit: not measured, no non-causal float16 case of our kernel ran."]
    label = (f"B={target.batch} H={target.heads} N={target.seq_len} d={target.head_dim} non-causal "
             f"{target.dtype}")
    # Each implementation's ok row at the case, found by the case key the case loop keeps rows by.
    ok = {case_key(r, BenchRow): r for r in rows if r.status == "ok"}
    cases = {impl: AttentionCase(impl, target.dtype, target.causal, target.batch, target.heads, target.seq_len,
                                 target.head_dim) for impl in (*POWER_IMPLS, *FALLBACK_IMPLS)}
    at_case = {impl: ok[case_key(c, BenchRow)] for impl, c in cases.items() if case_key(c, BenchRow) in ok}
    impls = list(POWER_IMPLS)
    if not any(i in at_case for i in POWER_IMPLS if i != "triton"):
        impls += FALLBACK_IMPLS
    done, notes = [], []
    for impl in impls:
        row = at_case.get(impl)
        if row is None:
            continue
        if deadline is not None and clock() > deadline:
            notes.append(f"Power at the limit ({label}): {impl} and the implementations after it not measured, the "
                         "phase's time budget was spent.")
            break
        try:
            for name, value in measure(cases[impl]).fields().items():
                setattr(row, name, value)
        except EnergyUnavailable as exc:
            return notes + [f"Power at the limit: not measured, {exc}."]
        except Exception as exc:  # noqa: BLE001 - one implementation's failure is its note
            notes.append(f"Power at the limit ({label}): {impl} failed, {type(exc).__name__}: {exc}"[:600])
            continue
        done.append(impl)
        on_update()
    if done:
        notes.insert(0, f"Power at the limit: {', '.join(done)} at {label}, each run back to back for about "
                        f"{WINDOW_S:g} s after a warm-up; the board's power from the driver's energy counter "
                        "(collect/energy.py).")
    return notes


class DeviceEnergy:
    """Runs one case back to back on the GPU and reads the board's energy (collect/energy.py); the meter is made
    on first use, so a machine without NVML fails at the power case alone, with the reason."""

    def __init__(self, pool, window_s: float = WINDOW_S):
        self.pool, self.window_s, self.meter = pool, window_s, None

    def __call__(self, case: AttentionCase) -> EnergyReading:
        import torch

        from .calls import call_for, forced_backend
        from .energy import Meter

        if self.meter is None:
            self.meter = Meter(torch.cuda.current_device())
        with forced_backend(case):
            q, k, v = self.pool.first(case)
            call = call_for(case, q, k, v)
            call()  # compiled and warm already, from the case loop; this only reloads its inputs
            return self.meter.measure(call, self.window_s)
