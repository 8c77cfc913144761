"""The arithmetic the rows report: steps and loops a row runs, the bytes a step reads, its floor (pure, tested
on the CPU)."""
from __future__ import annotations

from ..decode_profile import fused_role_order
from ..timing import LOOP_REPEATS


def steps_for(n_positions: int, context: int, wanted: int) -> int:
    """Decode steps a row can run after a prompt of `context`: as many as wanted, but the last
    generated token must still have a position (context + steps + 1 <= n_positions)."""
    return max(0, min(wanted, n_positions - context - 1))


def loop_shape(steps: int, repeats: int = LOOP_REPEATS) -> tuple[int, int]:
    """(loops, steps per loop) for `steps` steps: one untimed loop and up to `repeats` timed ones,
    at least four steps a loop where there is room (a loop starts from an idle GPU)."""
    if steps < 2:
        raise ValueError(f"timing needs at least 2 steps, got {steps}")
    loops = min(repeats + 1, max(2, steps // 4))
    return loops, steps // loops


def _role_bytes(step_fn, kv_bytes: float, layers: int) -> dict[str, float]:
    """Bytes each role of our step reads per step, summed from the step's own per-operation bytes in the
    fused step's order (operation_bytes, of the fused and the persistent step alike); roles that read none
    of the floor's bytes (the embedding, the argmax) are left out."""
    out: dict[str, float] = {}
    for role, n in zip(fused_role_order(layers), step_fn.operation_bytes(kv_bytes / layers)):
        if n:
            out[role] = out.get(role, 0.0) + float(n)
    return out


def kv_bytes_per_step(bytes_per_token: int, context: int, first: int, last: int) -> float:
    """Cache bytes a step reads, averaged over steps first..last (0-based after the prompt): step s
    attends over context + s + 1 keys."""
    return bytes_per_token * (context + 1 + (first + last) / 2)


def floor_ms(bytes_per_step: float, bandwidth: float | None) -> float | None:
    return None if not bandwidth else bytes_per_step / bandwidth * 1e3


