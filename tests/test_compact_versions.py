"""Storage format 2 on SQLite: a checkpoint's document is stored with its versions compacted
(``jsontext.compact_doc``: LangGraph's 32-digit zero-padded counters lose 24 of their zeros), read
back exactly as written by every reader — the saver, SQLite's own JSON functions (stats, the web
UI's fork layout), the row checksum, transfers to another backend — and refused by a release before.
"""

from __future__ import annotations

import json
import operator
import sqlite3
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from backends import Backend, make_backend
from bad_input_access import cfg
from threadline import SqliteSaver, read
from threadline.codec.jsontext import COMPACT_MARK, compact_doc, dumps_doc, expand_doc
from threadline.errors import CorruptRowError, SchemaError
from threadline.lifecycle import thread_rows
from threadline.storage.ops import Q
from threadline.storage.ops import schema as schema_ops
from threadline.storage.schema import LATEST_VERSION
from threadline.transfer import backup as B
from threadline.transfer.bundle import bundle


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def _graph(saver: Any, nodes: int = 12) -> Any:
    g = StateGraph(State)
    names = [f"n{i}" for i in range(nodes)]
    for i, name in enumerate(names):
        g.add_node(name, lambda s, i=i: {"log": [f"step {i}"]})
    for a, b in zip([START, *names], [*names, END]):
        g.add_edge(a, b)
    return g.compile(checkpointer=saver)


def _views(saver: Any, thread_id: str) -> list[tuple]:
    return [(t.checkpoint, t.metadata, t.parent_config, sorted(t.pending_writes or [], key=repr)) for t in saver.list(cfg(thread_id))]


def _stored_docs(saver: Any, *thread_ids: str) -> list[str]:
    """The documents of the threads' checkpoints as stored (the engine's statement, on any backend)."""

    def rows(d: Any, thread_id: str) -> Any:
        return (yield Q(d.THREAD_CHECKPOINT_ROWS, (thread_id,)))

    return [r[4] for t in thread_ids for r in saver.run(rows(saver.dialect, t))]


@pytest.fixture
def compacting(request: pytest.FixtureRequest, tmp_path: Any) -> Backend:
    """A SQLite database (Postgres keeps JSONB; Redis zstd-compresses its rows, runs of zeros included)."""
    return make_backend("sqlite", tmp_path, request)


# JSON strings that a document may hold: versions, and names made to look like them or like the mark
_TRICKY = st.sampled_from(["~", '"~', "0" * 24, "0" * 23, "0" * 48, "\\", '"', "{ ", "x", ".0.5"])
_TEXTS = st.lists(_TRICKY, max_size=6).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_TEXTS, st.one_of(_TEXTS, st.dictionaries(_TEXTS, _TEXTS, max_size=3)), max_size=5))
def test_compacting_a_document_gives_its_text_back_exactly(doc: dict) -> None:
    text = dumps_doc(doc)
    stored = compact_doc(text)
    assert expand_doc(stored) == text
    assert json.loads(stored) is not None  # still JSON, for SQLite's JSON functions
    assert len(stored) <= len(text) + 1
    assert not text.startswith(COMPACT_MARK) and expand_doc(text) == text  # a text as written is never taken for a compacted one


def test_a_graph_stores_compacted_documents_and_reads_as_the_official(tmp_path: Any, compacting: Backend) -> None:
    """Side by side with the official SqliteSaver: the same graph, every checkpoint read back (latest,
    each older one by a new saver, history) with LangGraph's versions as given, the documents smaller."""
    with OfficialSqliteSaver.from_conn_string(str(tmp_path / "official.db")) as official, compacting.open() as saver:
        for s in (official, saver):
            _graph(s).invoke({"log": ["start"]}, cfg("t"))
        want, got = _views(official, "t"), _views(saver, "t")
        assert [(c["channel_values"], sorted(c["channel_versions"]), m) for c, m, _, _ in got] == [
            (c["channel_values"], sorted(c["channel_versions"]), m) for c, m, _, _ in want
        ]
        versions = [v for c, *_ in got for v in c["channel_versions"].values()]
        assert versions and all(len(v.split(".")[0]) == 32 for v in versions)  # as LangGraph's get_next_version made them
        official_history = [(h.values, h.next) for h in _graph(official).get_state_history(cfg("t"))]
        docs = _stored_docs(saver, "t")
    assert docs and all(d.startswith(COMPACT_MARK) and '"~' in d for d in docs)
    assert sum(map(len, docs)) < 0.8 * sum(len(expand_doc(d)) for d in docs)
    with compacting.open() as fresh:  # no cache: every document parsed as stored
        assert _views(fresh, "t") == got
        history = list(_graph(fresh).get_state_history(cfg("t")))
        assert [(h.values, h.next) for h in history] == official_history


def test_names_that_look_like_compacted_versions_read_back_exactly(compacting: Backend) -> None:
    """A channel named like a compacted version, or holding ``"~`` (then the document is stored as
    written), and a version of another format, each read back as given."""
    names = {"~x": "00000000000000000000000000000001.0.5", "0" * 24 + "x": "00000000000000000000000000000002.0.25", "plain": "7"}
    for channels in ({"0" * 24 + "x": names["0" * 24 + "x"], "plain": "7"}, names):
        with compacting.open() as saver:
            ckpt = {"v": 4, "id": f"1ef{len(channels)}", "ts": "2026-11-30T00:00:00+00:00", "channel_values": {ch: [ch] for ch in channels},
                    "channel_versions": dict(channels), "versions_seen": {"node": dict(channels)}, "updated_channels": None}
            config = saver.put(cfg(f"t{len(channels)}"), ckpt, {"source": "input", "step": -1}, dict(channels))
        with compacting.open() as fresh:
            got = fresh.get_tuple(config)
            assert got.checkpoint["channel_versions"] == channels and got.checkpoint["versions_seen"] == {"node": channels}
            assert got.checkpoint["channel_values"] == {ch: [ch] for ch in channels}
            docs = _stored_docs(fresh, "t2", "t3")
    assert [d.startswith(COMPACT_MARK) for d in docs] == [True, False]  # the one with a "~" of its own as written


def test_a_damaged_compacted_document_fails_its_row_check(tmp_path: Any) -> None:
    path = str(tmp_path / "t.db")
    with SqliteSaver.from_conn_string(path) as saver:
        _graph(saver, 3).invoke({"log": ["start"]}, cfg("t"))
    with sqlite3.connect(path) as conn:  # one version's counter changed, the text still compacted JSON
        conn.execute("UPDATE threadline_checkpoints SET checkpoint = replace(checkpoint, '\"~00000002', '\"~00000009')")
    with SqliteSaver.from_conn_string(path) as fresh:
        with pytest.raises(CorruptRowError, match="checksum"):
            list(fresh.list(cfg("t")))


def test_sqlite_json_functions_read_compacted_documents(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stats join a document's versions to its blobs in SQL: every reference finds its row, as in an
    uncompacted copy of the same thread (a bundle restored with compaction off); a restore compacts."""
    path = str(tmp_path / "t.db")
    with SqliteSaver.from_conn_string(path) as saver:
        _graph(saver, 4).invoke({"log": ["start"]}, cfg("t"))
        bundle(saver, ["t"], str(tmp_path / "t.bundle"))
        compacted = read.stats(saver)
        docs = _stored_docs(saver, "t")
    with SqliteSaver.from_conn_string(str(tmp_path / "again.db")) as again:
        assert B.restore(again, str(tmp_path / "t.bundle")).ok
        assert _stored_docs(again, "t") == docs  # restored as its puts stored it
    with SqliteSaver.from_conn_string(str(tmp_path / "copy.db")) as copy:
        with monkeypatch.context() as m:
            m.setattr(thread_rows, "compact_doc", lambda text: text)  # the documents stored as written
            assert B.restore(copy, str(tmp_path / "t.bundle")).ok
        plain = read.stats(copy)
        assert not any(d.startswith(COMPACT_MARK) for d in _stored_docs(copy, "t"))
    assert compacted.references == plain.references > 0
    # the blobs were found through the compacted versions: a full copy's bytes, as in the plain copy
    assert compacted.logical_blob_bytes == plain.logical_blob_bytes > 0


@pytest.fixture(params=("postgres", "redis"))
def other_backend(request: pytest.FixtureRequest, tmp_path: Any) -> Backend:
    return make_backend(request.param, tmp_path, request)


def test_a_thread_bundled_from_sqlite_restores_on_another_backend(tmp_path: Any, other_backend: Backend) -> None:
    path = str(tmp_path / "t.db")
    with SqliteSaver.from_conn_string(path) as saver:
        _graph(saver, 4).invoke({"log": ["start"]}, cfg("t"))
        want = _views(saver, "t")
        bundle(saver, ["t"], str(tmp_path / "t.bundle"))
    with other_backend.open() as target:
        report = B.restore(target, str(tmp_path / "t.bundle"))
        assert report.ok and report.verified and [t.thread_id for t in report.threads] == ["t"]
        assert _views(target, "t") == want


def test_a_release_before_compacted_documents_refuses_the_database(compacting: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    with compacting.open() as saver:
        _graph(saver, 2).invoke({"log": ["start"]}, cfg("t"))
    monkeypatch.setattr(schema_ops, "LATEST_VERSION", 21)  # what a release before it knows
    with pytest.raises(SchemaError, match=rf"written by a newer threadline \(schema version {LATEST_VERSION}"):
        with compacting.open() as saver:
            saver.get_tuple(cfg("t"))
