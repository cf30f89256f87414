"""Real LangGraph graphs on every threadline backend.

Each scenario is written once and runs on ``sqlite``, ``sqlite-async``,
``postgres`` and ``postgres-async``: sync savers are driven with
``graph.invoke`` / ``get_state`` / ``update_state``, async savers with
``ainvoke`` / ``aget_state`` / ``aupdate_state`` (the ``Graph`` helper picks).
Where LangGraph's own ``InMemorySaver`` is the oracle, the same graph runs on it
and the observable results (state, history shape) must be identical.

The ``Graph`` helper and the shared graphs live in ``langgraph_scenarios.py``.
Here: conversations, interrupts, state history, forks, ``update_state`` and
subgraphs; durability modes, ``DeltaChannel`` and parallel branches are in
``test_langgraph_writes.py``.
"""

from __future__ import annotations

import operator
from typing import Annotated

import pytest
from backends import Backend
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, StateSnapshot, interrupt
from langgraph_scenarios import (
    assert_parent_links,
    cfg,
    chat_builder,
    cid,
    line_builder,
    opened,
    reference,
    shape,
)
from typing_extensions import TypedDict


@pytest.fixture
def backend(graph_backend: Backend) -> Backend:
    return graph_backend  # Redis too: these scenarios read through the savers only


# --- scenarios ----------------------------------------------------------------


async def test_multi_turn_memory_survives_reopen(backend: Backend) -> None:
    builder = chat_builder()
    thread = cfg("chat")
    async with opened(backend, builder) as g:
        out = await g.invoke({"turns": ["hi"]}, thread)
        assert out == {"turns": ["hi", "echo:hi"]}
        out = await g.invoke({"turns": ["how are you"]}, thread)
        assert out == {"turns": ["hi", "echo:hi", "how are you", "echo:how are you"]}
        before = [shape(s) for s in await g.history(thread)]

    # a new saver instance on the same database remembers everything
    async with opened(backend, builder) as g:
        state = await g.state(thread)
        assert state.values == {"turns": ["hi", "echo:hi", "how are you", "echo:how are you"]}
        assert [shape(s) for s in await g.history(thread)] == before
        out = await g.invoke({"turns": ["bye"]}, thread)
        assert out["turns"] == ["hi", "echo:hi", "how are you", "echo:how are you", "bye", "echo:bye"]
        # other threads are independent
        assert (await g.invoke({"turns": ["new"]}, cfg("other"))) == {"turns": ["new", "echo:new"]}

    async with opened(backend, builder) as g:
        assert (await g.state(thread)).values["turns"][-1] == "echo:bye"
        assert len(await g.history(thread)) == 9  # 3 turns x (input, __start__, reply)

    ref = reference(builder)
    for text in ("hi", "how are you", "bye"):
        await ref.invoke({"turns": [text]}, thread)
    async with opened(backend, builder) as g:
        assert [shape(s) for s in await g.history(thread)] == [shape(s) for s in await ref.history(thread)]


class AskState(TypedDict):
    log: Annotated[list[str], operator.add]
    answer: str


def ask_builder() -> StateGraph:
    def prep(state: AskState) -> dict:
        return {"log": ["prep"]}

    def ask(state: AskState) -> dict:
        answer = interrupt({"question": "proceed?", "log_so_far": list(state["log"])})
        return {"answer": answer, "log": [f"asked:{answer}"]}

    def done(state: AskState) -> dict:
        return {"log": [f"done:{state['answer']}"]}

    b = StateGraph(AskState)
    b.add_node("prep", prep)
    b.add_node("ask", ask)
    b.add_node("done", done)
    b.add_edge(START, "prep")
    b.add_edge("prep", "ask")
    b.add_edge("ask", "done")
    b.add_edge("done", END)
    return b


async def test_interrupt_resumed_by_a_new_saver(backend: Backend) -> None:
    builder = ask_builder()
    thread = cfg("ask")
    async with opened(backend, builder) as g:
        out = await g.invoke({"log": ["start"]}, thread)
        assert [i.value for i in out["__interrupt__"]] == [{"question": "proceed?", "log_so_far": ["start", "prep"]}]
        state = await g.state(thread)
        assert state.next == ("ask",)
        assert state.values == {"log": ["start", "prep"]}
        assert [i.value["question"] for t in state.tasks for i in t.interrupts] == ["proceed?"]
        assert [i.value["question"] for i in state.interrupts] == ["proceed?"]

    async with opened(backend, builder) as g:
        # the interrupt (a pending write) was persisted and is visible to the new instance
        state = await g.state(thread)
        assert state.next == ("ask",)
        assert [i.value["question"] for i in state.interrupts] == ["proceed?"]
        out = await g.invoke(Command(resume="yes"), thread)
        # prep ran once; ask re-ran with the resume value; done ran after it
        assert out == {"log": ["start", "prep", "asked:yes", "done:yes"], "answer": "yes"}
        state = await g.state(thread)
        assert state.next == () and state.interrupts == ()

    async with opened(backend, builder) as g:
        assert (await g.state(thread)).values["answer"] == "yes"
        history = await g.history(thread)
        assert_parent_links(history)
        ref = reference(builder)
        await ref.invoke({"log": ["start"]}, thread)
        await ref.invoke(Command(resume="yes"), thread)
        assert [shape(s) for s in history] == [shape(s) for s in await ref.history(thread)]


async def test_state_history_order_steps_sources(backend: Backend) -> None:
    builder = line_builder()
    thread = cfg("hist")
    async with opened(backend, builder) as g:
        await g.invoke({"log": [], "x": 0}, thread)
        history = await g.history(thread)
        assert [s.metadata["step"] for s in history] == [3, 2, 1, 0, -1]
        assert [s.metadata["source"] for s in history] == ["loop", "loop", "loop", "loop", "input"]
        assert [s.next for s in history] == [(), ("c",), ("b",), ("a",), ("__start__",)]
        assert [s.values for s in history] == [
            {"log": ["a:0", "b:1", "c:2"], "x": 3},
            {"log": ["a:0", "b:1"], "x": 2},
            {"log": ["a:0"], "x": 1},
            {"log": [], "x": 0},
            {"log": []},  # the input checkpoint: only the reducer channel's empty default
        ]
        assert_parent_links(history)
        ids = [cid(s) for s in history]
        assert ids == sorted(ids, reverse=True)  # newest first
        assert {s.config["configurable"]["checkpoint_ns"] for s in history} == {""}
        # limit / before / filter go through the saver's list
        assert [cid(s) for s in await g.history(thread, limit=2)] == ids[:2]
        assert [cid(s) for s in await g.history(thread, before=history[1].config)] == ids[2:]
        assert [cid(s) for s in await g.history(thread, filter={"source": "input"})] == [ids[-1]]
        assert [cid(s) for s in await g.history(thread, filter={"step": 1})] == [ids[2]]
        # any checkpoint can be read back by id
        for snap in history:
            assert shape(await g.state(snap.config)) == shape(snap)

    ref = reference(builder)
    await ref.invoke({"log": [], "x": 0}, thread)
    assert [shape(s) for s in history] == [shape(s) for s in await ref.history(thread)]


async def test_invoke_from_old_checkpoint_branches_and_keeps_the_original(backend: Backend) -> None:
    builder = chat_builder()
    thread = cfg("fork")
    async with opened(backend, builder) as g:
        await g.invoke({"turns": ["one"]}, thread)
        await g.invoke({"turns": ["two"]}, thread)
        original = await g.history(thread)
        assert len(original) == 6
        # the end of turn one: step 1, values [one, echo:one]
        fork_point = next(s for s in original if s.values == {"turns": ["one", "echo:one"]} and s.next == ())
        assert fork_point.metadata["step"] == 1

        out = await g.invoke({"turns": ["alt"]}, fork_point.config)
        assert out == {"turns": ["one", "echo:one", "alt", "echo:alt"]}

    async with opened(backend, builder) as g:
        latest = await g.state(thread)
        assert latest.values == {"turns": ["one", "echo:one", "alt", "echo:alt"]}
        everything = await g.history(thread)
        assert len(everything) == 9  # nothing deleted: 6 original + 3 on the branch

        # the original line is intact, checkpoint by checkpoint
        for snap in original:
            again = await g.state(snap.config)
            assert shape(again) == shape(snap)
            assert again.parent_config == snap.parent_config

        # walk parents from the new head: branch, then the fork point, then the shared prefix
        chain, cur = [], latest
        while True:
            chain.append(cur)
            if cur.parent_config is None:
                break
            cur = await g.state(cur.parent_config)
        assert [c.values["turns"] if c.values else [] for c in chain] == [
            ["one", "echo:one", "alt", "echo:alt"],
            ["one", "echo:one", "alt"],
            ["one", "echo:one"],  # the branch's input checkpoint: parent = fork point's values
            ["one", "echo:one"],
            ["one"],
            [],
        ]
        assert cid(chain[3]) == cid(fork_point)
        assert [cid(c) for c in chain[3:]] == [cid(s) for s in original[3:]]
        # the old head is not on the new chain but still reads back, with its own parents
        old_head = original[0]
        assert cid(old_head) not in {cid(c) for c in chain}
        assert (await g.state(old_head.config)).values["turns"][-1] == "echo:two"
        # both branches hang off the fork point
        children = [s for s in everything if s.parent_config and cid(s.parent_config) == cid(fork_point)]
        assert len(children) == 2
        assert {s.metadata["source"] for s in children} == {"input"}


async def test_update_state_as_node_then_continue(backend: Backend) -> None:
    builder = line_builder(("a", "b"))
    thread = cfg("upd")
    async with opened(backend, builder, interrupt_before=["b"]) as g:
        await g.invoke({"log": [], "x": 0}, thread)
        state = await g.state(thread)
        assert state.next == ("b",)
        assert state.values == {"log": ["a:0"], "x": 1}

        new_config = await g.update(state.config, {"x": 100, "log": ["edited"]}, as_node="a")
        after = await g.state(thread)
        assert cid(after) == cid(new_config)
        assert after.metadata["source"] == "update"
        assert after.metadata["step"] == state.metadata["step"] + 1
        assert cid(after.parent_config) == cid(state)
        assert after.next == ("b",)  # as_node="a": the graph continues after a
        assert after.values == {"log": ["a:0", "edited"], "x": 100}

    async with opened(backend, builder, interrupt_before=["b"]) as g:
        out = await g.invoke(None, thread)
        assert out == {"log": ["a:0", "edited", "b:100"], "x": 101}
        sources = [s.metadata["source"] for s in await g.history(thread)]
        assert sources == ["loop", "update", "loop", "loop", "input"]
        # the pre-update checkpoint is kept
        assert (await g.state(state.config)).values == {"log": ["a:0"], "x": 1}

    ref = reference(builder, interrupt_before=["b"])
    await ref.invoke({"log": [], "x": 0}, thread)
    await ref.update((await ref.state(thread)).config, {"x": 100, "log": ["edited"]}, as_node="a")
    await ref.invoke(None, thread)
    async with opened(backend, builder, interrupt_before=["b"]) as g:
        assert [shape(s) for s in await g.history(thread)] == [shape(s) for s in await ref.history(thread)]


class SubState(TypedDict):
    inner: Annotated[list[str], operator.add]


class OuterState(TypedDict):
    outer: Annotated[list[str], operator.add]
    inner: Annotated[list[str], operator.add]


def nested_builder() -> StateGraph:
    def s1(state: SubState) -> dict:
        return {"inner": ["s1"]}

    def s2(state: SubState) -> dict:
        ok = interrupt("inner question")
        return {"inner": [f"s2:{ok}"]}

    sub = StateGraph(SubState)
    sub.add_node("s1", s1)
    sub.add_node("s2", s2)
    sub.add_edge(START, "s1")
    sub.add_edge("s1", "s2")
    sub.add_edge("s2", END)

    def before(state: OuterState) -> dict:
        return {"outer": ["before"]}

    def after(state: OuterState) -> dict:
        return {"outer": [f"after:{len(state['inner'])}"]}

    b = StateGraph(OuterState)
    b.add_node("before", before)
    b.add_node("sub", sub.compile())
    b.add_node("after", after)
    b.add_edge(START, "before")
    b.add_edge("before", "sub")
    b.add_edge("sub", "after")
    b.add_edge("after", END)
    return b


async def test_subgraph_namespaces_and_interrupt_inside(backend: Backend) -> None:
    builder = nested_builder()
    thread = cfg("nested")
    async with opened(backend, builder) as g:
        out = await g.invoke({"outer": [], "inner": []}, thread)
        assert [i.value for i in out["__interrupt__"]] == ["inner question"]

        parent = await g.state(thread, subgraphs=True)
        assert parent.next == ("sub",)
        assert parent.values == {"outer": ["before"], "inner": []}
        (task,) = parent.tasks
        assert task.name == "sub"
        sub_state = task.state
        assert isinstance(sub_state, StateSnapshot)
        sub_ns = sub_state.config["configurable"]["checkpoint_ns"]
        assert sub_ns.startswith("sub:")
        assert sub_state.values == {"inner": ["s1"]}
        assert sub_state.next == ("s2",)
        assert [i.value for t in sub_state.tasks for i in t.interrupts] == ["inner question"]

        # the root history holds only root checkpoints; the subgraph's live under its namespace
        root_history = await g.history(thread)
        assert {s.config["configurable"]["checkpoint_ns"] for s in root_history} == {""}
        sub_history = await g.history(sub_state.config)
        assert sub_history and {s.config["configurable"]["checkpoint_ns"] for s in sub_history} == {sub_ns}
        assert [s.values for s in sub_history][0] == {"inner": ["s1"]}  # noqa: RUF015

    namespaces = {ns for ns, _ in backend.stored("nested")["checkpoints"]}
    assert namespaces == {"", sub_ns}

    async with opened(backend, builder) as g:
        again = await g.state(thread, subgraphs=True)
        assert again.tasks[0].state.values == {"inner": ["s1"]}
        out = await g.invoke(Command(resume="ok"), thread)
        assert out == {"outer": ["before", "after:2"], "inner": ["s1", "s2:ok"]}
        final = await g.state(thread, subgraphs=True)
        assert final.next == () and final.tasks == ()

    ref = reference(builder)
    await ref.invoke({"outer": [], "inner": []}, thread)
    await ref.invoke(Command(resume="ok"), thread)
    async with opened(backend, builder) as g:
        assert [shape(s) for s in await g.history(thread)] == [shape(s) for s in await ref.history(thread)]
