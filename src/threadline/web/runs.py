"""Humans in the loop in the browser: the inbox page, and runs — answer an interrupt, replay from a
checkpoint, edit state and run — streamed into the page as server-sent events.

``POST /run/{resume,replay,edit}`` (CSRF-checked, refused when read-only, needs ``--graph``)
starts the run in a worker thread — ``threadline.runs``, the same LangGraph run the CLI makes,
on the UI's writing saver, through the thread guard — and answers ``text/event-stream``: one
``update`` event per node update as it happens, then ``done`` (the thread's status) or ``error``
(the one line of what failed, where it failed). The page reads the stream with ``fetch`` (a POST
carries the CSRF token; ``EventSource`` can only GET). ``GET /api/agent`` is the agent's shape
(``graph.get_graph()``: nodes and edges, conditional ones marked) for the thread page.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from threadline import read, runs
from threadline.errors import ConfigError, ThreadlineError
from threadline.keys import thread_id_of
from threadline.web.actions import allowed, writer
from threadline.web.render import url
from threadline.web.respond import int_param, render, saver_of
from threadline.web.security import csrf_form

RUNS = ("resume", "replay", "edit")
NEEDS_GRAPH = "start `threadline ui` with --graph module:factory (your agent's graph) to run it from the browser"


def inbox_page(request: Request) -> Response:
    """Every interrupt waiting for an answer, oldest first, each with its answer form."""
    offset = int_param(request, "offset", 0)
    items = read.inbox(saver_of(request), limit=50, offset=offset)
    return render(request, "inbox.html", {"items": items, "offset": offset})


def sse(event: str, data: Any) -> bytes:
    """One server-sent event: ``event: NAME`` and its data as one JSON line."""
    return f"event: {event}\ndata: {json.dumps(data, default=str, ensure_ascii=False)}\n\n".encode()


def _start(request: Request, form: Any) -> Callable[[Callable[[runs.RunEvent], None]], runs.RunResult]:
    """The run the form asks for, checked before anything streams (HTTP 400/403/404 in one line)."""
    action = request.path_params["action"]
    if action not in RUNS:
        raise HTTPException(404, f"no run {action!r}")
    allowed(request)
    graph = request.app.state.graph
    if graph is None:
        raise HTTPException(400, f"{action} needs the agent's graph: {NEEDS_GRAPH}")
    tid = thread_id_of((form.get("thread_id") or "").strip() or None)
    cid = (form.get("checkpoint_id") or "").strip() or None
    if action == "resume":
        value = runs.parse_value(form.get("value") or "")
        interrupt = (form.get("interrupt_id") or "").strip() or None
        return lambda on: runs.resume(graph, writer(request, [tid]), tid, value, interrupt_id=interrupt, on_event=on)
    if cid is None:
        raise ConfigError(f"{action} needs the checkpoint to start from (checkpoint_id)")
    if action == "replay":
        return lambda on: runs.replay(graph, writer(request, [tid]), tid, cid, on_event=on)
    channel = (form.get("channel") or "").strip()
    if not channel:
        raise ConfigError("pick the channel to edit")
    value = runs.parse_value(form.get("value") or "")
    as_node = (form.get("as_node") or "").strip() or None
    return lambda on: runs.edit_and_run(graph, writer(request, [tid]), tid, cid, {channel: value}, as_node=as_node, on_event=on)


async def run(request: Request) -> Response:
    """Start a run and stream it (``text/event-stream``) as it happens."""
    form = await csrf_form(request)
    start = _start(request, form)
    tid = form.get("thread_id")
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def put(item: bytes | None) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def work() -> None:
        try:
            result = start(lambda e: put(sse("update", e.to_json())))
            put(sse("done", {"status": result.status.to_json() if result.status else None,
                             "thread_url": url("/thread", thread_id=tid)}))
        except Exception as exc:  # shown where it happened: the run's log in the page
            text = exc.cli_message() if isinstance(exc, ThreadlineError) else f"{type(exc).__name__}: {exc}"
            put(sse("error", {"message": " ".join(text.split())}))
        finally:
            put(None)

    threading.Thread(target=work, name=f"threadline-ui-run-{tid}", daemon=True).start()

    async def events() -> AsyncIterator[bytes]:
        yield sse("started", {"thread_id": tid, "action": request.path_params["action"]})
        while (item := await queue.get()) is not None:
            yield item

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def agent_shape(graph: Any) -> dict[str, Any]:
    """The agent's nodes and edges from ``graph.get_graph()`` (``conditional`` edges marked)."""
    g = graph.get_graph()
    nodes = [{"id": n, "label": getattr(node, "name", n) or n} for n, node in g.nodes.items()]
    edges = [{"source": e.source, "target": e.target, "conditional": bool(e.conditional)} for e in g.edges]
    return {"nodes": nodes, "edges": edges}


def api_agent(request: Request) -> Response:
    """The agent's shape as JSON; 404 in one line without ``--graph``."""
    graph = request.app.state.graph
    if graph is None:
        raise HTTPException(404, f"no agent graph: {NEEDS_GRAPH}")
    return JSONResponse(agent_shape(graph))


ROUTES = [
    Route("/inbox", inbox_page),
    Route("/run/{action}", run, methods=["POST"]),
    Route("/api/agent", api_agent),
]
