"""Small values are zstd-compressed with threadline's dictionary; every frame still reads.

The codec alone (frames, the shipped dictionary, rows written without it), then a real
LangGraph chat thread on SQLite whose pending writes of one short message are stored
compressed with the dictionary and read back by a saver with nothing cached.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
import zstandard
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, MessagesState, StateGraph

from threadline import SqliteSaver, codec
from threadline.codec import dictionary
from threadline.codec.tags import DICTIONARY_MAX_BYTES
from threadline.errors import CorruptRowError

SERDE = JsonPlusSerializer()
# The shipped dictionary: stored frames name it by ID, so its bytes may never change.
SHIPPED_SHA256 = "07015524edd356624453dea9ac62f78756c89a532266d976de20f73ffa3ef667"


def _frame_dict_id(data: bytes) -> int:
    return zstandard.get_frame_parameters(data).dict_id


def test_the_shipped_dictionary_is_the_one_frames_name() -> None:
    assert hashlib.sha256(dictionary.data()).hexdigest() == SHIPPED_SHA256
    assert dictionary.load().dict_id() == dictionary.DICT_ID


def test_a_short_message_compresses_with_the_dictionary_and_reads_back() -> None:
    value = [AIMessage(content="It is sunny in Lisbon today, 24 degrees.", id="ai-1")]
    tag, raw = SERDE.dumps_typed(value)
    assert 128 <= len(raw) < 512  # compressed now; below the old 512-byte threshold before
    ztag, data = codec.compress(tag, raw)
    assert ztag == "msgpack+zstd" and _frame_dict_id(data) == dictionary.DICT_ID
    plain = zstandard.ZstdCompressor(level=3).compress(raw)
    assert len(data) < 0.7 * len(plain), (len(data), len(plain))
    assert codec.decode(SERDE, ztag, data, "row") == value


def test_large_values_and_rows_written_before_read_without_the_dictionary() -> None:
    big = [f"item {i} of a long list" for i in range(8000)]
    tag, raw = SERDE.dumps_typed(big)
    assert len(raw) >= DICTIONARY_MAX_BYTES
    ztag, data = codec.compress(tag, raw)
    assert _frame_dict_id(data) == 0 and codec.decode(SERDE, ztag, data, "row") == big
    # a frame as earlier versions wrote every row: no dictionary
    small = ["a short list", "of words"] * 20
    tag, raw = SERDE.dumps_typed(small)
    old = zstandard.ZstdCompressor(level=3, write_content_size=True).compress(raw)
    assert codec.decode(SERDE, "msgpack+zstd", old, "row") == small


def test_a_frame_naming_another_dictionary_is_a_corrupt_row() -> None:
    raw = SERDE.dumps_typed(["x" * 40] * 10)[1]
    other = zstandard.train_dictionary(1024, [raw + bytes([i]) * 8 for i in range(200)], dict_id=40000)
    data = zstandard.ZstdCompressor(level=3, dict_data=other, write_content_size=True).compress(raw)
    with pytest.raises(CorruptRowError, match="dictionary 40000"):
        codec.decode(SERDE, "msgpack+zstd", data, "blob ('t', '', 'c', '1')")


def test_a_chat_thread_stores_short_messages_compressed_and_reads_them_cold(tmp_path: Path) -> None:
    def reply(state: MessagesState) -> dict:
        return {"messages": [AIMessage(content=f"Answer {len(state['messages'])}: the forecast says light rain.")]}

    graph = StateGraph(MessagesState)
    graph.add_node("reply", reply)
    graph.add_edge(START, "reply")
    path = tmp_path / "chat.db"
    conf = {"configurable": {"thread_id": "chat"}}
    with SqliteSaver.from_conn_string(str(path)) as saver:
        app = graph.compile(checkpointer=saver)
        for turn in range(5):
            app.invoke({"messages": [HumanMessage(content=f"What is the weather like on day {turn}?")]}, conf)
    rows = sqlite3.connect(path).execute(
        "SELECT type, blob FROM threadline_writes WHERE channel = 'messages' AND type LIKE '%zstd%'").fetchall()
    assert len(rows) == 10  # every human and AI message write
    with SqliteSaver.from_conn_string(str(path)) as cold:
        values = graph.compile(checkpointer=cold).get_state(conf).values["messages"]
    assert [m.content for m in values[-2:]] == ["What is the weather like on day 4?", "Answer 9: the forecast says light rain."]
    assert len(values) == 10
