"""The official ``langgraph-checkpoint-conformance`` suite against every threadline saver,
plus direct coverage of the sync methods.

Every capability, base and extended, must be detected (the saver overrides the
``a``-method) and pass; failures are printed with the suite's own messages.
The suite drives only the async methods, so ``SqliteSaver`` / ``PostgresSaver``
run there through their worker-thread shells; the second half of this module
(``test_sync_*``) calls their sync methods directly and checks the results,
including the rows in the tables.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest
from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from backends import ALL_KINDS, REDIS_KINDS, Backend

EXPECTED = sorted(c.value for c in ALL_CAPABILITIES)


@pytest.mark.parametrize("kind", ALL_KINDS + REDIS_KINDS)
async def test_official_conformance_suite(kind: str, fresh_backend) -> None:
    async def factory():
        # A fresh database for every capability suite.
        backend: Backend = fresh_backend(kind)
        async with AsyncExitStack() as stack:
            if backend.is_async:
                saver = await stack.enter_async_context(backend.open())
            else:
                saver = stack.enter_context(backend.open())
            yield saver

    registered = checkpointer_test(name=f"threadline-{kind}")(factory)
    report = await validate(registered, progress=ProgressCallbacks.verbose())
    report.print_report()

    assert sorted(report.results) == EXPECTED
    not_detected = [name for name, r in report.results.items() if not r.detected]
    failed = {
        name: r.failures for name, r in report.results.items() if r.detected and r.passed is not True
    }
    message = "\n".join(
        [f"capabilities not detected: {not_detected}"]
        + [f"--- {name}:\n" + "\n".join(fails) for name, fails in failed.items()]
    )
    assert not not_detected and not failed, message
    for name, r in report.results.items():
        assert r.tests_passed > 0 and r.tests_failed == 0, (name, r)
    assert report.conformance_level() == "FULL"


async def test_official_conformance_suite_in_memory() -> None:
    """``threadline.InMemorySaver``: a fresh private database for every capability suite, as the
    official ``InMemorySaver`` is run."""
    from threadline import InMemorySaver

    async def factory():
        async with InMemorySaver() as saver:
            yield saver

    report = await validate(checkpointer_test(name="threadline-memory")(factory), progress=ProgressCallbacks.verbose())
    report.print_report()
    assert sorted(report.results) == EXPECTED
    problems = {name: r.failures for name, r in report.results.items() if not r.detected or r.passed is not True}
    assert not problems, problems
    assert report.conformance_level() == "FULL"


async def test_saver_fixture_is_fresh_and_usable(saver, backend: Backend) -> None:
    """The ``saver`` fixture: an open saver of the backend's class on an empty database."""
    assert type(saver) is backend.saver_class()
    config = _cfg("fresh")
    ck = _ckpt({"v": 1}, {"v": "1"})
    if backend.is_async:
        assert [t async for t in saver.alist(None)] == []
        stored = await saver.aput(config, ck, {"step": 0}, {"v": "1"})
        assert (await saver.aget_tuple(config)).config == stored
    else:
        assert list(saver.list(None)) == []
        stored = saver.put(config, ck, {"step": 0}, {"v": "1"})
        assert saver.get_tuple(config).config == stored
    assert backend.counts()["checkpoints"] == 1


# --- direct sync coverage (SqliteSaver, PostgresSaver) ------------------------


def _ckpt(values: dict, versions: dict, *, cid: str | None = None) -> dict:
    c = empty_checkpoint()
    c["id"] = cid or str(uuid6(clock_seq=-1))
    c["channel_values"] = dict(values)
    c["channel_versions"] = dict(versions)
    return c


def _cfg(thread_id: str, ns: str = "", cid: str | None = None) -> dict:
    conf = {"thread_id": thread_id, "checkpoint_ns": ns}
    if cid is not None:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


class Chain:
    """Writes a linear chain of checkpoints on one (thread, ns) through a sync saver."""

    def __init__(self, saver, thread_id: str, ns: str = "") -> None:
        self.saver, self.thread_id, self.ns = saver, thread_id, ns
        self.values: dict = {}
        self.versions: dict = {}
        self.config = _cfg(thread_id, ns)
        self.ids: list[str] = []
        self.step = -1

    def put(self, changes: dict, **meta) -> dict:
        new_versions = {}
        for ch, v in changes.items():
            self.values[ch] = v
            self.versions[ch] = self.saver.get_next_version(self.versions.get(ch), None)
            new_versions[ch] = self.versions[ch]
        self.step += 1
        metadata = {"source": "loop", "step": self.step, "parents": {}, **meta}
        self.config = self.saver.put(self.config, _ckpt(self.values, self.versions), metadata, new_versions)
        self.ids.append(self.config["configurable"]["checkpoint_id"])
        return self.config


def test_sync_put_get_tuple_round_trip(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        chain = Chain(saver, "t1")
        first = chain.put({"a": 1, "b": [1, 2]}, source="input", user="ann")
        second = chain.put({"b": [1, 2, 3]}, run_id="run-9")

        assert first == _cfg("t1", "", chain.ids[0])
        latest = saver.get_tuple(_cfg("t1"))
        assert isinstance(latest, CheckpointTuple)
        assert latest.config == second
        assert latest.parent_config == first
        # "a" was not in new_versions of the second put: shared by reference, still read back
        assert latest.checkpoint["channel_values"] == {"a": 1, "b": [1, 2, 3]}
        assert latest.checkpoint["channel_versions"] == chain.versions
        assert latest.metadata["run_id"] == "run-9" and latest.metadata["step"] == 1
        assert latest.pending_writes == []

        old = saver.get_tuple(_cfg("t1", "", chain.ids[0]))
        assert old.checkpoint["channel_values"] == {"a": 1, "b": [1, 2]}
        assert old.metadata["user"] == "ann" and old.metadata["source"] == "input"
        assert old.parent_config is None

        assert saver.get_tuple(_cfg("nope")) is None
        assert saver.get_tuple(_cfg("t1", "other-ns")) is None
        assert saver.get_tuple(_cfg("t1", "", str(uuid6(clock_seq=-1)))) is None

    # one blob per (channel, version) actually written: b@1, b@2 (a, a small int, is kept in the
    # checkpoint's document, as the official PostgresSaver keeps primitive values)
    blobs = sync_backend.sql("SELECT channel, COUNT(*) FROM threadline_blobs WHERE thread_id = 't1' GROUP BY channel ORDER BY channel")
    assert blobs == [("b", 2)]
    rows = sync_backend.sql("SELECT checkpoint_count FROM threadline_threads WHERE thread_id = 't1'")
    assert rows == [(2,)]
    # indexed columns extracted from metadata
    cols = sync_backend.sql("SELECT checkpoint_id, step, source, run_id FROM threadline_checkpoints WHERE thread_id = 't1' ORDER BY checkpoint_id")
    assert cols == [(chain.ids[0], 0, "input", None), (chain.ids[1], 1, "loop", "run-9")]


def test_sync_put_same_id_twice_overwrites_without_duplicating(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        cid = str(uuid6(clock_seq=-1))
        v1 = saver.get_next_version(None, None)
        saver.put(_cfg("t"), _ckpt({"x": 1}, {"x": v1}, cid=cid), {"step": 0, "source": "loop"}, {"x": v1})
        saver.put(_cfg("t"), _ckpt({"x": 1}, {"x": v1}, cid=cid), {"step": 0, "source": "update"}, {})
        tuples = list(saver.list(_cfg("t")))
        assert len(tuples) == 1 and tuples[0].metadata["source"] == "update"
        assert tuples[0].checkpoint["channel_values"] == {"x": 1}
    assert sync_backend.sql("SELECT checkpoint_count FROM threadline_threads WHERE thread_id = 't'") == [(1,)]


def test_sync_list_filter_before_limit(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        a = Chain(saver, "ta")
        for i in range(5):
            a.put({"n": i}, source="input" if i == 0 else "loop", tag=f"t{i % 2}", score=i * 1.5, flag=(i == 3))
        b = Chain(saver, "tb")
        b.put({"n": 100}, source="input")
        sub = Chain(saver, "ta", "child:1")
        sub.put({"m": 1})

        root_ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(_cfg("ta"))]
        assert root_ids == list(reversed(a.ids))  # newest first, only ns ""

        all_ta = list(saver.list({"configurable": {"thread_id": "ta"}}))  # no ns: every namespace
        assert len(all_ta) == 6
        assert {t.config["configurable"]["checkpoint_ns"] for t in all_ta} == {"", "child:1"}

        everything = list(saver.list(None))
        assert len(everything) == 7
        ids = [t.config["configurable"]["checkpoint_id"] for t in everything]
        assert ids == sorted(ids, reverse=True)

        def ids_of(**kw) -> list[str]:
            return [t.config["configurable"]["checkpoint_id"] for t in saver.list(kw.pop("config", _cfg("ta")), **kw)]

        assert ids_of(filter={"source": "input"}) == [a.ids[0]]
        assert ids_of(config=None, filter={"source": "input"}) == sorted([a.ids[0], b.ids[0]], reverse=True)
        assert ids_of(filter={"tag": "t1"}) == [a.ids[3], a.ids[1]]
        assert ids_of(filter={"tag": "t1", "step": 3}) == [a.ids[3]]
        assert ids_of(filter={"score": 3.0}) == [a.ids[2]]
        assert ids_of(filter={"flag": True}) == [a.ids[3]]
        assert ids_of(filter={"tag": "nope"}) == []
        assert ids_of(filter={"missing_key": "x"}) == []

        assert ids_of(before=_cfg("ta", "", a.ids[3])) == [a.ids[2], a.ids[1], a.ids[0]]
        assert ids_of(before=_cfg("ta", "", a.ids[3]), limit=2) == [a.ids[2], a.ids[1]]
        assert ids_of(limit=1) == [a.ids[4]]
        assert ids_of(limit=0) == []
        assert ids_of(config=_cfg("ta", "", a.ids[2])) == [a.ids[2]]
        assert ids_of(config=_cfg("ta", "child:1")) == [sub.ids[0]]

        # values come back with each listed tuple
        listed = list(saver.list(_cfg("ta"), limit=2))
        assert [t.checkpoint["channel_values"] for t in listed] == [{"n": 4}, {"n": 3}]
        assert listed[0].parent_config == _cfg("ta", "", a.ids[3])


def test_sync_list_pages_past_page_size(sync_backend: Backend) -> None:
    from threadline.storage import ops

    n = ops.PAGE_SIZE + 7
    with sync_backend.open() as saver:
        chain = Chain(saver, "long")
        for i in range(n):
            chain.put({"i": i})
        listed = list(saver.list(_cfg("long")))
        assert [t.config["configurable"]["checkpoint_id"] for t in listed] == list(reversed(chain.ids))
        assert [t.checkpoint["channel_values"]["i"] for t in listed] == list(range(n - 1, -1, -1))
        assert len(list(saver.list(_cfg("long"), limit=ops.PAGE_SIZE + 3))) == ops.PAGE_SIZE + 3


def test_sync_put_writes(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        chain = Chain(saver, "w")
        cfg = chain.put({"x": 0})
        saver.put_writes(cfg, [("x", 1), ("y", {"k": "v"})], "task-b", "~path-b")
        saver.put_writes(cfg, [("x", 2)], "task-a", "~path-a")
        # regular writes are insert-or-ignore: the same (task, idx) again keeps the first value
        saver.put_writes(cfg, [("x", 99)], "task-a", "~path-a")
        # special channels replace
        saver.put_writes(cfg, [("__error__", "first")], "task-c")
        saver.put_writes(cfg, [("__error__", "second")], "task-c")
        got = saver.get_tuple(cfg).pending_writes
        # LangGraph's writes_sort_key order: task_path, task_id, idx
        assert got == [
            ("task-c", "__error__", "second"),
            ("task-a", "x", 2),
            ("task-b", "x", 1),
            ("task-b", "y", {"k": "v"}),
        ]

        # writes belong to their checkpoint only
        nxt = chain.put({"x": 1})
        assert saver.get_tuple(nxt).pending_writes == []
        assert len(saver.get_tuple(cfg).pending_writes) == 4
        saver.put_writes(nxt, [], "task-empty")  # no writes: nothing stored
        assert saver.get_tuple(nxt).pending_writes == []
    rows = sync_backend.sql("SELECT task_id, idx, channel FROM threadline_writes ORDER BY task_id, idx")
    assert rows == [("task-a", 0, "x"), ("task-b", 0, "x"), ("task-b", 1, "y"), ("task-c", -1, "__error__")]


def test_sync_delete_thread(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        for tid in ("gone", "kept"):
            root = Chain(saver, tid)
            cfg = root.put({"v": tid})
            saver.put_writes(cfg, [("v", "w")], "t1")
            Chain(saver, tid, "sub:1").put({"v": 1})
        before = {t: sync_backend.sql(f"SELECT * FROM threadline_{t} WHERE thread_id = 'kept'") for t in ("checkpoints", "blobs", "writes", "threads")}
        saver.delete_thread("gone")
        assert saver.get_tuple(_cfg("gone")) is None
        assert saver.get_tuple(_cfg("gone", "sub:1")) is None
        assert list(saver.list({"configurable": {"thread_id": "gone"}})) == []
        assert saver.get_tuple(_cfg("kept")).checkpoint["channel_values"] == {"v": "kept"}
        saver.delete_thread("never-existed")  # no error
    for table, rows in before.items():
        assert sync_backend.sql(f"SELECT * FROM threadline_{table} WHERE thread_id = 'kept'") == rows
        assert sync_backend.sql(f"SELECT COUNT(*) FROM threadline_{table} WHERE thread_id = 'gone'") == [(0,)]


def test_sync_delete_for_runs(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        chain = Chain(saver, "r")
        chain.put({"x": 1}, run_id="run-1")
        cfg2 = chain.put({"x": 2}, run_id="run-2")
        saver.put_writes(cfg2, [("x", 3)], "task")
        chain.put({"x": 3}, run_id="run-3")
        other = Chain(saver, "other")
        other.put({"y": 1}, run_id="run-2")
        saver.delete_for_runs(["run-2"])
        left = [t.metadata["run_id"] for t in saver.list(_cfg("r"))]
        assert left == ["run-3", "run-1"]
        assert saver.get_tuple(cfg2) is None
        assert saver.get_tuple(_cfg("other")) is None
        # the latest checkpoint still reads in full (x's version of run-3 is its own blob)
        assert saver.get_tuple(_cfg("r")).checkpoint["channel_values"] == {"x": 3}
        saver.delete_for_runs([])
        saver.delete_for_runs(["no-such-run"])
        assert len(list(saver.list(None))) == 2
    assert sync_backend.sql("SELECT COUNT(*) FROM threadline_writes") == [(0,)]
    assert sync_backend.sql("SELECT thread_id, checkpoint_count FROM threadline_threads") == [("r", 2)]


def test_sync_copy_thread(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        chain = Chain(saver, "src")
        chain.put({"a": 1}, source="input")
        cfg = chain.put({"a": 2, "b": "x"})
        saver.put_writes(cfg, [("a", 3)], "task", "~p")
        Chain(saver, "src", "sub:1").put({"s": True})
        src_before = {t: sync_backend.sql(f"SELECT * FROM threadline_{t} WHERE thread_id = 'src'") for t in ("checkpoints", "blobs", "writes")}

        saver.copy_thread("src", "dst")
        src = list(saver.list({"configurable": {"thread_id": "src"}}))
        dst = list(saver.list({"configurable": {"thread_id": "dst"}}))
        assert len(dst) == len(src) == 3
        for s, d in zip(src, dst):
            assert d.config["configurable"] == {**s.config["configurable"], "thread_id": "dst"}
            assert d.checkpoint == s.checkpoint
            assert d.metadata == s.metadata
            assert d.pending_writes == s.pending_writes
            if s.parent_config:
                assert d.parent_config["configurable"] == {**s.parent_config["configurable"], "thread_id": "dst"}
        saver.copy_thread("nothing-here", "dst2")
        assert saver.get_tuple(_cfg("dst2")) is None
    for table, rows in src_before.items():
        assert sync_backend.sql(f"SELECT * FROM threadline_{table} WHERE thread_id = 'src'") == rows
    assert sync_backend.sql("SELECT thread_id, checkpoint_count FROM threadline_threads ORDER BY thread_id") == [("dst", 3), ("src", 3)]


def test_sync_copy_thread_reports_the_same_size_as_its_source(sync_backend: Backend, request) -> None:
    """The ``threads`` row (checkpoint count, stored bytes) of an exact copy equals its source's."""
    with sync_backend.open() as saver:
        chain = Chain(saver, "src")
        chain.put({"a": "x" * 100, "b": [1, 2, 3]}, source="input", note="hello")
        cfg2 = chain.put({"b": [4]})
        saver.put_writes(cfg2, [("a", "w")], "task")
        saver.copy_thread("src", "dst")
    rows = dict((r[0], r[1:]) for r in sync_backend.sql("SELECT thread_id, checkpoint_count, bytes FROM threadline_threads"))
    assert rows["dst"][0] == rows["src"][0] == 2
    assert rows["dst"][1] == rows["src"][1] > 0


def test_sync_prune(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        chain = Chain(saver, "p")
        # floats: values with blob rows (a small str, int or bool is kept in its checkpoint's document)
        chain.put({"a": 1.5, "big": list(range(50))})
        mid = chain.put({"a": 2.5})
        saver.put_writes(mid, [("a", 9)], "t-mid")
        last = chain.put({"a": 3.5})
        saver.put_writes(last, [("a", 4)], "t-last")
        sub = Chain(saver, "p", "sub:1")
        sub.put({"s": 1.5})
        sub_last = sub.put({"s": 2.5})
        Chain(saver, "q").put({"z": 1})
        Chain(saver, "q").put({"z": 2})

        saver.prune(["p"], strategy="keep_latest")
        remaining = list(saver.list({"configurable": {"thread_id": "p"}}))
        assert sorted(t.config["configurable"]["checkpoint_id"] for t in remaining) == sorted(
            [last["configurable"]["checkpoint_id"], sub_last["configurable"]["checkpoint_id"]]
        )
        latest = saver.get_tuple(_cfg("p"))
        # "big" was written by the first (now deleted) checkpoint: its blob is still referenced and kept
        assert latest.checkpoint["channel_values"] == {"a": 3.5, "big": list(range(50))}
        assert latest.pending_writes == [("t-last", "a", 4)]
        assert saver.get_tuple(_cfg("p", "sub:1")).checkpoint["channel_values"] == {"s": 2.5}
        assert len(list(saver.list(_cfg("q")))) == 2  # other threads untouched

        saver.prune(["q"], strategy="delete")
        assert list(saver.list({"configurable": {"thread_id": "q"}})) == []
        with pytest.raises(ValueError):
            saver.prune(["p"], strategy="bogus")
        saver.prune([], strategy="keep_latest")
    # unreferenced blobs were collected: a@1, a@2 and s@1 are gone
    assert sync_backend.sql("SELECT channel, COUNT(*) FROM threadline_blobs WHERE thread_id = 'p' GROUP BY channel ORDER BY channel") == [
        ("a", 1),
        ("big", 1),
        ("s", 1),
    ]
    assert sync_backend.sql("SELECT COUNT(*) FROM threadline_writes WHERE thread_id = 'p'") == [(1,)]
    assert sync_backend.sql("SELECT thread_id, checkpoint_count FROM threadline_threads") == [("p", 2)]


def test_sync_get_delta_channel_history(sync_backend: Backend) -> None:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    with sync_backend.open() as saver:
        chain = Chain(saver, "d")
        c0 = chain.put({"log": ["seed"], "other": 0})
        saver.put_writes(c0, [("log", "a"), ("other", 1)], "t0")
        # later checkpoints bump "log"'s version without a stored value (as DeltaChannel does)
        versions = dict(chain.versions)
        cfg = c0
        for i, writes in enumerate([["b", "c"], ["d"], []]):
            versions["log"] = saver.get_next_version(versions["log"], None)
            ck = _ckpt({"other": 0}, versions)
            cfg = saver.put(cfg, ck, {"step": i + 1, "source": "loop"}, {"log": versions["log"]})
            if writes:
                saver.put_writes(cfg, [("log", w) for w in writes], f"t{i + 1}")
        target = cfg

        got = saver.get_delta_channel_history(config=target, channels=["log", "other", "absent"])
        assert got["log"] == {"seed": ["seed"], "writes": [("t0", "log", "a"), ("t1", "log", "b"), ("t1", "log", "c"), ("t2", "log", "d")]}
        assert got["other"] == {"seed": 0, "writes": []}
        assert got["absent"] == {"writes": []}
        # same answer as LangGraph's reference implementation (walks get_tuple + parent_config)
        ref = BaseCheckpointSaver.get_delta_channel_history(saver, config=target, channels=["log", "other", "absent"])
        assert got == ref
        # latest checkpoint when the config names none; empty channel list
        assert saver.get_delta_channel_history(config=_cfg("d"), channels=["log"]) == {"log": got["log"]}
        assert saver.get_delta_channel_history(config=_cfg("d"), channels=[]) == {}
        assert saver.get_delta_channel_history(config=_cfg("nobody"), channels=["log"]) == {"log": {"writes": []}}


def test_sync_methods_of_async_saver_from_another_thread(async_backend: Backend) -> None:
    """AsyncSqliteSaver / AsyncPostgresSaver serve sync calls made from a thread other than their loop's."""
    import asyncio
    import threading

    async def main():
        async with async_backend.open() as saver:
            out = {}

            def worker():
                chain = Chain(saver, "x")
                chain.put({"k": 1})
                chain.put({"k": 2})
                out["latest"] = saver.get_tuple(_cfg("x")).checkpoint["channel_values"]
                out["n"] = len(list(saver.list(_cfg("x"))))

            t = threading.Thread(target=worker)
            t.start()
            await asyncio.to_thread(t.join)
            assert out == {"latest": {"k": 2}, "n": 2}
            with pytest.raises(asyncio.InvalidStateError):
                saver.get_tuple(_cfg("x"))  # from the loop's own thread: refused, not deadlocked

    asyncio.run(main())
