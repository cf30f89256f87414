"""The one JSON filter of threadline: LangGraph's Store operators on a JSON column, read once
and expressed per backend. The Store's ``search`` (``storage/dialect/store.py``, ``store/pyfilter.py``),
the savers' ``list(filter=…)`` operators and the thread records' search all use it.

A filter is ``{key: value}`` or ``{key: {"$op": bound, …}}``; a dotted key is a path through
objects (``"user.level"`` names ``value["user"]["level"]``). Operators:

* ``$eq`` — JSON-type-exact equality (``1`` equals ``1.0``, ``True`` does not equal ``1``;
  lists and objects compare as canonical JSON); a ``None`` bound also matches a missing field;
* ``$ne`` — the field is present and differs (as the official SQLite and Postgres stores);
* ``$gt``, ``$gte``, ``$lt``, ``$lte`` — a number with a number, a string with a string
  (code-point order, which is UTF-8 byte order);
* ``$in`` — equals one of a list of values (``$eq`` each); ``$nin`` — present and differs from
  every one of them (``$ne`` each).

Every key segment and value is a bound parameter (``SqliteJson`` / ``PostgresJson`` build the
SQL, ``compile_filter`` the Python predicate of the Redis backends). Errors: FilterError (a
ValueError) for an unknown operator (named), a bad key or bound; FilterTooLargeError beyond
``threadline.limits``.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from threadline import limits
from threadline.errors import FilterError, FilterTooLargeError

RANGE_OPS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
OPERATORS = ("$eq", "$ne", *RANGE_OPS, "$in", "$nin")


def jsonable(obj: Any) -> Any:
    """``obj`` as JSON data, types JSON lacks written as orjson writes them; TypeError otherwise."""
    try:
        return orjson.loads(orjson.dumps(obj))
    except TypeError as exc:
        raise TypeError(f"{type(obj).__name__} is not JSON serializable") from exc


def dumps(value: Any, where: str = "value") -> str:
    """Canonical JSON text of ``value`` (sorted keys, compact); ValueError naming ``where`` when it cannot be stored."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=jsonable)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where} cannot be stored as JSON: {exc}") from exc
    if "\\u0000" in text:
        raise ValueError(f"{where} contains a NUL character, which the database cannot store")
    return text


def normalize(value: Any) -> Any:
    """A filter value as JSON would hold it (tuples as lists, datetimes as strings, …)."""
    if value is None or isinstance(value, (bool, int, float, str, list, dict)):
        return value
    if isinstance(value, tuple):
        return list(value)
    return jsonable(value)


def never_matches(value: Any) -> bool:
    """No stored JSON equals NaN, Infinity or a string with NUL (values cannot hold them)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    return isinstance(value, str) and "\x00" in value


def bindable(number: int | float) -> int | float:
    """Numbers beyond 64 bits compare as floats (no driver binds them as integers); beyond a
    double, as an infinity (as SQLite reads such a number in JSON)."""
    if not isinstance(number, int) or -(2**63) <= number < 2**63:
        return number
    try:
        return float(number)
    except OverflowError:
        return math.inf if number > 0 else -math.inf


def path_of(field: Any) -> tuple[str, ...]:
    """A filter key as its path: ``"user.level"`` names ``value["user"]["level"]``."""
    if not isinstance(field, str):
        raise FilterError(f"Invalid filter key: {field!r}; filter keys must be strings")
    segments = tuple(field.split("."))
    if not all(segments) or "\x00" in field:
        raise FilterError(f"Invalid filter key: {field!r}; a key is field names joined by '.', none of them empty or holding NUL")
    top = limits.current().max_filter_path_depth
    if len(segments) > top:
        raise FilterTooLargeError(f"filter key {field[:80]!r} names {len(segments)} fields, more than max_filter_path_depth={top} (threadline.limits)")
    return segments


def is_operators(spec: Any) -> bool:
    """``spec`` is an operator map (``{"$op": bound, …}``: a non-empty dict whose keys all start with ``$``)."""
    return isinstance(spec, dict) and bool(spec) and all(isinstance(k, str) and k.startswith("$") for k in spec)


def conditions(filter: Mapping[str, Any] | None) -> list[tuple[tuple[str, ...], list[tuple[str, Any]]]]:
    """A filter as (path, [(operator, value), …]) per key: ``{key: value}`` is ``$eq``,
    ``{key: {"$op": value, …}}`` its operators. Raises FilterError for a bad key (or a filter
    that is not JSON), FilterTooLargeError beyond the limits (a key with several operators
    counts each toward ``max_filter_keys``)."""
    if not filter:
        return []
    limits.check_filter_json(filter, "filter")
    found = []
    for field, spec in filter.items():
        found.append((path_of(field), list(spec.items()) if is_operators(spec) else [("$eq", spec)]))
    count, top = sum(len(c) for _, c in found), limits.current().max_filter_keys
    if count > top:
        raise FilterTooLargeError(f"filter has {count} conditions, more than max_filter_keys={top} (threadline.limits)")
    return found


@dataclass(frozen=True)
class Term:
    """One checked condition of a filter, for a backend to express: ``kind`` "false" (matches
    nothing), "present" (the field exists), "eq" / "ne" (JSON equality with ``value``, or a
    present field that differs), "cmp" (the field, a number or a string as ``value`` is,
    compares ``op`` — one of ``>``, ``>=``, ``<``, ``<=`` — to ``value``), "any" (``value`` is a
    tuple of "eq"/"false" terms on the same path, one of which holds)."""

    kind: str
    path: tuple[str, ...]
    value: Any = None
    op: str = ""


def filter_terms(filter: Mapping[str, Any] | None) -> list[Term]:
    """The checked conditions of a filter (the one reading of a filter; see the module
    docstring for the operators). Raises FilterError for an unknown operator (named), a
    range bound that is neither a number nor a string, an ``$in``/``$nin`` bound that is not
    a list; FilterTooLargeError beyond the limits."""
    terms: list[Term] = []
    for path, conds in conditions(filter):
        for op, raw in conds:
            terms += _terms(path, op, raw)
    return terms


def _equality(path: tuple[str, ...], op: str, value: Any) -> Term:
    if never_matches(value):
        return Term("false", path) if op == "$eq" else Term("present", path)
    return Term("eq" if op == "$eq" else "ne", path, value)


def _terms(path: tuple[str, ...], op: str, raw: Any) -> list[Term]:
    if op in ("$in", "$nin"):
        if not isinstance(raw, (list, tuple)):
            raise FilterError(f"filter {'.'.join(path)!r} {op} needs a list of values, got {type(raw).__name__}")
        values = [normalize(v) for v in raw]
        if op == "$nin":
            return [_equality(path, "$ne", v) for v in values] or [Term("present", path)]
        return [Term("any", path, tuple(_equality(path, "$eq", v) for v in values))]
    value = normalize(raw)
    if op in ("$eq", "$ne"):
        return [_equality(path, op, value)]
    if op not in RANGE_OPS:
        raise FilterError(f"Unsupported operator: {op}; use one of {', '.join(OPERATORS)}")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise FilterError(f"filter {'.'.join(path)!r} {op} needs a number or a string, got {type(value).__name__}")
    if isinstance(value, float) and math.isnan(value) or isinstance(value, str) and "\x00" in value:
        return [Term("false", path)]
    return [Term("cmp", path, value, RANGE_OPS[op])]


# --- SQL ------------------------------------------------------------------------------------


class SqliteJson:
    """SQLite conditions on the JSON text in ``column`` (an SQL expression such as ``s.value``).

    A field is found with json_each, one level per key segment, comparing the members' decoded
    names: SQLite's JSON paths compare a name as it is escaped in the JSON text, so a path could
    not name a field holding '"' or '\\\\' (or differ across versions)."""

    def __init__(self, column: str) -> None:
        self.column = column

    def _exists(self, path: tuple[str, ...], condition: str, params: list[Any]) -> tuple[str, list[Any]]:
        """``EXISTS`` a field at ``path`` satisfying ``condition`` (on alias ``{j}``): never NULL."""
        sources, keys = [f"json_each({self.column}) j1"], ["j1.key = ?"]
        for n in range(2, len(path) + 1):
            sources.append(f"json_each(CASE WHEN j{n - 1}.type = 'object' THEN j{n - 1}.value ELSE '{{}}' END) j{n}")
            keys.append(f"j{n}.key = ?")
        where = " AND ".join(keys + [condition.format(j=f"j{len(path)}")])
        return f"EXISTS (SELECT 1 FROM {', '.join(sources)} WHERE {where})", [*path, *params]

    def equals(self, path: tuple[str, ...], value: Any, negate: bool = False) -> tuple[str, list[Any]]:
        """SQL true where the JSON at ``path`` equals ``value`` (type-exact; None also matches a
        missing field) or, with ``negate``, is present and differs; never NULL."""
        if value is None:
            sql, params = self._exists(path, "{j}.type != 'null'", [])
            return (sql if negate else f"NOT {sql}"), params
        if isinstance(value, bool):
            condition, params = "{j}.type = ?", ["true" if value else "false"]
        elif isinstance(value, (int, float)):
            condition, params = "{j}.type IN ('integer', 'real') AND {j}.atom = ?", [bindable(value)]
        elif isinstance(value, str):
            condition, params = "{j}.type = 'text' AND {j}.atom = ?", [value]
        else:
            condition, params = "{j}.type = ? AND {j}.value = ?", ["object" if isinstance(value, dict) else "array", dumps(value, "filter value")]
        return self._exists(path, f"NOT ({condition})" if negate else condition, params)

    def present(self, path: tuple[str, ...]) -> tuple[str, list[Any]]:
        return self._exists(path, "TRUE", [])

    def compare(self, path: tuple[str, ...], op: str, value: int | float | str) -> tuple[str, list[Any]]:
        """SQL true where the JSON at ``path`` is a number (string) ``op`` a number (string) value."""
        if isinstance(value, str):
            return self._exists(path, f"{{j}}.type = 'text' AND {{j}}.atom {op} ?", [value])
        return self._exists(path, f"{{j}}.type IN ('integer', 'real') AND {{j}}.atom {op} ?", [bindable(value)])


class PostgresJson(SqliteJson):
    """Postgres conditions on the JSONB in ``column``: path operators with the path a bound ``text[]``."""

    def equals(self, path: tuple[str, ...], value: Any, negate: bool = False) -> tuple[str, list[Any]]:
        if value is None:
            op, missing = ("!=", "FALSE") if negate else ("=", "TRUE")
            return f"COALESCE(jsonb_typeof({self.column} #> ?) {op} 'null', {missing})", [list(path)]
        op = "!=" if negate else "="
        return f"COALESCE({self.column} #> ? {op} CAST(? AS JSONB), FALSE)", [list(path), dumps(value, "filter value")]

    def present(self, path: tuple[str, ...]) -> tuple[str, list[Any]]:
        return f"{self.column} #> ? IS NOT NULL", [list(path)]

    def compare(self, path: tuple[str, ...], op: str, value: int | float | str) -> tuple[str, list[Any]]:
        c = self.column
        if isinstance(value, str):
            return (
                f"CASE WHEN jsonb_typeof({c} #> ?) = 'string' THEN ({c} #>> ?) COLLATE \"C\" {op} ? ELSE FALSE END",
                [list(path), list(path), value],
            )
        # NUMERIC holds every JSON number exactly (DOUBLE PRECISION overflows beyond 1e308);
        # the bound is its exact text ("inf" included)
        return (
            f"CASE WHEN jsonb_typeof({c} #> ?) = 'number' THEN CAST({c} #> ? AS NUMERIC) {op} CAST(? AS NUMERIC) ELSE FALSE END",
            [list(path), list(path), repr(value)],
        )


def term_sql(j: SqliteJson, t: Term) -> tuple[str, list[Any]]:
    """One term as an SQL condition on ``j``'s column and its parameters."""
    if t.kind == "false":
        return "1 = 0", []
    if t.kind == "present":
        return j.present(t.path)
    if t.kind == "cmp":
        return j.compare(t.path, t.op, t.value)
    if t.kind == "any":
        parts = [term_sql(j, sub) for sub in t.value]
        if not parts:
            return "1 = 0", []
        return "(" + " OR ".join(s for s, _ in parts) + ")", [p for _, ps in parts for p in ps]
    return j.equals(t.path, t.value, negate=t.kind == "ne")


def where_terms(j: SqliteJson, terms: list[Term]) -> tuple[list[str], list[Any]]:
    """SQL conditions (all must hold) and parameters for ``terms`` on ``j``'s column."""
    clauses: list[str] = []
    params: list[Any] = []
    for t in terms:
        sql, args = term_sql(j, t)
        clauses.append(sql)
        params += args
    return clauses, params


# --- Python (backends without SQL) ----------------------------------------------------------

Predicate = Callable[[Any], bool]
_MISSING = object()
_COMPARE = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def _at(value: Any, path: tuple[str, ...]) -> Any:
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


def term_predicate(t: Term) -> Predicate:
    """One term as a predicate on a decoded JSON value (the SQL backends' meaning)."""
    path, value = t.path, t.value
    if t.kind == "false":
        return lambda v: False
    if t.kind == "present":
        return lambda v: _at(v, path) is not _MISSING
    if t.kind == "any":
        subs = [term_predicate(s) for s in value]
        return lambda v: any(s(v) for s in subs)
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


def terms_predicate(terms: list[Term]) -> Predicate:
    """A predicate holding where every term holds."""
    checks = [term_predicate(t) for t in terms]
    return lambda value: all(check(value) for check in checks)


def compile_filter(filter: Mapping[str, Any] | None) -> Predicate:
    """A predicate on decoded values for ``filter`` (``filter_terms``: the same checks and errors as the SQL backends)."""
    return terms_predicate(filter_terms(filter))
