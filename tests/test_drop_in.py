"""Drop-in reproductions: what a user switching from the official savers hit, and the door.

Each test is one reported problem (its number in the drop-in report), on real
databases: an application table named like threadline's old ones, checkpoints of
LangGraph < v4 with their sends kept as the parent's TASKS writes, and the errors
at the door (a file that is not a database, a read-only file, an unreachable or
wrongly authenticated Postgres, a schema of a newer release) — one threadline error
each, never a driver traceback, nothing written. The API surface and round-trip
fidelity against the official classes are in test_drop_in_api.py,
test_drop_in_idioms.py and test_side_by_side.py.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Annotated, TypedDict

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import TASKS
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Send

from backends import Backend
from threadline import BackendError, CorruptRowError, SqliteSaver, lifecycle
from threadline.errors import SchemaError


# --- 3. tables that collide -------------------------------------------------------------


def test_an_application_migrations_table_does_not_collide(sync_backend: Backend) -> None:
    """An app's own ``migrations`` and ``checkpoints`` tables stay as they are; threadline uses threadline_*."""
    sync_backend.sql("CREATE TABLE migrations (id INTEGER PRIMARY KEY, name TEXT)")
    sync_backend.sql("INSERT INTO migrations (id, name) VALUES (1, 'app-0001')")
    sync_backend.sql("CREATE TABLE checkpoints (id INTEGER PRIMARY KEY, label TEXT)")
    with sync_backend.open() as saver:
        cp = empty_checkpoint()
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {})
        assert saver.get_tuple({"configurable": {"thread_id": "t"}}).checkpoint["id"] == cp["id"]
    assert sync_backend.sql("SELECT id, name FROM migrations") == [(1, "app-0001")]
    assert sync_backend.sql("SELECT COUNT(*) FROM checkpoints") == [(0,)]


# --- 9. checkpoints of LangGraph < v4 --------------------------------------------------


def _v3_thread(saver) -> tuple[dict, dict]:
    """A parent checkpoint with Send packets as TASKS writes, and a v3 child without pending_sends."""
    parent = empty_checkpoint()
    parent["v"] = 3
    parent["channel_values"] = {"x": "a"}
    parent["channel_versions"] = {"x": saver.get_next_version(None, None)}
    parent.pop("pending_sends", None)
    pconf = saver.put({"configurable": {"thread_id": "old", "checkpoint_ns": ""}}, parent, {"step": 0}, dict(parent["channel_versions"]))
    saver.put_writes(pconf, [(TASKS, Send("node", {"n": 1})), (TASKS, Send("node", {"n": 2}))], "task-1", "~0")
    child = empty_checkpoint()
    child["id"] = str(uuid6(clock_seq=-1))
    child["v"] = 3
    child["channel_values"] = {"x": "b"}
    child["channel_versions"] = {"x": saver.get_next_version(parent["channel_versions"]["x"], None)}
    child.pop("pending_sends", None)
    cconf = saver.put(pconf, child, {"step": 1}, dict(child["channel_versions"]))
    return pconf, cconf


def _official_twin(backend: Backend):
    """The official saver of the backend's kind on a fresh database of its own."""
    from contextlib import contextmanager

    @contextmanager
    def opened():
        if not backend.is_postgres:
            from langgraph.checkpoint.sqlite import SqliteSaver as Official

            with Official.from_conn_string(backend.url + ".official") as official:
                yield official
            return
        from langgraph.checkpoint.postgres import PostgresSaver as Official

        from backends import pg_schemas

        with pg_schemas().fresh() as url, Official.from_conn_string(url) as official:
            official.setup()
            yield official

    return opened()



# --- a thread deleted by another process while a run goes on --------------------------------


class _Notes(TypedDict):
    messages: Annotated[list, add_messages]
    notes: dict


def _deleting_graph(checkpointer, delete):
    """Three steps on two channels; the second step deletes the thread (``delete()``, another
    process's saver) before the graph writes its checkpoint. ``notes`` is written once, first
    (a dict: the official PostgresSaver keeps a str inline in the checkpoint, a dict as a blob)."""

    def first(state: _Notes) -> dict:
        return {"messages": [AIMessage("one " * 100, id="1")], "notes": {"kept": True}}

    def second(state: _Notes) -> dict:
        delete()
        return {"messages": [AIMessage("two " * 100, id="2")]}

    def third(state: _Notes) -> dict:
        return {"messages": [AIMessage("three " * 100, id="3")]}

    g = StateGraph(_Notes)
    for node in (first, second, third):
        g.add_node(node.__name__, node)
    g.add_edge(START, "first")
    g.add_edge("first", "second")
    g.add_edge("second", "third")
    g.add_edge("third", END)
    return g.compile(checkpointer=checkpointer)


def _listed(saver) -> list:
    """(step, channels, messages) of each stored checkpoint of thread ``t``, newest first."""
    return [
        (t.metadata["step"], sorted(t.checkpoint["channel_values"]), len(t.checkpoint["channel_values"].get("messages", [])))
        for t in saver.list({"configurable": {"thread_id": "t"}})
    ]


def _after_deletion(graph, saver) -> tuple[dict, list]:
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": []}, config, durability="sync")
    return graph.get_state(config).values, _listed(saver)


def _delete_after_step_1(saver) -> None:
    """Delete thread ``t`` once its checkpoint of step 1 is stored (LangGraph may still be
    writing it while the next step runs)."""
    import time

    def head_step():
        head = saver.get_tuple({"configurable": {"thread_id": "t"}})
        return head.metadata.get("step") if head is not None else None

    deadline = time.monotonic() + 10
    while head_step() != 1:
        assert time.monotonic() < deadline, "step 1 was never stored"
        time.sleep(0.01)
    saver.delete_thread("t")


def test_a_run_goes_on_after_another_process_deletes_its_thread(sync_backend: Backend) -> None:
    """A saver that cached a checkpoint another process then deleted (``delete_thread``, the TTL
    sweeper) builds the run's next checkpoints on it. They read back as the official PostgresSaver
    returns its own: without the channels whose values went with the deleted checkpoints (here
    ``notes``), every channel written since intact — never a CorruptRowError."""
    from langgraph.checkpoint.postgres import PostgresSaver as Official

    from backends import pg_schemas

    with sync_backend.open() as saver, sync_backend.open() as other:
        ours = _after_deletion(_deleting_graph(saver, lambda: _delete_after_step_1(other)), saver)
    with pg_schemas().fresh() as url, Official.from_conn_string(url) as official:
        official.setup()
        theirs = _after_deletion(_deleting_graph(official, lambda: _delete_after_step_1(official)), official)
    assert ours == theirs
    values, listed = ours
    assert "notes" not in values and [m.id for m in values["messages"]] == ["1", "2", "3"]
    assert listed == [(3, ["messages"], 3), (2, ["branch:to:third", "messages"], 2)]
    with sync_backend.open() as fresh:  # another process, nothing cached, reads the same
        assert _listed(fresh) == listed


def test_pre_v4_pending_sends_read_back_as_the_official_saver_returns_them(sync_backend: Backend) -> None:
    """The official PostgresSaver hands a v3 checkpoint its parent's TASKS writes as the TASKS
    channel; the official SqliteSaver returns the checkpoint as stored. threadline does what
    the official saver of the same backend does."""
    with sync_backend.open() as saver:
        _, cconf = _v3_thread(saver)
        got = saver.get_tuple(cconf)
        listed = [t for t in saver.list({"configurable": {"thread_id": "old"}}) if t.config == got.config][0]
    with _official_twin(sync_backend) as official:
        _, oconf = _v3_thread(official)
        theirs = official.get_tuple(oconf).checkpoint
    assert listed.checkpoint == got.checkpoint
    mine = got.checkpoint
    assert {k: v for k, v in mine.items() if k not in ("id", "ts", "channel_versions")} == {
        k: v for k, v in theirs.items() if k not in ("id", "ts", "channel_versions")
    }
    assert set(mine["channel_versions"]) == set(theirs["channel_versions"])
    if sync_backend.is_postgres:
        assert mine["channel_values"][TASKS] == [Send("node", {"n": 1}), Send("node", {"n": 2})]
        assert mine["channel_versions"][TASKS] == max(v for k, v in mine["channel_versions"].items() if k != TASKS)
    else:
        assert TASKS not in mine["channel_values"]


def _checkpoint(values: dict, versions: dict) -> dict:
    c = empty_checkpoint()
    c.update(id=str(uuid6(clock_seq=-1)), channel_values=values, channel_versions=versions)
    return c


def test_a_channel_named_at_a_version_never_stored_reads_back_without_a_value(sync_backend: Backend, request: pytest.FixtureRequest) -> None:
    """LangGraph's migration of older checkpoints renames channels and keeps their versions, so
    a resumed graph's checkpoint names versions no put stored under those names. The official
    PostgresSaver reads such a channel back without a value; so does threadline (also from a
    fresh saver, and fsck finds nothing), while a blob it inherited and lost still fails."""
    from langgraph.checkpoint.postgres import PostgresSaver as Official

    from backends import fresh_postgres_url

    # a list: a value with a blob row (a small str is kept in the checkpoint's document)
    first = _checkpoint({"rewrite_query": ["q"], "items": [1]}, {"rewrite_query": "1.1", "items": "1.1"})
    renamed = {"branch:to:analyzer": "1.1", "rewrite_query": "1.1", "items": "2.2", "answer": "2.2"}
    second = _checkpoint({"rewrite_query": ["q"], "items": [1, 2], "answer": "a"}, renamed)
    rootless = _checkpoint({"items": [9]}, {"items": "1.1", "seed": "7.7"})
    seen = []
    with Official.from_conn_string(fresh_postgres_url(request)) as official, sync_backend.open() as mine:
        official.setup()
        for saver in (official, mine):
            c1 = saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, first, {}, first["channel_versions"])
            c2 = saver.put(c1, second, {}, {"items": "2.2", "answer": "2.2"})
            c3 = saver.put({"configurable": {"thread_id": "u", "checkpoint_ns": ""}}, rootless, {}, {})
            seen.append([saver.get_tuple(c).checkpoint for c in (c2, c3)])
    assert seen[1] == seen[0]
    assert seen[1][0]["channel_values"] == {"rewrite_query": ["q"], "items": [1, 2], "answer": "a"}
    assert seen[1][1]["channel_values"] == {}
    with sync_backend.open() as fresh:
        assert fresh.get_tuple(c2).checkpoint == seen[0][0]
        assert not [f for f in lifecycle.fsck(fresh).findings if f.kind == "dangling_blob"]
        sync_backend.sql("DELETE FROM threadline_blobs WHERE channel = 'rewrite_query'")
        with pytest.raises(CorruptRowError, match="rewrite_query"):
            fresh.get_tuple(c2)
        assert [f.checkpoint_id for f in lifecycle.fsck(fresh).findings if f.kind == "dangling_blob"] == [first["id"], second["id"]]


# --- durability: a commit waits for the disk, as with the official classes -------------------


def _durability(conn: sqlite3.Connection) -> tuple:
    return tuple(conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("journal_mode", "synchronous"))


def test_sqlite_connections_are_as_durable_as_the_official_ones(tmp_path: Path) -> None:
    """``from_conn_string`` (saver, store) and ``SqliteCache(path=)`` open WAL connections with the
    official classes' ``synchronous`` (SQLite's default, FULL): a returned put is on disk."""
    from langgraph.cache.sqlite import SqliteCache as OfficialCache
    from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSaver
    from langgraph.store.sqlite import SqliteStore as OfficialStore

    from threadline import SqliteStore
    from threadline.cache import SqliteCache

    with OfficialSaver.from_conn_string(str(tmp_path / "o.db")) as off, SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as mine:
        off.setup()
        assert _durability(mine.conn) == _durability(off.conn) == ("wal", 2)
    with OfficialStore.from_conn_string(str(tmp_path / "os.db")) as off, SqliteStore.from_conn_string(str(tmp_path / "ts.db")) as mine:
        off.setup()
        assert _durability(mine.conn)[1] == _durability(off.conn)[1] == 2
    off_cache, my_cache = OfficialCache(path=str(tmp_path / "oc.db")), SqliteCache(path=str(tmp_path / "tc.db"))
    assert _durability(my_cache.conn) == _durability(off_cache._conn) == ("wal", 2)


# --- 6. errors at the door ----------------------------------------------------------


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.db"
    bogus.write_bytes(b"these are my notes, not a database" * 100)
    before = bogus.read_bytes()
    with pytest.raises(BackendError, match="not a SQLite database"):
        with SqliteSaver.from_conn_string(str(bogus)):
            pass
    assert bogus.read_bytes() == before


def test_a_read_only_file_and_an_unopenable_path(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root ignores file modes; SQLite's read-only URI mode is the same situation
        conn = sqlite3.connect(f"file:{tmp_path / 'ro.db'}?mode=rwc", uri=True)
        conn.execute("CREATE TABLE app (x)")
        conn.close()
        ro = sqlite3.connect(f"file:{tmp_path / 'ro.db'}?mode=ro", uri=True, check_same_thread=False)
        with pytest.raises(BackendError, match="read-only"):
            SqliteSaver(ro).setup()
        ro.close()
    else:
        path = tmp_path / "ro.db"
        sqlite3.connect(path).close()
        path.chmod(stat.S_IRUSR)
        with pytest.raises(BackendError, match="read-only"):
            with SqliteSaver.from_conn_string(str(path)):
                pass
    with pytest.raises(BackendError, match="cannot open"):
        with SqliteSaver.from_conn_string(str(tmp_path / "no" / "such" / "dir" / "x.db")):
            pass


async def test_a_schema_of_a_newer_release_is_refused_untouched(backend: Backend) -> None:
    with backend.open(is_async=False):
        pass
    backend.sql("INSERT INTO threadline_migrations (v, applied_at) VALUES (99, 0)")
    before = backend.snapshot()
    with pytest.raises(SchemaError, match="newer threadline"):
        if backend.is_async:
            async with backend.open():
                pass
        else:
            with backend.open():
                pass
    assert backend.snapshot() == before


def test_unreachable_and_wrongly_authenticated_postgres() -> None:
    from threadline import PostgresSaver

    with pytest.raises(BackendError, match="cannot connect") as info:
        with PostgresSaver.from_conn_string("postgresql://nobody:secret@127.0.0.1:1/x"):
            pass
    assert "secret" not in str(info.value)
    from backends import pg_dsn, postgres_unavailable

    if postgres_unavailable() is None:
        with pytest.raises(BackendError, match="cannot connect"):
            with PostgresSaver.from_conn_string(pg_dsn().replace("postgres@", "no_such_role@")):
                pass


def _cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / "threadline"), *args],
        cwd=cwd, capture_output=True, text=True, env={**os.environ, "THREADLINE_DB": "", **(env or {})}, timeout=120,
    )


def test_cli_import_needs_a_named_target_and_a_real_source(tmp_path: Path) -> None:
    r = _cli("import", "official.db", cwd=tmp_path)
    assert r.returncode == 2 and "--db" in r.stderr and "Traceback" not in r.stderr + r.stdout
    r = _cli("import", "missing.db", "--db", "target.db", cwd=tmp_path)
    assert r.returncode == 2 and "does not exist" in r.stderr
    assert not (tmp_path / "target.db").exists()
    assert not (tmp_path / "threadline-demo.db").exists()
    bogus = tmp_path / "bogus.db"
    bogus.write_text("not sqlite" * 50)
    r = _cli("import", str(bogus), "--db", "target.db", cwd=tmp_path)
    assert r.returncode == 2 and "not a SQLite database" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "target.db").exists()
