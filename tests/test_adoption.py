"""Switching a live deployment: official-saver tables and threadline's in one database.

* coexistence: the official saver and a threadline saver work side by side in one
  SQLite file and one Postgres schema (their tables never collide);
* adoption: a thread found only in the official tables — here the demo agent stopped
  at a human-approval ``interrupt()`` by the official saver — is served by threadline
  on first touch: same state, same history, resumed with ``Command(resume=…)``; the
  official rows are never changed; later official checkpoints are caught up; a deleted
  adopted thread stays deleted; ``adopt=False`` turns it off;
* ``threadline import`` names its target explicitly and leaves the source untouched.
"""

from __future__ import annotations

import datetime
from contextlib import contextmanager
from typing import Any, Iterator

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import UUID, uuid6
from langgraph.types import Command

from backends import Backend
from threadline import read
from threadline.demo.agent import compile_graph
from threadline.demo.scenario import RESUME, TURNS

OFFICIAL_TABLES = {"sqlite": ("checkpoints", "writes"), "postgres": ("checkpoints", "checkpoint_blobs", "checkpoint_writes")}


@contextmanager
def official(b: Backend) -> Iterator[Any]:
    """The official saver of ``b``'s kind on ``b``'s database."""
    if b.is_postgres:
        from langgraph.checkpoint.postgres import PostgresSaver as Official
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver as Official
    with Official.from_conn_string(b.url) as saver:
        saver.setup()
        yield saver


def official_rows(b: Backend) -> dict[str, list]:
    return {t: sorted(b.sql(f"SELECT * FROM {t}"), key=repr) for t in OFFICIAL_TABLES[b.kind]}


def conf(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}}


def run_to_interrupt(saver: Any, thread_id: str) -> Any:
    graph = compile_graph(saver)
    for text in TURNS:
        graph.invoke({"messages": [("user", text)]}, conf(thread_id))
    return graph


def shape(graph: Any, thread_id: str) -> list[tuple]:
    """What get_state_history shows: ids, parents, next nodes, interrupts and message texts."""
    return [
        (
            s.config["configurable"]["checkpoint_id"],
            s.parent_config and s.parent_config["configurable"]["checkpoint_id"],
            s.next,
            tuple(i.value for t in s.tasks for i in t.interrupts),
            tuple((m.type, m.content) for m in s.values.get("messages", [])),
        )
        for s in graph.get_state_history(conf(thread_id))
    ]


def test_official_and_threadline_savers_side_by_side(sync_backend: Backend) -> None:
    b = sync_backend
    with official(b) as off, b.open(adopt=False) as tl:
        run_to_interrupt(off, "official-thread")
        run_to_interrupt(tl, "threadline-thread")
        assert off.get_tuple(conf("threadline-thread")) is None  # neither sees the other's tables
        assert tl.get_tuple(conf("official-thread")) is None
        off_state = compile_graph(off).get_state(conf("official-thread"))
        tl_state = compile_graph(tl).get_state(conf("threadline-thread"))
        assert off_state.next == tl_state.next == ("call_tool",)
        assert [m.content for m in off_state.values["messages"]] == [m.content for m in tl_state.values["messages"]]
    tables = {r[0] for r in b.sql("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")} if b.is_postgres else {
        r[0] for r in b.sql("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    assert set(OFFICIAL_TABLES[b.kind]) <= tables
    assert {"threadline_checkpoints", "threadline_blobs", "threadline_writes", "threadline_threads", "threadline_migrations"} <= tables


def test_official_thread_interrupted_is_adopted_and_resumed_by_threadline(sync_backend: Backend) -> None:
    b = sync_backend
    with official(b) as off:
        off_graph = run_to_interrupt(off, "t1")
        expected = shape(off_graph, "t1")
        interrupted = off_graph.get_state(conf("t1"))
    assert interrupted.next == ("call_tool",) and interrupted.tasks[0].interrupts
    before = official_rows(b)

    with b.open() as tl:
        graph = compile_graph(tl)
        assert shape(graph, "t1") == expected  # the whole past, time travel included
        state = graph.get_state(conf("t1"))
        assert state.next == ("call_tool",)
        assert state.tasks[0].interrupts[0].value == interrupted.tasks[0].interrupts[0].value
        final = graph.invoke(Command(resume=RESUME), conf("t1"))
        assert final["messages"][-1].type == "ai"
        assert any(m.type == "tool" for m in final["messages"])
        assert graph.get_state(conf("t1")).next == ()
        marker = b.sql("SELECT thread_id, checkpoint_id FROM threadline_adopted")
        assert marker == [("t1", expected[0][0])]
        # an old checkpoint of the adopted past branches like any other
        old = expected[-3][0]
        branched = graph.invoke({"messages": [("user", "hello again")]}, {"configurable": {"thread_id": "t1", "checkpoint_id": old}})
        assert branched["messages"][-1].type == "ai"
        stored = len(list(tl.list(conf("t1"))))
        assert stored > len(expected)

    assert official_rows(b) == before  # the official rows are never changed

    with b.open() as tl:  # a second open adopts nothing again
        assert len(list(tl.list(conf("t1")))) == stored
        assert b.sql("SELECT COUNT(*) FROM threadline_checkpoints WHERE thread_id = 't1'")[0][0] == stored


def test_new_official_checkpoints_are_caught_up_and_deleted_threads_stay_deleted(sync_backend: Backend) -> None:
    """A mixed fleet: an official worker advances a thread after threadline adopted it."""
    b = sync_backend
    with official(b) as off:
        compile_graph(off).invoke({"messages": [("user", TURNS[0])]}, conf("t2"))
    with b.open() as tl:
        first = len(list(tl.list(conf("t2"))))
        assert first > 0
    with official(b) as off:
        compile_graph(off).invoke({"messages": [("user", TURNS[1])]}, conf("t2"))
        official_count = len(list(off.list(conf("t2"))))
    with b.open() as tl:
        assert len(list(tl.list(conf("t2")))) == official_count > first
        assert compile_graph(tl).get_state(conf("t2")).next == ("call_tool",)
        tl.delete_thread("t2")
        assert tl.get_tuple(conf("t2")) is None
    with b.open() as tl:
        assert tl.get_tuple(conf("t2")) is None  # the marker keeps it from coming back
    assert len(official_rows(b)["checkpoints"]) == official_count


def test_adopt_false_serves_threadline_tables_only(sync_backend: Backend) -> None:
    b = sync_backend
    with official(b) as off:
        compile_graph(off).invoke({"messages": [("user", TURNS[0])]}, conf("t3"))
    with b.open(adopt=False) as tl:
        assert tl.get_tuple(conf("t3")) is None
        assert list(tl.list(conf("t3"))) == []
    assert b.sql("SELECT COUNT(*) FROM threadline_checkpoints")[0][0] == 0


async def test_async_savers_adopt_too(sync_backend: Backend) -> None:
    b = sync_backend
    with official(b) as off:
        expected = shape(run_to_interrupt(off, "t4"), "t4")
    async with b.open(is_async=True) as tl:
        await tl.setup()
        graph = compile_graph(tl)
        history = [s async for s in graph.aget_state_history(conf("t4"))]
        assert [s.config["configurable"]["checkpoint_id"] for s in history] == [e[0] for e in expected]
        final = await graph.ainvoke(Command(resume=RESUME), conf("t4"))
        assert any(m.type == "tool" for m in final["messages"])


def _put_official_history(b: Backend, thread_id: str, written: list[datetime.datetime]) -> list[str]:
    """Official checkpoints of ``thread_id`` written at the times ``written`` (their ``ts``); returns their ids."""
    ids = []
    with official(b) as off:
        parent = conf(thread_id)
        parent["configurable"]["checkpoint_ns"] = ""
        for step, when in enumerate(written):
            ck = empty_checkpoint()
            ck.update(id=str(uuid6(clock_seq=step)), ts=when.isoformat(), channel_values={"n": step}, channel_versions={"n": str(step + 1)})
            parent = off.put(parent, ck, {"source": "loop", "step": step, "parents": {}}, {"n": str(step + 1)})
            ids.append(ck["id"])
    return ids


def test_adopted_threads_keep_the_times_they_were_written(sync_backend: Backend) -> None:
    """Issue 31 item 4: a thread adopted today was written in March; its created and updated
    times (the listings', idle retention's) are those of its checkpoints, not the adoption's."""
    b = sync_backend
    written = [datetime.datetime(2024, 3, 1, 12, 0, tzinfo=datetime.timezone.utc), datetime.datetime(2024, 3, 2, 8, 30, tzinfo=datetime.timezone.utc)]
    _put_official_history(b, "march", written)
    with b.open() as tl:
        assert tl.get_tuple(conf("march")) is not None  # first touch: adopted
        info = read.list_threads(tl, thread_ids=["march"]).threads[0]
        assert (info.created_at, info.updated_at) == (written[0].timestamp(), written[1].timestamp())
        assert read.list_threads(tl, idle_for=30 * 86400).threads[0].thread_id == "march"
        assert [t.checkpoint["ts"] for t in tl.list(conf("march"))] == [w.isoformat() for w in reversed(written)]
    # caught up later: the thread's updated time is the new checkpoint's
    later = datetime.datetime(2024, 4, 5, 9, 0, tzinfo=datetime.timezone.utc)
    with official(b) as off:
        head = off.get_tuple(conf("march"))
        ck = empty_checkpoint()
        ck.update(id=str(uuid6(clock_seq=2)), ts=later.isoformat(), channel_values={"n": 2}, channel_versions={"n": "3"})
        off.put(head.config, ck, {"source": "loop", "step": 2, "parents": {}}, {"n": "3"})
    with b.open() as tl:
        assert len(list(tl.list(conf("march")))) == 3
        info = read.list_threads(tl, thread_ids=["march"]).threads[0]
        assert (info.created_at, info.updated_at) == (written[0].timestamp(), later.timestamp())


def test_an_adopted_checkpoint_without_ts_takes_the_time_of_its_id(sync_backend: Backend) -> None:
    b = sync_backend
    with official(b) as off:
        ck = empty_checkpoint()
        ck.pop("ts")
        off.put({"configurable": {"thread_id": "no-ts", "checkpoint_ns": ""}}, ck, {"source": "input", "step": -1, "parents": {}}, {})
    with b.open() as tl:
        assert tl.get_tuple(conf("no-ts")) is not None
        info = read.list_threads(tl, thread_ids=["no-ts"]).threads[0]
    # LangGraph's uuid6 ``time``: 100-ns intervals since 1582-10-15 (0x01B21DD213814000 of them before 1970)
    assert info.created_at == info.updated_at == pytest.approx((UUID(ck["id"]).time - 0x01B21DD213814000) / 1e7, abs=1e-6)
