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

MEMORY_COLUMNS = ("peak_mem_bytes", "mem_at_start_bytes")


def others_resident(models) -> dict[str, int] | None:
    """Each model's name and the bytes the other models held while its rows ran; None where a model
    does not say what it held (an older run, or no GPU), since then no row's figure can be corrected."""
    held = {m.name: m.resident_bytes for m in models}
    if not held or any(b is None for b in held.values()):
        return None
    total = sum(held.values())
    return {name: total - b for name, b in held.items()}


def own_memory(rows: pd.DataFrame, models) -> tuple[pd.DataFrame, bool]:
    """`rows` with their memory columns less the other models' resident bytes, and whether that was
    possible. With one model, or without the figures, the rows come back as they are (and False
    where other models were loaded, so a caption can say what the figures still include)."""
    others = others_resident(models)
    if len(models) < 2:
        return rows, True
    if others is None or rows.empty:
        return rows, others is not None
    out = rows.copy()
    less = out["model"].map(others).fillna(0)
    for col in MEMORY_COLUMNS:
        if col in out:
            out[col] = out[col] - less
    return out, True
