"""Renderers of the human-in-the-loop commands: ``inbox``, and the runs of ``resume`` / ``replay``
(each node's update printed as it streams, then the thread's status)."""

from __future__ import annotations

import json
from typing import Any

from rich.markup import escape

from threadline.cli.render.format import DAMAGED, damage_notes, table
from threadline.cli.render.messages import message_line
from threadline.cli.shared import out


def _waited(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def inbox(items: list[Any], **_: Any) -> None:
    if not items:
        out.print("no thread is waiting on an interrupt")
        return
    t = table(f"inbox: {len(items)} interrupt(s) waiting, oldest first", "thread", "node", "waited", "~payload", "~metadata", "interrupt id")
    for i in items:
        payload = DAMAGED if i.damage is not None and i.interrupt_id is None else escape(json.dumps(i.value, default=str, ensure_ascii=False))
        t.add_row(escape(i.thread_id), escape(i.node or "?"), _waited(i.waited), payload,
                  escape(json.dumps(i.metadata, default=str, ensure_ascii=False)) if i.metadata else "", escape(i.interrupt_id or ""))
    out.print(t)
    for line in damage_notes(items):
        out.print(line, soft_wrap=True)
    out.print("answer one: threadline resume THREAD --value JSON --graph MODULE:FACTORY")


def _stream(event: Any) -> None:
    update = event.update
    if event.node == "__interrupt__":
        for i in update if isinstance(update, list) else [update]:
            value = i.get("value") if isinstance(i, dict) else i
            out.print(f"[magenta]interrupt[/magenta]: {escape(json.dumps(value, default=str, ensure_ascii=False))}")
        return
    messages = update.get("messages") if isinstance(update, dict) else None
    if isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
        for m in messages:
            out.print(f"[bold]{escape(event.node)}[/bold] {escape(message_line(m))}")
        return
    out.print(f"[bold]{escape(event.node)}[/bold] {escape(json.dumps(update, default=str, ensure_ascii=False))}")


def run(result: Any, **_: Any) -> None:
    status = result.status
    if status is None:
        return
    where = f" from {result.started_from}" if result.started_from else ""
    out.print(f"{result.action}{where}: {len(result.events)} update(s); thread {escape(result.thread_id)} is now {status.kind}"
              + (f" (waiting in {', '.join(i.get('node') or '?' for i in status.interrupts)})" if status.interrupts else ""))


run.stream = _stream  # type: ignore[attr-defined]
