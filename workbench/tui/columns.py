"""A table's columns for its width: every column when wide, the narrow set below a width."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from textual.widgets import DataTable


def set_columns(
    table: DataTable[Any],
    columns: Sequence[tuple[str, str]],
    narrow_keys: Collection[str],
    narrow: bool,
) -> None:
    """Replace the table's columns (label, key) with all of them, or with those in
    `narrow_keys` when `narrow`; the rows go with them (the caller fills them again)."""
    table.clear(columns=True)
    for label, key in columns:
        if not narrow or key in narrow_keys:
            table.add_column(label, key=key)
