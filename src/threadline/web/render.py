"""Turning read models into what the templates show: sizes, times, chat transcripts,
JSON trees and diffs. Pure functions over ``jsonable`` data; the templates escape
every string (Jinja2 autoescape), so nothing here builds HTML.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from threadline.read import iso, jsonable

ROLE_OF = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant", "AIMessageChunk": "assistant",
           "tool": "tool", "system": "system", "function": "tool", "remove": "removed"}
JSON_ITEMS_SHOWN = 200  # items of a list or keys of a dict shown before "… n more"


def size(n: int | float | None) -> str:
    """Bytes as B / KiB / MiB / GiB text."""
    if n is None:
        return "–"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(n)


def when(ts: float | str | None) -> str:
    """Epoch seconds or ISO text → ``YYYY-MM-DD HH:MM:SS`` (UTC)."""
    text = iso(ts) if isinstance(ts, (int, float)) else ts
    return text[:19].replace("T", " ") if text else "–"


def url(path: str, **params: Any) -> str:
    """``path?query`` with the non-empty parameters, URL-encoded."""
    kept = {k: v for k, v in params.items() if v is not None and v != ""}
    return f"{path}?{urlencode(kept)}" if kept else path


def to_json_text(value: Any, indent: int | None = 2) -> str:
    """A decoded value as JSON text (``jsonable`` first), for editing and compact previews."""
    return json.dumps(jsonable(value), ensure_ascii=False, indent=indent, default=str)


def brief(value: Any, width: int = 120) -> str:
    text = to_json_text(value, None) if not isinstance(value, str) else value
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


# --- chat transcripts --------------------------------------------------------------


def _message_dict(item: Any) -> dict[str, Any] | None:
    data = jsonable(item)
    if not isinstance(data, Mapping) or "content" not in data:
        return None
    kind = data.get("type") or data.get("role")
    return dict(data) if isinstance(kind, str) and kind in ROLE_OF else None


def is_message_list(value: Any) -> bool:
    """A non-empty list whose items are all chat messages (LangChain messages or their dict form)."""
    return isinstance(value, list) and bool(value) and all(_message_dict(m) is not None for m in value)


def _text_and_parts(content: Any) -> tuple[str, list[Any]]:
    """A message's text and its non-text content blocks (images, …)."""
    if isinstance(content, str):
        return content, []
    text, parts = [], []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            text.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
            text.append(block["text"])
        else:
            parts.append(block)
    return "\n".join(text), parts


def message(item: Any) -> dict[str, Any]:
    """One message for the transcript: ``role`` (user / assistant / tool / system), ``text``,
    ``parts`` (other content blocks), ``tool_calls`` (``name``, ``args`` as JSON text, ``id``),
    ``tool_call_id``, ``name``, ``id`` and the remaining fields as ``extra``."""
    data = _message_dict(item) or {"type": "unknown", "content": jsonable(item)}
    kind = data.pop("type", None) or data.pop("role", "unknown")
    text, parts = _text_and_parts(data.pop("content", ""))
    calls = [
        {"name": c.get("name"), "id": c.get("id"), "args": json.dumps(c.get("args"), ensure_ascii=False, indent=2)}
        for c in data.pop("tool_calls", None) or []
        if isinstance(c, Mapping)
    ]
    return {
        "role": ROLE_OF.get(kind, kind),
        "kind": kind,
        "id": data.pop("id", None),
        "name": data.pop("name", None),
        "tool_call_id": data.pop("tool_call_id", None),
        "status": data.pop("status", None),
        "text": text,
        "parts": parts,
        "tool_calls": calls,
        "extra": {k: v for k, v in data.items() if k not in ("additional_kwargs", "response_metadata") or v},
    }


def transcript(value: Any) -> list[dict[str, Any]]:
    return [message(m) for m in value]


def split_channels(values: Mapping[str, Any]) -> tuple[dict[str, list], dict[str, Any]]:
    """(message channels as transcripts, the other channels as jsonable data), in channel order."""
    chats, other = {}, {}
    for ch in sorted(values):
        v = values[ch]
        if is_message_list(v):
            chats[ch] = transcript(v)
        else:
            other[ch] = jsonable(v)
    return chats, other


# --- JSON trees ----------------------------------------------------------------------


def json_kind(value: Any) -> str:
    """The template's rendering of a jsonable value: dict, list, str, num, bool, null."""
    if isinstance(value, Mapping):
        return "dict"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "bool"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "num"
    return "str"


def json_items(value: Any) -> tuple[list[tuple[str, Any]], int]:
    """The first ``JSON_ITEMS_SHOWN`` (key, child) pairs of a dict or list, and how many are left out."""
    pairs = [(str(k), v) for k, v in value.items()] if isinstance(value, Mapping) else [(str(i), v) for i, v in enumerate(value)]
    return pairs[:JSON_ITEMS_SHOWN], max(0, len(pairs) - JSON_ITEMS_SHOWN)


def summary(value: Any) -> str:
    """A one-line summary of a dict or list for a collapsed node."""
    if isinstance(value, Mapping):
        keys = ", ".join(list(map(str, value))[:6])
        return f"{{{len(value)} keys: {keys}{', …' if len(value) > 6 else ''}}}"
    if isinstance(value, list):
        return f"[{len(value)} items]"
    return brief(value)


def diff_messages(change: Mapping[str, Any]) -> dict[str, list]:
    """A message-list change of ``read.diff`` with each message made a transcript entry."""
    m = change.get("messages") or {}
    return {
        "added": [message(x) for x in m.get("added", [])],
        "removed": [message(x) for x in m.get("removed", [])],
        "edited": [{"id": e["id"], "before": message(e["before"]), "after": message(e["after"])} for e in m.get("edited", [])],
    }


def isolated(text: Any) -> str:
    """``text`` between Unicode's first-strong isolate and pop-directional isolate: where no
    ``<bdi>`` can go (a page title, a note), a right-to-left or override character in a
    thread id cannot reorder the text around it."""
    return f"\u2068{text}\u2069"


def waited(seconds: float | None) -> str:
    """A wait as people say it: ``45 s``, ``12 min``, ``3.5 h``, ``2.0 d``."""
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def template_globals() -> dict[str, Any]:
    """Everything the templates call."""
    return {
        "size": size,
        "when": when,
        "waited": waited,
        "isolated": isolated,
        "url": url,
        "brief": brief,
        "json_kind": json_kind,
        "json_items": json_items,
        "summary": summary,
        "to_json_text": to_json_text,
        "diff_messages": diff_messages,
    }
