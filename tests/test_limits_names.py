"""A value over ``max_value_bytes`` is refused with an error naming where it was going: the
thread_id, checkpoint_ns and checkpoint, the channel (and the task, for a pending write), and the
fix — on SQLite, Postgres and Redis, through a real graph and through the saver's own calls.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

from threadline import ValueTooLargeError, limits

KINDS = ("sqlite", "postgres", "redis")
BIG = "v" * 5000


class State(TypedDict):
    notes: Annotated[list, operator.add]
    text: str


def _graph(saver: Any) -> Any:
    def write(state: State) -> dict:
        return {"text": BIG if state["notes"][-1] == "big" else "small"}

    return StateGraph(State).add_node("write", write).add_edge(START, "write").add_edge("write", END).compile(checkpointer=saver)


def _names(err: ValueTooLargeError, thread_id: str, checkpoint_ns: str, channel: str) -> None:
    message = str(err)
    assert f"thread {thread_id!r}" in message and f"checkpoint_ns {checkpoint_ns!r}" in message and f"channel {channel!r}" in message
    assert "max_value_bytes=1000" in message and "limits.configure(max_value_bytes=" in message and "nothing was written" in message
    assert (err.thread_id, err.checkpoint_ns, err.channel, err.limit) == (thread_id, checkpoint_ns, channel, 1000)
    assert err.size is not None and err.size > 1000 and "\n" not in message


@pytest.mark.parametrize("kind", KINDS)
def test_a_node_writing_a_value_too_large_names_thread_task_and_channel(kind: str, fresh_backend: Any) -> None:
    backend = fresh_backend(kind)
    config = {"configurable": {"thread_id": "user-7"}}
    with backend.open() as saver:
        app = _graph(saver)
        app.invoke({"notes": ["first"]}, config)
        before = backend.stored("user-7")
        with limits.override(max_value_bytes=1000), pytest.raises(ValueTooLargeError) as err:
            app.invoke({"notes": ["big"]}, config)
        _names(err.value, "user-7", "", "text")
        assert err.value.task_id is not None and f"the pending write of task {err.value.task_id!r}" in str(err.value)
        assert err.value.checkpoint_id is not None and err.value.checkpoint_id in str(err.value)
        assert backend.stored("user-7")["writes"].count("text") == before["writes"].count("text")  # the write was not stored


@pytest.mark.parametrize("kind", KINDS)
def test_a_put_of_a_value_too_large_names_thread_namespace_checkpoint_and_channel(kind: str, fresh_backend: Any) -> None:
    backend = fresh_backend(kind)
    with backend.open() as saver:
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"text": BIG, "small": "x"}
        checkpoint["channel_versions"] = {"text": "1", "small": "1"}
        config = {"configurable": {"thread_id": "user-8", "checkpoint_ns": "inner:1"}}
        with limits.override(max_value_bytes=1000), pytest.raises(ValueTooLargeError) as err:
            saver.put(config, checkpoint, {"source": "input", "step": -1}, {"text": "1", "small": "1"})
        _names(err.value, "user-8", "inner:1", "text")
        assert err.value.task_id is None and err.value.checkpoint_id == checkpoint["id"] and checkpoint["id"] in str(err.value)
        assert saver.get_tuple(config) is None  # nothing was written
