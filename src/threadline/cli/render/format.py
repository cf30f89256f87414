"""Small text helpers shared by the renderers: sizes, times, short ids, folded values, tables."""

from __future__ import annotations

import json
import time
from typing import Any

from rich import box
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from threadline.read import iso, jsonable
from threadline.read.names import short

VALUE_WIDTH = 200  # characters of a value shown before it is folded (--full shows it whole)

__all__ = ["VALUE_WIDTH", "ago", "fold", "page_footer", "short", "size", "table", "value_text", "when"]


def when(ts: float | None) -> str:
    text = iso(ts)
    return text[:19].replace("T", " ") if text else "-"


def ago(ts: float | None, now: float | None = None) -> str:
    """How long ago, in at most 10 characters: ``42s ago``, ``5m ago``, ``3h ago``, ``12d ago``, then the date."""
    if ts is None:
        return "-"
    age = max(0.0, (time.time() if now is None else now) - float(ts))
    for below, per, unit in ((60, 1, "s"), (3600, 60, "m"), (86400, 3600, "h"), (30 * 86400, 86400, "d")):
        if age < below:
            return f"{int(age // per)}{unit} ago"
    return when(ts)[:10]


def size(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if abs(value) < 1024:
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def fold(text: str, width: int | None) -> str:
    """``text`` cut to ``width`` characters, saying how much was left out (None: whole)."""
    if width is None or len(text) <= width:
        return text
    return f"{text[:width]}… (+{len(text) - width} chars; --full shows all)"


def value_text(value: Any, width: int | None = VALUE_WIDTH) -> str:
    """A decoded value as one line of JSON, folded to ``width``."""
    value = jsonable(value)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return fold(" ".join(text.split()) if "\n" in text else text, width)


class _Table(Table):
    """A table whose ``…`` columns show each cell on one line, cut with ``…`` to the column's width."""

    cut: set[int] = set()

    def add_row(self, *cells: Any, **kwargs: Any) -> None:
        shown = []
        for i, cell in enumerate(cells):
            if i in self.cut and isinstance(cell, str):
                cell = Text.from_markup(cell, overflow="ellipsis")
                cell.no_wrap = True
            shown.append(cell)
        super().add_row(*shown, **kwargs)


def table(title: str | None, *columns: str) -> Table:
    """A compact table: no vertical rules, headers and ids never wrapped. A column named
    ``"~name"`` is free text that folds to fit; ``"…name"`` is a name cut with ``…`` when the
    table is too wide for the terminal (before any other column is cut); ``">name"`` is
    right-aligned."""
    t = _Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True,
               min_width=len(title or ""))  # a title wider than the columns widens the table instead of wrapping
    t.cut = {i for i, col in enumerate(columns) if col.startswith("…")}
    for col in columns:
        if col.startswith("~"):
            t.add_column(col[1:], overflow="fold", ratio=1)
        elif col.startswith("…"):
            t.add_column(col[1:], overflow="ellipsis")
        else:
            t.add_column(col.lstrip(">"), justify="right" if col.startswith(">") else "left", no_wrap=True)
    return t


def page_footer(shown: int, offset: int, total: int, noun: str) -> str | None:
    """``"… more: --offset N"`` when a page does not reach the end, else None."""
    end = offset + shown
    if end >= total:
        return None
    return f"[dim]{noun} {offset + 1 if shown else 0}–{end} of {total}; more: --offset {end}[/dim]"


DAMAGED = "[red]damaged[/red]"


def damage_notes(rows: Any) -> list[str]:
    """One line per thread of ``rows`` (``ThreadInfo`` or ``InboxItem``) with a ``damage``: the
    thread, the error and the command that explains it (rich markup, escaped)."""
    damaged = {r.thread_id: r.damage for r in rows if r.damage is not None}
    return [f"{DAMAGED} {escape(tid)}: {escape(d.error)}: {escape(d.message)} — run `{escape(d.command)}`" for tid, d in damaged.items()]
