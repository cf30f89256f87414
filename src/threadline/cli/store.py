"""``threadline store``: look at and edit the LangGraph Store kept in a threadline database.

Namespaces are written as their labels joined with dots: ``users.123`` is the namespace
``("users", "123")`` (LangGraph forbids dots inside labels, so this is unambiguous).
Read commands (ls, get, search) open the database read-only and never create the
Store's tables; put and delete write to the database named by ``--db`` or
``$THREADLINE_DB``. Errors and exit codes as every other command (see ``shared``).
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import traceback
from collections.abc import Callable
from datetime import datetime
from typing import Any

import typer
from rich.markup import escape

from threadline.cli import Command, app, default_db
from threadline.cli import options as O
from threadline.cli.shared import Db, Debug, Json, emit, err, explain, fail, out, signature
from threadline.errors import NotFoundError
from threadline.lazy import LazyModule

# loaded when a command runs (``threadline --help`` loads none of them)
F = LazyModule("threadline.cli.render.format")
stores = LazyModule("threadline.store")
official = LazyModule("threadline.store.official")
reader = LazyModule("threadline.store.reader")

store_app = typer.Typer(name="store", help="The LangGraph Store in the database: namespaces and items.",
                        no_args_is_help=True, rich_markup_mode=None)
app.add_typer(store_app)

NAMESPACE_HELP = "Namespace: its labels joined with dots, e.g. users.123."
Namespace = typer.Argument(..., metavar="NAMESPACE", help=NAMESPACE_HELP, show_default=False)
Key = typer.Argument(..., metavar="KEY", help="The item's key.", show_default=False)
PAGE = 1000  # items per read while --query scans


def store_command(
    name: str, *, render: Callable[..., None], writes: bool = False, prepare: Callable[[dict[str, Any]], None] | None = None
) -> Callable[[Callable[..., Any]], Any]:
    """``shared.command`` for the Store: ``fn(store, **options)`` on a store opened read-only
    (``writes=False``, the default database as other reads) or on the database named by
    ``--db``/``$THREADLINE_DB`` with its Store tables set up (``writes=True``). ``prepare(options)``
    checks the options before the database is opened. A read names, on stderr, the items of
    LangGraph's official store in the database that are not adopted yet."""

    def decorate(fn: Callable[..., Any]) -> Any:
        sig = signature(fn)
        kw = inspect.Parameter.KEYWORD_ONLY
        params = [*list(sig.parameters.values())[1:],
                  inspect.Parameter("db", kw, default=Db, annotation=str),
                  inspect.Parameter("as_json", kw, default=Json, annotation=bool),
                  inspect.Parameter("debug", kw, default=Debug, annotation=bool)]

        @functools.wraps(fn)
        def run(db: str | None, as_json: bool, debug: bool, **options: Any) -> None:
            try:
                if writes:
                    url = db or os.environ.get("THREADLINE_DB")
                    if not url:
                        fail(f"store {name} writes to the database you name: pass --db URL (or set $THREADLINE_DB)", 2)
                    if prepare is not None:
                        prepare(options)
                    opener = stores.open_store(url)
                else:
                    opener = reader.open_store_reader(db or default_db())
                with opener as store:
                    result = fn(store, **options)
                    waiting = None if writes else reader.unadopted(store)
                if waiting:
                    err.print(f"note: {reader.plural(waiting, 'item')} of LangGraph's official store in this database "
                              f"{'is' if waiting == 1 else 'are'} not adopted yet and not shown: threadline's store adopts them "
                              "when a program opens it (or copy them now: `threadline store import DB --db DB`)", soft_wrap=True)
                if as_json:
                    emit(result)
                else:
                    render(result)
            except (typer.Exit, typer.Abort):
                raise
            except Exception as exc:
                if debug or os.environ.get("THREADLINE_DEBUG"):
                    traceback.print_exc()
                fail(*explain(exc))

        run.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        store_app.command(name, cls=Command)(run)
        return fn

    return decorate


def _item_json(item: Any) -> dict[str, Any]:
    data = item.dict()
    data["namespace"] = reader.dotted(item.namespace)
    return data


def _value(value: Any, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _render_namespaces(result: list[str]) -> None:
    for ns in result:
        out.print(escape(ns), soft_wrap=True)
    if not result:
        err.print("no namespaces")


def _render_item(item: dict[str, Any]) -> None:
    out.print(f"{escape(item['namespace'])} / {escape(item['key'])}   created {item['created_at']}   updated {item['updated_at']}",
              soft_wrap=True)
    out.print(json.dumps(item["value"], ensure_ascii=False, indent=2, default=str), markup=False, soft_wrap=True)


def _render_items(items: list[dict[str, Any]]) -> None:
    t = F.table(f"{len(items)} item{'' if len(items) == 1 else 's'}", "namespace", "key", "updated (UTC)", "…value")
    for item in items:
        t.add_row(escape(item["namespace"]), escape(item["key"]), _updated(item["updated_at"]), escape(_value(item["value"])))
    out.print(t)


def _updated(stamp: Any) -> str:
    """An item's ISO time as ``YYYY-MM-DD HH:MM:SS`` (UTC), as the other tables show times."""
    try:
        return F.when(datetime.fromisoformat(str(stamp)).timestamp())
    except ValueError:
        return str(stamp)


def _render_done(result: dict[str, Any]) -> None:
    out.print(f"{result['done']} {escape(result['namespace'])} / {escape(result['key'])}", soft_wrap=True)


@store_command("ls", render=_render_namespaces)
def ls(
    store: Any,
    prefix: str = typer.Argument("", metavar="[NAMESPACE]", help="Only namespaces under this one (labels joined with dots)."),
    max_depth: int = typer.Option(None, "--max-depth", min=1, metavar="N", help="Cut namespaces to their first N labels."),
    limit: int = O.limit(100, "namespaces"),
    offset: int = O.Offset,
) -> list[str]:
    """List namespaces (dotted), optionally under NAMESPACE."""
    ns = reader.namespace(prefix, root=True)
    found = store.list_namespaces(prefix=ns or None, max_depth=max_depth, limit=limit, offset=offset)
    return [reader.dotted(n) for n in found]


@store_command("get", render=_render_item)
def get(store: Any, ns: str = Namespace, key: str = Key) -> dict[str, Any]:
    """One item: its value (JSON), created_at, updated_at."""
    item = store.get(reader.namespace(ns), key, refresh_ttl=False)
    if item is None:
        raise NotFoundError(f"no item {key!r} in namespace {ns!r} (see `threadline store search {ns}`)")
    return _item_json(item)


def _filters(items: list[str] | None) -> dict[str, Any] | None:
    """``--filter KEY=VALUE`` items as a Store filter; VALUE read as JSON when it parses
    (``3``, ``true``, ``{"$gt": 3}``), else as text."""
    return O.metadata(items) or None


@store_command("search", render=_render_items)
def search(
    store: Any,
    prefix: str = typer.Argument("", metavar="[NAMESPACE_PREFIX]", help="Items in this namespace and those under it (default: all)."),
    query: str = typer.Option(None, "--query", metavar="TEXT", help="Only items whose key or value contains TEXT (any case)."),
    filters: list[str] = typer.Option(None, "--filter", metavar="KEY=VALUE", callback=O.Where.callback,
                                      help="Only items whose value has KEY equal to VALUE (JSON or text; "
                                           "an operator object such as '{\"$gt\": 3}' compares). Repeatable."),
    limit: int = O.limit(10, "items"),
    offset: int = O.Offset,
) -> list[dict[str, Any]]:
    """Items under a namespace prefix, most recently updated first."""
    ns, where = reader.namespace(prefix, root=True), _filters(filters)
    if not query:
        items = store.search(ns, filter=where, limit=limit, offset=offset, refresh_ttl=False)
        return [_item_json(i) for i in items]
    # The CLI has no embedding model: --query is a text match, scanned page by page.
    needle, matched, start = query.casefold(), [], 0
    while len(matched) < offset + limit:
        page = store.search(ns, filter=where, limit=PAGE, offset=start, refresh_ttl=False)
        matched += [i for i in page if needle in i.key.casefold() or needle in json.dumps(i.value, ensure_ascii=False).casefold()]
        if len(page) < PAGE:
            break
        start += PAGE
    return [_item_json(i) for i in matched[offset:offset + limit]]


@store_command("put", render=_render_done, writes=True)
def put(
    store: Any,
    ns: str = Namespace,
    key: str = Key,
    value: str = typer.Argument(..., metavar="JSON", help='The value: a JSON object, e.g. \'{"theme": "dark"}\'.', show_default=False),
) -> dict[str, Any]:
    """Store VALUE (a JSON object) under NAMESPACE and KEY, replacing any item there."""
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"JSON is not valid JSON ({exc}); quote it for the shell, e.g. '{{\"theme\": \"dark\"}}'") from None
    if not isinstance(data, dict):
        raise ValueError(f"JSON must be an object (store values are objects), got {type(data).__name__}: wrap it, e.g. '{{\"value\": {value}}}'")
    store.put(reader.namespace(ns), key, data)
    return {"done": "stored", "namespace": ns, "key": key}


@store_command("delete", render=_render_done, writes=True)
def delete(store: Any, ns: str = Namespace, key: str = Key) -> dict[str, Any]:
    """Delete the item under NAMESPACE and KEY (exit 2 when there is none)."""
    labels = reader.namespace(ns)
    if store.get(labels, key, refresh_ttl=False) is None:
        raise NotFoundError(f"no item {key!r} in namespace {ns!r}: nothing deleted")
    store.delete(labels, key)
    return {"done": "deleted", "namespace": ns, "key": key}


def _render_import(result: dict[str, Any]) -> None:
    spaces = result["namespaces"]
    shown = ", ".join(spaces[:8]) + (f" and {len(spaces) - 8} more" if len(spaces) > 8 else "")
    out.print(f"imported {reader.plural(result['items'], 'item')} from {escape(result['source'])}"
              + (f" ({reader.plural(len(spaces), 'namespace')}: {escape(shown)})" if spaces else ""), soft_wrap=True)
    if result["kept"]:
        out.print(f"kept {reader.plural(result['kept'], 'item')} the store already held (--replace overwrites them)", soft_wrap=True)


@store_command("import", render=_render_import, writes=True, prepare=lambda o: official.read_official_items(o["source"], check_only=True))
def import_(
    store: Any,
    source: str = typer.Argument(..., metavar="SOURCE", show_default=False,
                                 help="A database of LangGraph's official SqliteStore (a path) or PostgresStore (postgresql://…)."),
    replace: bool = typer.Option(False, "--replace", help="Overwrite items the store already holds (default: keep them)."),
) -> dict[str, Any]:
    """Copy every item of an official LangGraph store into the store of --db (namespaces, keys,
    values, created and updated times, TTLs). SOURCE is only read; it may be the --db database
    itself (adopting its official items now)."""
    return official.import_langgraph_store(source, store, replace=replace).to_json()
