"""``threadline.InMemorySaver``: the official ``InMemorySaver`` replaced, on real graphs, side by
side with the official one; its database saved to a file with ``transfer.backup``.

The API by introspection is in ``test_drop_in_api.py``, the official conformance suite in
``test_conformance.py`` (``test_official_conformance_suite_in_memory``); LangGraph's own tests
run with it through ``compat/langgraph_suite.py --suite langgraph-memory``.
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver as OfficialInMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from threadline import InMemorySaver, MemorySaver, SqliteSaver
from threadline.transfer.backup import backup


class State(TypedDict):
    items: Annotated[list[str], operator.add]
    note: str


def _graph(checkpointer):
    def first(state: State) -> dict:
        return {"items": [f"first-{len(state['items'])}"]}

    def ask(state: State) -> dict:
        return {"note": interrupt("approve?"), "items": ["asked"]}

    b = StateGraph(State)
    b.add_node("first", first)
    b.add_node("ask", ask)
    b.add_edge(START, "first")
    b.add_edge("first", "ask")
    b.add_edge("ask", END)
    return b.compile(checkpointer=checkpointer)


def _cfg(tid: str) -> dict:
    return {"configurable": {"thread_id": tid}}


def _run(saver) -> list:
    """An interrupted run resumed, then a second turn: the state history, newest first."""
    g = _graph(saver)
    g.invoke({"items": ["in"], "note": ""}, _cfg("t"))
    g.invoke(Command(resume="yes"), _cfg("t"))
    g.invoke({"items": ["again"]}, _cfg("t"))
    g.invoke(Command(resume="ok"), _cfg("t"))
    return [(s.values, s.next, s.metadata["step"], s.metadata["source"]) for s in g.get_state_history(_cfg("t"))]


def test_same_history_as_the_official_saver() -> None:
    assert _run(InMemorySaver()) == _run(OfficialInMemorySaver())


async def test_async_graph_and_context_manager() -> None:
    async with InMemorySaver() as saver:
        g = _graph(saver)
        await g.ainvoke({"items": ["a"], "note": ""}, _cfg("x"))
        out = await g.ainvoke(Command(resume="fine"), _cfg("x"))
        assert out == {"items": ["a", "first-1", "asked"], "note": "fine"}
        assert len([t async for t in saver.alist(_cfg("x"))]) == len(list(saver.list(_cfg("x"))))


def test_instances_share_nothing_and_stack_closes() -> None:
    closed: list[str] = []
    with InMemorySaver() as one:
        one.stack.callback(closed.append, "one")
        _graph(one).invoke({"items": [], "note": ""}, _cfg("t"))
        two = MemorySaver()
        assert list(two.list(None)) == [] and len(list(one.list(None))) > 0
    assert closed == ["one"]
    assert one.get_tuple(_cfg("t")) is not None  # readable after the block, as the official one


def test_thread_tools_of_the_official_api() -> None:
    saver = InMemorySaver()
    g = _graph(saver)
    g.invoke({"items": ["a"], "note": ""}, _cfg("a"))
    saver.copy_thread("a", "b")
    assert g.get_state(_cfg("b")).values == g.get_state(_cfg("a")).values
    saver.prune(["a"], strategy="keep_latest")
    assert len(list(saver.list(_cfg("a")))) == 1
    saver.delete_thread("a")
    assert saver.get_tuple(_cfg("a")) is None and saver.get_tuple(_cfg("b")) is not None
    v1 = saver.get_next_version(None, None)
    assert saver.get_next_version(v1, None) > v1


def test_factory_is_accepted_and_ignored() -> None:
    from collections import defaultdict

    class Mine(defaultdict):
        pass

    saver = InMemorySaver(factory=Mine)
    _graph(saver).invoke({"items": [], "note": ""}, _cfg("t"))
    assert saver.get_tuple(_cfg("t")) is not None


def test_backup_to_a_file_reads_back(tmp_path) -> None:
    saver = InMemorySaver()
    _graph(saver).invoke({"items": ["kept"], "note": ""}, _cfg("t"))
    want = saver.get_tuple(_cfg("t"))
    report = backup(saver, str(tmp_path / "mem.db"))
    assert report.method == "vacuum-into" and report.threads == 1
    with SqliteSaver.from_conn_string(str(tmp_path / "mem.db")) as disk:
        got = disk.get_tuple(_cfg("t"))
        assert got.checkpoint == want.checkpoint and got.pending_writes == want.pending_writes
        assert _graph(disk).get_state(_cfg("t")).next == ("ask",)


@pytest.mark.parametrize("limit", [0, 2])
def test_list_limit_as_official(limit: int) -> None:
    ours, theirs = InMemorySaver(), OfficialInMemorySaver()
    for s in (ours, theirs):
        _graph(s).invoke({"items": [], "note": ""}, _cfg("t"))
    assert len(list(ours.list(_cfg("t"), limit=limit))) == len(list(theirs.list(_cfg("t"), limit=limit)))


async def test_async_methods_go_through_the_sync_ones() -> None:
    """As the official saver's: a subclass overriding ``put``/``get_tuple`` changes ``aput``/``aget_tuple``
    (LangGraph's own tests rely on it)."""
    seen: list[str] = []

    class Recording(InMemorySaver):
        def put(self, config, checkpoint, metadata, new_versions):
            seen.append("put")
            return super().put(config, checkpoint, metadata, new_versions)

        def get_tuple(self, config):
            seen.append("get_tuple")
            return super().get_tuple(config)

    g = _graph(Recording())
    await g.ainvoke({"items": [], "note": ""}, _cfg("t"))
    assert "put" in seen and "get_tuple" in seen
