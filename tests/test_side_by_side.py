"""Side by side: the official LangGraph saver and threadline's saver of the same name,
driven by the SAME random sequence of calls, must return identical results.

* SQLite: ``langgraph.checkpoint.sqlite.SqliteSaver`` vs ``threadline.SqliteSaver``,
  each on its own file.
* Postgres: ``langgraph.checkpoint.postgres.PostgresSaver`` vs
  ``threadline.PostgresSaver``, each on its own fresh schema (the official one
  after its ``setup()``).

A hypothesis strategy draws a sequence of operations (``Put``, ``PutWrites``,
``GetTuple``, ``List``, ``DeleteThread``, ``DeleteForRuns``, ``CopyThread``,
``Prune``). Operations refer to earlier checkpoints by index, resolved when they
run, so every drawn sequence is valid and shrinks well. Each operation runs on
both savers; results are compared field by field (``CheckpointTuple`` equality:
``config``, ``checkpoint``, ``metadata``, ``parent_config``, ``pending_writes``),
and so are exceptions (threadline must raise an instance of the official
exception's class, except that where the official saver's DATABASE refused a
value, any threadline exception will do). After the sequence, both databases are read back whole.

Operations the OFFICIAL class does not implement (inherited from
``BaseCheckpointSaver``, raising ``NotImplementedError``) are not drawn for that
backend, and an official ``NotImplementedError`` at run time skips that call on
both savers (so their databases stay alike): with langgraph-checkpoint-sqlite 3.1 that is
``delete_for_runs``, ``copy_thread`` and ``prune`` on SQLite; with
langgraph-checkpoint-postgres 3.2 ``delete_for_runs`` and ``copy_thread`` on
Postgres (``OFFICIAL_SKIPS`` records what this run found).

Checkpoints are built the way LangGraph builds them: ids from ``uuid6``,
increasing; ``channel_versions`` from the official saver's ``get_next_version``;
``new_versions`` holding exactly the channels that changed; a checkpoint's
channels carried over from its parent (or the latest checkpoint of its
namespace), so a version always names one value.

``list`` filters use keys inside the official SQLite key pattern
``[a-zA-Z0-9_.-]`` (it raises ValueError for others; ``test_any_filter_key_*``
cover other keys), keys that exist and keys that never do, dotted keys, and
values of every JSON type, often copied from stored metadata so they match.

Besides the random sequences, ``EXAMPLES`` are run every time: the patterns
that matter most (a LangGraph-shaped round trip, re-puts, pending sends of v<4
checkpoints, every kind of write, ties, metadata from config, keep_latest
pruning, each kind of filter).

A failure shows the resolved call sequence (also in hypothesis' "Falsifying
example" and its ``note`` output) and the first differing field.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.base.id import uuid6

from backends import pg_schemas, require_postgres

TASKS = "__pregel_tasks"
THREADS = ("t1", "t2", "t3")
# "" is the root graph; "child:1" a subgraph CALL (task id after ":"), which
# keep_latest prunes with the root checkpoint it started from; "inner" a
# checkpointer=True subgraph's namespace, which keeps its own latest.
NAMESPACES = ("", "child:1", "inner")
CHANNELS = ("a", "b", "messages")
SPECIAL_CHANNELS = ("__error__", "__interrupt__", "__scheduled__", "__resume__")
RUN_IDS = ("r1", "r2", "r3")


class _Empty:
    """In ``Put.changes``: the channel is cleared (new version, no value)."""

    def __repr__(self) -> str:
        return "EMPTY"


EMPTY = _Empty()

# --- values -------------------------------------------------------------------

# No NUL (Postgres JSONB cannot hold U+0000; both official savers strip it from
# top-level metadata strings only, see NUL_TEXT) and no lone surrogates.
TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=6)
NUL_TEXT = st.text(alphabet=st.sampled_from("ab\x00é"), max_size=4)
# Floats stay where JSON text round-trips exactly through Postgres' numeric
# (beyond 2**53 the official Postgres saver reads integral floats back as ints).
FLOATS = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False, allow_subnormal=False)
SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | FLOATS | TEXT
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
# Values likely to collide, so filters hit.
COMMON = st.sampled_from(
    [None, 0, 1, 2, 3, -1, True, False, 1.0, 1.5, "1", "input", "loop", "update", "fork", "r1", "r2", "x", "é", "", [], {}, [1], [1, 2], [2, 1], [1.0],
     {"level": 1}, {"level": 2, "name": "x"}, {"name": "x", "level": 2}, {"level": "é"}, '{"level":1}', "[1,2]"]
)
VALUE = COMMON | JSON

USER = st.one_of(
    st.sampled_from([{"level": 1}, {"level": 2, "name": "x"}, {"level": None}, {"name": "x"}, {}]),
    st.dictionaries(st.sampled_from(["level", "name", "tags"]), COMMON | JSON, max_size=3),
)

_METADATA_KNOWN = st.fixed_dictionaries(
    {},
    optional={
        "source": st.sampled_from(["input", "loop", "update", "fork"]),
        "step": st.integers(-1, 4),
        "run_id": st.sampled_from(RUN_IDS) | st.none(),
        "writes": st.none() | st.dictionaries(st.sampled_from(["node", "other"]), VALUE, max_size=2),
        "user": USER,
        "user.level": COMMON,  # a literal dotted key
        "score": FLOATS | st.integers(0, 3),
        "flag": st.booleans() | st.none(),
        "tags": st.lists(COMMON, max_size=3),
        "note": NUL_TEXT,  # top-level string: both official savers strip NULs
        # NUL below the top level is a deliberate difference (threadline refuses it on both
        # backends, as Postgres JSONB must): test_deliberate_differences_on_sqlite
        "nested": st.dictionaries(TEXT, VALUE, max_size=2),
    },
)


@st.composite
def _metadata(draw: st.DrawFn) -> dict:
    """LangGraph's keys (source, step, run_id, writes, parents...) plus up to two random ones."""
    known = draw(_METADATA_KNOWN)
    extra = draw(st.dictionaries(TEXT.filter(lambda k: k not in known), VALUE, max_size=2))
    return {**extra, **known}


METADATA = _metadata()

# Extra config["configurable"] keys: get_checkpoint_metadata copies the str/int/
# float/bool ones into metadata unless excluded (langgraph_*, checkpoint_map,
# dunder keys) or already set.
CONF_EXTRA = st.dictionaries(
    st.sampled_from(["user_id", "step", "source", "flag", "score", "langgraph_step", "langgraph_node", "checkpoint_map", "__pregel_x", "obj", "run_id"]),
    NUL_TEXT | st.integers(0, 3) | st.booleans() | FLOATS | st.none() | st.just({"a": 1}),
    max_size=3,
)
CONF_METADATA = st.none() | st.dictionaries(st.sampled_from(["tag", "run_id", "step", "user_id"]), NUL_TEXT | st.integers(0, 3), max_size=2)

# Filter keys: inside the official SQLite pattern [a-zA-Z0-9_.-]; keys that
# exist in the metadata drawn above, keys that never do, dotted paths (a JSON
# path on official SQLite, a literal key on official Postgres).
FILTER_KEYS = st.sampled_from(
    ["source", "step", "run_id", "writes", "user", "user.level", "user.name", "score", "flag", "tags", "note", "parents", "nested", "missing", "no.such.path", "user_id", "tag", "thread_id", "a-b", "0"]
)
# A filter value is a literal, or ("from", i): the value at that key (literal key
# first, else the dotted path) in the metadata of the i-th put, resolved when the
# listing runs, so filters hit stored values often; None when there is none.
FILTER_VALUES = st.tuples(st.just("lit"), st.none() | VALUE) | st.tuples(st.just("from"), st.integers(0, 50))
FILTERS = st.none() | st.dictionaries(FILTER_KEYS, FILTER_VALUES, min_size=1, max_size=2) | st.just({})

# --- operations ---------------------------------------------------------------


@dataclass
class Put:
    thread: str
    ns: str
    parent: tuple[str, int] | None  # ("same", i): i-th checkpoint of (thread, ns); ("any", i): i-th put anywhere
    changes: tuple[tuple[str, Any], ...]
    metadata: dict
    conf_extra: dict
    conf_metadata: dict | None
    v: int
    shape: str  # "v4" | "updated" (+updated_channels) | "legacy" (+pending_sends=[], updated_channels=None)
    reuse: int | None  # reuse the id of the i-th earlier put: an overwrite, or a twin in another thread/ns
    with_parents: bool  # metadata["parents"] = {"": latest root checkpoint} (as LangGraph sets for subgraphs)


@dataclass
class PutWrites:
    target: int  # i-th put
    thread: str | None  # None: the target's thread; else another thread (writes for a checkpoint not there)
    writes: tuple[tuple[str, Any], ...]
    task_id: str
    task_path: str


@dataclass
class GetTuple:
    thread: str
    ns: str | None  # None: no checkpoint_ns key in the config
    target: int | None  # None: latest; else the i-th put's id
    at_target: bool  # look the id up where it was put (else in thread/ns above)
    extra: dict  # more config: {"configurable": {...extra...}} keys and top-level keys


@dataclass
class List:
    scope: str  # "none" | "thread" | "thread_ns" | "thread_ns_id" | "thread_id"
    thread: str
    ns: str
    target: int
    filter: dict | None  # key -> ("lit", value) | ("from", i), see FILTER_VALUES
    before: int | str | None  # i-th put's id, "future" (newer than any), or None
    limit: int | None


@dataclass
class DeleteThread:
    thread: str


@dataclass
class DeleteForRuns:
    run_ids: tuple[str, ...]


@dataclass
class CopyThread:
    source: str
    target: str


@dataclass
class Prune:
    threads: tuple[str, ...]
    strategy: str


IDX = st.integers(0, 50)
LATEST = -1  # as an index: the last one
# Most activity on one thread and the root namespace, so parents, writes and
# re-puts meet the same checkpoints often.
THREAD = st.sampled_from(("t1",) * 3 + THREADS)
NS = st.sampled_from(("",) * 3 + NAMESPACES)

PUT = st.builds(
    Put,
    thread=THREAD,
    ns=NS,
    parent=st.none() | st.just(("same", LATEST)) | st.just(("same", LATEST)) | st.tuples(st.just("same"), IDX) | st.tuples(st.just("any"), IDX),
    changes=st.lists(st.tuples(st.sampled_from(CHANNELS), st.just(EMPTY) | VALUE), max_size=3, unique_by=lambda c: c[0]).map(tuple),
    metadata=METADATA,
    conf_extra=CONF_EXTRA,
    conf_metadata=CONF_METADATA,
    v=st.sampled_from([4, 4, 4, 3, 1]),
    shape=st.sampled_from(["v4", "updated", "legacy"]),
    reuse=st.none() | st.none() | IDX,
    with_parents=st.booleans(),
)
PUT_WRITES = st.builds(
    PutWrites,
    target=st.just(LATEST) | IDX,
    thread=st.none() | st.none() | st.sampled_from(THREADS),
    writes=st.lists(
        st.tuples(st.sampled_from(CHANNELS + SPECIAL_CHANNELS + (TASKS,)), VALUE),
        max_size=3,
    ).map(tuple),
    task_id=st.sampled_from(["task-1", "task-2", "00000000-0000-0000-0000-000000000000"]),
    task_path=st.sampled_from(["", "~__pregel_pull, a", "~__pregel_push, 0", "~__pregel_pull, b"]),
)
GET_TUPLE = st.builds(
    GetTuple,
    thread=THREAD,
    ns=st.none() | st.sampled_from(NAMESPACES),
    target=st.none() | IDX,
    at_target=st.booleans(),
    extra=st.dictionaries(st.sampled_from(["user_id", "configurable.run_id", "metadata", "tags", "recursion_limit"]), st.integers(0, 3), max_size=2),
)
LIST = st.builds(
    List,
    scope=st.sampled_from(["none", "thread", "thread_ns", "thread_ns_id", "thread_id"]),
    thread=THREAD,
    ns=NS,
    target=IDX,
    filter=FILTERS,
    before=st.none() | st.none() | IDX | st.just("future"),
    limit=st.none() | st.integers(0, 4) | st.just(-1),  # -1: "no limit" to SQLite, an error to Postgres
)
THREAD_SUBSETS = st.lists(st.sampled_from(THREADS + ("nope",)), max_size=3, unique=True).map(tuple)
OTHER = {
    "delete_thread": st.builds(DeleteThread, st.sampled_from(THREADS + ("nope",))),
    "delete_for_runs": st.builds(DeleteForRuns, st.lists(st.sampled_from(RUN_IDS), max_size=2, unique=True).map(tuple)),
    "copy_thread": st.builds(CopyThread, st.sampled_from(THREADS), st.sampled_from(THREADS + ("t4",))),
    "prune": st.builds(Prune, THREAD_SUBSETS, st.sampled_from(["keep_latest", "keep_latest", "delete"])),
}


def implemented(cls: type, name: str) -> bool:
    """Whether ``cls`` overrides ``BaseCheckpointSaver.<name>`` (the base one raises NotImplementedError)."""
    return getattr(cls, name) is not getattr(BaseCheckpointSaver, name)


def ops_strategy(official_cls: type) -> st.SearchStrategy[list]:
    kinds = [PUT, PUT, PUT, PUT_WRITES, PUT_WRITES, GET_TUPLE, LIST, LIST, LIST]
    kinds += [s for name, s in OTHER.items() if implemented(official_cls, name)]
    return st.lists(st.one_of(kinds), min_size=2, max_size=30)


# --- comparing ----------------------------------------------------------------

OFFICIAL_SKIPS: dict[str, set[str]] = {}


class Mismatch(AssertionError):
    pass


def _diff(a: Any, b: Any, path: str = "", out: list[str] | None = None) -> list[str]:
    """Where ``a`` (official) and ``b`` (threadline) differ, as readable lines."""
    out = [] if out is None else out
    if len(out) >= 12:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in b:
                out.append(f"{path}[{k!r}]: official has {a[k]!r}, threadline has no such key")
            elif k not in a:
                out.append(f"{path}[{k!r}]: threadline has {b[k]!r}, official has no such key")
            else:
                _diff(a[k], b[k], f"{path}[{k!r}]", out)
    elif isinstance(a, CheckpointTuple) and isinstance(b, CheckpointTuple):
        for name in CheckpointTuple._fields:
            _diff(getattr(a, name), getattr(b, name), f"{path}.{name}", out)
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and type(a) is type(b) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", out)
    elif _fresh_tasks_version(path, a, b):
        pass  # both savers draw a new random version for sends migrated onto an empty checkpoint
    elif not (a == b and type(a) is type(b)) and not (a == b and {type(a), type(b)} <= {int, float}):
        out.append(f"{path or 'result'}: official {a!r} ({type(a).__name__}) != threadline {b!r} ({type(b).__name__})")
    return out


def _fresh_tasks_version(path: str, a: Any, b: Any) -> bool:
    """The TASKS version a v<4 checkpoint with no channel_versions gets on read:
    ``get_next_version(None)`` on both sides, equal but for its random suffix."""
    first = f"{1:032}."
    return (
        path.endswith(f"['channel_versions'][{TASKS!r}]")
        and isinstance(a, str) and isinstance(b, str)
        and a.startswith(first) and b.startswith(first)
    )


def _loc(t: CheckpointTuple) -> tuple[str, str]:
    c = t.config["configurable"]
    return (str(c["thread_id"]), str(c["checkpoint_ns"]))


def _cid(t: CheckpointTuple) -> str:
    return t.config["configurable"]["checkpoint_id"]


def compare_listing(off: list, mine: list, limit: int | None, complete: list | None) -> list[str]:
    """Compare two ``list()`` results.

    The official savers order by ``checkpoint_id DESC`` only, so rows with the
    SAME checkpoint_id in different threads / namespaces (a copied thread, a
    checkpoint put again elsewhere) come in no defined order: such ties are
    compared order-insensitively (sorted by thread_id, checkpoint_ns). When
    ``limit`` cuts through a tie, WHICH tied rows come back is not defined
    either: threadline's must be rows the unlimited official listing
    (``complete``) has.
    """
    off_ids, my_ids = [_cid(t) for t in off], [_cid(t) for t in mine]
    if off_ids != my_ids:
        return [
            "checkpoint ids differ (id tail, thread_id, checkpoint_ns):"
            f"\n      official:   {[(_cid(t)[-12:],) + _loc(t) for t in off]}"
            f"\n      threadline: {[(_cid(t)[-12:],) + _loc(t) for t in mine]}"
        ]
    problems: list[str] = []
    i = 0
    while i < len(off):
        j = i
        while j < len(off) and off_ids[j] == off_ids[i]:
            j += 1
        og, mg = sorted(off[i:j], key=_loc), sorted(mine[i:j], key=_loc)
        cut = limit is not None and j == len(off) == limit and complete is not None
        if cut and len([t for t in complete if _cid(t) == off_ids[i]]) > j - i:
            allowed = [t for t in complete if _cid(t) == off_ids[i]]
            for t in mg:
                if t not in allowed:
                    problems.append(f"row {_loc(t)} of tied id {off_ids[i]} is not one the official has: {_diff(next((a for a in allowed if _loc(a) == _loc(t)), None), t)}")
            if len({_loc(t) for t in mg}) != len(mg):
                problems.append(f"duplicate rows for tied id {off_ids[i]}")
        elif og != mg:
            if [_loc(t) for t in og] != [_loc(t) for t in mg]:
                problems.append(f"rows with id {off_ids[i]}: official at {[_loc(t) for t in og]}, threadline at {[_loc(t) for t in mg]}")
            else:
                for a, b in zip(og, mg):
                    lines = _diff(a, b)
                    if _loc(a)[0] != _loc(off[0])[0]:
                        # official PostgresSaver.list looks up a v<4 row's pending sends in the
                        # FIRST listed row's thread; threadline in the row's own (a README difference)
                        lines = [x for x in lines if f"[{TASKS!r}]" not in x]
                    problems += [f"row {_loc(a)}: {line}" for line in lines]
        i = j
    return problems


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None

    def describe(self) -> str:
        if self.error is None:
            return repr(self.value)[:300]
        return f"raised {type(self.error).__name__}: {self.error}"


def _also_accepted(error: BaseException) -> tuple[type, ...]:
    """When the official saver fails because its DATABASE refused a value (a
    sqlite3 / psycopg error, e.g. Postgres' "\\u0000 cannot be converted to text"),
    threadline may refuse the same call with any exception of its own: nobody
    catches the official driver's exception class on purpose. Every other
    official exception (ValueError, TypeError, KeyError, ...) must be matched by
    an instance of the same class."""
    import sqlite3

    import psycopg

    return (Exception,) if isinstance(error, (sqlite3.Error, psycopg.Error)) else ()


def outcome(fn: Callable[[], Any]) -> Outcome:
    try:
        return Outcome(value=fn())
    except Exception as exc:  # noqa: BLE001 - every exception is an observable result
        return Outcome(error=exc)


# --- running ------------------------------------------------------------------


@dataclass
class Run:
    backend: str
    official: Any
    mine: Any
    log: list[str] = field(default_factory=list)
    puts: list[tuple[str, str, str]] = field(default_factory=list)  # (thread, ns, checkpoint_id) of every put
    metadata: list[dict] = field(default_factory=list)  # the metadata argument of every put
    last_id: str = ""
    clock: int = 0

    # failing

    def fail(self, call: str, problems: list[str]) -> None:
        trace = "\n".join(f"  {i + 1:>2}. {line}" for i, line in enumerate(self.log))
        raise Mismatch(
            f"[{self.backend}] official and threadline differ on call #{len(self.log)}: {call}\n"
            + "\n".join(f"    {p}" for p in problems)
            + f"\ncalls so far (both savers got each one):\n{trace}"
        )

    def both(self, call: str, fn: Callable[[Any], Any], compare: Callable[[Any, Any], list[str]] | None = None) -> Any:
        """Run ``fn`` on both savers; compare results or exceptions; return the official result."""
        self.log.append(call)
        if currently_in_test_context():  # also usable outside hypothesis, e.g. to replay a sequence by hand
            note(f"{len(self.log)}. {call}")
        off = outcome(lambda: fn(self.official))
        if isinstance(off.error, NotImplementedError):
            # Not run on threadline either, so both databases stay the same.
            OFFICIAL_SKIPS.setdefault(self.backend, set()).add(call.split("(")[0])
            self.log[-1] += "   [official: NotImplementedError; skipped on both]"
            return None
        mine = outcome(lambda: fn(self.mine))
        if off.error is not None or mine.error is not None:
            if off.error is not None and mine.error is not None and isinstance(mine.error, (type(off.error),) + _also_accepted(off.error)):
                return None
            if off.error is not None and mine.error is None and _also_accepted(off.error) and call.startswith(("list(", "get_tuple(")):
                # a read the official database refused (e.g. Postgres' negative LIMIT): threadline
                # may answer it; nothing is written, so the two databases stay the same
                return None
            problems = [f"official {off.describe()}", f"threadline {mine.describe()}"]
            if mine.error is not None:
                problems.append("threadline traceback:\n" + "".join(traceback.format_exception(mine.error)[-3:]))
            self.fail(call, problems)
        problems = compare(off.value, mine.value) if compare else _diff(off.value, mine.value)
        if problems:
            self.fail(call, problems)
        return off.value

    # helpers

    def new_id(self) -> str:
        while True:
            self.clock += 1
            cid = str(uuid6(clock_seq=self.clock))
            if cid > self.last_id:
                self.last_id = cid
                return cid

    def listing(self, saver: Any, config: Any, **kw: Any) -> list:
        return list(saver.list(config, **kw))

    def official_line(self, thread: str, ns: str) -> list[CheckpointTuple]:
        """The official saver's checkpoints of (thread, ns), oldest first."""
        return list(reversed(list(self.official.list({"configurable": {"thread_id": thread, "checkpoint_ns": ns}}))))

    # operations

    def do(self, op: Any) -> None:
        getattr(self, "do_" + type(op).__name__)(op)

    def do_Put(self, op: Put) -> None:
        line = self.official_line(op.thread, op.ns)
        parent_id = None
        base = line[-1] if line else None
        if op.parent is not None:
            kind, i = op.parent
            if kind == "same" and line:
                base = line[i % len(line)]
                parent_id = _cid(base)
            elif kind == "any" and self.puts:
                parent_id = self.puts[i % len(self.puts)][2]
                base = next((t for t in line if _cid(t) == parent_id), base)
        values = {k: v for k, v in (base.checkpoint["channel_values"] if base else {}).items() if k in CHANNELS}
        versions = {k: v for k, v in (base.checkpoint["channel_versions"] if base else {}).items() if k in CHANNELS}
        new_versions = {}
        for ch, val in op.changes:
            versions[ch] = new_versions[ch] = self.official.get_next_version(versions.get(ch), None)
            if val is EMPTY:
                values.pop(ch, None)
            else:
                values[ch] = copy.deepcopy(val)
        cid = self.puts[op.reuse % len(self.puts)][2] if op.reuse is not None and self.puts else self.new_id()
        checkpoint: dict[str, Any] = {
            "v": op.v,
            "id": cid,
            "ts": f"2024-05-04T06:32:{len(self.log) % 60:02d}.000000+00:00",
            "channel_values": values,
            "channel_versions": versions,
            "versions_seen": {"__input__": {}, "node": dict(new_versions)},
        }
        if op.shape == "updated":
            checkpoint["updated_channels"] = sorted(new_versions)
        elif op.shape == "legacy":
            checkpoint["pending_sends"] = []
            checkpoint["updated_channels"] = None
        metadata = copy.deepcopy(op.metadata)
        if op.with_parents:
            roots = self.official_line(op.thread, "") if op.ns else []
            metadata["parents"] = {"": _cid(roots[-1])} if roots else {}
        conf = {"thread_id": op.thread, "checkpoint_ns": op.ns, **copy.deepcopy(op.conf_extra)}
        if parent_id is not None:
            conf["checkpoint_id"] = parent_id
        config: dict[str, Any] = {"configurable": conf}
        if op.conf_metadata is not None:
            config["metadata"] = dict(op.conf_metadata)
        args = (config, checkpoint, metadata, new_versions)
        inputs: dict[str, Any] = {}

        def put(saver: Any) -> Any:
            mine = copy.deepcopy(args)
            result = saver.put(*mine)
            inputs[id(saver)] = mine
            return result

        self.both(f"put({config!r}, {checkpoint!r}, metadata={metadata!r}, new_versions={new_versions!r})", put)
        self.puts.append((op.thread, op.ns, cid))
        self.metadata.append(metadata)
        if id(self.official) in inputs and id(self.mine) in inputs:
            problems = _diff(inputs[id(self.official)], inputs[id(self.mine)])
            if problems:
                self.fail("put(...) modified its arguments differently", problems)

    def do_PutWrites(self, op: PutWrites) -> None:
        if not self.puts:
            return
        thread, ns, cid = self.puts[op.target % len(self.puts)]
        config = {"configurable": {"thread_id": op.thread or thread, "checkpoint_ns": ns, "checkpoint_id": cid}}
        writes = [(ch, copy.deepcopy(v)) for ch, v in op.writes]
        self.both(
            f"put_writes({config!r}, {writes!r}, task_id={op.task_id!r}, task_path={op.task_path!r})",
            lambda s: s.put_writes(copy.deepcopy(config), copy.deepcopy(writes), op.task_id, op.task_path),
        )

    def do_GetTuple(self, op: GetTuple) -> None:
        conf: dict[str, Any] = {"thread_id": op.thread}
        if op.ns is not None:
            conf["checkpoint_ns"] = op.ns
        if op.target is not None and self.puts:
            thread, ns, cid = self.puts[op.target % len(self.puts)]
            conf["checkpoint_id"] = cid
            if op.at_target:
                conf["thread_id"], conf["checkpoint_ns"] = thread, ns
        config: dict[str, Any] = {"configurable": conf}
        for k, v in op.extra.items():
            if k == "metadata":
                config["metadata"] = {"user_id": v}
            elif k == "tags":
                config["tags"] = [f"tag{v}"]
            elif k == "recursion_limit":
                config[k] = 25 + v
            else:
                conf[k.removeprefix("configurable.")] = v
        self.both(f"get_tuple({config!r})", lambda s: s.get_tuple(copy.deepcopy(config)))

    def do_List(self, op: List) -> None:
        config: dict | None = None
        tid = self.puts[op.target % len(self.puts)][2] if self.puts else str(uuid6())
        if op.scope != "none":
            conf: dict[str, Any] = {"thread_id": op.thread}
            if op.scope.startswith("thread_ns"):
                conf["checkpoint_ns"] = op.ns
            if op.scope.endswith("_id"):
                conf["checkpoint_id"] = tid
            config = {"configurable": conf}
        before = None
        if op.before == "future":
            before = {"configurable": {"checkpoint_id": str(uuid6(clock_seq=0x3FFF))}}
        elif op.before is not None and self.puts:
            before = {"configurable": {"checkpoint_id": self.puts[op.before % len(self.puts)][2]}}
        flt = None if op.filter is None else {k: self.filter_value(k, v) for k, v in op.filter.items()}
        if flt and any(_deliberately_different_filter(v) for v in flt.values()):
            return  # see test_deliberate_differences_on_sqlite
        kw = {"filter": flt, "before": before, "limit": op.limit}
        complete = None
        if op.limit is not None:
            complete = outcome(lambda: self.listing(self.official, config, filter=flt, before=before)).value
        self.both(
            f"list({config!r}, filter={flt!r}, before={before!r}, limit={op.limit!r})",
            lambda s: self.listing(s, copy.deepcopy(config), **copy.deepcopy(kw)),
            lambda a, b: compare_listing(a, b, op.limit, complete),
        )

    def filter_value(self, key: str, spec: tuple[str, Any]) -> Any:
        kind, value = spec
        if kind == "lit":
            return copy.deepcopy(value)
        if not self.metadata:
            return None
        md = self.metadata[value % len(self.metadata)]
        if key in md:
            return copy.deepcopy(md[key])
        for part in key.split("."):
            if not isinstance(md, dict) or part not in md:
                return None
            md = md[part]
        return copy.deepcopy(md)

    def do_DeleteThread(self, op: DeleteThread) -> None:
        self.both(f"delete_thread({op.thread!r})", lambda s: s.delete_thread(op.thread))

    def do_DeleteForRuns(self, op: DeleteForRuns) -> None:
        self.both(f"delete_for_runs({list(op.run_ids)!r})", lambda s: s.delete_for_runs(list(op.run_ids)))

    def do_CopyThread(self, op: CopyThread) -> None:
        self.both(f"copy_thread({op.source!r}, {op.target!r})", lambda s: s.copy_thread(op.source, op.target))

    def do_Prune(self, op: Prune) -> None:
        self.both(f"prune({list(op.threads)!r}, strategy={op.strategy!r})", lambda s: s.prune(list(op.threads), strategy=op.strategy))

    def read_back_everything(self) -> None:
        """Both databases, read whole: every listing and every checkpoint put."""
        self.both("list(None)", lambda s: self.listing(s, None), lambda a, b: compare_listing(a, b, None, None))
        for thread in THREADS + ("t4",):
            self.both(
                f"list({{'configurable': {{'thread_id': {thread!r}}}}})",
                lambda s, t=thread: self.listing(s, {"configurable": {"thread_id": t}}),
                lambda a, b: compare_listing(a, b, None, None),
            )
            for ns in NAMESPACES:
                config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
                self.both(f"get_tuple({config!r})", lambda s, c=config: s.get_tuple(copy.deepcopy(c)))
        for thread, ns, cid in dict.fromkeys(self.puts):
            config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cid}}
            self.both(f"get_tuple({config!r})", lambda s, c=config: s.get_tuple(copy.deepcopy(c)))


def run_sequence(backend: str, official: Any, mine: Any, ops: list) -> None:
    run = Run(backend, official, mine)
    for op in ops:
        run.do(op)
    run.read_back_everything()


# --- the savers ---------------------------------------------------------------


@contextmanager
def sqlite_pair() -> Iterator[tuple[Any, Any]]:
    from langgraph.checkpoint.sqlite import SqliteSaver as Official

    from threadline import SqliteSaver

    with tempfile.TemporaryDirectory(prefix="tl_side_") as d:
        with Official.from_conn_string(str(Path(d) / "official.db")) as official:
            official.setup()
            with SqliteSaver.from_conn_string(str(Path(d) / "threadline.db")) as mine:
                mine.setup()
                yield official, mine


@contextmanager
def postgres_pair() -> Iterator[tuple[Any, Any]]:
    from langgraph.checkpoint.postgres import PostgresSaver as Official

    from threadline import PostgresSaver

    with pg_schemas().fresh() as official_url, pg_schemas().fresh() as mine_url:
        with Official.from_conn_string(official_url) as official:
            official.setup()
            with PostgresSaver.from_conn_string(mine_url) as mine:
                mine.setup()
                yield official, mine


def _official_sqlite() -> type:
    from langgraph.checkpoint.sqlite import SqliteSaver

    return SqliteSaver


def _official_postgres() -> type:
    from langgraph.checkpoint.postgres import PostgresSaver

    return PostgresSaver


# --- explicit examples: patterns every run must cover, whatever hypothesis draws ---


def _put(thread: str = "t1", ns: str = "", *, parent: tuple[str, int] | None = ("same", LATEST), changes: tuple = (), metadata: dict | None = None,
         v: int = 4, shape: str = "v4", reuse: int | None = None, conf_extra: dict | None = None, with_parents: bool = False) -> Put:
    return Put(thread, ns, parent, changes, metadata or {}, conf_extra or {}, None, v, shape, reuse, with_parents)


def _list(flt: dict | None = None, scope: str = "none", limit: int | None = None) -> List:
    return List(scope, "t1", "", 0, None if flt is None else {k: ("lit", v) for k, v in flt.items()}, None, limit)


_META = {"source": "loop", "step": 1, "user": {"level": 1, "name": "x"}, "flag": True, "tags": [1, 2], "writes": {"node": {"x": 1}}}
EXAMPLES = {
    # a LangGraph-shaped checkpoint and metadata, read back
    "roundtrip": [_put(parent=None, changes=(("a", 1), ("messages", ["hi"])), metadata=dict(_META)), GetTuple("t1", "", None, False, {})],
    # a checkpoint put again with the same id (LangGraph's update_state / retries) and another parent
    "re-put": [_put(parent=None), _put(changes=(("a", 2),)), _put(parent=None, changes=(("a", 3),), reuse=LATEST)],
    # v<4 checkpoint whose parent has pending sends (TASKS writes)
    "pending sends": [_put(parent=None, v=3), PutWrites(LATEST, None, ((TASKS, "send-1"), (TASKS, {"x": 2})), "task-1", ""), _put(v=3, changes=(("a", 1),))],
    # sends migrated onto a v<4 checkpoint without channels: a fresh (random) TASKS version
    "pending sends, no channels": [_put(parent=None), PutWrites(LATEST, None, ((TASKS, None),), "task-1", ""), _put(v=3), _list(None)],
    # ... and onto a checkpoint of another namespace whose parent id is a root checkpoint's
    "pending sends, other namespace": [_put(parent=None), PutWrites(LATEST, None, ((TASKS, None),), "task-1", ""), _put(ns="child:1", v=3), _list(None)],
    # the same, with checkpoints shaped as langgraph.checkpoint.base.empty_checkpoint() makes them (pending_sends=[])
    "pending sends, legacy shape": [
        _put(parent=None, v=3, shape="legacy"),
        PutWrites(LATEST, None, ((TASKS, "send-1"),), "task-1", ""),
        _put(v=3, shape="legacy", changes=(("a", 1),)),
    ],
    # every kind of write on one checkpoint, two tasks, upserts of special channels
    "writes": [
        _put(parent=None),
        PutWrites(LATEST, None, (("a", 1), ("__error__", "boom"), ("b", [1])), "task-2", "~__pregel_pull, b"),
        PutWrites(LATEST, None, (("__interrupt__", {"v": 1}), ("__resume__", "yes")), "task-1", "~__pregel_pull, a"),
        PutWrites(LATEST, None, (("__interrupt__", {"v": 2}),), "task-1", "~__pregel_pull, a"),
        PutWrites(LATEST, None, (("a", "ignored"),), "task-2", "~__pregel_pull, b"),
    ],
    # a task writes its special channels again from another task_path (upsert): sorting by task_path
    "special write upsert, new task_path": [
        _put(parent=None),
        PutWrites(LATEST, None, (("__interrupt__", 1),), "task-2", "~__pregel_pull, b"),
        PutWrites(LATEST, None, (("a", 0),), "task-1", "~__pregel_pull, a"),
        PutWrites(LATEST, None, (("__interrupt__", 2),), "task-2", ""),
    ],
    "negative limit": [_put(parent=None), _put(), _list(None, limit=-1)],
    # a channel cleared, a subgraph namespace, a twin id in another thread (a tie in list(None))
    "ties": [_put(parent=None, changes=(("a", 1),)), _put(changes=(("a", EMPTY),)), _put("t2", "child:1", parent=None, reuse=0), _put("t2", "", parent=None, reuse=1)],
    # keep_latest: a subgraph call's namespace goes with the root checkpoint it started from;
    # a checkpointer=True subgraph ("inner") keeps its latest
    "prune subgraph call": [
        _put(parent=None, changes=(("a", [1]),)),
        _put(ns="child:1", parent=None, with_parents=True),
        _put(ns="child:1", with_parents=True),
        _put(ns="inner", parent=None, with_parents=True),
        _put(ns="inner"),
        PutWrites(0, None, (("a", 1),), "task-1", ""),
        _put(changes=(("a", [1, 2]),)),
        PutWrites(LATEST, None, (("a", 2),), "task-1", ""),
        Prune(("t1",), "keep_latest"),
    ],
    # keep_latest keeps the parent a v<4 head reads its pending sends from
    "prune sends parent": [
        _put(parent=None, v=3),
        _put(v=3),
        PutWrites(LATEST, None, ((TASKS, "send-1"),), "task-1", ""),
        _put(v=3, changes=(("a", 1),)),
        Prune(("t1", "t2"), "keep_latest"),
    ],
    # metadata from config (copied unless excluded), NULs stripped from top-level strings
    "config metadata": [_put(parent=None, metadata={"note": "a\x00b", "step": 2}, conf_extra={"user_id": "u\x00", "langgraph_step": 3, "step": 9, "obj": {"a": 1}}), GetTuple("t1", None, 0, True, {"user_id": 1, "metadata": 2})],
}
FILTER_EXAMPLES = [
    {"missing": None}, {"source": None}, {"user.level": 1}, {"user": {"level": 1}}, {"user": {"name": "x", "level": 1}}, {"flag": 1}, {"step": True},
    {"tags": [1]}, {"tags": []}, {"writes": {"node": {"x": 1}}}, {"user": '{"level":1,"name":"x"}'}, {"source": "loop", "step": 1},
]
for _i, _flt in enumerate(FILTER_EXAMPLES):
    EXAMPLES[f"filter {_i}"] = [
        _put(parent=None, metadata=dict(_META)),
        _put(parent=None, metadata={"source": "input", "step": True, "flag": 1, "user": {"level": 2}, "tags": [2, 1]}),
        _put("t2", parent=None, metadata={"step": 1}),
        _list(_flt),
    ]


def with_examples(test: Callable) -> Callable:
    for ops in EXAMPLES.values():
        test = example(ops=ops)(test)
    return test


SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture],
    print_blob=True,
)


@SETTINGS
@with_examples
@given(ops=ops_strategy(_official_sqlite()))
def test_sqlite_side_by_side(ops: list) -> None:
    with sqlite_pair() as (official, mine):
        run_sequence("sqlite", official, mine, ops)


@pytest.fixture
def postgres_available() -> None:
    require_postgres()


@SETTINGS
@with_examples
@given(ops=ops_strategy(_official_postgres()))
def test_postgres_side_by_side(postgres_available: None, ops: list) -> None:
    # threadline keeps a ``writes`` metadata key on both backends (README, deliberate
    # differences; the official PostgresSaver drops it): not drawn here, see
    # test_postgres_keeps_metadata_writes.
    ops = [dataclasses.replace(op, metadata={k: v for k, v in op.metadata.items() if k != "writes"}) if isinstance(op, Put) else op for op in ops]
    with postgres_pair() as (official, mine):
        run_sequence("postgres", official, mine, ops)


def test_postgres_keeps_metadata_writes(postgres_available: None) -> None:
    """Deliberate: metadata reads back as put, ``writes`` included (the official PostgresSaver drops it)."""
    from langgraph.checkpoint.base import empty_checkpoint

    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    with postgres_pair() as (official, mine):
        for saver in (official, mine):
            saver.put(cfg, empty_checkpoint(), {"source": "input", "writes": {"n": 1}}, {})
        assert official.get_tuple(cfg).metadata == {"source": "input"}
        assert mine.get_tuple(cfg).metadata == {"source": "input", "writes": {"n": 1}}


# --- the parts of the contract the property test cannot draw ------------------


def test_official_skips_are_the_unimplemented_methods() -> None:
    """Which operations the side-by-side test cannot compare, because the official class lacks them."""
    missing = {
        "sqlite": sorted(n for n in OTHER if not implemented(_official_sqlite(), n)),
        "postgres": sorted(n for n in OTHER if not implemented(_official_postgres(), n)),
    }
    assert missing == {
        "sqlite": ["copy_thread", "delete_for_runs", "prune"],
        "postgres": ["copy_thread", "delete_for_runs"],
    }, f"the official savers' implemented methods changed: {missing}; update the docstring"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_get_next_version_matches_the_official_format(backend: str) -> None:
    """Versions are ``f"{n:032}.{random:016}"`` strings that increase; ``get_next_version`` accepts str, int and None."""
    from threadline import PostgresSaver, SqliteSaver

    official_cls, mine_cls = (_official_sqlite(), SqliteSaver) if backend == "sqlite" else (_official_postgres(), PostgresSaver)
    official, mine = official_cls.__new__(official_cls), mine_cls.__new__(mine_cls)
    for current in (None, 1, 7, official.get_next_version(None, None), official.get_next_version("00000000000000000000000000000041.0.123", None)):
        want = official.get_next_version(current, None)
        # official: f"{counter + 1:032}.{random.random():016}": the float's shortest repr
        # (~17 significant digits, so forks of one channel at one step never share a
        # version), zero-padded to 16 characters. Many samples: a 6-digit suffix
        # sometimes looks the same.
        decimals = set()
        for _ in range(200):
            got = mine.get_next_version(current, None)
            assert isinstance(got, str), (current, want, got)
            counter, _, suffix = got.partition(".")
            assert re.fullmatch(r"\d{32}", counter) and counter == want.partition(".")[0], (current, want, got)
            # (a fraction below 1e-4 prints with an exponent: "000000000001e-05", officially too)
            assert re.fullmatch(r"[0-9.e+-]+", suffix) and 0 <= float(suffix) < 1, (current, want, got)
            assert suffix == f"{float(suffix):016}", f"version {got!r}: suffix is not f'{{random:016}}' like the official {want!r}"
            decimals.add(len(repr(float(suffix))))
        assert max(decimals) > 10, f"versions carry only ~{max(decimals)} characters of randomness (official: ~18), e.g. {got!r} vs {want!r}"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_put_returns_the_thread_id_it_was_given(backend: str, request: pytest.FixtureRequest) -> None:
    """``put`` returns ``config["configurable"]["thread_id"]`` as passed (an int stays an int),
    on both official savers. (Reading an int thread_id back is another matter:
    the official PostgresSaver's get_tuple/list fail on it, "text = smallint".)"""
    if backend == "postgres":
        request.getfixturevalue("postgres_available")
    pair = sqlite_pair if backend == "sqlite" else postgres_pair
    with pair() as (official, mine):
        cp = _plain_checkpoint()
        config = {"configurable": {"thread_id": 1, "checkpoint_ns": ""}}
        want = official.put(copy.deepcopy(config), copy.deepcopy(cp), {}, {})
        got = mine.put(copy.deepcopy(config), copy.deepcopy(cp), {}, {})
        assert got == want and type(got["configurable"]["thread_id"]) is int, f"official {want}, threadline {got}"


WEIRD_KEYS = ["a') OR 1=1 --", "we ird", "ключ", "$.x", "a\"b", "%s", "?", "x;DROP TABLE checkpoints"]


@pytest.mark.parametrize("key", WEIRD_KEYS)
def test_any_filter_key_is_safe_on_sqlite(key: str) -> None:
    """The official SQLite saver refuses filter keys outside ``[a-zA-Z0-9_.-]`` with ValueError
    (they would go into its SQL text). threadline accepts any key, binds it as a
    parameter, and matches it as a literal top-level metadata key."""
    with sqlite_pair() as (official, mine):
        with pytest.raises(ValueError):
            list(official.list(None, filter={key: 1}))
        cp1, cp2 = _plain_checkpoint(), _plain_checkpoint()
        mine.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp1, {key: 1, "step": 1}, {})
        mine.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp2, {"step": 2}, {})
        got = [t.checkpoint["id"] for t in mine.list(None, filter={key: 1})]
        assert got == [cp1["id"]], f"filter {{{key!r}: 1}} returned {got}"
        assert [t.checkpoint["id"] for t in mine.list(None, filter={key: 2})] == []
        assert [t.checkpoint["id"] for t in mine.list(None)] == [cp2["id"], cp1["id"]]


@pytest.mark.parametrize("key", WEIRD_KEYS)
def test_any_filter_key_matches_official_postgres(postgres_available: None, key: str) -> None:
    """The official Postgres saver takes any key (``metadata @> %s``): results must match."""
    with postgres_pair() as (official, mine):
        cp1, cp2 = _plain_checkpoint(), _plain_checkpoint()
        for saver in (official, mine):
            saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, copy.deepcopy(cp1), {key: 1, "step": 1}, {})
            saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, copy.deepcopy(cp2), {"step": 2}, {})
        for flt in ({key: 1}, {key: 2}, {key: None}):
            want = list(official.list(None, filter=flt))
            got = outcome(lambda f=flt: list(mine.list(None, filter=f)))
            assert got.error is None, f"filter {flt!r}: threadline {got.describe()}"
            assert compare_listing(want, got.value, None, None) == [], flt


def _plain_checkpoint() -> dict:
    return {
        "v": 4,
        "id": str(uuid6()),
        "ts": "2024-05-04T06:32:42.235444+00:00",
        "channel_values": {},
        "channel_versions": {},
        "versions_seen": {},
    }


def _deliberately_different_filter(value: Any) -> bool:
    """Filter values threadline treats differently on purpose (README, deliberate differences):
    a string with NUL (FilterError where the official SQLite saver returns []), and a list or
    object holding non-ASCII text (matched, where the official SQLite saver's ASCII-escaped
    filter text never matches)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, (dict, list)):
        return not json.dumps(value, ensure_ascii=False).isascii() or any(
            _deliberately_different_filter(v) for v in (value.values() if isinstance(value, dict) else value)
        )
    return False


def test_deliberate_differences_on_sqlite(tmp_path) -> None:
    """What the README's table of deliberate differences says, on the official and threadline SqliteSaver."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite import SqliteSaver as Official

    from threadline import ConfigError, FilterError, SqliteSaver

    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    with Official.from_conn_string(str(tmp_path / "o.db")) as official, SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as mine:
        for saver in (official, mine):
            saver.put(cfg, empty_checkpoint(), {"user": {"name": "é"}}, {})
        # NUL below the top level of metadata: stored by the official saver, refused by threadline
        official.put(cfg, empty_checkpoint(), {"nested": {"k": "a\x00"}}, {})
        with pytest.raises(ConfigError, match="NUL"):
            mine.put(cfg, empty_checkpoint(), {"nested": {"k": "a\x00"}}, {})
        # NUL in a filter value: [] from the official saver, FilterError from threadline
        assert list(official.list(None, filter={"note": "x\x00"})) == []
        with pytest.raises(FilterError):
            list(mine.list(None, filter={"note": "x\x00"}))
        # an object filter with non-ASCII text: the official saver never matches it
        assert list(official.list(None, filter={"user": {"name": "é"}})) == []
        assert len(list(mine.list(None, filter={"user": {"name": "é"}}))) == 1
