"""Rows written by threadline's first storage engine stay readable, and writable on top.

``tests/fixtures/foundation.db`` was written by a real LangGraph run before delta
encoding and compression existed (every blob a plain ``msgpack`` snapshot);
``foundation.json`` holds what every reader must see (``make_foundation.py``
made both). The database is copied to a temporary directory first: the fixture
itself is never modified.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from langgraph.types import Command

from threadline import AsyncSqliteSaver, SqliteSaver, codec
from threadline.codec import BlobCodec
from threadline.storage.dialect.sqlite import SqliteDialect

from foundation import FIXTURES, FX

EXPECTED = json.loads((FIXTURES / "foundation.json").read_text())


@pytest.fixture
def foundation_db(tmp_path: Path) -> Path:
    target = tmp_path / "foundation.db"
    shutil.copyfile(FIXTURES / "foundation.db", target)
    return target


def test_fixture_holds_only_first_engine_rows() -> None:
    conn = sqlite3.connect(f"file:{FIXTURES / 'foundation.db'}?mode=ro", uri=True)
    try:
        types = {r[0] for r in conn.execute("SELECT type FROM blobs UNION SELECT type FROM writes")}
        assert types <= {"msgpack", "null", "empty"}
        assert conn.execute("SELECT COUNT(*) FROM blobs WHERE base_version IS NOT NULL").fetchone() == (0,)
        assert conn.execute("SELECT COUNT(DISTINCT checkpoint_ns) FROM checkpoints").fetchone()[0] >= 3  # root + subgraphs
    finally:
        conn.close()


def test_reads_the_foundation_database_exactly(foundation_db: Path) -> None:
    with SqliteSaver.from_conn_string(str(foundation_db)) as saver:
        got = FX.expected(saver, FX.build_graph(saver))
    assert got["tuples"] == EXPECTED["tuples"]
    assert got["threads"] == EXPECTED["threads"]
    conn = sqlite3.connect(foundation_db)
    try:  # schema 5: the rows were copied into tables stored in their primary key's order
        clustered = {name for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'") if sql.endswith("WITHOUT ROWID")}
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'threadline_checkpoints'")}
        run_index = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'threadline_checkpoints_run_id'").fetchone()[0]
        plan = conn.execute("EXPLAIN QUERY PLAN " + SqliteDialect().checkpoints_of_runs(2), ("a", "b")).fetchall()
    finally:
        conn.close()
    # heads (schema 17, format 2) keep their rowid since schema 23: a head of a few KB fills whole overflow pages
    assert clustered == {"threadline_blobs", "threadline_writes"}
    # schema 6: the (source, step) index, which no query used, is gone
    assert {"threadline_checkpoints_run_id", "threadline_checkpoints_created_at"} <= indexes
    assert "threadline_checkpoints_source_step" not in indexes
    # schema 18: only checkpoints given a run_id are in its index; delete_for_runs still finds them through it
    assert run_index.endswith("WHERE run_id IS NOT NULL")
    assert any("USING INDEX threadline_checkpoints_run_id" in step[-1] for step in plan)


async def test_async_saver_reads_the_foundation_database_exactly(foundation_db: Path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(foundation_db)) as saver:
        tuples = [t async for t in saver.alist(None)]
    assert len(tuples) == len(EXPECTED["tuples"])
    for t, want in zip(tuples, EXPECTED["tuples"]):
        assert t.config["configurable"] == want["config"]
        assert FX.jsonable(t.checkpoint["channel_values"]) == want["channel_values"]
        assert FX.jsonable([list(w) for w in t.pending_writes]) == want["pending_writes"]


def test_new_puts_on_top_of_the_foundation_database(foundation_db: Path) -> None:
    with SqliteSaver.from_conn_string(str(foundation_db)) as saver:
        saver.blob_codec = BlobCodec(delta_min_bytes=0)  # the fixture's values are small: delta them anyway
        graph = FX.build_graph(saver)
        before = {tid: graph.get_state(FX.cfg(tid)).values for tid in FX.THREADS}

        # more turns on an old thread, the pending subgraph interrupt resumed, the old branch continued
        for i in range(3):
            graph.invoke({**FX.human(f"new turn {i} " * 20, 100 + i), "mode": "plain"}, FX.cfg("chat"))
        graph.invoke(Command(resume="approved later"), FX.cfg("sub-open"))
        graph.invoke({**FX.human("more on the branch", 200), "mode": "plain"}, FX.cfg("branch"))
        after = {tid: graph.get_state(FX.cfg(tid)).values for tid in ("chat", "sub-open", "branch")}

    # old values are a prefix of the new ones
    for tid, values in after.items():
        old = FX.jsonable(before[tid]["messages"])
        assert FX.jsonable(values["messages"][: len(old)]) == old
    assert len(after["chat"]["messages"]) == len(before["chat"]["messages"]) + 6
    assert after["sub-open"]["messages"][-1].content == "sub answer: approved later"

    conn = sqlite3.connect(foundation_db)
    try:
        # new rows are deltas whose chain reaches down to the first engine's plain snapshots
        rows = {
            (ch, v): (t, b)
            for ch, v, t, b in conn.execute("SELECT channel, version, type, base_version FROM threadline_blobs WHERE thread_id = 'chat'")
        }
    finally:
        conn.close()
    deltas = [(ch, v) for (ch, v), (t, _) in rows.items() if codec.is_delta(t)]
    assert deltas
    roots = set()
    for ch, v in deltas:
        while codec.is_delta(rows[(ch, v)][0]):
            v = rows[(ch, v)][1]
        roots.add(rows[(ch, v)][0])
    assert "msgpack" in roots

    # a new saver (nothing cached) reads old and new checkpoints alike
    with SqliteSaver.from_conn_string(str(foundation_db)) as saver:
        graph = FX.build_graph(saver)
        assert FX.jsonable(graph.get_state(FX.cfg("chat")).values) == FX.jsonable(after["chat"])
        got = FX.expected(saver, graph)
    old_ids = {json.dumps(t["config"], sort_keys=True) for t in EXPECTED["tuples"]}
    kept = [t for t in got["tuples"] if json.dumps(t["config"], sort_keys=True) in old_ids]
    assert len(kept) == len(EXPECTED["tuples"])
    for now, then in zip(kept, EXPECTED["tuples"]):  # every old checkpoint still reads exactly as before …
        assert {k: v for k, v in now.items() if k != "pending_writes"} == {k: v for k, v in then.items() if k != "pending_writes"}
        # … and resuming an interrupt may only add pending writes to the checkpoint it resumed
        assert all(w in now["pending_writes"] for w in then["pending_writes"])
    assert len(got["tuples"]) > len(EXPECTED["tuples"])


def test_checkpoint_checksums_of_earlier_releases_still_match() -> None:
    """The checksum column of stored rows is computed over a canonical form that must never
    change: this value was written by an earlier release for the same row."""
    from threadline.codec import seal

    key = ("thread-1", "", "1f1e7a91-794d-6362-8096-0472ea6c29d0")
    doc = {
        "channel_versions": {"__start__": "00000000000000000000000000000002.0.2383", "messages": 3},
        "id": "1f1e7a91", "ts": "2026-11-24T01:48:05+00:00", "updated_channels": ["messages"], "v": 4,
        "versions_seen": {"__input__": {}, "agent": {"messages": 2.5}},
        "big": 10**20, "f": 1e16, "z": -0.0, "t": True, "n": None, "u": "é\u2028\"\\",
    }
    meta = {"source": "loop", "step": 150, "parents": {}, "writes": {"agent": [1, "x", {"b": 1, "a": [None]}]}}
    assert seal.checkpoint_checksum(None, key, "1f1e7a91-parent", doc, meta) == "b2:7ab0efaad6eb7d1a"
