"""Table helpers shared by the pages: one cell of markdown, a frame as a markdown table, floats to fixed
decimals."""

from __future__ import annotations

import pandas as pd

from hybridlib.notebook import table_cell


def cell(value: object) -> str:
    """:func:`~hybridlib.notebook.table_cell` of ``value``; NaN/None empty; whole or large floats as grouped
    integers, other floats to 3 significant digits."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return table_cell(f"{value:,.0f}" if value.is_integer() or abs(value) >= 1000 else f"{value:.3g}")
    return table_cell(f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value)


def markdown_table(frame: pd.DataFrame, index: str | None = None) -> str:
    """``frame`` as a markdown table; its index becomes the first column, headed ``index`` (default: its name)."""
    head = [index or frame.index.name or "", *map(str, frame.columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += [
        "| " + " | ".join(cell(v) for v in (i, *row)) + " |" for i, row in zip(frame.index, frame.values)
    ]
    return "\n".join(lines)
