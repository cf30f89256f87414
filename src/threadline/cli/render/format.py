"""Small text helpers shared by the renderers: sizes, times, checkpoint ids, folded values."""

from __future__ import annotations

import json
from typing import Any


def short(cid: str | None) -> str:
    return "-" if not cid else cid


def when(ts: float | None) -> str:
    from threadline.read import iso

    text = iso(ts)
    return text[:19].replace("T", " ") if text else "-"


def size(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if abs(value) < 1024:
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def brief(value: Any, width: int = 100) -> str:
    from threadline.read import jsonable

    text = json.dumps(jsonable(value), ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"
