"""TTL and retention on the saver, applied by the sweeper (threadline.lifecycle.sweeper).

* a thread expires as a whole once its TTL (the saver's default or its own ``ttl_minutes``)
  has passed since its last put or, with ``refresh_on_read``, its last read;
* retention per branch never removes a head, a pending interrupt, a fork point kept
  checkpoints branch from, or DeltaChannel ancestors;
* one sweep at a time per database (the lease), and the background sweeper of a saver;
* 4 writer processes while 2 processes run sweepers: every kept checkpoint loads with the
  state LangGraph gave it, expired threads are gone entirely, sweeps never overlap.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import time
from contextlib import asynccontextmanager

import pytest
from langgraph.types import Command
from sweep_workers import sweep_until, write_and_record
from workers import build_chat, expected_state, user_message

from lifecycle_graphs import build_graph, cfg
from threadline import open_saver
from threadline import lifecycle as L
from threadline import read as H
from threadline.errors import ConfigError
from threadline.lifecycle.jobs import run_job
from threadline.storage.ops import sweep as sweep_ops

TABLES = ("checkpoints", "blobs", "writes", "threads")


def rows_of(backend, thread_id: str) -> dict[str, int]:
    return {t: backend.sql(f"SELECT COUNT(*) FROM threadline_{t} WHERE thread_id = ?", (thread_id,))[0][0] for t in TABLES}


def age(backend, thread_id: str, minutes: float) -> None:
    """Make a thread's last put (and read) ``minutes`` ago."""
    then = time.time() - minutes * 60
    backend.sql("UPDATE threadline_threads SET updated_at = ?, accessed_at = NULL WHERE thread_id = ?", (then, thread_id))


async def call(saver, name: str, *args, **kwargs):
    """The sync method on a sync saver, the a-method awaited on an async one."""
    if hasattr(saver, "loop"):
        return await getattr(saver, "a" + name)(*args, **kwargs)
    return getattr(saver, name)(*args, **kwargs)


async def chat(saver, thread_id: str, turns: int = 1, **configurable) -> None:
    graph = build_chat().compile(checkpointer=saver)
    for turn in range(turns):
        config = {"configurable": {"thread_id": thread_id, **configurable}}
        if hasattr(saver, "loop"):
            await graph.ainvoke({"messages": [user_message(thread_id, turn)]}, config)
        else:
            graph.invoke({"messages": [user_message(thread_id, turn)]}, config)


async def test_ttl_expires_whole_threads_by_default_or_own_ttl(backend):
    async with _open(backend, ttl={"default_ttl": 60, "refresh_on_read": True}) as saver:
        await chat(saver, "old", 2)
        await chat(saver, "fresh")
        await chat(saver, "forever", ttl_minutes="never")
        await chat(saver, "brief", ttl_minutes=5)
        await chat(saver, "read")
        for tid in ("old", "forever", "read"):
            age(backend, tid, 61)
        age(backend, "brief", 6)
        # a read restarts the clock (refresh_on_read)
        assert await call(saver, "get_tuple", {"configurable": {"thread_id": "read"}}) is not None
        before = {t: rows_of(backend, t) for t in ("old", "fresh", "forever", "read")}
        report = await call(saver, "sweep")
        assert report.ran and report.threads_expired == 2 and report.checkpoints_deleted == 4 * 2 + 4
        for tid in ("old", "brief"):
            assert rows_of(backend, tid) == dict.fromkeys(TABLES, 0), tid
        for tid in ("fresh", "forever", "read"):
            assert rows_of(backend, tid) == before[tid], tid
        space = report.space
        assert space.bytes_before is not None and space.bytes_after is not None
        assert backend.sql("SELECT ttl_minutes FROM threadline_threads WHERE thread_id = ?", ("forever",)) == [(-1.0,)]
        # recorded with the lease's release
        last = await call(saver, "run", sweep_ops.last_run(saver.dialect, "sweeper"))
        assert last["result"]["threads_expired"] == 2 and last["lease_until"] == 0


async def test_a_put_moves_updated_at_by_a_second_or_more_and_never_back(backend):
    """``threads.updated_at`` (the TTL clock, the listing's "updated") is the last put's time to
    within a second: a put moves it when it is a second or more newer, never back."""
    async with _open(backend) as saver:
        await chat(saver, "t")
        when = lambda: backend.sql("SELECT updated_at FROM threadline_threads WHERE thread_id = ?", ("t",))[0][0]  # noqa: E731
        start = when()
        await chat(saver, "t")
        assert when() == start or when() - start >= 1.0  # within the second the row keeps its time
        age(backend, "t", 1)  # a minute ago: the next put moves it
        before = time.time()
        await chat(saver, "t")
        assert before <= when() <= time.time()
        future = time.time() + 3600  # a clock that ran ahead elsewhere: not moved back
        backend.sql("UPDATE threadline_threads SET updated_at = ? WHERE thread_id = ?", (future, "t"))
        await chat(saver, "t")
        assert when() == future


@asynccontextmanager
async def _open(backend, **kw):
    """A saver of ``backend``'s kind (sync or async) with ``kw``."""
    if backend.is_async:
        async with backend.open(**kw) as saver:
            yield saver
    else:
        with backend.open(**kw) as saver:
            yield saver



def test_a_threads_own_ttl_is_read_as_langgraph_merges_checkpoint_metadata() -> None:
    """``ttl_minutes`` from the put's metadata, the config's metadata or ``configurable``,
    with ``get_checkpoint_metadata``'s precedence and filters, on every mix of values."""
    import itertools

    from langgraph.checkpoint.base import get_checkpoint_metadata

    from threadline.ttl import NEVER, TTL_KEY, thread_ttl_of

    def expected(value):
        if value is None:
            return None
        if value == "never":
            return NEVER
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            return ConfigError
        return float(value)

    values = [None, 5, 0, -1, 2.5, True, "never", "never\x00", "x", [1], "<absent>"]
    for own, meta, conf in itertools.product(values, repeat=3):
        metadata = {} if own == "<absent>" else {TTL_KEY: own}
        configurable = {"thread_id": "t"} if conf == "<absent>" else {"thread_id": "t", TTL_KEY: conf}
        config = {"configurable": configurable, "metadata": {} if meta == "<absent>" else {TTL_KEY: meta}}
        want = expected(get_checkpoint_metadata(config, dict(metadata)).get(TTL_KEY))
        try:
            got = thread_ttl_of(config, metadata)
        except ConfigError:
            got = ConfigError
        assert got == want, (own, meta, conf)


def test_bad_ttl_settings_are_one_clear_error(tmp_path):
    url = str(tmp_path / "t.db")
    for ttl, word in (({"default_tll": 5}, "default_tll"), ({"default_ttl": -1}, "default_ttl"), ({"refresh_on_read": "yes"}, "refresh_on_read"), (5, "mapping")):
        with pytest.raises(ConfigError, match=word):
            with open_saver(url, ttl=ttl):
                pass
    with pytest.raises(ConfigError, match="keep_last"):
        with open_saver(url, retention={"keep_last": 0}):
            pass
    with pytest.raises(ConfigError, match="keep_lats"):
        with open_saver(url, retention={"keep_lats": 3}):
            pass
    with open_saver(url, ttl={"default_ttl": 5}) as saver:
        graph = build_chat().compile(checkpointer=saver)
        for bad in (0, -3, "soon", True):
            with pytest.raises(ConfigError, match="ttl_minutes"):
                graph.invoke({"messages": ["hi"]}, {"configurable": {"thread_id": "x", "ttl_minutes": bad}})
        assert saver.get_tuple({"configurable": {"thread_id": "x"}}) is None  # nothing stored


def test_one_sweep_at_a_time_and_the_interval_between(sync_backend):
    with sync_backend.open(ttl={"default_ttl": 1}) as a, sync_backend.open(ttl={"default_ttl": 1}) as b:
        now = time.time()
        assert a.run(sweep_ops.claim(a.dialect, "sweeper", "someone", now, 300, 0), write=True)
        assert not b.sweep().ran  # the lease is held
        assert not a.run(sweep_ops.claim(a.dialect, "sweeper", "other", now, 300, 0), write=True)
        a.run(sweep_ops.finish(a.dialect, "sweeper", "someone", time.time(), {}), write=True)
        assert b.sweep().ran
        # a background sweeper skips a run when one finished within its interval
        assert not run_job(b, b.sweep_job(min_gap=60)).ran
        assert run_job(b, b.sweep_job(min_gap=0)).ran


def test_background_sweeper_of_from_conn_string(tmp_path):
    url = str(tmp_path / "bg.db")
    with open_saver(url, ttl={"default_ttl": 0.001, "refresh_on_read": False, "sweep_interval_minutes": 0.002}) as saver:
        graph = build_chat().compile(checkpointer=saver)
        graph.invoke({"messages": ["hi"]}, {"configurable": {"thread_id": "gone"}})
        sweeper = saver._sweeper
        assert sweeper is not None
        deadline = time.time() + 30
        while saver.get_tuple({"configurable": {"thread_id": "gone"}}) is not None and time.time() < deadline:
            time.sleep(0.05)
        assert saver.get_tuple({"configurable": {"thread_id": "gone"}}) is None
    assert saver._sweeper is None and not sweeper.thread.is_alive()  # stopped with the block
    assert any(r.threads_expired for r in sweeper.reports)


async def test_async_background_sweeper(tmp_path):
    from threadline import aopen_saver

    async with aopen_saver(str(tmp_path / "abg.db"), ttl={"default_ttl": 0.001, "refresh_on_read": False}) as saver:
        task = await saver.start_ttl_sweeper(sweep_interval_minutes=0.002)
        await chat(saver, "gone")
        deadline = time.time() + 30
        while await saver.aget_tuple({"configurable": {"thread_id": "gone"}}) is not None and time.time() < deadline:
            await asyncio.sleep(0.05)
        assert await saver.aget_tuple({"configurable": {"thread_id": "gone"}}) is None
        assert await saver.stop_ttl_sweeper(timeout=10) and task.done()


def test_retention_keeps_heads_interrupts_fork_points_and_delta_ancestors(db):
    backend, facts = db
    with open_saver(backend.url) as saver:
        g = build_graph(saver)
        # a rollback to the head's parent: the old head and the rollback branch from it, so it stays
        old = H.state_at(saver, "t-research")
        old_head, target = old.checkpoint_id, old.parent_checkpoint_id
        r = L.rollback(saver, "t-research", target)
        plan = L.prune(saver, L.RetentionPolicy(keep_last=1))
        assert plan.checkpoints > 0
        tree = H.thread_history(saver, "t-research")
        kept = set(tree.nodes[""])
        heads = {cid for cid, n in tree.nodes[""].items() if not n.children}
        assert old_head in kept and target in kept and r.checkpoint_id in kept
        assert len(heads) == 3  # the two time-travel branches and the rollback branch
        assert tree.nodes[""][target].is_fork_point  # the rollback's child and the old branch's child meet here
        # the interrupted thread keeps its pending interrupt and resumes
        assert H.state_at(saver, "t-interrupt").interrupts
        assert g.invoke(Command(resume=True), cfg("t-interrupt"))["approved"] is True
        # older_than everything: only heads, fork points and what they need are left
        L.prune(saver, L.RetentionPolicy(older_than=0))
        tree = H.thread_history(saver, "t-research")
        assert {cid for cid, n in tree.nodes[""].items() if not n.children} == heads
        assert L.fsck(saver, deep=True).ok


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_four_writers_two_sweepers_lose_nothing_needed(kind, fresh_backend, tmp_path):
    backend = fresh_backend(kind)
    url = backend.url
    with open_saver(url):
        pass  # the deployment's migration step
    heavy = bool(os.environ.get("THREADLINE_HEAVY"))  # `make test-heavy`: a longer run
    turns = 8 if heavy else 3
    active = [[f"w{p}-a{i}" for i in range(6 if heavy else 2)] for p in range(4)]
    short = [[f"w{p}-s{i}" for i in range(3 if heavy else 1)] for p in range(4)]
    ctx = multiprocessing.get_context("spawn")
    stop = tmp_path / "stop"
    sweepers = [ctx.Process(target=sweep_until, args=(url, str(stop), str(tmp_path / f"sweeps{i}.json"))) for i in range(2)]
    writers = [
        ctx.Process(target=write_and_record, args=(url, active[p], short[p], turns, str(tmp_path / f"w{p}.json"))) for p in range(4)
    ]
    for p in sweepers + writers:
        p.start()
    try:
        for p in writers:
            p.join(timeout=300)
            assert p.exitcode == 0, f"writer {p.name} exited with {p.exitcode}"
        # the short-lived threads expire while the sweepers run
        deadline = time.time() + 60
        short_ids = [t for group in short for t in group]
        while any(rows_of(backend, t)["checkpoints"] for t in short_ids) and time.time() < deadline:
            time.sleep(0.2)
    finally:
        stop.touch()
        for p in sweepers:
            p.join(timeout=120)
    assert all(p.exitcode == 0 for p in sweepers)
    recorded = {}
    for p in range(4):
        for tid, ns, cid, values in json.loads((tmp_path / f"w{p}.json").read_text()):
            recorded[(tid, ns, cid)] = values
    sweeps = [r for i in range(2) for r in json.loads((tmp_path / f"sweeps{i}.json").read_text()) if r["ran"]]
    assert sum(r["checkpoints_deleted"] for r in sweeps) > 0 and not any(r["errors"] for r in sweeps)
    runs = sorted((r["started_at"], r["finished_at"]) for r in sweeps)
    assert all(a[1] <= b[0] for a, b in zip(runs, runs[1:])), "two sweeps overlapped"
    with open_saver(url) as saver:
        graph = build_chat().compile(checkpointer=saver)
        kept = [t.config["configurable"] for t in saver.list(None)]
        assert kept
        for c in kept:
            key = (c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])
            assert key in recorded, key
            assert graph.get_state({"configurable": c}).values == recorded[key], key
        for tid in (t for group in active for t in group):
            assert graph.get_state(cfg(tid)).values == expected_state(tid, turns)
            assert 2 <= rows_of(backend, tid)["checkpoints"] < 4 * turns
        for tid in short_ids:
            assert rows_of(backend, tid) == dict.fromkeys(TABLES, 0), tid
        assert L.fsck(saver, deep=True).ok
