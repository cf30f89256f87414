"""A real chat graph (LangGraph's prebuilt ReAct agent over a LangChain chat model) on the
savers: each put serializes only the messages the step added, and the graph's next read
is a copy of the list the saver keeps, equal to what the official saver returns; and no put
reads a value back to build on."""

from __future__ import annotations

import itertools
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver
from langgraph.prebuilt import create_react_agent

from threadline import SqliteSaver
from threadline.codec import copies
from threadline.storage.ops import write

TURNS = 8


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found: {query} " * 100


class _Model(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> _Model:
        return self


def _replies() -> Any:
    for i in itertools.count():
        yield AIMessage(content="", id=f"call-{i}", tool_calls=[{"name": "lookup", "args": {"query": f"q{i}"}, "id": f"tc-{i}"}])
        yield AIMessage(content=f"answer {i} " * 150, id=f"answer-{i}")


class CountingSerde(JsonPlusSerializer):
    """LangGraph's serializer, noting the length of every list it serializes."""

    def __init__(self) -> None:
        super().__init__()
        self.list_lengths: list[int] = []

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if type(obj) is list:
            self.list_lengths.append(len(obj))
        return super().dumps_typed(obj)


def _chat(saver: Any) -> list:
    agent = create_react_agent(_Model(messages=_replies()), [lookup], checkpointer=saver)
    config = {"configurable": {"thread_id": "chat"}}
    for turn in range(TURNS):
        agent.invoke({"messages": [("user", f"question {turn} " * 100)]}, config)
    return agent.get_state(config).values["messages"]


def test_a_chat_agent_serializes_only_new_messages_and_reads_copies(tmp_path, monkeypatch) -> None:
    serde = CountingSerde()
    copied = []
    fresh = copies.fresh
    monkeypatch.setattr("threadline.codec.deltas.fresh", lambda value: copied.append(1) or fresh(value))
    with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
        saver.serde = serde
        ours = _chat(saver)
    with OfficialSqliteSaver.from_conn_string(str(tmp_path / "o.db")) as official:
        theirs = _chat(official)
    def content(messages: list) -> list:  # add_messages gives the user's and the tools' messages random ids
        return [{k: v for k, v in m.model_dump().items() if k != "id"} for m in messages]

    assert content(ours) == content(theirs) and len(ours) == 4 * TURNS
    # the history is serialized whole only by the codec's first self-checks; later puts serialize
    # only the messages a step added (the official saver serializes the whole history every time)
    later = serde.list_lengths[2 * len(serde.list_lengths) // 3 :]  # the last turns
    assert later and max(later) <= 2, serde.list_lengths
    assert len(copied) >= TURNS - 2  # the reads at the start of later turns are copies, not deserializations


def test_a_chat_agents_puts_read_no_value_back(tmp_path, monkeypatch) -> None:
    """Every put finds its delta bases in the saver's cache, in a new saver too once its first
    read filled it; a value nothing can be built on (the ``[]`` LangGraph leaves in
    ``__pregel_tasks`` after each turn's input) is not read back by the next turn's put."""
    reads: list = []
    fetch = write.fetch_blob_rows

    def counted(d: Any, keys: Any) -> Any:
        reads.append(keys)
        return (yield from fetch(d, keys))

    monkeypatch.setattr(write, "fetch_blob_rows", counted)
    path = str(tmp_path / "t.db")
    with SqliteSaver.from_conn_string(path) as saver:
        _chat(saver)
    assert reads == []
    with SqliteSaver.from_conn_string(path) as saver:  # as a new process: an empty cache
        messages = _chat(saver)
    assert reads == [] and len(messages) > 4 * TURNS
