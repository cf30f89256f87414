"""Bad input on every backend: malformed configs, hostile filters, and values the
database cannot hold.

For each bad call: the right error (``ConfigError``, ``FilterError``) or the right
empty result, never a raw driver error; every row in every table is byte-for-byte
what it was before (compared with ``Backend.snapshot()``); and the saver still works
afterwards. Tampered rows and hostile payloads are in ``test_bad_rows.py``; the
seeded database both use is in ``bad_input_access.py``.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from backends import Backend
from bad_input_access import (
    assert_still_works,
    cfg,
    cid_of,
    ckpt,
    seeded,
)
from langgraph.checkpoint.base.id import uuid6

from threadline import ConfigError, CorruptRowError, FilterError

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
    async with seeded(backend) as (api, _seed):
        before = backend.snapshot()
        with pytest.raises(ConfigError, match="before"):
            await api.list(cfg("alpha"), before=cfg("alpha"))
        with pytest.raises(ConfigError):
            await api.list(cfg("alpha"), before={"configurable": {"checkpoint_id": 5}})
        assert backend.snapshot() == before


async def test_int_and_uuid_thread_ids_are_their_string(backend: Backend) -> None:
    """keys.thread_id_of: ints and UUIDs (common in LangGraph apps) are stored as ``str(value)``;
    ``put`` hands back the caller's thread_id as given, as the official savers do."""
    async with seeded(backend) as (api, _seed):
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
        with pytest.raises(Exception):  # noqa: B017 (any error: what counts is that nothing is written)
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


@pytest.mark.parametrize("version", ["1\x00", "9" * 100_000])
async def test_a_channel_version_no_key_can_hold_is_refused(backend: Backend, version: str) -> None:
    """A version with NUL, or longer than a key column holds: ConfigError naming the channel, nothing written."""
    async with seeded(backend) as (api, seed):
        before = backend.snapshot()
        with pytest.raises(ConfigError, match="version of channel 'v'"):
            await api.call("put", cfg("gamma"), ckpt({"v": [1]}, {"v": version}), {"step": 0}, {"v": version})
        assert backend.snapshot() == before
        await assert_still_works(api, seed)
