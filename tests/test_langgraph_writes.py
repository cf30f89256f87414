"""Real LangGraph graphs on every threadline backend: how a run's writes reach the saver.

Durability modes (which checkpoints are on disk once the saver is closed),
``DeltaChannel`` (values stored as deltas, rebuilt from ancestors' writes, and
pruned), and parallel branches (the same state as in memory; a failed branch
keeps its sibling's pending writes for the resume). Each scenario runs on every
backend, sync and async, through the ``Graph`` helper of
``langgraph_scenarios.py``, with LangGraph's ``InMemorySaver`` as the oracle
(see ``test_langgraph.py``).
"""

from __future__ import annotations

import operator
import threading
import time
from typing import Annotated, Any

import pytest
from backends import Backend
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph_scenarios import (
    assert_parent_links,
    cfg,
    cid,
    line_builder,
    opened,
    reference,
    shape,
)
from typing_extensions import TypedDict


@pytest.mark.parametrize("durability, expected", [("sync", 5), ("async", 5), ("exit", 1)])
async def test_durability_modes(backend: Backend, durability: str, expected: int) -> None:
    builder = line_builder()
    thread = cfg(f"dur-{durability}")
    async with opened(backend, builder) as g:
        out = await g.invoke({"log": [], "x": 0}, thread, durability=durability)
        assert out == {"log": ["a:0", "b:1", "c:2"], "x": 3}
    # every checkpoint LangGraph handed over is on disk once the saver is closed
    async with opened(backend, builder) as g:
        history = await g.history(thread)
        assert len(history) == expected
        assert history[0].values == {"log": ["a:0", "b:1", "c:2"], "x": 3}
        assert history[0].next == ()
        assert_parent_links(history)
    assert len(backend.stored(thread["configurable"]["thread_id"])["checkpoints"]) == expected
    ref = reference(builder)
    await ref.invoke({"log": [], "x": 0}, thread, durability=durability)
    assert [shape(s) for s in history] == [shape(s) for s in await ref.history(thread)]


@pytest.fixture
def backend(graph_backend: Backend) -> Backend:
    return graph_backend  # Redis too: these scenarios read through the savers only


def extend(state: list, writes: list) -> list:
    """Batching-invariant DeltaChannel reducer: each write is a list of items to append."""
    out = list(state)
    for w in writes:
        out.extend(w if isinstance(w, list) else [w])
    return out


class DeltaState(TypedDict):
    items: Annotated[list, DeltaChannel(extend, snapshot_frequency=3)]
    n: int


def delta_builder(stop_every: int = 7) -> StateGraph:
    def add(state: DeltaState) -> dict:
        return {"items": [f"i{state['n']}"], "n": state["n"] + 1}

    b = StateGraph(DeltaState)
    b.add_node("add", add)
    b.add_edge(START, "add")
    b.add_conditional_edges("add", lambda s: "add" if s["n"] % stop_every else END)
    return b


async def test_delta_channel_matches_in_memory_and_survives_reopen_and_prune(backend: Backend) -> None:
    builder = delta_builder()
    thread = cfg("delta")
    turns = [{"items": ["start"], "n": 1}, {"items": ["second"], "n": 1}, {"items": ["third"], "n": 8}]

    ref = reference(builder)
    for turn in turns:
        await ref.invoke(turn, thread)
    ref_state = await ref.state(thread)
    ref_history = [shape(s) for s in await ref.history(thread)]
    assert len(ref_history) > 3 * 3  # enough supersteps to cross several snapshots

    async with opened(backend, builder) as g:
        for turn in turns:
            await g.invoke(turn, thread)
        assert (await g.state(thread)).values == ref_state.values
        assert [shape(s) for s in await g.history(thread)] == ref_history

    # deltas really are in use, at the same checkpoints as in memory: "items" is stored (as a
    # _DeltaSnapshot) only every few updates, and otherwise rebuilt from ancestors' writes
    def snapshot_pattern(saver: Any) -> list[tuple[int, str | None]]:
        return [
            (t.metadata["step"], type(t.checkpoint["channel_values"].get("items")).__name__)
            for t in saver.list(thread)
        ]

    ref_pattern = snapshot_pattern(ref.saver)
    assert 0 < sum(kind == "_DeltaSnapshot" for _, kind in ref_pattern) < len(ref_pattern) / 2
    with backend.open(is_async=False) as twin:
        assert snapshot_pattern(twin) == ref_pattern

    async with opened(backend, builder) as g:
        state = await g.state(thread)
        assert state.values == ref_state.values
        history = await g.history(thread)
        assert [shape(s) for s in history] == ref_history
        # every historical checkpoint reconstructs the same as the in-memory one
        ref_by_step = {(s.metadata["step"], s.metadata["source"]): s.values for s in await ref.history(thread)}
        for snap in history[::3]:
            assert (await g.state(snap.config)).values == ref_by_step[(snap.metadata["step"], snap.metadata["source"])]

        async def prune() -> None:
            if g.is_async:
                await g.saver.aprune(["delta"], strategy="keep_latest")
            else:
                g.saver.prune(["delta"], strategy="keep_latest")

        if backend.is_postgres:  # refused, nothing pruned, as the official PostgresSaver
            with pytest.raises(NotImplementedError, match="DeltaChannel"):
                await prune()
            assert len(await g.history(thread)) == len(history)
        else:
            await prune()
            pruned = await g.state(thread)
            assert pruned.values == ref_state.values
            assert cid(pruned) == cid(state)
            assert len(await g.history(thread)) < len(history)

    async with opened(backend, builder) as g:
        assert (await g.state(thread)).values == ref_state.values
        # the thread keeps working after pruning, same as the unpruned in-memory thread
        await g.invoke({"items": ["after-prune"], "n": 1}, thread)
        await ref.invoke({"items": ["after-prune"], "n": 1}, thread)
        assert (await g.state(thread)).values == (await ref.state(thread)).values


class FanState(TypedDict):
    log: Annotated[list[str], operator.add]
    total: Annotated[int, operator.add]


def fan_builder(fail_once: list[bool] | None = None, runs: list[str] | None = None) -> StateGraph:
    """START → (left, right) in one superstep → join. ``fail_once=[True]`` makes right fail once,
    after left has finished (a failure that comes first cancels left: LangGraph stores the
    writes of tasks finished by then, so the test would depend on thread timing)."""
    left_done = threading.Event()

    def left(state: FanState) -> dict:
        if runs is not None:
            runs.append("left")
        left_done.set()
        return {"log": ["left"], "total": 1}

    def right(state: FanState) -> dict:
        if fail_once:
            fail_once.pop()
            left_done.wait(10)
            time.sleep(0.2)  # left's writes are handed to the saver as it returns
            raise RuntimeError("right failed")
        return {"log": ["right"], "total": 10}

    def join(state: FanState) -> dict:
        return {"log": [f"join:{state['total']}"], "total": 100}

    b = StateGraph(FanState)
    b.add_node("left", left)
    b.add_node("right", right)
    b.add_node("join", join)
    b.add_edge(START, "left")
    b.add_edge(START, "right")
    b.add_edge(["left", "right"], "join")
    b.add_edge("join", END)
    return b


async def test_parallel_branches_same_state_as_in_memory(backend: Backend) -> None:
    builder = fan_builder()
    thread = cfg("fan")
    ref = reference(builder)
    expected = await ref.invoke({"log": ["go"], "total": 0}, thread)
    await ref.invoke({"log": ["again"], "total": 0}, thread)
    async with opened(backend, builder) as g:
        out = await g.invoke({"log": ["go"], "total": 0}, thread)
        assert out == expected
        await g.invoke({"log": ["again"], "total": 0}, thread)
    async with opened(backend, builder) as g:
        assert (await g.state(thread)).values == (await ref.state(thread)).values
        assert [shape(s) for s in await g.history(thread)] == [shape(s) for s in await ref.history(thread)]


async def test_failed_branch_keeps_sibling_writes_for_resume(backend: Backend) -> None:
    """One parallel node fails: the other's pending writes survive, and resuming (with a new saver) does not re-run it."""
    calls: list[str] = []
    builder = fan_builder(fail_once=[True], runs=calls)
    thread = cfg("fail")
    async with opened(backend, builder) as g:
        with pytest.raises(RuntimeError, match="right failed"):
            await g.invoke({"log": [], "total": 0}, thread)
        state = await g.state(thread)
        assert state.next == ("right",)  # left's writes are stored: only right is still to run
        errored = [t for t in state.tasks if t.error]
        assert [t.name for t in errored] == ["right"]
        assert "right failed" in repr(errored[0].error)
    assert calls == ["left"]
    writes = backend.stored("fail")["writes"]
    assert "__error__" in writes and "log" in writes

    async with opened(backend, builder) as g:
        out = await g.invoke(None, thread)
        assert out == {"log": ["left", "right", "join:11"], "total": 111}
    assert calls == ["left"]  # its stored writes were reused, not recomputed


def test_writes_of_a_checkpoint_pruned_meanwhile_are_not_left_as_orphans(backend: Backend) -> None:
    """LangGraph saves a task's writes in the background: they may land after a sweep pruned their
    checkpoint (a newer one is stored). They are not stored then (they could only be orphans),
    while writes of a stored checkpoint, and of one not stored yet, are."""
    from langgraph.checkpoint.base import empty_checkpoint

    def ck(i: int) -> dict:
        return {**empty_checkpoint(), "id": f"1f0000000-0000-6000-8000-00000000000{i}"}

    thread = {"configurable": {"thread_id": "late-writes", "checkpoint_ns": ""}}
    with backend.open(is_async=False) as saver:
        first = saver.put(thread, ck(1), {"step": 0}, {})
        second = saver.put(first, ck(2), {"step": 1}, {})
        saver.prune(["late-writes"], strategy="keep_latest")  # the first checkpoint is gone
        saver.put_writes(first, [("x", 1)], "task-late")  # its writes arrive late: dropped
        saver.put_writes(second, [("x", 2)], "task-ok")  # kept
        ahead = {"configurable": {**thread["configurable"], "checkpoint_id": ck(3)["id"]}}
        saver.put_writes(ahead, [("x", 3)], "task-ahead")  # writes ahead of their checkpoint: kept
        assert [w[1] for w in saver.get_tuple(second).pending_writes] == ["x"]
    stored = backend.stored("late-writes")
    assert stored["checkpoints"] == [("", ck(2)["id"])]
    assert stored["writes"] == ["x", "x"]  # the second checkpoint's and the one ahead: no orphan
