"""Store and Cache input, checked once for every backend, before anything runs.

A Store backend calls ``op(op)`` on each operation of a batch (``ops.plan`` does) and
``value`` on each value it stores; a Cache calls ``namespace``, ``key`` and ``ttl``. Every rule is a limit of ``threadline.limits``
or what every backend can store, and each raises one threadline error naming it:

* a key is a string without NUL or unpaired surrogates, at most ``max_key_bytes`` in
  UTF-8; a namespace as stored, at most ``max_namespace_bytes`` (``KeyTooLongError``, a
  ``ConfigError``, else ``ConfigError``);
* a TTL is None or a finite number, not a bool or string, at most ``max_ttl_seconds``
  either way (``ConfigError``);
* ``limit`` and ``offset`` are integers from 0 to 2**63 - 1 (``ConfigError``);
* a value's JSON nests at most ``max_json_depth`` deep (``ValueTooLargeError``);
* a filter has at most ``max_filter_keys`` conditions (a key with several operators
  counts each), keys naming paths of at most ``max_filter_path_depth`` fields, at most
  ``max_filter_bytes`` of JSON, nested at most ``max_json_depth`` deep
  (``FilterTooLargeError``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, SearchOp

from threadline import limits
from threadline.errors import ConfigError, ValueTooLargeError
from threadline.keys import text_key
from threadline.store import values as V
from threadline.storage.jsonfilter import conditions, path_of  # noqa: F401  (the filter checks, one copy)

MAX_ROWS = 2**63 - 1  # the largest LIMIT or OFFSET every database takes (a signed 64-bit integer)


def key(value: Any, what: str = "store key") -> str:
    """The key, or ConfigError / KeyTooLongError (``keys.text_key``)."""
    return text_key(what, value)


def namespace(text: str, what: str = "namespace") -> str:
    """A namespace as stored (``text``), or ConfigError / KeyTooLongError beyond ``max_namespace_bytes``."""
    return text_key(what, text, "max_namespace_bytes")


def ttl(value: Any, unit: float, what: str = "ttl") -> float | None:
    """A TTL in ``unit`` seconds (60 for minutes) as a float, or None; ConfigError for a bool,
    a string, NaN, an infinity or more than ``max_ttl_seconds`` either way."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{what} must be a number or None, got {type(value).__name__} {value!r}")
    top = limits.current().max_ttl_seconds
    if not math.isfinite(value) or abs(value) * unit > top:
        raise ConfigError(f"{what} {value!r} is not a finite number of at most max_ttl_seconds={top} seconds (threadline.limits)")
    return float(value)


def page(limit: Any, offset: Any) -> None:
    """ConfigError unless ``limit`` and ``offset`` are integers from 0 to ``MAX_ROWS``."""
    for name, value in (("limit", limit), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ROWS:
            raise ConfigError(f"{name} must be an integer from 0 to {MAX_ROWS}, got {value!r}")


def value(item: Any, where: str) -> str:
    """``values.dumps`` of an item's value; ValueTooLargeError when it nests deeper than ``max_json_depth``."""
    try:
        text = V.dumps(item, where)
    except RecursionError:
        raise limits.too_deep(where, ValueTooLargeError) from None
    limits.check_depth(item, text, where, ValueTooLargeError)
    return text


def labels(path: Sequence[str]) -> None:
    """ConfigError / KeyTooLongError for a namespace, prefix or pattern no namespace can match."""
    namespace(V.ns_text(tuple(path)))


def op(o: Op) -> None:
    """Check one Store operation (see the module docstring)."""
    if isinstance(o, GetOp):
        labels(o.namespace)
        key(o.key)
    elif isinstance(o, SearchOp):
        labels(o.namespace_prefix)
        page(o.limit, o.offset)
        conditions(o.filter)
    elif isinstance(o, ListNamespacesOp):
        page(o.limit, o.offset)
        for cond in o.match_conditions or ():
            labels(cond.path)
    elif isinstance(o, PutOp):
        labels(o.namespace)
        key(o.key)
        if o.value is not None:
            ttl(o.ttl, 60)
