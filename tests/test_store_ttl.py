"""Store TTL on every backend: default and per-item lifetimes, refresh on read, omit_expired,
sweep_ttl, the sweeper, and many processes sweeping one database at once.

Time is a fake clock (the store reads ``time.time()`` through ``threadline.store.base``), so
nothing here waits for a TTL to pass."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
from langgraph.store.base import PutOp

from store_fixtures import StoreDb, call, db, sync_db  # noqa: F401
from threadline.store import base


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(base, "time", c)
    return c


async def open_store(db: StoreDb, ttl: dict[str, Any] | None):
    cm = db.open(ttl=ttl)
    s = await cm.__aenter__() if db.is_async else cm.__enter__()
    return cm, s


async def close_store(db: StoreDb, cm: Any) -> None:
    if db.is_async:
        await cm.__aexit__(None, None, None)
    else:
        cm.__exit__(None, None, None)


async def sweep(s: Any) -> int:
    return await s.sweep_ttl() if hasattr(s, "_aqueue") else s.sweep_ttl()


@pytest.fixture
async def ttl_store(db: StoreDb, clock: Clock, request: pytest.FixtureRequest):
    config = dict(getattr(request, "param", {"default_ttl": 1.0}))  # a copy: tests change it
    cm, s = await open_store(db, config)
    yield s
    await close_store(db, cm)


async def test_default_and_per_item_ttl(ttl_store: Any, clock: Clock) -> None:
    await call(ttl_store, "put", ("t",), "default", {"v": 1})
    await call(ttl_store, "put", ("t",), "short", {"v": 2}, ttl=0.5)
    await call(ttl_store, "put", ("t",), "forever", {"v": 3}, ttl=None)
    clock.advance(45)
    assert await sweep(ttl_store) == 1
    clock.advance(20)
    assert await sweep(ttl_store) == 1
    assert [i.key for i in await call(ttl_store, "search", ("t",), refresh_ttl=False)] == ["forever"]
    assert await sweep(ttl_store) == 0


async def test_reads_restart_the_ttl(ttl_store: Any, clock: Clock) -> None:
    for key in ("got", "found", "untouched"):
        await call(ttl_store, "put", ("r",), key, {"key": key})
    clock.advance(50)
    assert await call(ttl_store, "get", ("r",), "got") is not None  # refresh_on_read defaults to True
    assert len(await call(ttl_store, "search", ("r",), filter={"key": "found"})) == 1
    assert await call(ttl_store, "get", ("r",), "untouched", refresh_ttl=False) is not None
    clock.advance(20)
    assert await sweep(ttl_store) == 1
    assert {i.key for i in await call(ttl_store, "search", ("r",), refresh_ttl=False)} == {"got", "found"}


@pytest.mark.parametrize("ttl_store", [{"default_ttl": 1.0, "refresh_on_read": False}], indirect=True)
async def test_refresh_on_read_false(ttl_store: Any, clock: Clock) -> None:
    await call(ttl_store, "put", ("r",), "k", {"v": 1})
    clock.advance(50)
    assert await call(ttl_store, "get", ("r",), "k") is not None
    clock.advance(20)
    assert await sweep(ttl_store) == 1


@pytest.mark.parametrize("ttl_store", [{"default_ttl": 1.0, "omit_expired": True}], indirect=True)
async def test_omit_expired_hides_unswept_items(ttl_store: Any, clock: Clock) -> None:
    await call(ttl_store, "put", ("o", "gone"), "k", {"v": 1})
    await call(ttl_store, "put", ("o", "kept"), "k", {"v": 2}, ttl=None)
    clock.advance(61)
    assert await call(ttl_store, "get", ("o", "gone"), "k") is None
    assert [i.namespace for i in await call(ttl_store, "search", ("o",))] == [("o", "kept")]
    assert await call(ttl_store, "list_namespaces", prefix=("o",)) == [("o", "kept")]
    ttl_store.ttl_config["omit_expired"] = False  # read per operation, as the official stores
    assert await call(ttl_store, "get", ("o", "gone"), "k", refresh_ttl=False) is not None


async def test_sweeper_runs_until_stopped(db: StoreDb, clock: Clock) -> None:
    cm, s = await open_store(db, {"default_ttl": 1.0, "sweep_interval_minutes": 0.001})
    try:
        await call(s, "put", ("s",), "k", {"v": 1})
        clock.advance(61)
        runner = await s.start_ttl_sweeper() if db.is_async else s.start_ttl_sweeper()
        deadline = time.monotonic() + 30
        while await call(s, "get", ("s",), "k", refresh_ttl=False) is not None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert await call(s, "get", ("s",), "k", refresh_ttl=False) is None
        assert (await s.stop_ttl_sweeper(timeout=10)) if db.is_async else s.stop_ttl_sweeper(timeout=10)
        assert runner.done()
    finally:
        await close_store(db, cm)


async def test_no_ttl_config_means_no_sweeper(db: StoreDb) -> None:
    cm, s = await open_store(db, None)
    try:
        runner = await s.start_ttl_sweeper() if db.is_async else s.start_ttl_sweeper()
        if db.is_async:
            await runner
        assert runner.done()
    finally:
        await close_store(db, cm)


SWEEPER = textwrap.dedent(
    """
    import sys, threadline
    with threadline.open_store(sys.argv[1]) as store:
        sys.stdin.readline()  # start together
        print(store.sweep_ttl())
    """
)


def test_many_processes_sweep_one_database(sync_db: StoreDb) -> None:
    """Four processes sweep 3500 expired items at once: each item is deleted by exactly one,
    none fails, and live items stay."""
    with sync_db.open() as s:
        ops = [PutOp(("p", str(i % 7)), f"e{i}", {"i": i}, ttl=-1.0) for i in range(3500)]
        ops += [PutOp(("p", "live"), f"l{i}", {"i": i}, ttl=60.0) for i in range(300)]
        s.batch(ops)
    procs = [
        subprocess.Popen([sys.executable, "-c", SWEEPER, sync_db.url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outputs = [p.communicate("go\n", timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [err for _, err in outputs]
    assert sum(int(out) for out, _ in outputs) == 3500
    assert sync_db.sql("SELECT count(*) FROM threadline_store") == [(300,)]
