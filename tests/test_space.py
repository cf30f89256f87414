"""Space that comes back (threadline.lifecycle.vacuum): new SQLite files use incremental
auto-vacuum and shrink after a prune; an older file is converted by ``vacuum(full=True)``;
Postgres reclaims with VACUUM and shrinks with VACUUM FULL. Every report gives the bytes on
disk before and after."""

from __future__ import annotations

import os
import sqlite3

from workers import build_chat

from threadline import open_saver
from threadline import lifecycle as L
from threadline.lifecycle.vacuum import vacuum


def fill(saver, threads: int = 6, turns: int = 6) -> None:
    """Threads whose every turn adds ~3 KB of incompressible text."""
    graph = build_chat().compile(checkpointer=saver)
    for t in range(threads):
        for _ in range(turns):
            graph.invoke({"messages": [os.urandom(1500).hex()]}, {"configurable": {"thread_id": f"t{t}"}})


def test_new_sqlite_file_shrinks_after_prune(tmp_path):
    path = str(tmp_path / "new.db")
    with open_saver(path) as saver:
        assert saver.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
        fill(saver)
        report = L.prune(saver, L.RetentionPolicy(keep_last=1))
        space = report.space
        assert report.checkpoints > 0 and space.pages_released > 0 and not space.needs_full
        assert space.bytes_after < space.bytes_before
        assert space.bytes_after == os.path.getsize(path) + (os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0)


def test_older_sqlite_file_is_converted_by_a_full_vacuum(tmp_path):
    path = str(tmp_path / "old.db")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")  # a file made before threadline asked for auto-vacuum
    conn.execute("CREATE TABLE app (x)")
    conn.close()
    with open_saver(path) as saver:
        assert saver.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
        fill(saver, threads=3)
        report = L.prune(saver, L.RetentionPolicy(keep_last=1))
        assert report.space.needs_full and report.space.pages_released == 0
        full = vacuum(saver, full=True)
        assert full.bytes_after < full.bytes_before
        assert saver.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
        assert not vacuum(saver).needs_full


def test_postgres_vacuum_and_full_vacuum_report_table_bytes(pg_url):
    with open_saver(pg_url) as saver:
        fill(saver, threads=3)
        report = L.prune(saver, L.RetentionPolicy(keep_last=1))
        assert report.space.bytes_before > 0 and report.space.statements == []  # a small deletion: autovacuum's job
        plain = vacuum(saver)
        assert plain.statements and all(s.startswith("VACUUM (ANALYZE)") for s in plain.statements)
        full = vacuum(saver, full=True)
        assert full.bytes_after < full.bytes_before
