"""``open_saver`` / ``aopen_saver``: the three URL forms and clear errors for bad ones."""

from __future__ import annotations

import pytest
from conftest import make_backend, require_postgres
from workers import build_chat, expected_state, user_message

from threadline import AsyncPostgresSaver, AsyncSqliteSaver, BackendError, PostgresSaver, SqliteSaver, aopen_saver, open_saver


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


def test_postgres_url(request, tmp_path):
    require_postgres()
    backend = make_backend("postgres", tmp_path, request)
    with open_saver(backend.target) as saver:
        assert isinstance(saver, PostgresSaver)
        assert _turn(saver, "pg") == expected_state("pg", 1)


async def test_async_variants(request, tmp_path):
    async with aopen_saver(str(tmp_path / "a.db")) as saver:
        assert isinstance(saver, AsyncSqliteSaver)
    require_postgres()
    backend = make_backend("postgres-async", tmp_path, request)
    async with aopen_saver(backend.target) as saver:
        assert isinstance(saver, AsyncPostgresSaver)
        graph = build_chat().compile(checkpointer=saver)
        await graph.ainvoke({"messages": ["hi"]}, {"configurable": {"thread_id": "x"}})
        assert (await graph.aget_state({"configurable": {"thread_id": "x"}})).values["turns"] == 1


@pytest.mark.parametrize("url", ["mysql://root@localhost/db", "redis://127.0.0.1:6379", "s3://bucket/key"])
def test_unknown_scheme_is_named(url):
    with pytest.raises(BackendError, match="unknown database URL scheme"):
        with open_saver(url):
            pass


def test_unreachable_postgres_is_named():
    with pytest.raises(BackendError, match=r"cannot connect to Postgres at postgresql://\*\*\*@127\.0\.0\.1:1/test"):
        with open_saver("postgresql://user:secret@127.0.0.1:1/test"):
            pass


async def test_unreachable_postgres_async():
    with pytest.raises(BackendError, match="127.0.0.1:1"):
        async with aopen_saver("postgresql://postgres@127.0.0.1:1/test"):
            pass
