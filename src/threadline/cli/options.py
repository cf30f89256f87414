"""Options several commands share, parsed by their callbacks: a bad value is a usage
error (exit 2) before any database is opened."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import typer

from threadline.errors import ThreadlineError


def _duration(value: str | None) -> float | None:
    from threadline.read import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _where(items: list[str] | None) -> list[str] | None:
    for item in items or []:
        if "=" not in item:
            raise typer.BadParameter(f"expects key=value, got {item!r}")
    return items


def metadata(items: list[str] | None) -> dict[str, Any]:
    """``--where key=value`` items (checked by the option) as a metadata filter; values parsed as JSON when they are."""
    result: dict[str, Any] = {}
    for item in items or []:
        key, raw = item.split("=", 1)
        try:
            result[key] = json.loads(raw)
        except ValueError:
            result[key] = raw
    return result


def _graph(spec: str | None) -> Any:
    from threadline.read import load_graph

    spec = spec or os.environ.get("THREADLINE_GRAPH")
    if not spec:
        return None
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return load_graph(spec)
    except ThreadlineError as exc:
        raise typer.BadParameter(str(exc)) from None


def duration(flag: str, help: str) -> Any:
    """An option taking ``90s``, ``15m``, ``12h``, ``30d``, ``2w`` or seconds; the command gets seconds."""
    return typer.Option(None, flag, help=help, callback=_duration)


Ns = typer.Option("", "--ns", help="checkpoint_ns (default: the root graph '').")
Graph = typer.Option(
    None, "--graph", callback=_graph,
    help="Compiled graph as module:attr (default $THREADLINE_GRAPH), e.g. threadline.demo:build_graph.",
)
Where = typer.Option(None, "--where", callback=_where,
                     help="Metadata filter key=value (value parsed as JSON if it is). Repeatable.")
Threads = typer.Option(None, "--thread", help="Only these threads (repeatable).")
