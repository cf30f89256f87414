"""A value the serializer cannot store raises one ``SerializationError`` (a ``TypeError``) naming
the channel (or the pending write's channel and task), the path inside the value and the type;
nothing of the failing put or put_writes is written. Real graphs on SQLite and Postgres."""

from __future__ import annotations

import dataclasses
import threading
from collections import namedtuple

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Send

from threadline import ThreadlineError
from threadline.codec import encode
from threadline.codec import tags
from threadline.codec.serde import default_serde
from threadline.errors import SerializationError

from backends import Backend


def _graph(saver):
    def hello(state: MessagesState) -> dict:
        return {"messages": [AIMessage(f"m{i}") for i in range(3)]}

    def leak(state: MessagesState) -> dict:
        return {"messages": [AIMessage("x", additional_kwargs={"lock": threading.Lock()})]}

    b = StateGraph(MessagesState)
    b.add_node("hello", hello)
    b.add_node("leak", leak)
    b.add_edge(START, "hello")
    b.add_edge("hello", "leak")
    return b.compile(checkpointer=saver)


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_graph_error_names_channel_path_and_type(sync_backend: Backend, durability: str) -> None:
    cfg = {"configurable": {"thread_id": f"t-{durability}"}}
    with sync_backend.open() as saver:
        g = _graph(saver)
        with pytest.raises(SerializationError) as caught:
            g.invoke({"messages": []}, cfg, durability=durability)
        err = caught.value
        assert isinstance(err, ThreadlineError) and isinstance(err, TypeError)
        assert err.channel == "messages" and err.type_name == "_thread.lock"
        # the checkpoint's value (messages[3]) or the task's pending write (messages[0])
        if err.task_id is None:
            assert err.path == "messages[3].additional_kwargs.lock"
            assert "channel 'messages': messages[3].additional_kwargs.lock is of type _thread.lock" in str(err)
        else:
            assert err.path == "messages[0].additional_kwargs.lock"
            assert f"task {err.task_id!r} to channel 'messages'" in str(err)
        latest = saver.get_tuple(cfg)
        # the last checkpoint stored is the one before the failing step, whole: 3 messages
        assert latest.metadata["step"] == 1 and len(latest.checkpoint["channel_values"]["messages"]) == 3
        assert all(not isinstance(v, threading.Lock) for _, _, v in latest.pending_writes)


def test_nothing_half_written(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        cfg = saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, empty_checkpoint(), {"step": -1}, {})
        before = sync_backend.snapshot()
        ck = empty_checkpoint()
        ck["channel_values"] = {"ok": list(range(500)), "bad": {"k": [1, {"lock": threading.Lock()}]}}
        ck["channel_versions"] = {"ok": "1", "bad": "1"}
        with pytest.raises(SerializationError, match=r"channel 'bad': bad\.k\[1\]\.lock is of type _thread\.lock"):
            saver.put(cfg, ck, {"step": 0}, {"ok": "1", "bad": "1"})
        with pytest.raises(SerializationError, match=r"task 'task-1' to channel 'w': w is of type _thread\.lock"):
            saver.put_writes(cfg, [("fine", "yes"), ("w", threading.Lock())], "task-1")
        assert sync_backend.snapshot() == before


@dataclasses.dataclass
class Box:
    inner: object


Pair = namedtuple("Pair", "left right")


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (threading.Lock(), "ch"),
        ({"a b": [0, {"x": object()}]}, "ch['a b'][1].x"),
        ([Box(inner={"deep": threading.Lock()})], "ch[0].inner.deep"),
        (Pair(1, (2, threading.Lock())), "ch.right[1]"),
        ({frozenset({1}): 1, "s": Send("node", {"arg": threading.Lock()})}, "ch.s.arg.arg"),
    ],
)
def test_paths_through_containers(value: object, path: str) -> None:
    with pytest.raises(SerializationError) as caught:
        encode(default_serde(), value, "ch")
    assert caught.value.path == path


def test_walker_runs_only_on_failure(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A graph whose values serialize never walks them."""
    from threadline import SqliteSaver

    def refuse(*args: object) -> None:
        raise AssertionError("the walker ran on a value that serialized")

    monkeypatch.setattr(tags, "unserializable", refuse)
    with SqliteSaver.from_conn_string(str(tmp_path / "ok.db")) as saver:
        b = StateGraph(MessagesState)
        b.add_node("hello", lambda s: {"messages": [AIMessage("hi", additional_kwargs={"n": 1})]})
        b.add_edge(START, "hello")
        b.compile(checkpointer=saver).invoke({"messages": []}, {"configurable": {"thread_id": "ok"}})


def test_other_serializer_errors_stay_as_raised() -> None:
    """A serializer that fails otherwise (here a ValueError) is not taken for an unserializable value."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    class Faulty(JsonPlusSerializer):
        def dumps_typed(self, obj: object) -> tuple[str, bytes]:
            raise ValueError("Faulty serializer")

    with pytest.raises(ValueError, match="Faulty serializer") as caught:
        encode(Faulty(), "a plain string", "ch")
    assert not isinstance(caught.value, SerializationError)
