"""Chat messages as a person reads them: ``role: content``, with tool calls and tool results.

Works on the JSON rendering of values (``threadline.read.jsonable``): a LangChain
message is a dict with ``type`` (``human``, ``ai``, ``tool``, ``system``, …) and
``content`` (text, or a list of content blocks), plus ``tool_calls`` on AI messages and
``name`` / ``tool_call_id`` on tool results.
"""

from __future__ import annotations

import json
from typing import Any

from threadline.cli.render.format import fold

ROLES = {"human": "human", "ai": "ai", "tool": "tool", "system": "system", "function": "function", "chat": "chat",
         "HumanMessageChunk": "human", "AIMessageChunk": "ai", "ToolMessageChunk": "tool", "SystemMessageChunk": "system"}


def is_message(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in ROLES and "content" in value


def is_message_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(is_message(m) for m in value)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, dict):
                parts.append(f"[{block.get('type', 'block')}]")
        return " ".join(parts)
    return json.dumps(content, ensure_ascii=False, default=str)


def _call(call: dict[str, Any]) -> str:
    args = call.get("args")
    shown = json.dumps(args, ensure_ascii=False, default=str) if args not in (None, {}) else ""
    return f"→ {call.get('name', '?')}({shown})" + (f" [{call['id']}]" if call.get("id") else "")


def message_line(m: dict[str, Any], *, width: int | None = 200) -> str:
    """One message as ``role: content``; an AI message's tool calls follow its text as
    ``→ name({args}) [call id]``; a tool result reads ``tool NAME [call id]: content``.
    The content is folded to ``width`` characters (None: whole)."""
    role = ROLES.get(m.get("type"), str(m.get("type")))
    if role == "tool":
        name = m.get("name")
        role = "tool" + (f" {name}" if name else "") + (f" [{m['tool_call_id']}]" if m.get("tool_call_id") else "")
    text = _text(m.get("content"))
    calls = [_call(c) for c in m.get("tool_calls") or [] if isinstance(c, dict)]
    body = "; ".join(([text] if text else []) + calls)
    return f"{role}: {fold(body, width)}"
