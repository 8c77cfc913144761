"""A decode row's memory as its own loop holds it.

The decode phase builds every model it decodes before its first row and keeps them all loaded to the
end (its stages go model by model in order of what the report needs most), so the allocator's
figures a row records, its peak and what was allocated at its start, also hold the other models'
weights. At gpt2 beside gpt2-xl that is most of the figure. Runs that record how many bytes each
model took on the device when it was built (`DecodeModel.resident_bytes`) let the pages take the
others' out; for older runs they cannot, and the pages say what the figures include.
"""
from __future__ import annotations

import pandas as pd

from .fmt import known

MEMORY_COLUMNS = ("peak_mem_bytes", "mem_at_start_bytes")


def others_resident(models) -> dict[str, int] | None:
    """Each model's name and the bytes the other models held while its rows ran; None where a model
    does not say what it held (an older run, or no GPU), since then no row's figure can be corrected."""
    held = {m.name: m.resident_bytes for m in models}
    if not held or any(b is None for b in held.values()):
        return None
    total = sum(held.values())
    return {name: total - b for name, b in held.items()}


def memory_is_own(models) -> bool:
    """Whether rows' memory figures can be read as each loop's own: one model loaded, or every model's
    footprint known so that the others' can be taken out."""
    return len(models) < 2 or others_resident(models) is not None


def own_memory(rows: pd.DataFrame, models) -> tuple[pd.DataFrame, bool]:
    """`rows` with their memory columns less the other models' resident bytes, and whether their figures
    are each loop's own (memory_is_own): where they cannot be corrected they come back as they are, so a
    caption can say what they still include."""
    others = others_resident(models) if len(models) > 1 else None
    if others is None or rows.empty:
        return rows, memory_is_own(models)
    out = rows.copy()
    less = out["model"].map(others).fillna(0)
    for col in MEMORY_COLUMNS:
        if col in out:
            out[col] = out[col] - less
    return out, True


def own_decode_rows(run) -> tuple[pd.DataFrame, bool]:
    """A run's decode rows as every page reads them: own_memory over the models its decode phase loaded."""
    decode = run.phase("decode")
    return own_memory(run.frame("decode", "rows"), decode.models if decode is not None else [])


def idle_share(row) -> float | None:
    """The share of a decode row's step its GPU sat idle between kernels (its profiled busy time against its step);
    None where the row was not profiled. A profiled step busier than the timed one idled for none of it."""
    busy, step = row.get("kernel_ms_per_step"), row.get("step_ms_median")
    if not known(busy) or not known(step) or step <= 0:
        return None
    return max(0.0, 1 - float(busy) / float(step))
