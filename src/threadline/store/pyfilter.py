"""A ``search`` filter evaluated in Python on decoded values, for stores that cannot ask their
database (the Redis store): the terms of ``sql.filter_terms`` (the one reading and check of
a filter, which ``sql.where_filter`` turns into SQL), given the SQL stores' meaning.

``{key: value}`` matches a value whose field at ``key`` (a dotted key is a path through
objects) equals ``value``, JSON-type-exactly (``1`` equals ``1.0``, ``True`` does not equal
``1``; lists and objects compare as their canonical JSON); ``None`` also matches a missing
field. ``{key: {"$op": bound, …}}``: ``$eq``, ``$ne`` (the field is present and differs),
``$gt``, ``$gte``, ``$lt``, ``$lte`` (a number with a number, a string with a string in
code-point order, which is UTF-8 byte order, as the SQL stores compare).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from threadline.store.sql import Term, filter_terms
from threadline.store.values import dumps

Predicate = Callable[[dict[str, Any]], bool]
_MISSING = object()
_COMPARE = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def _at(value: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The field at ``path``, or ``_MISSING`` when an object on the way lacks it (or is not an object)."""
    here: Any = value
    for name in path:
        if not isinstance(here, dict) or name not in here:
            return _MISSING
        here = here[name]
    return here


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _equal(field: Any, value: Any) -> bool:
    """JSON equality of a present, non-null ``field`` and a non-null filter ``value``."""
    if isinstance(value, bool):
        return isinstance(field, bool) and field is value
    if _is_number(value):
        return _is_number(field) and field == value
    if isinstance(value, str):
        return isinstance(field, str) and field == value
    if isinstance(value, (list, dict)):
        return type(field) is type(value) and dumps(field, "stored field") == dumps(value, "filter value")
    return False


def _predicate(t: Term) -> Predicate:
    path, value = t.path, t.value
    if t.kind == "false":
        return lambda v: False
    if t.kind == "present":
        return lambda v: _at(v, path) is not _MISSING
    if t.kind == "cmp":
        compare, kind = _COMPARE[t.op], (str,) if isinstance(value, str) else (int, float)
        return lambda v: isinstance(f := _at(v, path), kind) and not isinstance(f, bool) and compare(f, value)
    if value is None:
        if t.kind == "eq":
            return lambda v: _at(v, path) in (_MISSING, None)
        return lambda v: _at(v, path) not in (_MISSING, None)
    if t.kind == "eq":
        return lambda v: (f := _at(v, path)) is not _MISSING and f is not None and _equal(f, value)
    return lambda v: (f := _at(v, path)) is not _MISSING and (f is None or not _equal(f, value))


def compile_filter(filter: dict[str, Any] | None) -> Predicate:
    """A predicate on decoded values for ``filter`` (``sql.filter_terms``: the same checks, so a
    malformed key, an unknown operator or a range bound that is neither a number nor a string
    raises ValueError as on the SQL stores)."""
    checks = [_predicate(t) for t in filter_terms(filter)]
    return lambda value: all(check(value) for check in checks)
