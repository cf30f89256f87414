"""Bad input, tampered rows and hostile payloads, on every backend.

For each bad call: the right error (``ConfigError``, ``FilterError``,
``CorruptRowError``) or the right empty result, never a raw driver error;
every row in every table is byte-for-byte what it was before (compared with
``Backend.snapshot()``); and the saver still works afterwards.

Tests marked ``xfail(strict=True)`` document bugs found in ``src/threadline``
(see each reason); they turn into failures once the bug is fixed, so the
marker can be removed.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import ormsgpack
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from backends import Backend
from threadline import ConfigError, CorruptRowError, FilterError

# --- uniform sync/async access --------------------------------------------------


@dataclass
class Api:
    """Calls a saver's sync methods (sync savers) or ``a``-methods (async savers) by one name."""

    saver: Any
    is_async: bool

    async def call(self, name: str, *args: Any, **kw: Any) -> Any:
        if self.is_async:
            return await getattr(self.saver, "a" + name)(*args, **kw)
        return getattr(self.saver, name)(*args, **kw)

    async def list(self, config: Any, **kw: Any) -> list:
        if self.is_async:
            return [t async for t in self.saver.alist(config, **kw)]
        return list(self.saver.list(config, **kw))

    async def ids(self, config: Any, **kw: Any) -> list[str]:
        return [t.config["configurable"]["checkpoint_id"] for t in await self.list(config, **kw)]


def cfg(thread_id: Any, ns: Any = "", cid: Any = None) -> dict:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if cid is not None:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


def ckpt(values: dict, versions: dict) -> dict:
    c = empty_checkpoint()
    c["id"] = str(uuid6(clock_seq=-1))
    c["channel_values"] = dict(values)
    c["channel_versions"] = dict(versions)
    return c


HOSTILE_META = {
    "a": 1,
    "$.a": "dollar",
    '"': "quote",
    "x') OR 1=1 --": "inj",
    "nested": {"a": 1, "b": 2},
    "tags": ["x", "y"],
    "none": None,
}


@dataclass
class Seed:
    """What ``seeded`` stored (configs returned by put)."""

    alpha: list[dict]  # three checkpoints on ("alpha", "")
    sub: dict  # one on ("alpha", "sub:1")
    beta: dict  # one on ("beta", "")


@asynccontextmanager
async def seeded(backend: Backend):
    """Open a saver and store a small known database; yield (api, seed)."""
    if backend.is_async:
        async with backend.open() as saver:
            api = Api(saver, True)
            yield api, await _seed(api)
    else:
        with backend.open() as saver:
            api = Api(saver, False)
            yield api, await _seed(api)


async def _seed(api: Api) -> Seed:
    alpha = []
    config = cfg("alpha")
    values = {"msgs": ["hello"], "count": 0}
    versions = {"msgs": "1", "count": "1"}
    config = await api.call("put", config, ckpt(values, versions), {"source": "input", "step": -1, **HOSTILE_META}, versions)
    alpha.append(config)
    await api.call("put_writes", config, [("msgs", "w0"), ("count", 1)], "task-0", "~0")
    values, versions = {"msgs": ["hello", "w0"], "count": 1}, {"msgs": "2", "count": "2"}
    config = await api.call("put", config, ckpt(values, versions), {"source": "loop", "step": 0, "a": 2}, versions)
    alpha.append(config)
    values, versions = {"msgs": ["hello", "w0", "x"], "count": 1}, {"msgs": "3", "count": "2"}
    config = await api.call("put", config, ckpt(values, versions), {"source": "loop", "step": 1, "a": 1, "run_id": "r1"}, {"msgs": "3"})
    alpha.append(config)
    await api.call("put_writes", config, [("msgs", "w2")], "task-2", "~2")
    await api.call("put_writes", config, [("__interrupt__", {"q": "?"})], "task-3")
    sub = await api.call("put", cfg("alpha", "sub:1"), ckpt({"inner": 1}, {"inner": "1"}), {"source": "loop", "step": 0}, {"inner": "1"})
    beta = await api.call("put", cfg("beta"), ckpt({"msgs": ["b"]}, {"msgs": "1"}), {"source": "input", "step": -1, "a": 1}, {"msgs": "1"})
    return Seed(alpha, sub, beta)


async def assert_still_works(api: Api, seed: Seed) -> None:
    """The saver is usable after an error: the seeded data reads back whole."""
    latest = await api.call("get_tuple", cfg("alpha"))
    assert latest.config == seed.alpha[-1]
    assert latest.checkpoint["channel_values"] == {"msgs": ["hello", "w0", "x"], "count": 1}
    seeded_ids = {cid_of(c) for c in (*seed.alpha, seed.sub, seed.beta)}
    assert seeded_ids <= set(await api.ids(None))
    assert await api.ids(cfg("alpha")) == [cid_of(c) for c in reversed(seed.alpha)]


def cid_of(config: dict) -> str:
    return config["configurable"]["checkpoint_id"]


# --- malformed configs --------------------------------------------------------

BAD_CONFIGS: list[tuple[Any, str]] = [
    (None, "config"),
    ("alpha", "config"),
    ({}, "configurable"),
    ({"configurable": "alpha"}, "configurable"),
    ({"configurable": {}}, "thread_id"),
    ({"configurable": {"checkpoint_ns": ""}}, "thread_id"),
    (cfg(None), "thread_id"),
    (cfg(True), "thread_id"),
    (cfg(False), "thread_id"),
    (cfg({"thread": "alpha"}), "thread_id"),
    (cfg(["alpha"]), "thread_id"),
    (cfg(1.5), "thread_id"),
    (cfg(""), "thread_id"),
    (cfg(b"alpha"), "thread_id"),
    (cfg("alpha", ns=5), "checkpoint_ns"),
    (cfg("alpha", ns={"ns": 1}), "checkpoint_ns"),
    (cfg("alpha", cid=123), "checkpoint_id"),
    (cfg("alpha", cid={"id": "x"}), "checkpoint_id"),
    (cfg("alpha", cid=["x"]), "checkpoint_id"),
    (cfg("alpha", cid=True), "checkpoint_id"),
]


async def test_malformed_configs_raise_config_error_and_change_nothing(backend: Backend) -> None:
    async with seeded(backend) as (api, seed):
        before = backend.snapshot()
        good_cid = cid_of(seed.alpha[-1])
        for config, word in BAD_CONFIGS:
            with pytest.raises(ConfigError, match=word):
                await api.call("get_tuple", config)
            with pytest.raises(ConfigError, match=word):
                await api.call("put", config, ckpt({"msgs": ["evil"]}, {"msgs": "9"}), {"source": "loop", "step": 9}, {"msgs": "9"})
            with pytest.raises(ConfigError, match=word):
                await api.call("get_delta_channel_history", config=config, channels=["msgs"])
            # put_writes: give it a checkpoint_id unless that is the thing under test
            wconfig = config
            if isinstance(config, dict) and isinstance(config.get("configurable"), dict) and "checkpoint_id" not in config["configurable"]:
                wconfig = {"configurable": {**config["configurable"], "checkpoint_id": good_cid}}
            with pytest.raises(ConfigError, match=word):
                await api.call("put_writes", wconfig, [("msgs", "evil")], "task-evil")
        # list() accepts a config without thread_id (every thread) but not a malformed one
        for config, word in BAD_CONFIGS:
            if config is None:
                continue  # list(None): every thread
            if isinstance(config, dict) and isinstance(config.get("configurable"), dict) and config["configurable"].get("thread_id") is None:
                continue
            with pytest.raises(ConfigError, match=word):
                await api.list(config)
        assert backend.snapshot() == before
        await assert_still_works(api, seed)


async def test_list_before_without_checkpoint_id(backend: Backend) -> None:
    async with seeded(backend) as (api, seed):
        before = backend.snapshot()
        with pytest.raises(ConfigError, match="before"):
            await api.list(cfg("alpha"), before=cfg("alpha"))
        with pytest.raises(ConfigError):
            await api.list(cfg("alpha"), before={"configurable": {"checkpoint_id": 5}})
        assert backend.snapshot() == before


async def test_int_and_uuid_thread_ids_are_their_string(backend: Backend) -> None:
    """keys.thread_id_of: ints and UUIDs (common in LangGraph apps) are stored as ``str(value)``;
    ``put`` hands back the caller's thread_id as given, as the official savers do."""
    async with seeded(backend) as (api, seed):
        u = uuid.uuid4()
        for tid in (7, u):
            stored = await api.call("put", cfg(tid), ckpt({"v": 1}, {"v": "1"}), {"step": 0}, {"v": "1"})
            assert stored["configurable"]["thread_id"] == tid
            as_str = {"configurable": {**stored["configurable"], "thread_id": str(tid)}}
            assert (await api.call("get_tuple", cfg(str(tid)))).config == as_str
            assert (await api.call("get_tuple", cfg(tid))).config == as_str


async def test_unknown_or_foreign_checkpoint_id_gives_none(backend: Backend) -> None:
    async with seeded(backend) as (api, seed):
        before = backend.snapshot()
        unknown = str(uuid6(clock_seq=-1))
        assert await api.call("get_tuple", cfg("alpha", cid=unknown)) is None
        assert await api.call("get_tuple", cfg("nobody")) is None
        assert await api.call("get_tuple", cfg("nobody", cid=unknown)) is None
        # a checkpoint_id is only found in its own thread and namespace
        assert await api.call("get_tuple", cfg("beta", cid=cid_of(seed.alpha[0]))) is None
        assert await api.call("get_tuple", cfg("alpha", ns="sub:1", cid=cid_of(seed.alpha[0]))) is None
        assert await api.call("get_tuple", cfg("alpha", ns="", cid=cid_of(seed.sub))) is None
        assert await api.ids(cfg("alpha", cid=unknown)) == []
        assert await api.ids(cfg("beta", cid=cid_of(seed.alpha[0]))) == []
        assert await api.call("get_delta_channel_history", config=cfg("alpha", cid=unknown), channels=["msgs"]) == {
            "msgs": {"writes": []}
        }
        # an id-looking string with SQL in it is just an unknown id
        assert await api.call("get_tuple", cfg("alpha", cid="' OR '1'='1")) is None
        assert await api.call("get_tuple", cfg("alpha' OR '1'='1")) is None
        assert backend.snapshot() == before


async def test_put_writes_needs_a_checkpoint_id(backend: Backend) -> None:
    async with seeded(backend) as (api, seed):
        before = backend.snapshot()
        for config in (cfg("alpha"), cfg("alpha", cid="")):
            with pytest.raises(ConfigError, match="checkpoint_id"):
                await api.call("put_writes", config, [("msgs", "evil")], "task-evil")
        with pytest.raises(ConfigError, match="task_id"):
            await api.call("put_writes", seed.alpha[-1], [("msgs", "evil")], 42)
        assert backend.snapshot() == before
        await assert_still_works(api, seed)


async def test_unserializable_values_write_nothing(backend: Backend) -> None:
    """One transaction per operation: a value that cannot be stored leaves no half-written rows."""
    async with seeded(backend) as (api, seed):
        before = backend.snapshot()
        versions = {"ok": "1", "bad": "1"}
        with pytest.raises(Exception) as info:
            await api.call("put", cfg("alpha"), ckpt({"ok": 1, "bad": object()}, versions), {"step": 5}, versions)
        assert not isinstance(info.value, CorruptRowError)
        with pytest.raises(ConfigError, match="metadata"):
            await api.call("put", cfg("alpha"), ckpt({"ok": 1}, {"ok": "1"}), {"step": 5, "obj": object()}, {"ok": "1"})
        with pytest.raises(Exception):
            await api.call("put_writes", seed.alpha[-1], [("ok", 1), ("bad", object())], "task-new")
        assert backend.snapshot() == before
        await assert_still_works(api, seed)


async def test_bad_thread_id_arguments(backend: Backend) -> None:
    async with seeded(backend) as (api, seed):
        before = backend.snapshot()
        for bad in (None, True, {"t": 1}, "", 1.5):
            with pytest.raises(ConfigError, match="thread_id"):
                await api.call("delete_thread", bad)
            with pytest.raises(ConfigError, match="thread_id"):
                await api.call("copy_thread", "alpha", bad)
            with pytest.raises(ConfigError, match="thread_id"):
                await api.call("copy_thread", bad, "gamma")
            with pytest.raises(ConfigError, match="thread_id"):
                await api.call("prune", ["beta", bad])
        with pytest.raises(ConfigError, match="same thread"):
            await api.call("copy_thread", "alpha", "alpha")
        with pytest.raises(TypeError):
            await api.call("prune", "alpha")  # a single string is not a list of thread ids
        with pytest.raises(TypeError):
            await api.call("delete_for_runs", "r1")
        with pytest.raises(ValueError, match="strategy"):
            await api.call("prune", ["alpha"], strategy="everything")
        assert backend.snapshot() == before
        await assert_still_works(api, seed)


# --- hostile filters ------------------------------------------------------------


async def test_hostile_filters_match_as_the_official_saver_or_raise_filter_error(backend: Backend) -> None:
    """Keys and values that look like SQL or JSON paths are bound parameters: they match as
    the official saver of the backend matches them (SQLite: a dotted key of the official
    saver's characters is a JSON path, other keys are literal, None also matches a missing
    key; Postgres: JSON containment of literal top-level keys), or raise FilterError;
    nothing is ever changed."""
    async with seeded(backend) as (api, seed):
        before = backend.snapshot()
        c0, c1, c2 = (cid_of(c) for c in seed.alpha)
        sub, beta = cid_of(seed.sub), cid_of(seed.beta)
        every = sorted([c0, c1, c2, sub, beta], reverse=True)
        both: list[tuple[dict, Any]] = [
            ({"x') OR 1=1 --": 1}, []),
            ({"x') OR 1=1 --": "inj"}, [c0]),  # the key is matched literally
            ({"source": "x') OR 1=1 --"}, []),
            ({"source": "input' OR '1'='1"}, []),
            ({"source": "input\" OR \"1\"=\"1"}, []),
            ({"$": 1}, []),
            ({"$.a": "dollar"}, [c0]),  # not a key the official SQLite saver takes: literal on both
            ({'"': "quote"}, [c0]),
            ({"a.b": 1}, []),
            ({"a[0]": 1}, []),
            ({"'": "quote"}, []),
            ({"%": 1}, []),
            ({"_": 1}, []),
            ({"?": 1}, []),
            ({"a": "%"}, []),
            ({"a": 1}, sorted([c0, c2, beta], reverse=True)),
            ({"a": "1"}, []),  # a string is not the number
            ({"a": 1, "source": "input"}, sorted([c0, beta], reverse=True)),
            ({"nested": {"a": 1, "b": 2}}, [c0]),
            ({"tags": ["x", "y"]}, [c0]),
            ({"a": {}}, []),
            ({"a": []}, []),
            ({"run_id": "r1"}, [c2]),
            ({"": 1}, []),
        ]
        per_backend = {
            "sqlite": [
                ({"none": None}, every),  # None matches a missing key too
                ({"a": None}, [sub]),
                ({"nested": {"b": 2, "a": 1}}, []),  # the same JSON text, key order included
            ],
            "postgres": [
                ({"none": None}, [c0]),  # containment: the key must be there
                ({"a": None}, []),
                ({"nested": {"b": 2, "a": 1}}, [c0]),
            ],
        }
        for flt, expected in both + per_backend["postgres" if backend.is_postgres else "sqlite"]:
            assert await api.ids(None, filter=flt) == expected, flt
            assert await api.ids(cfg("alpha"), filter=flt) == [c for c in expected if c not in (beta, sub)], flt
        refused = [
            {1: "x"},
            {None: 1},
            {("a",): 1},
            {True: 1},
            "source=input",
            [("a", 1)],
        ]
        for flt in refused:
            with pytest.raises(FilterError):
                await api.list(None, filter=flt)
        assert backend.snapshot() == before
        await assert_still_works(api, seed)


# Seeded metadata has nested={"a": 1, "b": 2} and tags=["x", "y"].
CONTAINER_FILTERS = {
    "sub-dict": {"nested": {"a": 1}},
    "sub-list": {"tags": ["x"]},
    "reordered-list": {"tags": ["y", "x"]},
    "empty-dict": {"nested": {}},
    "empty-list": {"tags": []},
    "list-member": {"tags": "x"},
    "super-dict": {"nested": {"a": 1, "b": 2, "c": 3}},
    "super-list": {"tags": ["x", "y", "z"]},
}
# Postgres matches by JSON containment (``metadata @> filter``), as the official PostgresSaver.
CONTAINED = {"sub-dict", "sub-list", "reordered-list", "empty-dict", "empty-list"}


@pytest.mark.parametrize("case", list(CONTAINER_FILTERS))
async def test_filter_with_dict_or_list_value_matches_as_the_official_saver(backend: Backend, case: str) -> None:
    """An object or array filter value: equality of the JSON text on SQLite (the official
    SqliteSaver compares ``json_extract``), containment on Postgres (the official
    PostgresSaver's ``@>``)."""
    async with seeded(backend) as (api, seed):
        expected = [cid_of(seed.alpha[0])] if backend.is_postgres and case in CONTAINED else []
        assert await api.ids(None, filter=CONTAINER_FILTERS[case]) == expected


UNREPRESENTABLE_FILTER_VALUES = {
    "nan": {"a": float("nan")},
    "inf": {"a": float("inf")},
    "-inf": {"a": float("-inf")},
    "nan-in-list": {"tags": [float("nan")]},
    "nan-in-dict": {"nested": {"a": float("nan")}},
    "int-2**70": {"a": 2**70},
    "int--2**70": {"a": -(2**70)},
    "nul-in-value": {"a": "x\x00y"},
    "nul-in-key": {"a\x00": 1},
}


@pytest.mark.parametrize("case", sorted(UNREPRESENTABLE_FILTER_VALUES))
async def test_filter_values_the_database_cannot_hold(backend: Backend, case: str) -> None:
    """NaN/Infinity, integers beyond 64 bits, NUL characters: an empty result or FilterError, never a driver error.

    (Found: Postgres raised raw psycopg errors, SQLite OverflowError / 'malformed JSON'; fixed in 31a074b.)
    """
    flt = UNREPRESENTABLE_FILTER_VALUES[case]
    async with seeded(backend) as (api, seed):
        before = backend.snapshot()
        try:
            result = await api.ids(None, filter=flt)
        except FilterError:
            pass
        else:
            assert result == []
        assert backend.snapshot() == before
        await assert_still_works(api, seed)


# --- values the database cannot hold, on the write side ----------------------------

@pytest.mark.parametrize("case", ["nan", "inf", "nul-in-key", "nul-in-value", "int-2**70"])
async def test_metadata_the_database_cannot_hold(backend: Backend, case: str) -> None:
    """Either refused with ConfigError (nothing written), or stored so that it reads back and filtered listing keeps working.

    (Found: NaN metadata was stored as non-JSON 'NaN', after which every filtered list() on SQLite failed with
    'malformed JSON', and Postgres raised raw psycopg errors; fixed in 31a074b.)
    """
    meta = {
        "nan": {"score": float("nan")},
        "inf": {"score": float("inf")},
        "nul-in-key": {"k\x00": 1},
        "nul-in-value": {"k": "v\x00"},
        "int-2**70": {"big": 2**70},
    }[case]
    async with seeded(backend) as (api, seed):
        before = backend.snapshot()
        try:
            stored = await api.call("put", cfg("gamma"), ckpt({"v": 1}, {"v": "1"}), {"step": 0, **meta}, {"v": "1"})
        except ConfigError:
            assert backend.snapshot() == before
        else:
            got = await api.call("get_tuple", stored)
            assert set(meta) <= set(got.metadata)
        # the rest of the database stays listable and filterable
        assert await api.ids(None, filter={"source": "input"}) == sorted([cid_of(seed.alpha[0]), cid_of(seed.beta)], reverse=True)
        await assert_still_works(api, seed)


@pytest.mark.parametrize("where", ["thread_id", "checkpoint_ns", "checkpoint_id"])
async def test_nul_character_in_keys_is_refused(backend: Backend, where: str) -> None:
    """A NUL in thread_id / checkpoint_ns / checkpoint_id: ConfigError naming the key, on every backend.

    (Found: Postgres TEXT cannot hold NUL, so put/get_tuple raised a raw psycopg.DataError while SQLite stored
    the key; keys.py now refuses NUL everywhere, 31a074b.)
    """
    config = {
        "thread_id": cfg("nul\x00thread"),
        "checkpoint_ns": cfg("alpha", ns="sub\x00ns"),
        "checkpoint_id": cfg("alpha", cid="id\x00"),
    }[where]
    async with seeded(backend) as (api, seed):
        before = backend.snapshot()
        with pytest.raises(ConfigError, match=where):
            await api.call("get_tuple", config)
        with pytest.raises(ConfigError, match=where):
            await api.list(config)
        with pytest.raises(ConfigError, match=where):
            await api.call("put", config, ckpt({"v": 1}, {"v": "1"}), {"step": 0}, {"v": "1"})
        with pytest.raises(ConfigError, match=where):
            await api.call("put_writes", {"configurable": {**seed.alpha[-1]["configurable"], **config["configurable"]}}, [("v", 1)], "t")
        if where == "thread_id":
            for call in (("delete_thread", "a\x00"), ("copy_thread", "alpha", "a\x00"), ("prune", ["a\x00"])):
                with pytest.raises(ConfigError, match=where):
                    await api.call(*call)
        assert backend.snapshot() == before
        await assert_still_works(api, seed)


# --- tampered rows ----------------------------------------------------------------


def _others_untouched(backend: Backend, original: dict, tampered: dict[str, tuple[str, tuple]]) -> None:
    """Every row of every table equals ``original``, except the tampered rows (``table → (where, params)``)."""
    now = backend.snapshot()
    for table, rows in original.items():
        if table not in tampered:
            assert now[table] == rows, table
            continue
        where, params = tampered[table]
        changed = backend.sql(f"SELECT * FROM threadline_{table} WHERE {where}", params)
        assert changed, f"the tampered {table} rows are still there"
        kept = [r for r in now[table] if r not in changed]
        assert len(kept) == len(rows) - len(changed), table
        assert all(r in rows for r in kept), table


@asynccontextmanager
async def tampered(backend: Backend, table: str, set_sql: str, where: str, params: tuple):
    """Seed, run ``UPDATE table SET set_sql WHERE where`` behind the saver's back, yield (api, seed).

    On exit: the reads (failed or not) wrote nothing, and only the tampered rows differ from before.
    """
    async with seeded(backend) as (api, seed):
        original = backend.snapshot()
        backend.sql(f"UPDATE threadline_{table} SET {set_sql} WHERE {where}", params)
        after_tamper = backend.snapshot()
        yield api, seed
        assert backend.snapshot() == after_tamper
        _others_untouched(backend, original, {table: (where, params)})


async def test_corrupted_blob_row(backend: Backend) -> None:
    payload = "x'deadbeef'" if not backend.is_postgres else "'\\xdeadbeef'::bytea"
    where = "thread_id = ? AND channel = ? AND version = ?"
    async with tampered(backend, "blobs", f"blob = {payload}", where, ("alpha", "msgs", "3")) as (api, seed):
        for call in (
            lambda: api.call("get_tuple", cfg("alpha")),
            lambda: api.call("get_tuple", seed.alpha[-1]),
            lambda: api.list(cfg("alpha")),
            lambda: api.list(None, filter={"run_id": "r1"}),
        ):
            with pytest.raises(CorruptRowError) as info:
                await call()
            msg = str(info.value)
            assert "blob" in msg and "'alpha'" in msg and "'msgs'" in msg and "'3'" in msg, msg
        # other checkpoints (older versions of msgs, other threads) still read
        older = await api.call("get_tuple", seed.alpha[1])
        assert older.checkpoint["channel_values"] == {"msgs": ["hello", "w0"], "count": 1}
        assert (await api.call("get_tuple", cfg("beta"))).checkpoint["channel_values"] == {"msgs": ["b"]}
        assert len(await api.list(cfg("alpha"), before=seed.alpha[-1])) == 2


async def test_corrupted_write_row(backend: Backend) -> None:
    payload = "x'deadbeef'" if not backend.is_postgres else "'\\xdeadbeef'::bytea"
    where = "thread_id = ? AND task_id = ?"
    async with tampered(backend, "writes", f"blob = {payload}", where, ("alpha", "task-0")) as (api, seed):
        with pytest.raises(CorruptRowError) as info:
            await api.call("get_tuple", seed.alpha[0])
        msg = str(info.value)
        assert "write" in msg and "'alpha'" in msg and cid_of(seed.alpha[0]) in msg and "'task-0'" in msg, msg
        # the DeltaChannel history walk reads that write too
        with pytest.raises(CorruptRowError, match="task-0"):
            await api.call("get_delta_channel_history", config=seed.alpha[1], channels=["count"])
        # the latest checkpoint's own writes are intact
        assert (await api.call("get_tuple", cfg("alpha"))).pending_writes == [
            ("task-3", "__interrupt__", {"q": "?"}),
            ("task-2", "msgs", "w2"),
        ]


def _doc(backend: Backend, column: str, cid: str) -> Any:
    (value,) = backend.sql(f"SELECT {column} FROM threadline_checkpoints WHERE checkpoint_id = ?", (cid,))[0]
    return json.loads(value) if isinstance(value, (str, bytes)) else value


CHECKPOINT_CORRUPTIONS = {
    # name: (column, function of the stored doc → new JSON value, or raw text for SQLite only)
    "not-an-object": ("checkpoint", lambda doc: [1, 2, 3]),
    "string": ("checkpoint", lambda doc: "checkpoint"),
    "metadata-not-an-object": ("metadata", lambda doc: 42),
    "pending-sends-garbage": ("checkpoint", lambda doc: {**doc, "__pending_sends__": ["msgpack", "!!not base64!!"]}),
    "pending-sends-pickle": (
        "checkpoint",
        lambda doc: {**doc, "__pending_sends__": ["pickle", base64.b64encode(pickle.dumps(["x"])).decode()]},
    ),
    "pending-sends-shape": ("checkpoint", lambda doc: {**doc, "__pending_sends__": 5}),
    "channel-versions-list": ("checkpoint", lambda doc: {**doc, "channel_versions": [1, 2]}),
    "channel-versions-string": ("checkpoint", lambda doc: {**doc, "channel_versions": "msgs"}),
}


@pytest.mark.parametrize("case", sorted(CHECKPOINT_CORRUPTIONS))
async def test_corrupted_checkpoint_row(backend: Backend, case: str, request) -> None:
    column, change = CHECKPOINT_CORRUPTIONS[case]
    async with seeded(backend) as (api, seed):
        target = cid_of(seed.alpha[1])
        new = json.dumps(change(_doc(backend, column, target)))
        original = backend.snapshot()
        backend.sql(f"UPDATE threadline_checkpoints SET {column} = ? WHERE checkpoint_id = ?", (new, target))
        after_tamper = backend.snapshot()
        with pytest.raises(CorruptRowError) as info:
            await api.call("get_tuple", seed.alpha[1])
        msg = str(info.value)
        assert target in msg, msg
        assert "'alpha'" in msg or "checkpoint" in msg, msg
        with pytest.raises(CorruptRowError):
            await api.list(cfg("alpha"))
        # neighbours still read
        assert (await api.call("get_tuple", seed.alpha[2])).checkpoint["channel_values"]["msgs"] == ["hello", "w0", "x"]
        assert (await api.call("get_tuple", seed.alpha[0])).metadata["source"] == "input"
        assert (await api.call("get_tuple", cfg("beta"))) is not None
        assert backend.snapshot() == after_tamper
        _others_untouched(backend, original, {"checkpoints": ("checkpoint_id = ?", (target,))})


@pytest.mark.parametrize("column, text", [("checkpoint", "{not json"), ("metadata", "nope"), ("checkpoint", "")])
async def test_unreadable_checkpoint_json_sqlite(sqlite_backend_fx: Backend, column: str, text: str) -> None:
    """SQLite stores JSON as text, so a row can hold text that is not JSON at all."""
    backend = sqlite_backend_fx
    async with seeded(backend) as (api, seed):
        target = cid_of(seed.alpha[0])
        original = backend.snapshot()
        backend.sql(f"UPDATE threadline_checkpoints SET {column} = ? WHERE checkpoint_id = ?", (text, target))
        with pytest.raises(CorruptRowError, match=target):
            await api.call("get_tuple", seed.alpha[0])
        with pytest.raises(CorruptRowError, match="JSON"):
            await api.list(cfg("alpha"))
        assert (await api.call("get_tuple", cfg("alpha"))).config == seed.alpha[-1]
        _others_untouched(backend, original, {"checkpoints": ("checkpoint_id = ?", (target,))})


# --- strict deserialization ---------------------------------------------------

CANARY: list[str] = []


@dataclass
class Canary:
    """Not in any allowlist. Instantiating it is observable."""

    note: str

    def __post_init__(self) -> None:
        CANARY.append(self.note)


@dataclass
class Point:
    x: int
    y: int


class Sentinel:
    """A plain class (not a data class), so no policy revives it. Instantiating it is observable."""

    def __init__(self, note: str) -> None:
        CANARY.append(note)


class Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _payloads(marker: str) -> dict[str, tuple[str, bytes]]:
    """(type, bytes) payloads that would run code or build a foreign object if loaded naively."""
    touch = f"touch {marker}"
    return {
        "msgpack-os.system-posargs": ("msgpack", ormsgpack.packb(ormsgpack.Ext(1, ormsgpack.packb(("os", "system", [touch]))))),
        "msgpack-os.system-single": ("msgpack", ormsgpack.packb(ormsgpack.Ext(0, ormsgpack.packb(("os", "system", touch))))),
        "msgpack-subprocess-kwargs": (
            "msgpack",
            ormsgpack.packb(ormsgpack.Ext(2, ormsgpack.packb(("subprocess", "Popen", {"args": ["touch", marker]})))),
        ),
        "msgpack-method": (
            "msgpack",
            ormsgpack.packb(ormsgpack.Ext(3, ormsgpack.packb(("os", "system", touch, "__call__")))),
        ),
        "msgpack-sentinel-class": (
            "msgpack",
            ormsgpack.packb(ormsgpack.Ext(2, ormsgpack.packb((__name__, "Sentinel", {"note": "loaded"})))),
        ),
        "json-lc2-os.system": (
            "json",
            json.dumps({"lc": 2, "type": "constructor", "id": ["os", "system"], "args": [touch]}).encode(),
        ),
        "json-lc2-sentinel": (
            "json",
            json.dumps({"lc": 2, "type": "constructor", "id": [__name__, "Sentinel"], "kwargs": {"note": "json"}}).encode(),
        ),
        "pickle-os.system": ("pickle", pickle.dumps(Evil(marker))),
    }


@pytest.mark.parametrize("payload", sorted(_payloads("/x")))
async def test_tampered_payloads_never_run_code(backend: Backend, payload: str, tmp_path) -> None:
    marker = tmp_path / "pwned"
    tag, data = _payloads(str(marker))[payload]
    CANARY.clear()
    async with seeded(backend) as (api, seed):
        original = backend.snapshot()
        blob_key = ("thread_id = ? AND channel = ? AND version = ?", ("alpha", "msgs", "3"))
        write_key = ("thread_id = ? AND task_id = ?", ("alpha", "task-2"))
        for table, (where, params) in (("blobs", blob_key), ("writes", write_key)):
            backend.sql(f"UPDATE threadline_{table} SET type = ?, blob = ? WHERE {where}", (tag, data, *params))
        after_tamper = backend.snapshot()
        for read in (
            lambda: api.call("get_tuple", cfg("alpha")),
            lambda: api.list(cfg("alpha")),
            lambda: api.call("get_delta_channel_history", config=cfg("alpha"), channels=["msgs"]),
        ):
            try:
                result = await read()
            except CorruptRowError:
                continue
            # loaded as plain data: no foreign object, nothing executed
            for value in _loaded_values(result):
                assert not isinstance(value, (Sentinel, Evil)), value
                assert type(value).__module__ in ("builtins",), (payload, type(value))
        assert not marker.exists(), f"{payload}: code ran"
        assert CANARY == [], f"{payload}: Sentinel was instantiated"
        if tag == "pickle":
            with pytest.raises(CorruptRowError, match="pickle"):
                await api.call("get_tuple", cfg("alpha"))
        assert backend.snapshot() == after_tamper
        _others_untouched(backend, original, {"blobs": blob_key, "writes": write_key})


def _loaded_values(result: Any) -> list[Any]:
    tuples = result if isinstance(result, list) else [result] if not isinstance(result, dict) else []
    values: list[Any] = []
    for t in tuples:
        values += list(t.checkpoint["channel_values"].values())
        values += [w[2] for w in t.pending_writes]
    if isinstance(result, dict):
        for entry in result.values():
            values += [w[2] for w in entry["writes"]]
            if "seed" in entry:
                values.append(entry["seed"])
    return values


async def test_saver_stores_but_never_revives_foreign_classes(backend: Backend) -> None:
    """With an allowlist (LangGraph's strict mode passes one), a value of a class outside it can be
    written, but reading gives plain data, not the class."""
    CANARY.clear()
    async with seeded(backend) as (api, seed):
        api.saver = api.saver.with_allowlist([Point])
        stored = await api.call("put", cfg("delta"), ckpt({"c": Canary("via-put")}, {"c": "1"}), {"step": 0}, {"c": "1"})
        await api.call("put_writes", stored, [("c", Canary("via-write"))], "task")
        CANARY.clear()
        got = await api.call("get_tuple", stored)
        assert not isinstance(got.checkpoint["channel_values"]["c"], Canary)
        assert not isinstance(got.pending_writes[0][2], Canary)
        assert CANARY == []


class PointState(TypedDict):
    point: Point
    other: Any


async def _run_point_graph(backend: Backend) -> dict:
    """Run a graph whose state schema holds a dataclass; read the state back with a NEW saver."""

    def move(state: PointState) -> dict:
        return {"point": Point(state["point"].x + 1, state["point"].y), "other": Canary("in-graph")}

    b = StateGraph(PointState)
    b.add_node("move", move)
    b.add_edge(START, "move")
    b.add_edge("move", END)
    thread = cfg("points")
    if backend.is_async:
        async with backend.open() as saver:
            await b.compile(checkpointer=saver).ainvoke({"point": Point(1, 2), "other": None}, thread)
    else:
        with backend.open() as saver:
            b.compile(checkpointer=saver).invoke({"point": Point(1, 2), "other": None}, thread)
    CANARY.clear()
    if backend.is_async:
        async with backend.open() as saver:
            return (await b.compile(checkpointer=saver).aget_state(thread)).values
    with backend.open() as saver:
        return b.compile(checkpointer=saver).get_state(thread).values


async def test_schema_types_allowlisted_in_langgraph_strict_mode(backend: Backend, monkeypatch) -> None:
    """Positive control: with LANGGRAPH_STRICT_MSGPACK, compile() passes the state schema's types to
    ``saver.with_allowlist``; they round-trip, while a type outside the schema (field typed Any) stays blocked."""
    import langgraph._internal._serde as lg_serde

    monkeypatch.setattr(lg_serde, "STRICT_MSGPACK_ENABLED", True)
    values = await _run_point_graph(backend)
    assert values["point"] == Point(2, 2) and isinstance(values["point"], Point)
    assert not isinstance(values["other"], Canary)
    assert values["other"] == {"note": "in-graph"}
    assert CANARY == []


async def test_schema_types_round_trip_in_langgraph_default_mode(backend: Backend) -> None:
    """LangGraph's default mode passes no allowlist: imported data classes round-trip (as with the
    official savers), while non-data classes and anything not yet imported stay blocked (the payload tests)."""
    values = await _run_point_graph(backend)
    assert isinstance(values["point"], Point) and values["point"] == Point(2, 2)


def test_json_refuses_a_nul_but_not_the_text_of_an_escaped_one() -> None:
    from threadline.storage.dialect import dumps_json

    assert dumps_json({"\\u0000": "\\\\u0000"}) == '{"\\\\u0000":"\\\\\\\\u0000"}'  # backslashes, then "u0000"
    for bad in ({"\x00": 1}, {"k": "a\\\x00"}):
        with pytest.raises(ValueError, match="NUL"):
            dumps_json(bad)
