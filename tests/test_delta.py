"""Delta encoding and compression on real databases, and their lifecycle safety.

(The codec alone is ``test_delta_codec.py``.)

* a hypothesis property: ``get_tuple`` returns exactly what was ``put`` for
  random sequences of appends, in-place mutations, replacements, shrinking
  lists, dict merges, key changes/removals/reorders, branches and saver restarts;
* the storage rules on every backend: chains fetched in one query, snapshots at
  least every K deltas, a base changed behind the saver's back, compressed writes;
* lifecycle on real LangGraph threads: ``prune``, ``delete_for_runs``,
  ``copy_thread``, ``delete_thread`` leave every kept checkpoint readable.
"""

from __future__ import annotations

import copy
import importlib.util
import random
import sqlite3
import struct
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from threadline import SqliteSaver, codec
from threadline.codec import BlobCodec
from threadline.codec.tags import DELTA_PIECE_BYTES
from threadline.storage import ops
from threadline.storage import rows as R
from threadline.keys import key_of
from threadline.codec.serde import default_serde

from backends import Backend
from test_delta_codec import JSONISH, cont, dumps

SERDE = default_serde()


def _load_fixture_module():
    path = Path(__file__).parent / "fixtures" / "make_foundation.py"
    spec = importlib.util.spec_from_file_location("make_foundation", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_foundation"] = module  # typing.get_type_hints looks the module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


FX = _load_fixture_module()


# --- the property: get_tuple returns exactly what was put -----------------------------

ITEM = JSONISH | st.builds(
    lambda text, n: AIMessage(content=text, id=f"m{n}"), st.text(max_size=60), st.integers(0, 10**6)
)
APPEND = st.tuples(st.just("append"), st.lists(ITEM, min_size=1, max_size=6))
LIST_OP = st.one_of(
    APPEND,
    APPEND,
    APPEND,
    st.tuples(st.just("set"), st.integers(0, 1000), ITEM),
    st.tuples(st.just("nested"), st.integers(0, 1000), ITEM),
    st.tuples(st.just("replace"), st.lists(ITEM, max_size=8)),
    st.tuples(st.just("shrink"), st.integers(1, 4)),
)
MERGE = st.tuples(st.just("merge"), st.dictionaries(st.text(max_size=6), ITEM, min_size=1, max_size=4))
DICT_OP = st.one_of(
    MERGE,
    MERGE,
    st.tuples(st.just("change"), st.integers(0, 1000), ITEM),
    st.tuples(st.just("remove"), st.integers(0, 1000)),
    st.tuples(st.just("reorder")),
    st.tuples(st.just("replace"), st.dictionaries(st.text(max_size=6), ITEM, max_size=5)),
)
STEP = st.fixed_dictionaries(
    {
        "parent": st.one_of(st.none(), st.none(), st.none(), st.integers(0, 1000)),  # None: continue the branch
        "restart": st.sampled_from([False] * 6 + [True]),
        "list_ops": st.lists(LIST_OP, max_size=3),
        "dict_ops": st.lists(DICT_OP, max_size=2),
        "touch": st.booleans(),  # a new version even when nothing changed
    }
)


def apply_list_op(value: list, op: tuple) -> list:
    kind = op[0]
    if kind == "append":
        value.extend(copy.deepcopy(op[1]))
    elif kind == "set" and value:
        value[op[1] % len(value)] = copy.deepcopy(op[2])  # in place: same list object
    elif kind == "nested" and value:
        target = value[op[1] % len(value)]
        if isinstance(target, dict):
            target["nested"] = copy.deepcopy(op[2])  # in place, one level down
        elif isinstance(target, list):
            target.append(copy.deepcopy(op[2]))
        elif isinstance(target, AIMessage):
            target.content = f"{target.content}!"  # an in-place mutation of a message
    elif kind == "replace":
        return copy.deepcopy(op[1])
    elif kind == "shrink":
        del value[max(0, len(value) - op[1]):]
    return value


def apply_dict_op(value: dict, op: tuple) -> dict:
    kind = op[0]
    keys = list(value)
    if kind == "merge":
        value.update(copy.deepcopy(op[1]))
    elif kind == "change" and keys:
        value[keys[op[1] % len(keys)]] = copy.deepcopy(op[2])
    elif kind == "remove" and keys:
        del value[keys[op[1] % len(keys)]]
    elif kind == "reorder":
        return dict(reversed(list(value.items())))
    elif kind == "replace":
        return copy.deepcopy(op[1])
    return value


def assert_exact(got: dict, expected: dict) -> None:
    assert got == expected
    for ch, value in expected.items():  # same bytes: same dict key order, same types
        assert dumps(got[ch]) == dumps(value), ch


class Model:
    """Drives a saver through random steps and remembers what every checkpoint must read back."""

    def __init__(self, saver_factory, thread_id: str = "t") -> None:
        self.factory = saver_factory
        self.saver = saver_factory()
        self.thread_id = thread_id
        self.checkpoints: list[tuple[dict, dict, dict]] = []  # (config, expected values, versions)
        self.config: dict = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        self.live: dict[str, Any] = {"L": [], "D": {}}
        self.versions: dict[str, str] = {}

    def step(self, step: dict) -> None:
        if step["restart"]:
            self.saver = self.factory()  # a new saver: empty cache, reads its bases back
        if step["parent"] is not None and self.checkpoints:
            config, expected, versions = self.checkpoints[step["parent"] % len(self.checkpoints)]
            self.config, self.live, self.versions = config, copy.deepcopy(expected), dict(versions)
        before = {ch: dumps(v) for ch, v in self.live.items()}
        for op in step["list_ops"]:
            self.live["L"] = apply_list_op(self.live["L"], op)
        for op in step["dict_ops"]:
            self.live["D"] = apply_dict_op(self.live["D"], op)
        new_versions = {}
        for ch, value in self.live.items():
            if ch not in self.versions or step["touch"] or dumps(value) != before[ch]:
                new_versions[ch] = self.versions[ch] = self.saver.get_next_version(self.versions.get(ch), None)
        ck = empty_checkpoint()
        ck["id"] = str(uuid6(clock_seq=-1))
        ck["channel_values"] = self.live  # the live objects: mutated in place by later steps
        ck["channel_versions"] = dict(self.versions)
        self.config = self.saver.put(self.config, ck, {"source": "loop", "step": len(self.checkpoints)}, new_versions)
        expected = copy.deepcopy(self.live)
        self.checkpoints.append((self.config, expected, dict(self.versions)))
        assert_exact(self.saver.get_tuple(self.config).checkpoint["channel_values"], expected)

    def check_all(self, saver) -> None:
        for config, expected, versions in self.checkpoints:
            got = saver.get_tuple(config)
            assert got.checkpoint["channel_versions"] == versions
            assert_exact(got.checkpoint["channel_values"], expected)
        listed = {t.config["configurable"]["checkpoint_id"]: t for t in saver.list({"configurable": {"thread_id": self.thread_id}})}
        assert len(listed) == len(self.checkpoints)
        for config, expected, _ in self.checkpoints:
            assert_exact(listed[config["configurable"]["checkpoint_id"]].checkpoint["channel_values"], expected)


def memory_sqlite(codec_kwargs: dict):
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)

    def factory() -> SqliteSaver:
        saver = SqliteSaver(conn)
        saver.blob_codec = BlobCodec(**codec_kwargs)
        return saver

    return conn, factory


@given(
    steps=st.lists(STEP, min_size=1, max_size=30),
    max_depth=st.sampled_from([1, 2, 3, 8, 64]),
    piece_bytes=st.sampled_from([0, 0, 64, 1024]),
    compress_min=st.sampled_from([-1, 0, 200]),
    fast_lists=st.sampled_from([True, True, False]),
    checks=st.sampled_from([0, 3]),
)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@pytest.mark.filterwarnings("error::RuntimeWarning")  # a fast-path self-check failure is a failure here
def test_get_tuple_returns_exactly_what_was_put(
    steps: list[dict], max_depth: int, piece_bytes: int, compress_min: int, fast_lists: bool, checks: int
) -> None:
    """``checks=0``: the item-by-item list path runs unverified, so only the assertions judge it."""
    conn, factory = memory_sqlite(
        {
            "max_depth": max_depth,
            "delta_piece_bytes": piece_bytes,
            "delta_min_bytes": 0,
            "delta_max_ratio": 100.0,
            "compress_min_bytes": compress_min,
            "fast_lists": fast_lists,
            "_checks_left": checks,
        }
    )
    try:
        model = Model(factory)
        for step in steps:
            model.step(step)
        model.check_all(factory())  # a saver that never saw the writes: every chain read from the database
    finally:
        conn.close()


def random_steps(seed: int, n: int) -> list[dict]:
    """A deterministic walk for the backends (no hypothesis: one Postgres schema per test)."""
    rnd = random.Random(seed)

    def item(i: int) -> Any:
        return rnd.choice([f"text {i} " * rnd.randint(1, 8), {"i": i, "tags": ["a", "b"][: rnd.randint(0, 2)]}, AIMessage(content=f"msg {i}", id=f"m{i}"), [i, float(i) / 3]])

    steps = []
    for i in range(n):
        list_ops: list[tuple] = [("append", [item(i * 10 + j) for j in range(rnd.randint(1, 3))])]
        r = rnd.random()
        if r < 0.08:
            list_ops.append(("set", rnd.randint(0, 99), item(-i)))
        elif r < 0.14:
            list_ops.append(("nested", rnd.randint(0, 99), item(-i)))
        elif r < 0.18:
            list_ops.append(("shrink", rnd.randint(1, 3)))
        elif r < 0.2:
            list_ops.append(("replace", [item(-i)]))
        dict_ops: list[tuple] = [("merge", {f"k{i}": item(i)})]
        r = rnd.random()
        if r < 0.15:
            dict_ops.append(("change", rnd.randint(0, 99), item(-i)))
        elif r < 0.2:
            dict_ops.append(("remove", rnd.randint(0, 99)))
        steps.append(
            {
                "parent": rnd.randint(0, 99) if rnd.random() < 0.1 else None,
                "restart": rnd.random() < 0.1,
                "list_ops": list_ops,
                "dict_ops": dict_ops,
                "touch": rnd.random() < 0.1,
            }
        )
    return steps


def test_random_walk_round_trips_on_every_backend(sync_backend: Backend) -> None:
    with sync_backend.open() as first:

        def factory():
            # a saver on the same connection with its own, empty cache ("restart")
            saver = type(first)(first.conn)
            saver.is_setup = True
            saver.blob_codec = BlobCodec(max_depth=4, delta_min_bytes=0, delta_piece_bytes=0, compress_min_bytes=300)
            return saver

        model = Model(factory)
        for step in random_steps(7, 60):
            model.step(step)
        model.check_all(factory())
    kinds: dict[str, int] = {}
    for tag, n in sync_backend.sql("SELECT type, COUNT(*) FROM threadline_blobs GROUP BY type"):
        kinds[tag.removesuffix(codec.SUM)] = kinds.get(tag.removesuffix(codec.SUM), 0) + n  # every row is sealed
    assert kinds.get("delta-list:msgpack", 0) + kinds.get("delta-list:msgpack+zstd", 0) > 20, kinds
    assert kinds.get("delta-dict:msgpack", 0) + kinds.get("delta-dict:msgpack+zstd", 0) > 10, kinds
    assert any(k.endswith("+zstd") for k in kinds), kinds


# --- storage rules, on every backend ---------------------------------------------------


class Counting:
    """Wraps a sans-IO operation and records the SQL it runs."""

    def __init__(self) -> None:
        self.sql: list[str] = []

    def wrap(self, op):
        try:
            q = next(op)
            while True:
                self.sql.append(q.sql)
                q = op.send((yield q))
        except StopIteration as stop:
            return stop.value


def grow(saver, thread_id: str, n: int, *, start: int = 0, config: dict | None = None, state: tuple | None = None) -> tuple[dict, list]:
    """Append two messages per put, n puts. ``state``: (messages, version) to go on from without reading."""
    config = config or {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    if state is None:
        tup = saver.get_tuple(config)
        messages = list(tup.checkpoint["channel_values"]["messages"]) if tup else []
        version = tup.checkpoint["channel_versions"]["messages"] if tup else None
    else:
        messages, version = state
    for i in range(start, start + n):
        messages = messages + [HumanMessage(content=f"question {i} " * 10, id=f"h{i}"), AIMessage(content=f"answer {i} " * 10, id=f"a{i}")]
        version = saver.get_next_version(version, None)
        ck = empty_checkpoint()
        ck["id"] = str(uuid6(clock_seq=-1))
        ck["channel_values"] = {"messages": messages}
        ck["channel_versions"] = {"messages": version}
        config = saver.put(config, ck, {"source": "loop", "step": i}, {"messages": version})
    return config, messages


def chain_depths(backend: Backend, thread_id: str) -> list[int]:
    rows = backend.sql(
        "SELECT version, base_version, type, blob FROM threadline_blobs WHERE thread_id = ? AND channel = 'messages' ORDER BY version",
        (thread_id,),
    )
    out = []
    for version, base, tag, data in rows:
        tag, data = codec.PLAIN.open(R.blob_row_ref(thread_id, "", "messages", version, base), tag, data)
        if codec.is_delta(tag):
            _, payload = codec.decompress(tag[len(codec.DELTA_LIST):], data, "row")
            out.append(struct.unpack_from("<BH", payload)[1])
        else:
            out.append(0)
    return out


def test_chain_is_bounded_by_k_and_read_in_one_query(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        saver.blob_codec = BlobCodec(max_depth=5)
        config, messages = grow(saver, "t", 40)
        depths = chain_depths(sync_backend, "t")
        assert max(depths) == 5 and depths.count(0) >= 40 // 6
        assert all(b == a + 1 or b == 0 for a, b in zip(depths, depths[1:]))  # a snapshot at least every K deltas
        sync_backend.sql("DELETE FROM threadline_heads")  # read through the chain, not the latest values' head row
        counting = Counting()
        got = saver.run(counting.wrap(ops.get_tuple(saver.dialect, saver.serde, key_of(config))))
        assert got.checkpoint["channel_values"]["messages"] == messages
        blob_queries = [s for s in counting.sql if "blobs" in s]
        assert len(blob_queries) == 1 and "WITH RECURSIVE" in blob_queries[0]


def test_a_new_saver_continues_with_deltas_and_a_changed_base_falls_back_to_a_snapshot(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        config, _ = grow(saver, "t", 6)
    with sync_backend.open() as saver:  # empty cache: reads the parent's versions and the base back
        config, messages = grow(saver, "t", 1, start=6, config=config)
        last = sync_backend.sql("SELECT type, base_version FROM threadline_blobs WHERE thread_id = 't' ORDER BY version DESC LIMIT 1")
        assert codec.is_delta(last[0][0]) and last[0][1] is not None
        # rewrite the base row behind the saver's back (another process, a restore, …) as a snapshot
        head = sync_backend.sql("SELECT version FROM threadline_blobs WHERE thread_id = 't' ORDER BY version DESC LIMIT 1")[0][0]
        resolved = saver.run(ops.fetch_blobs(saver.dialect, [("t", "", "messages", head)]))[("t", "", "messages", head)]
        assert codec.load(SERDE, resolved, "row") == messages
        sync_backend.sql(
            "UPDATE threadline_blobs SET type = 'msgpack', blob = ?, base_version = NULL WHERE thread_id = 't' AND version = ?",
            (resolved[2].serialized(), head),
        )
        # the cached base no longer matches the row: the delta is refused, a snapshot written instead
        config, messages = grow(saver, "t", 1, start=7, config=config, state=(messages, head))
        newest = sync_backend.sql("SELECT type, base_version FROM threadline_blobs WHERE thread_id = 't' ORDER BY version DESC LIMIT 1")[0]
        assert not codec.is_delta(newest[0]) and newest[1] is None
        assert saver.get_tuple(config).checkpoint["channel_values"]["messages"] == messages
        config, messages = grow(saver, "t", 2, start=8, config=config)
    with sync_backend.open() as saver:
        assert saver.get_tuple(config).checkpoint["channel_values"]["messages"] == messages


def test_large_writes_are_compressed_and_read_back(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        config, _ = grow(saver, "t", 1)
        big = [AIMessage(content="a long tool result " * 200, id="tool-1")]
        saver.put_writes(config, [("messages", big), ("small", 1)], "task-1")
        got = saver.get_tuple(config).pending_writes
        assert got == [("task-1", "messages", big), ("task-1", "small", 1)]
    types = dict(sync_backend.sql("SELECT channel, type FROM threadline_writes"))
    assert types == {"messages": "msgpack+zstd+sum", "small": "msgpack+sum"}


def test_delta_history_seed_reads_through_chains(sync_backend: Backend) -> None:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    with sync_backend.open() as saver:
        config, messages = grow(saver, "t", 8)
        saver.put_writes(config, [("messages", ["extra"])], "task")
        got = saver.get_delta_channel_history(config=config, channels=["messages"])
        assert got["messages"]["seed"] == messages[:-2]  # the nearest stored value among the ancestors
        assert got == BaseCheckpointSaver.get_delta_channel_history(saver, config=config, channels=["messages"])


async def test_async_savers_write_and_read_deltas(async_backend: Backend) -> None:
    async with async_backend.open() as saver:
        saver.blob_codec = BlobCodec(max_depth=3, delta_min_bytes=0, delta_piece_bytes=0)
        config = {"configurable": {"thread_id": "a", "checkpoint_ns": ""}}
        value: list = []
        version = None
        for i in range(10):
            value.append({"i": i, "text": "words " * 20})
            version = saver.get_next_version(version, None)
            ck = empty_checkpoint()
            ck["id"] = str(uuid6(clock_seq=-1))
            ck["channel_values"] = {"v": value}
            ck["channel_versions"] = {"v": version}
            config = await saver.aput(config, ck, {"step": i}, {"v": version})
            assert (await saver.aget_tuple(config)).checkpoint["channel_values"]["v"] == value
    async with async_backend.open() as saver:
        assert (await saver.aget_tuple(config)).checkpoint["channel_values"]["v"] == value
    assert async_backend.sql("SELECT COUNT(*) FROM threadline_blobs WHERE type LIKE 'delta-list:%'")[0][0] >= 5


# --- lifecycle on real LangGraph threads ------------------------------------------------


def run_threads(saver) -> dict:
    """Real LangGraph runs (the foundation fixture graph) with long message histories and several runs."""
    graph = FX.build_graph(saver)
    runs: dict[str, list[str]] = {}
    for tid in ("life", "other"):
        for turn in range(8):
            run_id = str(uuid.uuid4())
            runs.setdefault(tid, []).append(run_id)
            graph.invoke({**FX.human(f"turn {turn}: " + "words " * 30, turn), "mode": "plain"}, {**FX.cfg(tid), "run_id": run_id})
    # a branch from an early checkpoint, continued
    early = [s for s in graph.get_state_history(FX.cfg("life")) if s.metadata.get("step") == 4][0]
    forked = graph.update_state(early.config, {"messages": [HumanMessage(content="branch " * 30, id="hb")]})
    run_id = str(uuid.uuid4())
    runs["life"].append(run_id)
    graph.invoke({**FX.human("on the branch " * 10, 99), "mode": "plain"}, {**forked, "run_id": run_id})
    return runs


def everything(saver, thread_id: str) -> dict[str, Any]:
    return {
        (t.config["configurable"]["checkpoint_ns"], t.config["configurable"]["checkpoint_id"]): (
            FX.jsonable(t.checkpoint["channel_values"]),
            FX.jsonable(t.pending_writes),
        )
        for t in saver.list({"configurable": {"thread_id": thread_id}})
    }


def lifecycle_saver(backend: Backend):
    """A saver with short chains, so lifecycle operations cut through them."""

    class Opener:
        def __enter__(self):
            self.cm = backend.open()
            saver = self.cm.__enter__()
            saver.blob_codec = BlobCodec(max_depth=3, delta_min_bytes=0)
            return saver

        def __exit__(self, *exc):
            return self.cm.__exit__(*exc)

    return Opener()


@pytest.mark.parametrize("operation", ["prune", "delete_for_runs", "copy_thread", "delete_thread"])
def test_lifecycle_keeps_every_kept_checkpoint_readable(sync_backend: Backend, operation: str) -> None:
    with lifecycle_saver(sync_backend) as saver:
        runs = run_threads(saver)
        before = everything(saver, "life")
        other_before = everything(saver, "other")
        assert sync_backend.sql("SELECT COUNT(*) FROM threadline_blobs WHERE thread_id = 'life' AND type LIKE 'delta-%'")[0][0] > 10
        if operation == "prune":
            saver.prune(["life"], strategy="keep_latest")
        elif operation == "delete_for_runs":
            saver.delete_for_runs(runs["life"][1:7])  # the middle runs: later checkpoints' bases were written there
        elif operation == "copy_thread":
            saver.copy_thread("life", "copy")
            saver.delete_thread("life")
        else:
            saver.delete_thread("life")
    with lifecycle_saver(sync_backend) as saver:  # a new saver: nothing cached, every chain read from the tables
        kept_thread = "copy" if operation == "copy_thread" else "life"
        after = everything(saver, kept_thread)
        if operation == "delete_thread":
            assert after == {}
        else:
            assert after and set(after) <= set(before)
            for k, v in after.items():
                assert v[0] == before[k][0], k  # values exactly as before
            if operation == "copy_thread":
                assert after == before
            if operation == "prune":
                assert len([k for k in after if k[0] == ""]) == 1
        assert everything(saver, "other") == other_before
        # and the thread keeps going on top of what was kept
        graph = FX.build_graph(saver)
        if operation != "delete_thread":
            state = graph.get_state(FX.cfg(kept_thread))
            graph.invoke({**FX.human("after " * 20, 500), "mode": "plain"}, FX.cfg(kept_thread))
            new_state = graph.get_state(FX.cfg(kept_thread))
            assert FX.jsonable(new_state.values["messages"][: len(state.values["messages"])]) == FX.jsonable(state.values["messages"])
            assert len(new_state.values["messages"]) == len(state.values["messages"]) + 2
    with lifecycle_saver(sync_backend) as saver:
        if operation != "delete_thread":
            assert everything(saver, kept_thread)  # still all readable after the new puts


def test_gc_keeps_the_bases_of_kept_deltas(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        saver.blob_codec = BlobCodec(max_depth=50)
        config, messages = grow(saver, "g", 12)
        ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list({"configurable": {"thread_id": "g"}})]
        # delete every checkpoint but the latest: its value is a delta on versions only deleted checkpoints named
        saver.run(ops.delete_checkpoints(saver.dialect, [("g", "", cid) for cid in ids[1:]]), write=True)
        rows = sync_backend.sql("SELECT COUNT(*) FROM threadline_blobs WHERE thread_id = 'g'")[0][0]
        assert rows > 1  # the chain under the kept delta survived the GC
    with sync_backend.open() as saver:
        assert saver.get_tuple(config).checkpoint["channel_values"]["messages"] == messages


def test_a_small_value_is_written_whole_once_its_chain_holds_a_delta_per_piece_bytes() -> None:
    """``make_delta``'s ``piece_bytes``: at most one delta per that many bytes of the value,
    besides K (a chain of many small deltas reads slower than the value whole)."""
    base, new = ["x" * 100] * 10, ["x" * 100] * 11  # 11 items of ~100 bytes: room for one 1 KB piece
    deep = cont(base)
    assert codec.make_delta(deep, cont(new), max_depth=64, piece_bytes=1024)[2].depth == 1
    assert codec.make_delta(deep, cont(new), max_depth=64, piece_bytes=2048) is None
    deep.depth = 1
    assert codec.make_delta(deep, cont(new), max_depth=64, piece_bytes=1024) is None
    deep.depth = 5
    assert codec.make_delta(deep, cont(new), max_depth=64, piece_bytes=0)[2].depth == 6  # 0: K alone
    assert codec.make_delta(deep, cont(new), max_depth=64, piece_bytes=200) is None  # ~1.1 KB / 200: 5 deltas at most
    assert BlobCodec().delta_piece_bytes == DELTA_PIECE_BYTES == 1024
