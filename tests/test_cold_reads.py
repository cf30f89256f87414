"""Cold threads seen by the read side and the lifecycle (issue 33, the gaps: docs/offload.md):
listed with a ``cold`` marker (the threads listing, the browser's search, the Agent Server
search), read from their archive by the read commands and the browser without restoring, counted
by ``stats``, expired by TTL with their archive, bundled; restores offload large values again.
Real SQLite and Postgres, a real local directory store."""

from __future__ import annotations

import json
import time

import web_helpers as wh
from cli_support import cli
from test_offload import SMALL, _put_chain, db_url  # noqa: F401 (db_url: a fixture, SQLite and Postgres)
from test_offload import _values as _listed
from threadline import read
from threadline.backends import open_saver
from threadline.codec import BlobCodec
from threadline.lifecycle import objects as O
from threadline.lifecycle.jobs import run_job
from threadline.lifecycle.sweeper import sweep_job
from threadline.objectstore import Offload
from threadline.transfer.backup import restore
from threadline.transfer.bundle import bundle
from threadline.lifecycle.cold import cold_archives_op, tier, warm
from threadline.transfer.official import thread_view
from threadline.ttl import TTL
from threadline.web import UIConfig
from threadline.web.queries import search_threads_op


def _chain(saver, thread, n=2):
    return _put_chain(saver, thread, n=n, size=6000)


def _values(saver, thread):
    return _listed(saver, {"configurable": {"thread_id": thread}})


def _offloaded_rows(saver, thread):
    return saver.run(_rows_op(saver.dialect, thread))


def _rows_op(d, thread):
    from threadline.storage.ops import Q

    rows = yield Q("SELECT COUNT(*) FROM threadline_blobs WHERE thread_id = ? AND type LIKE '%+obj+%'", (thread,))
    return int(rows[0][0])


def _codec(tmp_path, **kw):
    return BlobCodec(offload=Offload(f"file://{tmp_path / 'objects'}", min_bytes=SMALL, **kw))


def test_cold_threads_are_listed_read_bundled_and_restored_offloaded(db_url, tmp_path):
    with open_saver(db_url, codec=_codec(tmp_path)) as s:
        _chain(s, "sleepy", n=3)
        expected = _values(s, "sleepy")
        before = read.list_threads(s, thread_ids=["sleepy"]).threads[0]
        assert tier(s, 0).threads == ["sleepy"]
        _chain(s, "busy")
        # listed, one query a page: marked cold, the stub's counts and the thread's own times
        page = read.list_threads(s, with_status=True)
        assert [t.thread_id for t in page.threads] == ["busy", "sleepy"] and page.total == 2
        cold = page.threads[1]
        assert cold.cold and cold.status is None and cold.head_checkpoint_id is None
        assert (cold.checkpoint_count, cold.updated_at, cold.created_at) == (3, before.updated_at, before.created_at)
        assert cold.bytes > 0 and not page.threads[0].cold and page.threads[0].status is not None
        assert read.list_threads(s, order_by="thread_id_desc").threads[0].thread_id == "sleepy"
        assert [t.thread_id for t in read.list_threads(s, idle_for=0, active_within=3600).threads] == ["busy", "sleepy"]
        assert [t.thread_id for t in read.list_threads(s, status="idle").threads] == ["busy"]  # its head is in its archive
        assert [(t.thread_id, t.cold) for t in read.search_threads(s, limit=10)] == [("busy", False), ("sleepy", True)]
        web = s.run(search_threads_op(s.dialect, pattern="sl"))
        assert [(t.thread_id, t.cold) for t in web.threads] == [("sleepy", True)] and web.total == 1
        assert json.loads(json.dumps(page.to_json()))["threads"][1]["cold"] is True
        # read from its archive, nothing restored
        with thread_view(s, ["sleepy"]) as view:
            assert view is not s and _values(view, "sleepy") == expected and view.cold == {"sleepy"}
        assert s.run(cold_archives_op(s.dialect, ["sleepy", "busy"])) == {"sleepy": next(iter(s.run(cold_archives_op(s.dialect, ["sleepy"])).values()))}
        # stats: in-row vs offloaded bytes and cold threads, one rule for the CLI and the browser
        summary = O.offload_summary(s, read.stats(s))
        assert summary["cold_threads"] == 1 and summary["cold_bytes"] == cold.bytes and summary["payload_bytes"] > 0
        assert summary["store"].startswith("file://") and summary["in_row_bytes"] > 0
        # a bundle takes it (from its archive); restoring into an offloading saver offloads again
        bundle(s, ["sleepy", "busy"], str(tmp_path / "bundle.db"))
        assert s.run(cold_archives_op(s.dialect, ["sleepy"]))  # still cold
    with open_saver(str(tmp_path / "plain.db"), codec=BlobCodec()) as plain:
        assert restore(plain, str(tmp_path / "bundle.db")).ok
        assert _values(plain, "sleepy") == expected and not _offloaded_rows(plain, "sleepy")
    with open_saver(str(tmp_path / "again.db"), codec=_codec(tmp_path)) as again:
        assert restore(again, str(tmp_path / "bundle.db")).ok
        assert _values(again, "sleepy") == expected and _offloaded_rows(again, "sleepy") > 0
    with open_saver(db_url, codec=_codec(tmp_path)) as s:  # a restore from the cold tier offloads again too
        assert warm(s, "sleepy") and _offloaded_rows(s, "sleepy") > 0 and _values(s, "sleepy") == expected
        assert not any(t.cold for t in read.list_threads(s).threads)


def test_ttl_expires_cold_threads_with_their_archive(db_url, tmp_path):
    codec = _codec(tmp_path, grace_seconds=0)
    with open_saver(db_url, codec=codec, ttl={"default_ttl": 60}) as s:
        _chain(s, "old")
        _chain(s, "pinned")
        _chain(s, "young")
        from threadline.lifecycle.tags import pin

        pin(s, "pinned")
        assert sorted(tier(s, 0).threads) == ["old", "pinned", "young"]
        later = time.time() + 61 * 60
        report = run_job(s, sweep_job(s.dialect, TTL(default_ttl=60), None, "test", bc=s.blob_codec, clock=lambda: later))
        assert report.threads_expired == 2 and report.checkpoints_deleted == 4 and not report.errors
        assert report.objects_deleted >= 2  # the archives, no longer named
        assert sorted(t.thread_id for t in read.list_threads(s).threads) == ["pinned"]
        assert s.get_tuple({"configurable": {"thread_id": "old"}}) is None
        assert not O.collect(s, delete=False).missing
        assert _values(s, "pinned")  # restores, its pin kept through the tier and back
        from threadline.read.tags import thread_pin_op

        assert s.run(thread_pin_op(s.dialect, "pinned")) is not None
    archives = list((tmp_path / "objects" / "v1" / "cold").glob("*"))
    assert len(archives) == 1  # the pinned thread's, until the next sweep


def test_cli_and_browser_show_cold_threads(tmp_path, monkeypatch):
    url = str(tmp_path / "db.sqlite")
    store = f"file://{tmp_path / 'objects'}?min_bytes={SMALL}"
    monkeypatch.setenv("THREADLINE_OFFLOAD", store)
    with open_saver(url) as s:
        _chain(s, "sleepy")
        assert tier(s, 0).threads == ["sleepy"]
        _chain(s, "busy")
    env = {"THREADLINE_OFFLOAD": store}
    listed = json.loads(cli("threads", "--db", url, "--json", env=env).stdout)["threads"]
    assert [(t["thread_id"], t["cold"]) for t in listed] == [("busy", False), ("sleepy", True)]
    table = cli("threads", "--db", url, env=env, columns=160).stdout
    assert "cold" in next(line for line in table.splitlines() if "sleepy" in line)
    shown = cli("history", "sleepy", "--db", url, env=env)
    assert shown.returncode == 0 and "is cold" in shown.stderr and "tier --restore sleepy" in shown.stderr
    assert json.loads(cli("history", "sleepy", "--db", url, "--json", env=env).stdout)["head"]
    stats = json.loads(cli("stats", "--db", url, "--json", env=env).stdout)["offloaded"]
    assert stats["cold_threads"] == 1 and stats["payload_bytes"] > 0
    lost = cli("history", "sleepy", "--db", url)  # no store to read the archive from: one line
    assert lost.returncode != 0 and "tier --restore sleepy" in lost.stderr and len(lost.stderr.strip().splitlines()) == 1
    with wh.client(UIConfig(db=url, read_only=True)) as c:
        rows = c.get("/rows").text
        assert "badge cold" in rows and "sleepy" in rows
        page = c.get("/thread", params={"thread_id": "sleepy"})
        assert page.status_code == 200 and "badge cold" in page.text and "tier --restore sleepy" in page.text
        stats_page = c.get("/stats").text
        assert 'id="offloaded"' in stats_page and "cold threads" in stats_page
    with open_saver(url) as s:
        assert s.run(cold_archives_op(s.dialect, ["sleepy"]))  # browsing restored nothing


def _sql(d, statement):
    from threadline.storage.ops import Q

    yield Q(statement)


def test_migration_13_keeps_the_stubs_of_a_version_12_database_and_applies_again(db_url, tmp_path):
    import sqlite3

    with open_saver(db_url, codec=_codec(tmp_path)) as s:
        _chain(s, "sleepy")
        expected = _values(s, "sleepy")
        assert tier(s, 0).threads == ["sleepy"]
        s.run(_sql(s.dialect, "DELETE FROM threadline_migrations WHERE v = 13"), write=True)  # applied again below
    if not db_url.startswith("postgres"):
        conn = sqlite3.connect(db_url)  # back to migration 12's stub table
        conn.executescript(
            "CREATE TABLE old AS SELECT thread_id, object, checkpoints, bytes, tiered_at FROM threadline_cold; DROP TABLE threadline_cold; "
            "CREATE TABLE threadline_cold (thread_id TEXT NOT NULL PRIMARY KEY, object TEXT NOT NULL, checkpoints INTEGER NOT NULL "
            "DEFAULT 0, bytes INTEGER NOT NULL DEFAULT 0, tiered_at REAL NOT NULL); INSERT INTO threadline_cold SELECT * FROM old; "
            "DROP TABLE old;")
        conn.close()
    for _ in range(2):
        with open_saver(db_url, codec=_codec(tmp_path)) as s:
            (cold,) = read.list_threads(s).threads
            assert cold.cold and cold.checkpoint_count == 2
            s.run(_sql(s.dialect, "DELETE FROM threadline_migrations WHERE v = 13"), write=True)
    with open_saver(db_url, codec=_codec(tmp_path)) as s:
        assert _values(s, "sleepy") == expected
