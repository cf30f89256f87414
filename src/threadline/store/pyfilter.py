"""A ``search`` filter evaluated in Python on decoded values, for stores that cannot ask their
database (the Redis store): the same meaning as the SQL stores' ``sql.where_filter``, with
the key paths, value normalization and operator checks taken from ``store.sql``.

``{key: value}`` matches a value whose field at ``key`` (a dotted key is a path through
objects) equals ``value``, JSON-type-exactly (``1`` equals ``1.0``, ``True`` does not equal
``1``; lists and objects compare as their canonical JSON); ``None`` also matches a missing
field. ``{key: {"$op": bound, …}}``: ``$eq``, ``$ne`` (the field is present and differs),
``$gt``, ``$gte``, ``$lt``, ``$lte`` (a number with a number, a string with a string in
code-point order, which is UTF-8 byte order, as the SQL stores compare).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from threadline.store.sql import RANGE_OPS, never_matches, normalize, path_of
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


def _condition(path: tuple[str, ...], op: str, value: Any) -> Predicate:
    if op in ("$eq", "$ne"):
        if never_matches(value):
            return (lambda v: False) if op == "$eq" else (lambda v: _at(v, path) is not _MISSING)
        if value is None:
            if op == "$eq":
                return lambda v: _at(v, path) in (_MISSING, None)
            return lambda v: _at(v, path) not in (_MISSING, None)
        if op == "$eq":
            return lambda v: (f := _at(v, path)) is not _MISSING and f is not None and _equal(f, value)
        return lambda v: (f := _at(v, path)) is not _MISSING and (f is None or not _equal(f, value))
    if op not in RANGE_OPS:
        raise ValueError(f"Unsupported operator: {op}; use one of $eq, $ne, $gt, $gte, $lt, $lte")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"filter {'.'.join(path)!r} {op} needs a number or a string, got {type(value).__name__}")
    if isinstance(value, float) and math.isnan(value) or isinstance(value, str) and "\x00" in value:
        return lambda v: False
    compare = _COMPARE[RANGE_OPS[op]]
    if isinstance(value, str):
        return lambda v: isinstance(f := _at(v, path), str) and compare(f, value)
    return lambda v: _is_number(f := _at(v, path)) and compare(f, value)


def compile_filter(filter: dict[str, Any] | None) -> Predicate:
    """A predicate on decoded values for ``filter``; raises ValueError (as the SQL stores) for a
    malformed key, an unknown operator or a range bound that is neither a number nor a string."""
    checks: list[Predicate] = []
    for key, spec in (filter or {}).items():
        path = path_of(key)
        if isinstance(spec, dict) and spec and all(isinstance(k, str) and k.startswith("$") for k in spec):
            conditions = list(spec.items())
        else:
            conditions = [("$eq", spec)]
        checks += [_condition(path, op, normalize(raw)) for op, raw in conditions]
    return lambda value: all(check(value) for check in checks)
