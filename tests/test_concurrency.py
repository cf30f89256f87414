"""Concurrency: many LangGraph threads at once through one pool, and several OS processes on one database.

Afterwards every thread's final state and history must be exactly what its own
inputs produce: nothing lost, nothing mixed, no deadlock (the test would hang).
"""

from __future__ import annotations

import asyncio
import multiprocessing

from workers import build_chat, expected_state, run_threads, user_message

from threadline import open_saver

TURNS = 3


def check_thread(saver, thread_id: str, turns: int) -> None:
    graph = build_chat().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": thread_id}}
    assert graph.get_state(config).values == expected_state(thread_id, turns)
    history = list(graph.get_state_history(config))
    # per turn: the input checkpoint, the one after __start__, one per node (respond, note)
    assert len(history) == 4 * turns
    for snap in history:
        for msg in snap.values.get("messages", []):
            assert thread_id in msg, f"message {msg!r} leaked into {thread_id}"


async def test_32_threads_through_one_async_pool(async_backend):
    thread_ids = [f"pool-{i}" for i in range(32)]
    pool = {"pool_size": 8} if async_backend.is_postgres else {}  # Postgres: 32 threads through one pool
    async with async_backend.open(**pool) as saver:
        graph = build_chat().compile(checkpointer=saver)

        async def converse(tid: str) -> None:
            for turn in range(TURNS):
                await graph.ainvoke({"messages": [user_message(tid, turn)]}, {"configurable": {"thread_id": tid}})

        await asyncio.wait_for(asyncio.gather(*(converse(t) for t in thread_ids)), timeout=300)
        for tid in thread_ids:
            config = {"configurable": {"thread_id": tid}}
            assert (await graph.aget_state(config)).values == expected_state(tid, TURNS)
    with async_backend.open(is_async=False) as sync_saver:
        for tid in thread_ids:
            check_thread(sync_saver, tid, TURNS)
        counts = dict(async_backend.sql("SELECT thread_id, checkpoint_count FROM threadline_threads"))
        assert counts == {tid: 4 * TURNS for tid in thread_ids}


def test_four_processes_one_database(sync_backend):
    url = sync_backend.url
    with open_saver(url):
        pass  # create the tables once, as a deployment's migration step would
    groups = [[f"proc{p}-thread{i}" for i in range(4)] for p in range(4)]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=run_threads, args=(url, group, TURNS)) for group in groups]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0, f"worker {p.name} exited with {p.exitcode}"
    with open_saver(url) as saver:
        for group in groups:
            for tid in group:
                check_thread(saver, tid, TURNS)
