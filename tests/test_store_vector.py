"""Semantic search (``index=``) with a deterministic embedding: SQLite with sqlite-vec (through
a sqlite3 that loads extensions), SQLite with the Python distance functions (this Python's
sqlite3, and any that cannot load extensions), Postgres with pgvector (a bundled server), and
the clear error on a Postgres without pgvector."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

import threadline
from store_fixtures import SCHEMAS, call, pgvector_dsn, pgvector_server, require  # noqa: F401
from backends import pg_dsn, postgres_unavailable, with_search_path
from threadline.errors import BackendError
from threadline.store import drivers

ALPHABET = "abcdefghijklmnopqrstuvwxyz"


class LetterEmbeddings(Embeddings):
    """Letter counts (26 dims, +1 so no vector is all zeros): similar spellings, similar vectors."""

    dims = len(ALPHABET) + 1

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [float(text.lower().count(c)) for c in ALPHABET] + [1.0]


def expected(distance: str, a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    if distance == "cosine":
        return dot / (math.hypot(*a) * math.hypot(*b))
    if distance == "l2":
        return -math.dist(a, b)
    return dot


def index(distance: str = "cosine", vector_type: str = "vector", **extra: Any) -> dict[str, Any]:
    return {
        "dims": LetterEmbeddings.dims,
        "embed": LetterEmbeddings(),
        "distance_type": distance,
        "ann_index_config": {"vector_type": vector_type},
        **extra,
    }


KINDS = ("sqlite-vec", "sqlite-python", "sqlite-async", "pgvector", "pgvector-async")


@pytest.fixture(params=KINDS)
def opener(request: pytest.FixtureRequest, tmp_path, monkeypatch: pytest.MonkeyPatch):
    """``opener(**index)``: an async context manager giving a store of this kind on one database."""
    kind = request.param
    if kind == "sqlite-python":  # as on a Python whose sqlite3 cannot load sqlite-vec
        monkeypatch.setattr(drivers, "_sqlite_vec_path", lambda: None)
    path = str(tmp_path / "vectors.db")
    dsn = request.getfixturevalue("pgvector_dsn") if kind.startswith("pgvector") else None

    @asynccontextmanager
    async def open_(**config: Any) -> AsyncIterator[Any]:
        if kind == "sqlite-vec":
            dbapi = pytest.importorskip("pysqlite3.dbapi2")
            conn = dbapi.connect(path, check_same_thread=False, isolation_level=None)
            try:
                store = threadline.SqliteStore(conn, index=config)
                assert conn.execute("SELECT vec_version()").fetchone()[0].startswith("v")  # sqlite-vec is loaded
                yield store
            finally:
                conn.close()
        elif kind == "sqlite-python":
            with threadline.SqliteStore.from_conn_string(path, index=config) as store:
                yield store
        elif kind == "sqlite-async":
            async with threadline.AsyncSqliteStore.from_conn_string(path, index=config) as store:
                yield store
        elif kind == "pgvector":
            with threadline.PostgresStore.from_conn_string(dsn, index=config) as store:
                yield store
        else:
            async with threadline.AsyncPostgresStore.from_conn_string(dsn, index=config) as store:
                yield store

    open_.kind = kind
    return open_


DOCS = {
    "apple": {"text": "apple pie", "color": "red", "n": 1},
    "apricot": {"text": "apricot jam", "color": "orange", "n": 2},
    "banana": {"text": "banana bread", "color": "yellow", "n": 3},
    "zebra": {"text": "zebra crossing", "color": "black", "n": 4},
}


@pytest.mark.parametrize("vector_type", ["vector", "halfvec"])
@pytest.mark.parametrize("distance", ["cosine", "l2", "inner_product"])
async def test_scores_are_the_exact_similarity(opener: Any, distance: str, vector_type: str) -> None:
    if vector_type == "halfvec" and not opener.kind.startswith("pgvector"):
        pytest.skip("halfvec is pgvector's; SQLite stores float32")
    async with opener(**index(distance, vector_type, fields=["text"])) as store:
        for key, value in DOCS.items():
            await call(store, "put", ("fruit", key[0]), key, value)
        results = await call(store, "search", ("fruit",), query="apple tart", limit=10)
    e = LetterEmbeddings()
    want = {k: expected(distance, e.embed_query("apple tart"), e.embed_query(v["text"])) for k, v in DOCS.items()}
    tolerance = 0.05 if vector_type == "halfvec" else 1e-3
    assert [r.key for r in results] == sorted(want, key=lambda k: -want[k])
    for r in results:
        assert r.score == pytest.approx(want[r.key], rel=tolerance, abs=tolerance)


async def test_fields_filters_and_pages(opener: Any) -> None:
    async with opener(**index(fields=["title", "body"])) as store:
        await call(store, "put", ("docs",), "d1", {"title": "zebra", "body": "apple", "kind": "a"})
        await call(store, "put", ("docs",), "d2", {"title": "banana", "body": "bread", "kind": "b"})
        await call(store, "put", ("docs", "sub"), "d3", {"title": "apple", "kind": "a"})
        await call(store, "put", ("docs",), "d4", {"title": "apple", "kind": "a"}, index=False)
        await call(store, "put", ("docs",), "d5", {"title": "zzz", "other": "apple"}, index=["other"])
        top = await call(store, "search", ("docs",), query="apple", limit=10)
        assert {r.key for r in top} == {"d1", "d2", "d3", "d5"}  # d4 has no vectors
        assert {r.key for r in top[:3]} == {"d1", "d3", "d5"} and top[0].score == pytest.approx(1.0, abs=1e-3)
        assert [r.key for r in await call(store, "search", ("docs",), query="apple", filter={"kind": "b"})] == ["d2"]
        assert [r.key for r in await call(store, "search", ("docs", "sub"), query="apple")] == ["d3"]
        paged = [r.key for o in (0, 2) for r in await call(store, "search", ("docs",), query="apple", limit=2, offset=o)]
        assert paged == [r.key for r in top]
        assert "d4" in {r.key for r in await call(store, "search", ("docs",), limit=10)}  # a plain search lists it


async def test_put_replaces_and_delete_removes_vectors(opener: Any) -> None:
    async with opener(**index(fields=["text"])) as store:
        await call(store, "put", ("n",), "k", {"text": "zebra"})
        await call(store, "put", ("n",), "other", {"text": "apple"})
        assert (await call(store, "search", ("n",), query="zebra"))[0].key == "k"
        await call(store, "put", ("n",), "k", {"text": "apple"})
        assert all(r.score == pytest.approx(1.0, abs=1e-3) for r in await call(store, "search", ("n",), query="apple"))
        await call(store, "put", ("n",), "k", {"text": "zebra"}, index=False)
        assert [r.key for r in await call(store, "search", ("n",), query="zebra")] == ["other"]
        await call(store, "delete", ("n",), "other")
        assert await call(store, "search", ("n",), query="zebra") == []


async def test_expired_items_are_swept_with_their_vectors(opener: Any) -> None:
    async with opener(**index(fields=["text"])) as store:
        await call(store, "put", ("t",), "old", {"text": "apple"}, ttl=-1)  # already expired
        await call(store, "put", ("t",), "new", {"text": "apple"})
        swept = store.sweep_ttl() if not hasattr(store, "_aqueue") else await store.sweep_ttl()
        assert swept == 1
        assert [r.key for r in await call(store, "search", ("t",), query="apple")] == ["new"]


async def test_wrong_embedding_size_stores_nothing(opener: Any) -> None:
    bad = index(fields=["text"])
    bad["embed"] = lambda texts: [[1.0, 2.0] for _ in texts]
    async with opener(**bad) as store:
        with pytest.raises(ValueError, match="dims"):
            await call(store, "put", ("x",), "k", {"text": "apple"})
        assert await call(store, "search", ("x",)) == []


async def test_reopening_with_other_dims_is_refused(opener: Any) -> None:
    async with opener(**index(fields=["text"])) as store:
        await call(store, "put", ("x",), "k", {"text": "apple"})
    other = index(fields=["text"])
    other["dims"] = 5
    other["embed"] = lambda texts: [[1.0] * 5 for _ in texts]
    async with opener(**other) as store:
        with pytest.raises(ValueError, match="dimensions"):
            await call(store, "get", ("x",), "k")


def test_postgres_without_pgvector_is_a_clear_error() -> None:
    require(postgres_unavailable())
    import psycopg

    with psycopg.connect(pg_dsn(), autocommit=True) as conn:
        has_vector = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    if has_vector:
        pytest.skip("this Postgres has pgvector")
    schema = SCHEMAS.create()
    try:
        dsn = with_search_path(pg_dsn(), schema)
        with threadline.PostgresStore.from_conn_string(dsn, index=index()) as store:
            with pytest.raises(BackendError, match="pgvector") as info:
                store.setup()
        assert "without index=" in str(info.value)
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (schema,)).fetchone()[0] == 0
        with threadline.PostgresStore.from_conn_string(dsn) as store:  # without index= it works
            store.put(("a",), "k", {"v": 1})
            assert store.get(("a",), "k").value == {"v": 1}
    finally:
        SCHEMAS.drop(schema)
