"""``open_saver`` / ``aopen_saver`` and the backend registry: the URL forms and clear errors for bad ones."""

from __future__ import annotations

import pytest
from backends import fresh_postgres_url
from workers import build_chat, expected_state, user_message

from threadline import AsyncPostgresSaver, AsyncSqliteSaver, BackendError, PostgresSaver, SqliteSaver, aopen_saver, open_saver
from threadline.backends import REGISTRY, backend_of
from threadline.saver import AsyncShell, SyncShell


def _turn(saver, tid: str) -> dict:
    graph = build_chat().compile(checkpointer=saver)
    graph.invoke({"messages": [user_message(tid, 0)]}, {"configurable": {"thread_id": tid}})
    return graph.get_state({"configurable": {"thread_id": tid}}).values


def test_plain_path_and_sqlite_url_open_the_same_file(tmp_path):
    path = tmp_path / "db.sqlite"
    with open_saver(str(path)) as saver:
        assert isinstance(saver, SqliteSaver)
        _turn(saver, "t")
    with open_saver(f"sqlite:///{path}") as saver:
        assert isinstance(saver, SqliteSaver)
        graph = build_chat().compile(checkpointer=saver)
        assert graph.get_state({"configurable": {"thread_id": "t"}}).values == expected_state("t", 1)


def test_postgres_url(pg_url):
    with open_saver(pg_url) as saver:
        assert isinstance(saver, PostgresSaver)
        assert _turn(saver, "pg") == expected_state("pg", 1)


async def test_async_variants(request, tmp_path):
    async with aopen_saver(str(tmp_path / "a.db")) as saver:
        assert isinstance(saver, AsyncSqliteSaver)
    async with aopen_saver(fresh_postgres_url(request)) as saver:
        assert isinstance(saver, AsyncPostgresSaver)
        graph = build_chat().compile(checkpointer=saver)
        await graph.ainvoke({"messages": ["hi"]}, {"configurable": {"thread_id": "x"}})
        assert (await graph.aget_state({"configurable": {"thread_id": "x"}})).values["turns"] == 1


@pytest.mark.parametrize("url", ["mysql://root@localhost/db", "valkey://127.0.0.1:6379", "s3://bucket/key"])
def test_unknown_scheme_is_named(url):
    with pytest.raises(BackendError, match=r"unknown database URL scheme .*; use a path, sqlite:///path, postgresql:// or redis://"):
        with open_saver(url):
            pass


@pytest.mark.parametrize(
    "url, name",
    [
        ("checkpoints.db", "sqlite"),
        (":memory:", "sqlite"),
        ("/abs/dir/x.db", "sqlite"),
        ("sqlite:///rel.db", "sqlite"),
        ("SQLite:////abs.db", "sqlite"),
        ("postgresql://u@h:5432/db", "postgres"),
        ("postgres://u@h/db", "postgres"),
        ("postgresql+psycopg://u@h/db", "postgres"),
        ("redis://h:6379/0", "redis"),
        ("rediss://u:p@h:6380/0?prefix=app", "redis"),
        ("redis+cluster://h1:7000,h2:7001", "redis"),
    ],
)
def test_backend_of_names_the_backend_of_each_url_form(url, name):
    assert backend_of(url) == name


@pytest.mark.parametrize("url", ["", None, 42])
def test_a_missing_url_is_named(url):
    with pytest.raises(BackendError, match="database URL must be a non-empty string"):
        backend_of(url)


@pytest.mark.parametrize("entry", REGISTRY, ids=lambda e: e.name)
def test_every_registered_part_resolves(entry):
    """A registry entry names real classes: sync and async savers, stores and a cache
    with the official ``from_conn_string``, and the read-only opener."""
    from langgraph.cache.base import BaseCache
    from langgraph.store.base import BaseStore

    saver, async_saver = entry.get("saver"), entry.get("async_saver")
    assert issubclass(saver, SyncShell) and issubclass(async_saver, AsyncShell)
    # one dialect for both (SQL: a class attribute; Redis: one per saver, for its key prefix)
    assert getattr(saver, "dialect", None) is getattr(async_saver, "dialect", None)
    assert callable(entry.get("read_only"))
    for role in ("store", "async_store"):
        assert issubclass(entry.get(role), BaseStore) and callable(entry.get(role).from_conn_string)
    assert issubclass(entry.get("cache"), BaseCache) and callable(entry.get("cache").from_conn_string)
    assert backend_of(entry.example) == entry.name
    with pytest.raises(BackendError, match=f"the {entry.name} backend has no warehouse"):
        entry.get("warehouse")


def test_unreachable_postgres_is_named():
    with pytest.raises(BackendError, match=r"cannot connect to Postgres at postgresql://\*\*\*@127\.0\.0\.1:1/test"):
        with open_saver("postgresql://user:secret@127.0.0.1:1/test"):
            pass


async def test_unreachable_postgres_async():
    with pytest.raises(BackendError, match="127.0.0.1:1"):
        async with aopen_saver("postgresql://postgres@127.0.0.1:1/test"):
            pass


def test_sqlite_and_postgres_users_never_import_redis():
    """redis-py loads on first use of a Redis class only: a cold start of the other backends does not pay for it."""
    import subprocess
    import sys

    code = "import sys, threadline, threadline.store, threadline.cache, threadline.cli; assert 'redis' not in sys.modules, sorted(m for m in sys.modules if 'redis' in m)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_sqlite_program_imports_no_other_driver():
    """A cold start with the SQLite saver, store and a read loads neither psycopg nor redis-py."""
    import subprocess
    import sys

    code = (
        "import sys, tempfile, os; from threadline import SqliteSaver, SqliteStore\n"
        "d = tempfile.mkdtemp()\n"
        "with SqliteSaver.from_conn_string(os.path.join(d, 'a.db')) as s: s.get_tuple({'configurable': {'thread_id': 't'}})\n"
        "with SqliteStore.from_conn_string(os.path.join(d, 'b.db')) as st: st.setup(); st.put(('a',), 'k', {'v': 1})\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_pool', 'redis'))\n"
        "assert not loaded, loaded"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
