"""Storage format 2, inline channels: a checkpoint's channels that hold None or are empty are kept in
its document (``rows.NULLS`` / ``rows.EMPTIES``), as the official PostgresSaver keeps primitive values
inline, with no blob row; every reader sees LangGraph's ``channel_versions`` and values as before.

A real graph (a chain of nodes joined by ``branch:to:`` trigger channels, which hold None until
consumed and are empty after) on every backend, side by side with the official SQLite saver:
latest, every older checkpoint, history, a fork by ``update_state``, the thread's status, copy,
prune and fsck; a release before the format refuses the database.
"""

from __future__ import annotations

import enum
import operator
from typing import Annotated, Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from backends import Backend, make_backend
from bad_input_access import cfg
from threadline import lifecycle, read
from threadline.errors import CorruptRowError, SchemaError
from threadline.storage import inline
from threadline.storage import rows as R
from threadline.storage.ops import Q
from threadline.storage.ops import schema as schema_ops
from threadline.storage.schema import LATEST_VERSION


class State(TypedDict):
    log: Annotated[list[str], operator.add]
    note: str | None


def _graph(saver: Any, nodes: int = 4) -> Any:
    g = StateGraph(State)
    names = [f"n{i}" for i in range(nodes)]
    for i, name in enumerate(names):
        g.add_node(name, lambda s, i=i: {"log": [f"step {i}"], "note": None if i % 2 else f"note {i}"})
    g.add_edge(START, names[0])
    for a, b in zip(names, names[1:]):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    return g.compile(checkpointer=saver)


def _run(saver: Any, thread_id: str) -> Any:
    graph = _graph(saver)
    graph.invoke({"log": ["start"], "note": None}, cfg(thread_id))
    return graph


def _views(saver: Any, thread_id: str) -> list[tuple]:
    """Every checkpoint of the thread as LangGraph reads it: values, versions, metadata, writes."""
    return [
        (t.checkpoint["channel_values"], t.checkpoint["channel_versions"], t.checkpoint["versions_seen"], t.metadata,
         sorted(t.pending_writes or [], key=repr))
        for t in saver.list(cfg(thread_id))
    ]


@pytest.fixture(params=("sqlite", "postgres", "redis"))
def any_backend(request: pytest.FixtureRequest, tmp_path: Any) -> Backend:
    return make_backend(request.param, tmp_path, request)


def test_null_and_empty_channels_need_no_blob_row_and_read_as_the_official(any_backend: Backend) -> None:
    b = any_backend
    reference = InMemorySaver()
    _run(reference, "t")
    with b.open() as saver:
        _run(saver, "t")
        want, got = _views(reference, "t"), _views(saver, "t")
        # versions differ between savers (their own counters): compare the channels they name and the values
        assert [(v, set(cv), m) for v, cv, _, m, _ in got] == [(v, set(cv), m) for v, cv, _, m, _ in want]
        assert any(v.get("note", "x") is None for v, *_ in got)  # a channel holding None reads back as None
        latest = saver.get_tuple(cfg("t"))
        assert latest.checkpoint == next(saver.list(cfg("t"))).checkpoint
        # each older checkpoint by its id, as a new saver reads it (no cache)
        with b.open() as fresh:
            for t in saver.list(cfg("t")):
                again = fresh.get_tuple(t.config)
                assert again.checkpoint == t.checkpoint and again.metadata == t.metadata
        blobs = saver.run(_thread_blobs(saver.dialect, "t"))  # the engine's named statement, on every backend
        docs = saver.run(_thread_docs(saver.dialect, "t"))
    assert {r[2] for r in blobs} and not any(r[2].startswith("branch:to:") for r in blobs)  # triggers: no rows
    assert not [r for r in blobs if r[4].startswith(("empty", "null"))]
    assert any(R.NULLS in doc for doc in docs) and any(R.EMPTIES in doc for doc in docs)
    assert all(set(R.all_versions(doc)) >= set(doc["channel_versions"]) for doc in docs)


def _thread_blobs(d: Any, thread_id: str) -> Any:
    return (yield Q(d.THREAD_BLOBS, (thread_id,)))


def _thread_docs(d: Any, thread_id: str) -> Any:
    rows = yield Q(d.THREAD_CHECKPOINT_ROWS, (thread_id,))
    return [d.load_object(r[4], "checkpoint") for r in rows]


def test_time_travel_fork_and_status_see_inline_channels(any_backend: Backend) -> None:
    b = any_backend
    with b.open() as saver:
        graph = _run(saver, "t")
        history = list(graph.get_state_history(cfg("t")))
        middle = history[len(history) // 2]
        assert graph.get_state(middle.config).values == middle.values
        assert graph.get_state(middle.config).next == middle.next and middle.next  # a pending node: a trigger holding None
        forked = graph.update_state(middle.config, {"note": None})
        assert graph.get_state(forked).values["note"] is None
        assert graph.get_state(forked).next == middle.next
        graph.invoke(None, forked)
        assert graph.get_state(cfg("t")).values["log"][-1] == "step 3"
        assert read.thread_status(saver, "t").kind == "done"


def test_copy_prune_and_fsck_keep_inline_channels(sync_backend: Backend) -> None:
    b = sync_backend
    with b.open() as saver:
        _run(saver, "t")
        before = saver.get_tuple(cfg("t"))
        saver.copy_thread("t", "t2")
        assert saver.get_tuple(cfg("t2")).checkpoint["channel_values"] == before.checkpoint["channel_values"]
        saver.prune(["t"])
        after = saver.get_tuple(cfg("t"))
        assert after.checkpoint == before.checkpoint and len(list(saver.list(cfg("t")))) == 1
        assert lifecycle.fsck(saver, deep=True).ok


def test_a_damaged_inline_map_is_refused() -> None:
    doc = {"id": "c", "channel_versions": {"a": "1"}, R.NULLS: ["b"]}
    with pytest.raises(CorruptRowError, match="__none__"):
        R.all_versions(doc)
    assert R.all_versions({"channel_versions": {"a": "1"}, R.NULLS: {"b": "2"}, R.EMPTIES: {"c": "3"}}) == {"a": "1", "b": "2", "c": "3"}


def test_a_release_before_inline_channels_refuses_the_database(sync_backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    b = sync_backend
    with b.open() as saver:
        _run(saver, "t")
    monkeypatch.setattr(schema_ops, "LATEST_VERSION", 19)  # what a release before it knows
    with pytest.raises(SchemaError, match=rf"written by a newer threadline \(schema version {LATEST_VERSION}"):
        with b.open() as saver:
            saver.get_tuple(cfg("t"))


def test_a_channel_moved_in_or_out_of_the_document_fails_the_row_check(tmp_path: Any) -> None:
    """The inline maps are under the checkpoint row's checksum: an empty channel turned into one
    with a blob to look up, or a None into an empty one, is refused, never read as another state."""
    import json
    import sqlite3

    from threadline import SqliteSaver

    path = str(tmp_path / "t.db")
    with SqliteSaver.from_conn_string(path) as saver:
        _run(saver, "t")
        history = list(saver.list(cfg("t")))
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT checkpoint_id, checkpoint FROM threadline_checkpoints WHERE thread_id = 't'").fetchall()
    cid, text = next((cid, text) for cid, text in rows if R.EMPTIES in text and R.NULLS in text)
    doc = json.loads(text)
    moved_out = {**doc, "channel_versions": {**doc["channel_versions"], **doc[R.EMPTIES]}}
    moved_out.pop(R.EMPTIES)
    none_to_empty = {**doc, R.EMPTIES: {**doc[R.EMPTIES], **doc[R.NULLS]}}
    none_to_empty.pop(R.NULLS)
    for damaged in (moved_out, none_to_empty):
        conn.execute("UPDATE threadline_checkpoints SET checkpoint = ? WHERE thread_id = 't' AND checkpoint_id = ?",
                     (json.dumps(damaged, sort_keys=True, separators=(",", ":")), cid))
        conn.commit()
        with SqliteSaver.from_conn_string(path) as saver, pytest.raises(CorruptRowError, match="checksum"):
            saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": cid}})
    conn.execute("UPDATE threadline_checkpoints SET checkpoint = ? WHERE thread_id = 't' AND checkpoint_id = ?", (text, cid))
    conn.commit()
    conn.close()
    with SqliteSaver.from_conn_string(path) as saver:
        assert [t.checkpoint for t in saver.list(cfg("t"))] == [t.checkpoint for t in history]


# --- small scalars kept in the document ----------------------------------------------------------


class Color(str, enum.Enum):
    RED = "red"


class Scalars(TypedDict):
    log: Annotated[list[str], operator.add]
    route: str
    count: int
    ok: bool
    other: Any


# what each node writes: scalars kept in the document, and values of those types that keep a blob row
# (a str subclass, a str with NUL, a long str, a float)
_STEPS = [
    {"route": "to b", "count": 1, "ok": True, "other": Color.RED},
    {"route": "x\x00y", "count": -(1 << 62), "ok": False, "other": "z" * (inline.STR_MAX + 1)},
    {"route": "", "count": 0, "ok": True, "other": 2.5},
]


def _scalar_graph(saver: Any) -> Any:
    g = StateGraph(Scalars)
    for i, update in enumerate(_STEPS):
        g.add_node(f"n{i}", lambda s, i=i, update=update: {"log": [f"step {i}"], **update})
    g.add_edge(START, "n0")
    g.add_edge("n0", "n1")
    g.add_edge("n1", "n2")
    g.add_edge("n2", END)
    return g.compile(checkpointer=saver)


def _typed(values: dict) -> dict:
    """Values with their exact types (True == 1 and "red" == Color.RED: compared with their types)."""
    return {k: (type(v), v) for k, v in values.items()}


def test_small_scalars_need_no_blob_row_and_read_back_as_themselves(any_backend: Backend) -> None:
    b = any_backend
    start = {"log": ["start"], "route": "start", "count": 0, "ok": False, "other": None}
    reference = InMemorySaver()
    _scalar_graph(reference).invoke(start, cfg("t"))
    want = [(_typed(t.checkpoint["channel_values"]), set(t.checkpoint["channel_versions"]), t.metadata) for t in reference.list(cfg("t"))]
    with b.open() as saver:
        graph = _scalar_graph(saver)
        graph.invoke(start, cfg("t"))
        got = [(_typed(t.checkpoint["channel_values"]), set(t.checkpoint["channel_versions"]), t.metadata) for t in saver.list(cfg("t"))]
        assert got == want
        with b.open() as fresh:  # as a new saver reads them (no cache), each older checkpoint by its id
            again = [(_typed(fresh.get_tuple(t.config).checkpoint["channel_values"])) for t in saver.list(cfg("t"))]
        assert again == [v for v, _, _ in want]
        # time travel: an older state, a fork from it, and the readers that take values from the document
        history = list(graph.get_state_history(cfg("t")))
        middle = history[len(history) // 2]
        assert _typed(graph.get_state(middle.config).values) == _typed(middle.values)
        counts = [v.value for v in read.channel_history(saver, "t", "count").versions]
        assert counts == [0, 1, -(1 << 62), 0]
        assert read.latest_values(saver, "ok", ["t"])[0].value is True
        assert read.diff(saver, "t", history[-1].config["configurable"]["checkpoint_id"],
                         history[0].config["configurable"]["checkpoint_id"]).channels["route"]["after"] == ""
        forked = graph.update_state(middle.config, {"route": "forked", "count": 7})
        assert (graph.get_state(forked).values["route"], graph.get_state(forked).values["count"]) == ("forked", 7)
        assert [v.value for v in read.channel_history(saver, "t", "count").versions][-1] == 7  # the fork is the head
        blobs = saver.run(_thread_blobs(saver.dialect, "t"))
        docs = saver.run(_thread_docs(saver.dialect, "t"))
        assert lifecycle.fsck(saver, deep=True).ok
    channels = {r[2] for r in blobs}
    assert {"count", "ok"}.isdisjoint(channels)  # every value a kept scalar: no row
    assert "route" in channels and "other" in channels  # the str with NUL; the subclass, the long str, the float
    assert len([r for r in blobs if r[2] == "route"]) == 1
    assert any(doc.get(R.SCALARS, {}).get("count") for doc in docs)


def test_an_encrypting_saver_keeps_scalars_in_sealed_blob_rows(sync_backend: Backend) -> None:
    """A document is not encrypted: under a keyring a scalar keeps its blob row, sealed with AES-GCM."""
    from threadline.codec import BlobCodec, Keyring

    with sync_backend.open() as saver:
        saver.blob_codec = BlobCodec(keys=Keyring([bytes(range(32)).hex()]))
        _scalar_graph(saver).invoke({"log": [], "route": "secret route", "count": 41, "ok": False, "other": None}, cfg("t"))
        docs = saver.run(_thread_docs(saver.dialect, "t"))
        blobs = saver.run(_thread_blobs(saver.dialect, "t"))
        assert saver.get_tuple(cfg("t")).checkpoint["channel_values"]["route"] == ""
    assert not any(R.SCALARS in doc for doc in docs)
    assert "secret route" not in repr(docs)
    assert {"route", "count", "ok"} <= {r[2] for r in blobs}


def test_a_damaged_scalar_map_or_value_is_refused(tmp_path: Any) -> None:
    import json
    import sqlite3

    from threadline import SqliteSaver

    for damaged in ({"a": "1"}, {"a": ["1", 1.5]}, {"a": ["1", [1]]}, ["a"]):
        with pytest.raises(CorruptRowError, match="__scalars__"):
            R.all_versions({"id": "c", "channel_versions": {}, R.SCALARS: damaged})
    path = str(tmp_path / "t.db")
    with SqliteSaver.from_conn_string(path) as saver:
        _scalar_graph(saver).invoke({"log": [], "route": "r", "count": 1, "ok": False, "other": None}, cfg("t"))
    conn = sqlite3.connect(path)
    cid, text = conn.execute("SELECT checkpoint_id, checkpoint FROM threadline_checkpoints WHERE thread_id = 't' "
                             "ORDER BY checkpoint_id DESC LIMIT 1").fetchone()
    doc = json.loads(text)
    doc[R.SCALARS]["count"][1] += 1  # another value at the same version: the row's checksum refuses it
    conn.execute("UPDATE threadline_checkpoints SET checkpoint = ? WHERE thread_id = 't' AND checkpoint_id = ?",
                 (json.dumps(doc, sort_keys=True, separators=(",", ":")), cid))
    conn.commit()
    conn.close()
    with SqliteSaver.from_conn_string(path) as saver, pytest.raises(CorruptRowError, match="checksum"):
        saver.get_tuple(cfg("t"))


def test_a_release_before_scalars_refuses_the_database(sync_backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """A release that knows migration 20 would read a checkpoint without its ``__scalars__`` channels."""
    with sync_backend.open() as saver:
        _scalar_graph(saver).invoke({"log": [], "route": "r", "count": 1, "ok": False, "other": None}, cfg("t"))
    monkeypatch.setattr(schema_ops, "LATEST_VERSION", 20)
    with pytest.raises(SchemaError, match=rf"written by a newer threadline \(schema version {LATEST_VERSION}"):
        with sync_backend.open() as saver:
            saver.get_tuple(cfg("t"))


def test_delta_channel_history_takes_a_value_in_the_document_as_its_seed(any_backend: Backend) -> None:
    """LangGraph's walk stops at the nearest ancestor whose ``channel_values`` holds the channel, None
    included: the same answer from every checkpoint, for a None, a scalar and a list channel."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    with any_backend.open() as saver:
        _run(saver, "t")
        _scalar_graph(saver).invoke({"log": [], "route": "r", "count": 1, "ok": False, "other": None}, cfg("s"))
        for thread, channels in (("t", ["note", "log"]), ("s", ["count", "route", "other", "log"])):
            for t in saver.list(cfg(thread)):
                want = BaseCheckpointSaver.get_delta_channel_history(saver, config=t.config, channels=channels)
                assert saver.get_delta_channel_history(config=t.config, channels=channels) == want
