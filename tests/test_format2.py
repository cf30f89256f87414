"""Storage format 2, head rows (SQLite): databases made by the release before it (format 1) read
exactly, migrate online (``threadline migrate-format``) and read back identical; the head serves the
latest checkpoint alone, never a wrong value; every operation that deletes or re-seals values takes
the head with it. Postgres keeps format 1 in this release: its format 1 database reads exactly.

``tests/fixtures/format1.db`` and ``format1.pg.sql`` were written by that release
(``make_format1.py``); the fixtures are copied or loaded first, never modified.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from backends import fresh_postgres_url
from foundation import FIXTURES, FX
from threadline import PostgresSaver, SqliteSaver, lifecycle
from threadline.cli import app
from threadline.codec import BlobCodec, Keyring
from threadline.errors import ConfigError, CorruptRowError
from threadline.lifecycle.erase import Selection, erase
from threadline.storage.schema import LATEST_VERSION

KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="




def _expected(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


@pytest.fixture(params=["sqlite", "postgres"])
def format1(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, str, dict]:
    """(saver class, its connection string, what every reader must see) of a format 1 database."""
    if request.param == "sqlite":
        target = tmp_path / "format1.db"
        shutil.copyfile(FIXTURES / "format1.db", target)
        return SqliteSaver, str(target), _expected("format1.json")
    url = fresh_postgres_url(request)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute((FIXTURES / "format1.pg.sql").read_text())
    return PostgresSaver, url, _expected("format1.pg.json")


def _heads(saver: Any) -> list[tuple]:
    return saver.run(_q("SELECT thread_id, checkpoint_ns, checkpoint_id FROM threadline_heads ORDER BY 1, 2"))


def _q(sql: str, params: tuple = ()) -> Any:
    from threadline.storage.ops import Q

    return (yield Q(sql, params))


def _namespaces(saver: Any) -> set[tuple[str, str]]:
    return {tuple(r) for r in saver.run(_q("SELECT DISTINCT thread_id, checkpoint_ns FROM threadline_checkpoints"))}


@pytest.fixture
def sqlite_format1(tmp_path: Path) -> tuple[Any, str, dict]:
    target = tmp_path / "format1.db"
    shutil.copyfile(FIXTURES / "format1.db", target)
    return SqliteSaver, str(target), _expected("format1.json")


def test_a_format1_database_reads_exactly_migrates_and_reads_back_identical(format1: tuple) -> None:
    cls, url, want = format1
    with cls.from_conn_string(url) as saver:
        assert _heads(saver) == []  # written before format 2
        got = FX.expected(saver, FX.build_graph(saver))
        assert got["tuples"] == want["tuples"] and got["threads"] == want["threads"]
        if cls is PostgresSaver:
            with pytest.raises(ConfigError, match="not available on postgres"):
                lifecycle.migrate_format(saver)
            graph = FX.build_graph(saver)
            graph.invoke({**FX.human("one more turn " * 20, 900), "mode": "plain"}, FX.cfg("chat"))
            assert _heads(saver) == [] and len(graph.get_state(FX.cfg("chat")).values["messages"]) > 2
            return
        report = lifecycle.migrate_format(saver)
        assert report.ok and report.written == len(_namespaces(saver)) and report.threads == len(want["threads"]) + 1  # + "long"
        again = lifecycle.migrate_format(saver)  # resumable: what is current is skipped
        assert again.written == 0 and again.current == report.written
        assert not [f for f in lifecycle.fsck(saver, deep=True).findings if "head" in f.kind]
    with cls.from_conn_string(url) as fresh:  # nothing cached: the latest checkpoints come from their heads
        got = FX.expected(fresh, FX.build_graph(fresh))
    assert got["tuples"] == want["tuples"] and got["threads"] == want["threads"]


def test_the_head_alone_serves_the_latest_checkpoint(sqlite_format1: tuple) -> None:
    """With every blob gone, the latest checkpoint of each namespace still reads exactly (its head holds
    its values), and any older one fails loudly: the head is never used for another checkpoint."""
    cls, url, want = sqlite_format1
    with cls.from_conn_string(url) as saver:
        lifecycle.migrate_format(saver)
        latest = {(t["config"]["thread_id"], t["config"]["checkpoint_ns"]): t for t in reversed(want["tuples"])}
        older = [t for t in want["tuples"] if latest[(t["config"]["thread_id"], t["config"]["checkpoint_ns"])] is not t]
        saver.run(_q("DELETE FROM threadline_blobs"), write=True)
    with cls.from_conn_string(url) as fresh:
        for (tid, ns), t in latest.items():
            got = fresh.get_tuple({"configurable": {"thread_id": tid, "checkpoint_ns": ns}})
            assert FX.jsonable(got.checkpoint["channel_values"]) == t["channel_values"]
            assert FX.jsonable([list(w) for w in got.pending_writes]) == t["pending_writes"]
        named = [t for t in older if t["channel_versions"]][0]["config"]
        with pytest.raises(CorruptRowError, match="not stored"):
            fresh.get_tuple({"configurable": named})


def _reads_checkpoint_head_and_writes(sql: str) -> bool:
    return sql.startswith("SELECT") and all(f"FROM threadline_{t}" in sql for t in ("checkpoints", "writes")) and "threadline_heads" in sql


def test_a_sqlite_get_tuple_is_one_statement_without_a_transaction(tmp_path: Path) -> None:
    """Format 2 on SQLite: reading the latest checkpoint, by the saver that wrote it or by a new one,
    is one statement (the checkpoint row, its head and its pending writes), with no BEGIN or COMMIT
    around it — and the tuple is the one the official saver's two statements would give."""
    db = str(tmp_path / "one.db")
    seen: list[str] = []
    with SqliteSaver.from_conn_string(db) as saver:
        graph = FX.build_graph(saver)
        graph.invoke({**FX.human("hello", 1), "mode": "plain"}, FX.cfg("one"))
        want = saver.get_tuple(FX.cfg("one"))
        assert want.pending_writes == [] and want.checkpoint["channel_values"]
        saver.conn.set_trace_callback(seen.append)
        assert saver.get_tuple(FX.cfg("one")) == want
        saver.conn.set_trace_callback(None)
    assert len(seen) == 1 and _reads_checkpoint_head_and_writes(seen[0]), seen
    with SqliteSaver.from_conn_string(db) as fresh:
        seen.clear()
        fresh.conn.set_trace_callback(seen.append)
        got = fresh.get_tuple(FX.cfg("one"))
        fresh.conn.set_trace_callback(None)
    assert len(seen) == 1 and _reads_checkpoint_head_and_writes(seen[0]), seen
    assert got.checkpoint == want.checkpoint and got.metadata == want.metadata and got.parent_config == want.parent_config


def _three_turns(saver: Any, thread_id: str, words: int) -> Any:
    """The test graph on ``saver``, after three turns of ``words`` words each on ``thread_id``."""
    graph = FX.build_graph(saver)
    for turn in range(3):
        graph.invoke({**FX.human(f"turn {turn} " * words, turn), "mode": "plain"}, FX.cfg(thread_id))
    return graph


def test_a_warm_read_takes_the_head_entries_it_holds(tmp_path: Path) -> None:
    """The saver that wrote (or read) a checkpoint's head keeps its entries: its next read of that checkpoint
    takes them, as it takes cached values, instead of opening the stored head again. Shown with the stored
    head damaged: that saver still reads in one statement (no blob read), a new one falls back to the blobs
    (more statements); a head deleted (derived data) is not served from memory either. Every read gives
    the tuple read before."""
    db = str(tmp_path / "warm.db")
    with SqliteSaver.from_conn_string(db) as saver:
        _three_turns(saver, "warm", 30)
        latest = saver.get_tuple(FX.cfg("warm"))
        assert _heads(saver)[0][2] == latest.config["configurable"]["checkpoint_id"]
        data = bytes(saver.run(_q("SELECT data FROM threadline_heads WHERE thread_id = 'warm'"))[0][0])
        saver.run(_q("UPDATE threadline_heads SET data = ? WHERE thread_id = 'warm'", (data[:-1] + bytes([data[-1] ^ 1]),)), write=True)
        seen: list[str] = []
        saver.conn.set_trace_callback(seen.append)
        assert saver.get_tuple(FX.cfg("warm")) == latest
        saver.conn.set_trace_callback(None)
        assert len(seen) == 1 and _reads_checkpoint_head_and_writes(seen[0]), seen
        # a head deleted behind its back is not served from memory: the values come from the blobs
        saver.run(_q("DELETE FROM threadline_heads"), write=True)
        seen.clear()
        saver.conn.set_trace_callback(seen.append)
        assert saver.get_tuple(FX.cfg("warm")) == latest
        saver.conn.set_trace_callback(None)
        assert len(seen) > 1 and any("threadline_blobs" in sql for sql in seen[1:]), seen
        # the damaged head stored again, for a new saver
        saver.run(_q("INSERT INTO threadline_heads VALUES ('warm', '', ?, 'head2+x3', ?)", (latest.config["configurable"]["checkpoint_id"], data[:-1] + bytes([data[-1] ^ 1]))), write=True)
    with SqliteSaver.from_conn_string(db) as fresh:
        seen.clear()
        fresh.conn.set_trace_callback(seen.append)
        assert fresh.get_tuple(FX.cfg("warm")) == latest
        fresh.conn.set_trace_callback(None)
        assert len(seen) > 1 and any("threadline_blobs" in sql for sql in seen[1:]), seen


def test_a_warm_read_leaves_the_bytes_of_the_head_it_holds_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The get statement is given the checkpoint whose head the saver holds: for it the head's bytes are not
    fetched (NULL), for any other checkpoint or a saver holding none they are. Should the held entries be
    gone by the time they are looked up (evicted by another thread), the read takes the values from the
    blobs: the same tuple."""
    from threadline.storage.dialect.heads import get_with_head

    db = str(tmp_path / "held.db")
    with SqliteSaver.from_conn_string(db) as saver:
        _three_turns(saver, "held", 30)
        latest = saver.get_tuple(FX.cfg("held"))
        cid = latest.config["configurable"]["checkpoint_id"]
        assert saver.blob_codec.cache.head_row_id("held", "") == cid
        stored = bytes(saver.run(_q("SELECT data FROM threadline_heads WHERE thread_id = 'held'"))[0][0])
        for held, data in ((cid, None), (None, stored), ("another", stored)):
            rows = saver.run(_q(get_with_head(True, held=True), ("held", "", None, held)))
            (row,) = [r for r in rows if r[0] == 0]
            assert row[7] == "head2+x3" and (None if row[12] is None else bytes(row[12])) == data
        cache = saver.blob_codec.cache
        cache.forget_threads(["held"])  # no value cached either: they come from the blobs
        monkeypatch.setattr(cache, "head_row_id", lambda *key: cid)  # held when the statement was made …
        monkeypatch.setattr(cache, "head_row", lambda *key: None)  # … and evicted when it was looked up
        seen: list[str] = []
        saver.conn.set_trace_callback(seen.append)
        assert saver.get_tuple(FX.cfg("held")) == latest
        saver.conn.set_trace_callback(None)
        assert any("threadline_blobs" in sql for sql in seen[1:]), seen


def test_a_cold_read_keeps_the_head_and_the_next_put_builds_on_it(tmp_path: Path) -> None:
    """A new saver's read of the latest checkpoint caches its head, not an entry per value: a read that
    nothing follows builds none. A put on that checkpoint then finds its delta bases in the head it holds
    (no blob read), and every saver reads the new checkpoint back as the one that wrote it."""
    db = str(tmp_path / "cold.db")
    with SqliteSaver.from_conn_string(db) as saver:
        _three_turns(saver, "cold", 30)
    with SqliteSaver.from_conn_string(db) as fresh:
        latest = fresh.get_tuple(FX.cfg("cold"))
        cid, cache = latest.config["configurable"]["checkpoint_id"], fresh.blob_codec.cache
        held = cache.head_row("cold", "", cid)
        assert held is not None and len(held["messages"][2]) >= fresh.blob_codec.delta_min_bytes
        assert all(cache.get(("cold", "", ch, v)) is None for ch, v in latest.checkpoint["channel_versions"].items())
        seen: list[str] = []
        fresh.conn.set_trace_callback(seen.append)
        graph = FX.build_graph(fresh)
        graph.invoke({**FX.human("turn 3 " * 30, 3), "mode": "plain"}, FX.cfg("cold"))
        fresh.conn.set_trace_callback(None)
        writes = [sql for sql in seen if not sql.startswith("INSERT INTO threadline_writes")]
        assert not any("FROM threadline_blobs" in sql and "SELECT" in sql and "EXISTS" not in sql for sql in writes), writes
        types = [r[0] for r in fresh.run(_q("SELECT type FROM threadline_blobs WHERE thread_id = 'cold' AND channel = 'messages' ORDER BY version"))]
        assert types[-1].startswith("delta-"), types
        after = fresh.get_tuple(FX.cfg("cold"))
        assert len(after.checkpoint["channel_values"]["messages"]) > len(latest.checkpoint["channel_values"]["messages"])
    with SqliteSaver.from_conn_string(db) as other:
        assert other.get_tuple(FX.cfg("cold")) == after


def test_new_puts_write_heads_and_a_damaged_head_falls_back_to_the_blobs(sqlite_format1: tuple) -> None:
    cls, url, _ = sqlite_format1
    with cls.from_conn_string(url) as saver:
        graph = FX.build_graph(saver)
        graph.invoke({**FX.human("one more turn " * 20, 900), "mode": "plain"}, FX.cfg("chat"))
        state = graph.get_state(FX.cfg("chat"))
        assert [h[:2] for h in _heads(saver)] == [("chat", "")]
        head_id = _heads(saver)[0][2]
        assert head_id == state.config["configurable"]["checkpoint_id"]
        flip = "UPDATE threadline_heads SET data = ? WHERE thread_id = 'chat'"
        data = bytes(saver.run(_q("SELECT data FROM threadline_heads WHERE thread_id = 'chat'"))[0][0])
        saver.run(_q(flip, (data[:-1] + bytes([data[-1] ^ 1]),)), write=True)
    with cls.from_conn_string(url) as fresh:
        assert FX.build_graph(fresh).get_state(FX.cfg("chat")).values == state.values  # from the blobs
        report = lifecycle.fsck(fresh, thread_ids=["chat"])
        assert [f.kind for f in report.findings] == ["unreadable_head"] and not report.ok
        lifecycle.fsck(fresh, thread_ids=["chat"], repair=True)
        assert _heads(fresh) == [] and lifecycle.fsck(fresh, thread_ids=["chat"], deep=True).ok


def test_deleting_or_resealing_values_takes_the_head_with_them(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    shutil.copyfile(FIXTURES / "format1.db", db)
    with SqliteSaver.from_conn_string(db) as saver:
        lifecycle.migrate_format(saver)
        heads = {h[0] for h in _heads(saver)}
        assert {"chat", "long", "branch", "sub-open"} <= heads
        saver.delete_thread("chat")
        saver.prune(["long"], strategy="keep_latest")
        erase(saver, Selection(thread_pattern="branch"))
        left = {h[0] for h in _heads(saver)}
        assert not {"chat", "long", "branch"} & left and "sub-open" in left
    with SqliteSaver.from_conn_string(db) as saver:
        saver.blob_codec = BlobCodec(keys=Keyring([KEY], require=False))
        lifecycle.rekey(saver, thread_ids=["sub-open"])
        assert "sub-open" not in {h[0] for h in _heads(saver)}  # its plaintext copy is gone with the plaintext rows


def test_migrate_format_from_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "format1.db"
    shutil.copyfile(FIXTURES / "format1.db", db)
    first = CliRunner().invoke(app, ["migrate-format", "--db", str(db)])
    assert first.exit_code == 0, first.output
    assert "head row(s) written over 7 thread(s), 0 already current" in first.output
    again = CliRunner().invoke(app, ["migrate-format", "--db", str(db), "--json"])
    assert again.exit_code == 0 and json.loads(again.output)["written"] == 0
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT MAX(v) FROM threadline_migrations").fetchone() == (LATEST_VERSION,)
    finally:
        conn.close()


def test_heads_are_encrypted_under_a_keyring_and_checksummed_without(tmp_path: Path) -> None:
    secret = "the launch code is 0000"
    for keys, suffix in ((Keyring([KEY]), "+gcm"), (None, "+x3")):
        db = str(tmp_path / f"{suffix[1:]}.db")
        with SqliteSaver.from_conn_string(db) as saver:
            saver.blob_codec = BlobCodec(keys=keys)
            graph = FX.build_graph(saver)
            graph.invoke({**FX.human(secret, 1), "mode": "plain"}, FX.cfg("s"))
            ((kind, data),) = saver.run(_q("SELECT type, data FROM threadline_heads"))
            assert kind == "head2" + suffix and (secret.encode() in bytes(data)) is (keys is None)
            state = graph.get_state(FX.cfg("s")).values
        with SqliteSaver.from_conn_string(db) as fresh:
            fresh.blob_codec = BlobCodec(keys=keys)
            assert FX.build_graph(fresh).get_state(FX.cfg("s")).values == state
            assert lifecycle.fsck(fresh, deep=True).ok


def test_heads_are_a_rowid_table_and_a_database_before_it_migrates(tmp_path: Path) -> None:
    """Migration 23 (SQLite): the heads table keeps its rowid, so a head of a few KB stays in its leaf
    page but for whole overflow pages (a WITHOUT ROWID row spills past ~1 KB); a database whose heads
    table is the WITHOUT ROWID one of migration 17 is rebuilt with every head kept, and a new saver's
    read is still served by the head (one statement) and equal to the one before."""
    db = str(tmp_path / "heads.db")
    with SqliteSaver.from_conn_string(db) as saver:
        _three_turns(saver, "h", 60)
        want = saver.get_tuple(FX.cfg("h"))
    with sqlite3.connect(db) as conn:  # back to the layout before migration 23, its rows kept
        conn.executescript(
            "CREATE TABLE h17 (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', checkpoint_id TEXT NOT NULL, "
            "type TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (thread_id, checkpoint_ns)) WITHOUT ROWID;"
            "INSERT INTO h17 SELECT thread_id, checkpoint_ns, checkpoint_id, type, data FROM threadline_heads;"
            "DROP TABLE threadline_heads; ALTER TABLE h17 RENAME TO threadline_heads;"
            "DELETE FROM threadline_migrations WHERE v = 23;"
        )
        heads = conn.execute("SELECT * FROM threadline_heads").fetchall()
        assert len(heads) == 1 and len(heads[0][4]) > 2000  # a head past what a WITHOUT ROWID leaf keeps
    with SqliteSaver.from_conn_string(db) as fresh:
        seen: list[str] = []
        fresh.conn.set_trace_callback(seen.append)
        got = fresh.get_tuple(FX.cfg("h"))
        fresh.conn.set_trace_callback(None)
        assert got == want and len(seen) == 1 and _reads_checkpoint_head_and_writes(seen[0]), seen
    with sqlite3.connect(db) as conn:
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'threadline_heads'").fetchone()[0]
        assert "WITHOUT ROWID" not in sql.upper() and conn.execute("SELECT * FROM threadline_heads").fetchall() == heads
        assert conn.execute("SELECT MAX(v) FROM threadline_migrations").fetchone() == (LATEST_VERSION,)
