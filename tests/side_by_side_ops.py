"""The operations of the side-by-side test (``test_side_by_side.py``) and how they are drawn.

The values, metadata, config extras and filters hypothesis draws; one dataclass
per saver call (``Put``, ``PutWrites``, ``GetTuple``, ``List``, ``DeleteThread``,
``DeleteForRuns``, ``CopyThread``, ``Prune``), whose indexes into earlier
checkpoints are resolved when they run (``side_by_side_run.Run``);
``ops_strategy``, which draws only the operations the official class implements;
and the explicit ``EXAMPLES`` / ``FILTER_EXAMPLES`` every run covers
(``with_examples``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import example
from hypothesis import strategies as st
from langgraph.checkpoint.base import BaseCheckpointSaver

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
    # ... an older checkpoint put again with a value never stored before, every blob row inserted (found by hypothesis)
    "re-put, new values": [_put(parent=None), _put(parent=None), _put(parent=None, changes=(("a", []),), reuse=0), GetTuple("t1", "", 0, True, {})],
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
