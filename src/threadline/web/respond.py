"""What every endpoint shares: the open saver, query parameters, and rendering a page
with the context every template has."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response


def saver_of(request: Request) -> Any:
    return request.app.state.db.saver


@contextmanager
def thread_saver(request: Request, thread_id: str | None) -> Iterator[Any]:
    """The saver that serves ``thread_id``: the open database's, or — when the official saver's
    tables hold checkpoints of it that threadline has not adopted — a view of it as adopted
    (``web.db.Opened.view``; nothing is written)."""
    with request.app.state.db.view(thread_id or "") as saver:
        yield saver


def param(request: Request, name: str, default: str | None = None, *, required: bool = False) -> str | None:
    """A query parameter; HTTP 400 naming it when ``required`` and missing."""
    value = request.query_params.get(name, default)
    if required and not value:
        raise HTTPException(400, f"missing query parameter {name!r}")
    return value


def int_param(request: Request, name: str, default: int, *, lo: int = 0, hi: int = 10**9) -> int:
    """An integer query parameter within [lo, hi]; HTTP 400 naming it otherwise."""
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(400, f"query parameter {name!r} must be an integer, got {raw!r}") from None
    if not lo <= value <= hi:
        raise HTTPException(400, f"query parameter {name!r} must be between {lo} and {hi}, got {value}")
    return value


def inbox_count(saver: Any) -> int | None:
    """The header's inbox count (threads waiting on an interrupt); None where it cannot be read."""
    from threadline.read.inbox import inbox_count as count

    try:
        return count(saver)
    except Exception:  # a database without threadline's tables yet, a backend without the statement …
        return None


def render(request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> Response:
    """A template with the context every page has (database, read-only state, CSRF token, poll interval)."""
    state = request.app.state
    base = {
        "db_label": state.db_label,
        "backend": state.db.backend,
        "read_only": state.db.read_only,
        "read_only_reason": state.db.reason,
        "csrf": state.guard.csrf,
        "graph_spec": state.config.graph,
        "graph_ready": state.graph is not None,
        "poll_ms": int(state.config.poll_seconds * 1000),
        "done": request.query_params.get("done"),
    }
    return state.templates.TemplateResponse(request, name, {**base, **context}, status_code=status_code)
