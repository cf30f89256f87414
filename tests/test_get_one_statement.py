"""``get_tuple`` in one statement on Postgres (``PostgresDialect.get_statement``): the same
tuples as reading the checkpoint, its blob chains and its writes one statement each, with
pending writes, sends, subgraph namespaces, encryption and cached values skipped."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import TASKS
from langgraph.types import Send

from backends import make_backend
from threadline.codec import BlobCodec, Keyring
from threadline.errors import CorruptRowError
from threadline.keys import key_of
from threadline.storage import ops
from threadline.storage.dialect.postgres import PostgresDialect

KEY = base64.b64encode(bytes(range(32))).decode()


class Separate(PostgresDialect):
    """Postgres without the one-statement get: the reference."""

    def get_statement(self, latest: bool) -> None:
        return None


def counted(op):
    """Run ``op``, recording how many statements it yields in ``counted.n``."""
    counted.n = 0
    counted.sql = []
    q = next(op)
    while True:
        counted.n += 1
        counted.sql.append(q.sql[:150])
        try:
            q = op.send((yield q))
        except StopIteration as stop:
            return stop.value


@pytest.fixture
def pg(tmp_path: Path, request: pytest.FixtureRequest):
    return make_backend("postgres", tmp_path, request)


def _put(saver, thread_id: str, ns: str, parent: str | None, step: int, versions: dict, values: dict, new: dict) -> dict:
    ck = empty_checkpoint()
    ck["id"] = str(uuid6(clock_seq=step))
    ck["v"] = 4  # LangGraph v4+: no parent sends to look up (an older checkpoint costs a second statement)
    versions.update(new)
    ck["channel_values"] = values
    ck["channel_versions"] = dict(versions)
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, **({"checkpoint_id": parent} if parent else {})}}
    return saver.put(config, ck, {"source": "loop", "step": step}, new)


def _read(saver, config: dict, dialect) -> tuple:
    got = saver.run(counted(ops.get_tuple(dialect, saver.serde, key_of(config), saver.blob_codec)))
    return got, counted.n


@pytest.mark.parametrize("encrypted", [False, True])
@pytest.mark.parametrize("ns", ["", "child:1"])
def test_one_statement_reads_what_separate_statements_read(pg, ns: str, encrypted: bool) -> None:
    with pg.open() as saver:
        if encrypted:
            saver.blob_codec = BlobCodec(keys=Keyring([KEY]))
        versions: dict = {}
        messages = [AIMessage(content=f"m{i} " * 40, id=f"m{i}") for i in range(30)]
        config = _put(saver, "t", ns, None, 1, versions, {"messages": messages, "n": 1}, {"messages": "1", "n": "1"})
        for step in range(2, 6):  # deltas on the messages, a snapshot of n each step
            messages = messages + [AIMessage(content=f"s{step} " * 40, id=f"s{step}")]
            config = _put(saver, "t", ns, config["configurable"]["checkpoint_id"], step, versions,
                          {"messages": messages, "n": step}, {"messages": str(step), "n": str(step)})
        saver.put_writes(config, [("messages", AIMessage(content="pending", id="p")), ("n", 7)], "task-b", "~0")
        saver.put_writes(config, [(TASKS, Send("node", {"x": 1})), (TASKS, Send("node", {"x": 2}))], "task-a", "~1")
        saver.put_writes(config, [("__interrupt__", [{"value": "ask"}])], "task-a", "~1")
        named = {"configurable": {**config["configurable"]}}
        latest = {"configurable": {"thread_id": "t", "checkpoint_ns": ns}}
        for target in (named, latest):
            for cached in (True, False):
                if not cached:
                    saver.blob_codec.cache.clear()
                want, _ = _read(saver, target, Separate())
                if not cached:
                    saver.blob_codec.cache.clear()
                got, statements = _read(saver, target, saver.dialect)
                assert statements == 1, counted.sql
                assert got == want and got.pending_writes == want.pending_writes and len(got.pending_writes) == 5
                assert got.checkpoint["channel_values"]["messages"] == messages
        assert saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": "other"}}) is None


def test_cached_values_are_not_sent_again(pg) -> None:
    with pg.open() as saver:
        versions: dict = {}
        messages = [AIMessage(content=f"m{i} " * 40, id=f"m{i}") for i in range(30)]
        config = _put(saver, "t", "", None, 1, versions, {"messages": messages}, {"messages": "1"})
        latest = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        channels, versions_ = ops.read._cached_pairs(saver.blob_codec, key_of(latest))
        assert channels == ["messages"] and versions_ == ["1"]
        rows = saver.run(_rows(saver, latest, channels, versions_))
        assert [r[0] for r in rows] == [0]  # the checkpoint row only: the cached value is skipped
        assert saver.get_tuple(latest).checkpoint["channel_values"]["messages"] == messages


def _rows(saver, config: dict, channels: list, versions: list):
    return (yield ops.Q(saver.dialect.get_statement(True), ["t", "", channels, versions], read=True))


def test_a_skipped_value_the_cache_no_longer_holds_is_read_after(pg, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache may drop a value between choosing what to skip and using it (another thread)."""
    with pg.open() as saver:
        config = _put(saver, "t", "", None, 1, {}, {"n": [1, 2, 3] * 100}, {"n": "1"})
        monkeypatch.setattr(ops.read, "_cached_pairs", lambda bc, key: (["n"], ["1"]))
        saver.blob_codec.cache.clear()
        got, statements = _read(saver, config, saver.dialect)
        assert got.checkpoint["channel_values"]["n"] == [1, 2, 3] * 100 and statements == 2


def test_a_checkpoint_whose_versions_are_no_object_is_a_corrupt_row(pg) -> None:
    with pg.open() as saver:
        config = _put(saver, "t", "", None, 1, {}, {"n": 1}, {"n": "1"})
        pg.sql("UPDATE threadline_checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_versions}', '[1]')")
        saver.blob_codec.cache.clear()
        with pytest.raises(CorruptRowError):
            saver.get_tuple(config)


def _chat(saver, encrypted: bool) -> tuple[list[dict], list]:
    """A list channel whose later versions reference the pending writes that extended them
    (``delta-ref`` rows): the configs of its checkpoints and the list at the last."""
    if encrypted:
        saver.blob_codec = BlobCodec(keys=Keyring([KEY]))
    configs: list[dict] = []
    chat = [f"start {i} " * 30 for i in range(4)]
    for step in range(1, 7):
        parent = configs[-1]["configurable"]["checkpoint_id"] if configs else None
        configs.append(_put(saver, "r", "", parent, step, {}, {"chat": chat}, {"chat": str(step)}))
        added = [f"m{step}.{i} " + "words " * 30 for i in range(2)]
        saver.put_writes(configs[-1], [("chat", added)], f"task-{step}")
        chat = chat + added
    return configs, chat[:-2]


@pytest.mark.parametrize("encrypted", [False, True])
def test_the_writes_references_name_come_in_the_same_statement(pg, encrypted: bool) -> None:
    """Those of a checksummed reference; an encrypted one's are read after (its bytes are sealed)."""
    with pg.open() as saver:
        configs, chat = _chat(saver, encrypted)
        assert pg.sql("SELECT COUNT(*) FROM threadline_blobs WHERE type LIKE 'delta-ref:%'")[0][0] >= 3
        counts = []
        for config in configs:
            saver.blob_codec.cache.clear()
            want, _ = _read(saver, config, Separate())
            saver.blob_codec.cache.clear()
            got, statements = _read(saver, config, saver.dialect)
            assert got == want
            counts.append(statements)
        assert got.checkpoint["channel_values"]["chat"] == chat
        assert set(counts) == ({1, 2} if encrypted else {1}), counts


@pytest.mark.parametrize(
    "damage",
    [
        "overlay(blob placing '\\xff'::bytea from 37 for 1)",  # the checkpoint_id read in SQL is no text
        "overlay(blob placing 'x'::bytea from 34 for 1)",  # no JSON array where SQL looks for one
        "substring(blob from 1 for 35)",  # cut short
        "overlay(blob placing 'x'::bytea from 60 for 1)",  # another checkpoint_id
    ],
)
def test_a_damaged_reference_is_a_corrupt_row(pg, damage: str) -> None:
    """What the statement reads in a reference's bytes is never trusted: the row's seal fails."""
    with pg.open() as saver:
        configs, _ = _chat(saver, False)
        pg.sql(f"UPDATE threadline_blobs SET blob = {damage} WHERE type = 'delta-ref:msgpack+sum'")
        saver.blob_codec.cache.clear()
        with pytest.raises(CorruptRowError):
            saver.get_tuple(configs[-2])


def test_a_damaged_referenced_write_read_in_the_same_statement_is_a_corrupt_row(pg) -> None:
    with pg.open() as saver:
        configs, _ = _chat(saver, False)
        pg.sql("UPDATE threadline_writes SET blob = overlay(blob placing 'x'::bytea from 20 for 1)")
        saver.blob_codec.cache.clear()
        with pytest.raises(CorruptRowError, match="write"):
            _read(saver, configs[-2], saver.dialect)
        assert counted.n == 1
