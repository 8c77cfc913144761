"""HTML tables from DataFrames, with every cell escaped (kernel names are untrusted strings).

escape.text, not html.escape: a table inside an admonition is indented, so Markdown still reads the
text between its tags, and a cell must be inert as Markdown too."""
from __future__ import annotations

from typing import Callable, Mapping

import pandas as pd

from .escape import text as _text


def table_html(
    df: pd.DataFrame,
    columns: Mapping[str, str] | None = None,
    formats: Mapping[str, Callable] | None = None,
    caption: str | None = None,
) -> str:
    """`columns` maps field -> header (and picks the order); `formats` maps field -> formatter."""
    columns = dict(columns or {c: c for c in df.columns})
    formats = formats or {}
    head = "".join(f"<th>{_text(h)}</th>" for h in columns.values())
    body = []
    for _, row in df.iterrows():
        cells = []
        for col in columns:
            v = row.get(col)
            text = formats[col](v) if col in formats else ("" if v is None or (isinstance(v, float) and pd.isna(v)) else str(v))
            cells.append(f"<td>{_text(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption>{_text(caption)}</caption>" if caption else ""
    return f'\n<div class="report-table">\n<table>{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>\n</div>\n'
