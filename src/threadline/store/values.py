"""Store items as rows and back: keys, namespaces, JSON values, timestamps.

A namespace is stored as its labels joined with ``"."`` (LangGraph forbids ``"."``
in a label, so the text is unambiguous, as in the official stores). A value is a
dict stored as JSON text: compact, keys sorted (so an object in a filter matches
however its keys were ordered), no NaN or Infinity, no NUL character (Postgres
JSONB cannot hold one). Types JSON lacks (datetime, UUID, dataclasses, enums) are
written as orjson writes them, as the official SQLite store does; nothing is
ever pickled, and reading a value only parses JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import Item, SearchItem

from threadline.errors import CorruptRowError
from threadline.storage.jsonfilter import dumps, jsonable  # noqa: F401  (the one canonical JSON, shared with filters)

SEP = "."


def ns_text(namespace: tuple[str, ...]) -> str:
    return SEP.join(namespace)


def ns_tuple(text: str) -> tuple[str, ...]:
    return tuple(text.split(SEP))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(raw: Any, where: str, deserializer: Callable[[Any], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The stored value: a dict, or CorruptRowError naming ``where``."""
    if isinstance(raw, dict):
        return raw
    try:
        value = deserializer(raw) if deserializer else json.loads(raw, parse_constant=_no_constant)
    except (TypeError, ValueError) as exc:
        raise CorruptRowError(f"{where}: stored value is not readable JSON ({exc})") from exc
    if not isinstance(value, Mapping):
        raise CorruptRowError(f"{where}: stored value is a {type(value).__name__}, not a JSON object")
    return dict(value)


def stamp(seconds: float) -> datetime:
    """A stored time (seconds since the epoch) as an aware UTC datetime."""
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def item(namespace: tuple[str, ...], key: str, raw: Any, created: float, updated: float, loader: Any) -> Item:
    where = f"threadline_store item {namespace!r}/{key!r}"
    return Item(value=loads(raw, where, loader), key=key, namespace=namespace, created_at=stamp(created), updated_at=stamp(updated))


def search_item(prefix: str, key: str, raw: Any, created: float, updated: float, score: Any, loader: Any) -> SearchItem:
    namespace = ns_tuple(prefix)
    where = f"threadline_store item {namespace!r}/{key!r}"
    return SearchItem(
        namespace=namespace,
        key=key,
        value=loads(raw, where, loader),
        created_at=stamp(created),
        updated_at=stamp(updated),
        score=None if score is None else float(score),
    )
