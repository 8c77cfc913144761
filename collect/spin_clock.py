"""The spin before each timed call, reading the SM clock itself.

The spin keeps the GPU busy while the host issues the call (collect/timing.py). It also tells the SM clock the call
started at. That used to be torch.cuda._sleep's requested cycles over the spin's elapsed time between two CUDA events,
which puts the spin's launch and queueing inside the reading: before short calls it read low (an idle H100, 2026-12-06:
1,504-1,724 MHz for 50 us spins whose own counters said 1,975). So this spin writes its SM's clock64 and the GPU's
globaltimer (nanoseconds) when it starts and when it ends, and the clock is their ratio, whatever the call's length. It
does not make a reading exact: in a full collect on an H100 (run h100-20261206a, not committed: its profile file did not
come back from the GPU machine) 235 of the bench phase's 432 calls read a median above the device's 1,980 MHz maximum,
short calls at a median of 1,992 and the highest 2,085, as event readings had before (run h100-20261205b: 90 of 432, up
to 2,082). A probe on an H100 (2026-12-06, scripts/probe_spin_clock.py) found the counters right: over a 1 s spin the
GPU timer and the host's clock agreed within 0.02%, and in the bench's loop the readings fell on the clock's own 15 MHz
steps (1,965 to 2,071-2,084 MHz in two runs of it) with the calls after the highest ones 2-3% quicker. So the rest
before a call can run past the reported maximum, and its clock swings from call to call. A second spin on another
stream, running beside the call, read the call's own clock 1-4% under the rest's, at no measurable cost to those calls
(SDPA's FlashAttention-2, which leaves room on every SM); the collect does not take that reading, because a kernel whose
blocks fill an SM's registers would wait for the spin; the pages say so where a gap between two readings is no wider
than that overshoot (render/clock_reading.py). Where the kernel cannot be built (no Triton GPU backend, a GPU without
these registers), `stamped_spins` returns None and the caller falls back to torch.cuda._sleep and its events."""
from __future__ import annotations

from functools import lru_cache

# A slot per spin: clock64 at its start and end, globaltimer at its start and end.
SLOT = 4


@lru_cache(maxsize=1)
def _kernel():
    import triton
    import triton.language as tl

    # Unspecialized: Triton would otherwise compile a variant for a slot or a cycle count of 1 or divisible by 16,
    # each on the host in the middle of the timed loop, where the GPU would idle and its clock drop.
    @triton.jit(do_not_specialize=["slot", "cycles"])
    def stamped_spin(out_ptr, slot, cycles):
        # The program id stands in as the asm's operand only so that each read is an elementwise op Triton keeps.
        d = tl.program_id(0)
        c0 = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [d], dtype=tl.int64, is_pure=False, pack=1)
        g0 = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [d], dtype=tl.int64, is_pure=False,
                                       pack=1)
        c = c0
        while c - c0 < cycles:
            c = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [d], dtype=tl.int64, is_pure=False,
                                          pack=1)
        g1 = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [d], dtype=tl.int64, is_pure=False,
                                       pack=1)
        tl.store(out_ptr + 4 * slot, c0)
        tl.store(out_ptr + 4 * slot + 1, c)
        tl.store(out_ptr + 4 * slot + 2, g0)
        tl.store(out_ptr + 4 * slot + 3, g1)

    return stamped_spin


def clock_from_stamps(c0: int, c1: int, g0: int, g1: int) -> float | None:
    """The SM clock in MHz over one spin: its cycles over its nanoseconds; None where the timer did not move (a spin
    too short for the timer's resolution) or a slot was never written."""
    if g1 <= g0 or c1 <= c0:
        return None
    return (c1 - c0) * 1e3 / (g1 - g0)


class StampedSpins:
    """`n` spins, each writing its stamps into its own slot, read back once after the calls are done."""

    def __init__(self, n: int, kernel):
        import torch

        self.kernel = kernel
        self.stamps = torch.zeros(SLOT * n, dtype=torch.int64, device="cuda")

    def spin(self, i: int, cycles: int) -> None:
        self.kernel[(1,)](self.stamps, i, cycles, num_warps=1)

    def clocks(self) -> list[float]:
        """Every spin's clock in MHz (after a synchronize), those the timer could not tell left out."""
        flat = self.stamps.tolist()
        out = (clock_from_stamps(*flat[k:k + SLOT]) for k in range(0, len(flat), SLOT))
        return [c for c in out if c]


@lru_cache(maxsize=1)
def _works() -> bool:
    """Whether the stamped spin builds and runs here: tried once per process, on a spin of a few cycles."""
    import torch

    try:
        probe = StampedSpins(1, _kernel())
        probe.spin(0, 1000)
        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001 - any failure to build or launch means: time with the events instead
        return False


# The ways timed calls read their clock since the last reset_methods(): the runner records them per phase.
_methods: set[str] = set()


def stamped_spins(n: int) -> StampedSpins | None:
    """Slots for `n` stamped spins, or None where the kernel cannot run here (the caller then spins with
    torch.cuda._sleep and reads the clock from its events). Either way the method is noted for methods_used."""
    works = _works()
    _methods.add("counters" if works else "events")
    return StampedSpins(n, _kernel()) if works else None


def reset_methods() -> None:
    _methods.clear()


def methods_used(before: str | None = None) -> str | None:
    """How the timed calls since reset_methods() read the SM clock, as PhaseRecord.sm_clock_method says it: 'counters',
    'events', 'both', or None where none was timed. `before`: the method of rows a resumed phase kept."""
    seen = set(_methods) | ({"counters", "events"} if before == "both" else {before} if before else set())
    return None if not seen else seen.pop() if len(seen) == 1 else "both"
