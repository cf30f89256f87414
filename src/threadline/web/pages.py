"""The read-only pages and JSON endpoints: threads, a thread's branch graph, a checkpoint,
a diff, statistics, the Store, and the change markers pages poll for live updates."""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from threadline.read.tags import thread_pin_op, thread_tags_op
from threadline import read
from threadline.errors import NotADatabaseError
from threadline.read import checkpoint_row_op, head_op, jsonable
from threadline.read.common import isolated
from threadline.store.reader import dotted, namespace, open_store_reader, unadopted
from threadline.storage import rows as R
from threadline.storage.ops import lease
from threadline.web import queries
from threadline.web.layout import lay_out
from threadline.web.render import split_channels, to_json_text, url
from threadline.lifecycle import objects
from threadline.read.official import scope_of
from threadline.web.respond import int_param, param, render, saver_of, thread_saver

PAGE_SIZE = 50


def _json(text: str) -> Any:
    """``json.loads``, with nesting deeper than Python can parse a ValueError (never a RecursionError)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("metadata filter is nested too deeply to parse: filter on key=value pairs or a shallow JSON object") from None


def parse_metadata(text: str) -> dict[str, Any]:
    """``key=value, key2=value2`` (values read as JSON when they parse, else as text) or a JSON object.

    Raises ValueError naming the part that is neither, or for JSON nested too deeply to parse.
    """
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            value = _json(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"metadata filter is not a JSON object: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError("metadata filter must be a JSON object or key=value pairs")
        return value
    out: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, raw = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"metadata filter part {part!r} is not key=value (e.g. source=loop, step=3)")
        try:
            out[key.strip()] = _json(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw.strip()
    return out


def _listing(request: Request) -> dict[str, Any]:
    """The threads page's query, its page of threads and each one's status (a thread whose head
    cannot be read: its ``damage``, shown in its row; the others as always)."""
    saver = saver_of(request)
    q = param(request, "q", "") or ""
    meta = param(request, "meta", "") or ""
    sort = param(request, "sort", "updated") or "updated"
    offset = int_param(request, "offset", 0)
    limit = int_param(request, "limit", PAGE_SIZE, lo=1, hi=500)
    metadata = parse_metadata(meta)
    archived = (param(request, "archived", "") or "") in ("1", "true", "yes")  # archived threads listed too

    scope = scope_of(saver, True)

    def op():
        page = yield from queries.search_threads_op(saver.dialect, pattern=q, metadata=metadata, order=sort, limit=limit, offset=offset,
                                                    scope=scope, archived=None if archived else False)
        statuses = {}
        held = yield from lease.held(saver.dialect, [t.thread_id for t in page.threads])  # the page's running leases, read once
        for t in page.threads:
            if t.adopted and not t.cold:  # a cold thread has no head here: marked cold instead
                statuses[t.thread_id], t.damage = yield from isolated(t.thread_id, queries.thread_status_op(
                    saver.dialect, saver.serde, t.thread_id, t.head_checkpoint_id, saver.blob_codec, busy=t.thread_id in held))
        return page, statuses

    page, statuses = saver.run(op())
    for t in page.threads:  # a thread not adopted yet: its status as adopted (a view, nothing written)
        if not t.adopted:
            statuses[t.thread_id], t.damage = _status(request, t.thread_id)
    query = {"q": q, "meta": meta, "sort": sort, "limit": limit if limit != PAGE_SIZE else None, "archived": "1" if archived else None}
    return {"page": page, "statuses": statuses, "query": query, "orders": list(queries.ORDERS)}


def threads_page(request: Request) -> Response:
    return render(request, "threads.html", _listing(request))


def threads_rows(request: Request) -> Response:
    """The threads table's body alone, for live refresh."""
    return render(request, "_thread_rows.html", _listing(request))


def _thread_info(saver: Any, thread_id: str, view: Any = None) -> read.ThreadInfo:
    """The thread's row of the listing; a cold one's as ``view`` (``thread_saver``: its archive) holds it."""
    found = read.list_threads(saver, thread_ids=[thread_id], limit=1, official=True).threads
    if not found:
        raise no_thread(thread_id)
    if found[0].cold and view is not None and view is not saver:
        return dataclasses.replace(_thread_info(view, thread_id), cold=True)
    return found[0]


def _status(request: Request, thread_id: str) -> tuple[queries.Status | None, read.Damage | None]:
    """The status of a thread's head, read as adopted when it is not yet (``thread_saver``), or
    why it cannot be read (``read.common.isolated``)."""
    with thread_saver(request, thread_id) as saver:
        return _status_of(saver, thread_id)


def _status_of(saver: Any, thread_id: str) -> tuple[queries.Status | None, read.Damage | None]:
    """The status of the thread's head on ``saver``, or None and why it cannot be read."""
    def op():
        head = yield from head_op(saver.dialect, thread_id)
        return (yield from isolated(thread_id, queries.thread_status_op(saver.dialect, saver.serde, thread_id, head, saver.blob_codec)))

    return saver.run(op())


def no_thread(thread_id: str) -> HTTPException:
    return HTTPException(404, f"no thread {thread_id!r} in this database")


def thread_page(request: Request) -> Response:
    tid = param(request, "thread_id", required=True)
    ns = param(request, "ns", "") or ""
    with thread_saver(request, tid) as saver:
        info = _thread_info(saver_of(request), tid, saver)
        namespaces = saver.run(queries.namespaces_op(saver.dialect, tid))
        status, damage = _status_of(saver, tid)
        info.damage = info.damage or damage
        marks = _marks(saver, tid)
    return render(request, "thread.html", {"info": info, "ns": ns, "namespaces": namespaces, "status": status, **marks})


def _marks(saver: Any, thread_id: str) -> dict[str, Any]:
    """The thread's tags and pin (``read.tags``) and its state's channels (for one channel
    through time) for its page's header."""
    head = saver.run(head_op(saver.dialect, thread_id))
    versions = {}
    if head:
        row = saver.run(checkpoint_row_op(saver.dialect, thread_id, "", head))
        versions = R.all_versions(saver.dialect.load_object(row[4], f"checkpoint ({thread_id!r}, '', {head!r})"))
    return {"tags": saver.run(thread_tags_op(saver.dialect, thread_id)), "pinned": saver.run(thread_pin_op(saver.dialect, thread_id)),
            "channels": sorted(ch for ch in versions if not read.is_internal_channel(ch))}


def _head(saver: Any, thread_id: str) -> str | None:
    return saver.run(head_op(saver.dialect, thread_id))


def thread_header(request: Request) -> Response:
    """The thread page's header alone (status, head, sizes), for live refresh."""
    tid = param(request, "thread_id", required=True)
    with thread_saver(request, tid) as saver:
        info = _thread_info(saver_of(request), tid, saver)
        status, damage = _status_of(saver, tid)
        info.damage = info.damage or damage
        marks = _marks(saver, tid)
    return render(request, "_thread_header.html", {"info": info, "status": status, **marks})


def api_graph(request: Request) -> Response:
    """The branch-graph layout of one namespace of a thread (``layout.lay_out``) as JSON."""
    tid = param(request, "thread_id", required=True)
    ns = param(request, "ns", "") or ""
    with thread_saver(request, tid) as saver:
        return JSONResponse(lay_out(saver.run(queries.tree_op(saver.dialect, tid, ns))))


def api_changes(request: Request) -> Response:
    """A marker that changes whenever the thread (or, without ``thread_id``, any thread) is written."""
    tid = param(request, "thread_id")
    saver = saver_of(request)
    if not scope_of(saver, True).threadline:  # an official saver's database: its threads' newest checkpoint
        page = read.list_threads(saver, thread_ids=[tid] if tid else None, limit=1, official=True)
        newest = page.threads[0] if page.threads else None
        return JSONResponse({"marker": newest and [page.total, newest.updated_at], "head": newest and newest.head_checkpoint_id})

    def op():
        marker = yield from queries.change_marker_op(saver.dialect, tid)
        head = (yield from head_op(saver.dialect, tid)) if tid else None
        return {"marker": marker, "head": head}

    found = saver.run(op())
    if tid and found["head"] is None:  # a thread not adopted yet: its head as adopted
        with thread_saver(request, tid) as view:
            found["head"] = _head(view, tid)
    return JSONResponse(found)


def _pending_by_task(view: read.StateView) -> list[dict[str, Any]]:
    tasks: OrderedDict[str, dict[str, Any]] = OrderedDict()
    for w in view.pending_writes:
        task = tasks.setdefault(w.task_id, {"task_id": w.task_id, "node": w.node, "task_path": w.task_path, "writes": []})
        task["writes"].append(w)
    return list(tasks.values())


def checkpoint_page(request: Request) -> Response:
    tid = param(request, "thread_id", required=True)
    ns = param(request, "ns", "") or ""
    cid = param(request, "checkpoint_id")
    with thread_saver(request, tid) as saver:
        if not cid:
            head = saver.run(head_op(saver.dialect, tid, ns))
            if head is None:
                raise no_thread(tid)
            return RedirectResponse(url("/checkpoint", thread_id=tid, ns=ns, checkpoint_id=head), status_code=303)
        view = read.state_at(saver, tid, cid, checkpoint_ns=ns, graph=request.app.state.graph)
        produced_by = read.audit(saver, tid, view.parent_checkpoint_id, checkpoint_ns=ns) if view.parent_checkpoint_id else []
        sizes = read.task_stats(saver, tid, cid, checkpoint_ns=ns)
    chats, other = split_channels(view.values)
    graph = request.app.state.graph
    editable = graph is not None and not ns and not request.app.state.db.read_only
    return render(request, "checkpoint.html", {
        "graph_nodes": [n for n in graph.nodes if n != "__start__"] if editable else [],
        "edit_values": {ch: to_json_text(v) for ch, v in view.values.items()} if editable else {},
        "view": view,
        "chats": chats,
        "other": other,
        "tasks": _pending_by_task(view),
        "produced_by": produced_by,
        "sizes": sizes,
        "errors": [w for w in view.pending_writes if w.channel == read.ERROR],
    })


def panel(request: Request) -> Response:
    """A checkpoint's summary for the side panel of the thread page."""
    tid = param(request, "thread_id", required=True)
    ns = param(request, "ns", "") or ""
    cid = param(request, "checkpoint_id", required=True)
    with thread_saver(request, tid) as saver:
        view = read.state_at(saver, tid, cid, checkpoint_ns=ns)
    chats, other = split_channels(view.values)
    return render(request, "_panel.html", {"view": view, "chats": chats, "other": other})


def channel_page(request: Request) -> Response:
    """One channel through time (``read.channel_history``): its versions along the head branch, or every branch (``all``)."""
    tid = param(request, "thread_id", required=True)
    ns = param(request, "ns", "") or ""
    channel = param(request, "channel", required=True)
    with thread_saver(request, tid) as saver:
        history = read.channel_history(saver, tid, channel, checkpoint_ns=ns, all_branches=bool(param(request, "all", "")))
    history = dataclasses.replace(history, versions=[dataclasses.replace(v, value=jsonable(v.value)) for v in history.versions])
    return render(request, "channel.html", {"history": history})


def diff_page(request: Request) -> Response:
    tid = param(request, "thread_id", required=True)
    ns = param(request, "ns", "") or ""
    a = param(request, "a", required=True)
    b = param(request, "b", required=True)
    with thread_saver(request, tid) as saver:
        result = read.diff(saver, tid, a, b, checkpoint_ns=ns)

        def rows():
            ra = yield from checkpoint_row_op(saver.dialect, tid, ns, a)
            rb = yield from checkpoint_row_op(saver.dialect, tid, ns, b)
            return [{"id": r[2], "parent": r[3], "step": r[6], "source": r[7], "created": r[8]} for r in (ra, rb)]

        side_a, side_b = saver.run(rows())
    return render(request, "diff.html", {"thread_id": tid, "ns": ns, "diff": result, "a": side_a, "b": side_b})


def stats_page(request: Request) -> Response:
    tid = param(request, "thread_id")
    if tid:
        _thread_info(saver_of(request), tid)
    elif not scope_of(saver_of(request), True).threadline:
        raise HTTPException(404, "no statistics yet: only LangGraph's official saver has written this database "
                                 "(its threads are listed; open one for its statistics)")
    with thread_saver(request, tid) as saver:
        d = saver.dialect
        st = read.stats(saver, thread_ids=[tid] if tid else None, top=10)
        if not tid:
            st.offloaded = objects.offload_summary(saver, st)  # in-row vs offloaded bytes, cold threads
        tasks = read.task_stats(saver, tid, checkpoint_ns=None)
        charts = {
            "tables": st.tables,
            "sources": st.sources,
            "dedup": {"references": st.references, "blob_rows": st.tables["blobs"]["rows"],
                      "logical_bytes": st.logical_blob_bytes, "stored_bytes": st.tables["blobs"]["bytes"]},
            "deltas": saver.run(queries.delta_stats_op(d, tid)),
            "timeline": saver.run(queries.storage_timeline_op(d, tid)),
            "tasks": [t.to_json() for t in tasks.tasks],
            "durations": saver.run(queries.task_durations_op(d, tid)),
        }
    return render(request, "stats.html", {"thread_id": tid, "stats": st, "tasks": tasks, "charts": charts})


def store_page(request: Request) -> Response:
    """The Store's namespaces and the items under the namespace prefix ``ns`` (dotted), newest
    first. Read through its own read-only connection: nothing is created, TTLs are not restarted."""
    prefix = (param(request, "ns", "") or "").strip()
    offset = int_param(request, "offset", 0)
    labels = namespace(prefix, root=True)
    context: dict[str, Any] = {"ns": prefix, "offset": offset, "page_size": PAGE_SIZE}
    try:
        with open_store_reader(request.app.state.config.db) as store:
            namespaces = store.list_namespaces(prefix=labels or None, limit=1000)
            items = store.search(labels, limit=PAGE_SIZE + 1, offset=offset, refresh_ttl=False)
            context["unadopted"] = unadopted(store)
    except NotADatabaseError as exc:
        return render(request, "store.html", {**context, "missing": str(exc), "namespaces": [], "items": []})
    rows = [{"namespace": dotted(i.namespace), "key": i.key, "value": i.value,
             "created_at": i.created_at.isoformat(), "updated_at": i.updated_at.isoformat()} for i in items[:PAGE_SIZE]]
    return render(request, "store.html", {**context, "missing": None, "namespaces": [dotted(n) for n in namespaces],
                                          "items": rows, "more": len(items) > PAGE_SIZE})


ROUTES = [
    Route("/", threads_page),
    Route("/rows", threads_rows),
    Route("/thread", thread_page),
    Route("/thread/header", thread_header),
    Route("/checkpoint", checkpoint_page),
    Route("/panel", panel),
    Route("/diff", diff_page),
    Route("/channel", channel_page),
    Route("/stats", stats_page),
    Route("/store", store_page),
    Route("/api/graph", api_graph),
    Route("/api/changes", api_changes),
]
