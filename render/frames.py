"""A frame split by a key once: a page that asks about every case (every version x case x table) then pays
for each row once, not for a pass over the whole frame per question."""
from __future__ import annotations

import pandas as pd


def index_by(frame: pd.DataFrame, columns: tuple[str, ...]) -> dict[tuple, pd.DataFrame]:
    """Key (the values of `columns`, as a tuple) -> that key's rows, in frame order."""
    if frame.empty:
        return {}
    return dict(iter(frame.groupby(list(columns), sort=False, dropna=False)))
