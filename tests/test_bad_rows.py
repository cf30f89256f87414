"""Tampered rows and hostile payloads, on every backend.

A row changed behind the saver's back (a blob, a write, a checkpoint or its metadata
that no longer decodes) raises ``CorruptRowError`` naming the row, while its
neighbours still read. Payloads that would run code or build a foreign object if
loaded naively (msgpack extension types, ``lc: 2`` constructors, pickle) are refused
or read as plain data, never executed; a class outside the allowlist is stored but
never revived, in LangGraph's strict mode and its default one. The reads write
nothing: every row but the tampered ones is byte-for-byte what it was before
(``Backend.snapshot()``). Malformed configs, hostile filters and unstorable values
are in ``test_bad_input.py``.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import ormsgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from backends import Backend
from bad_input_access import CANARY, Canary, cfg, cid_of, ckpt, seeded
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from threadline import CorruptRowError

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
    async with seeded(backend) as (api, _seed):
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
    async with seeded(backend) as (api, _seed):
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


_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text())
_JSONISH = st.recursive(_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)), max_leaves=20)


@given(st.dictionaries(st.text(), _JSONISH, max_size=6))
def test_a_checkpoint_documents_fast_text_reads_back_as_json_text_or_is_refused_alike(doc: dict) -> None:
    """``dumps_doc`` (orjson, for a put's checkpoint document) writes a text that reads back as
    ``dumps_json``'s does, or json's own text, and refuses exactly what ``dumps_json`` refuses
    (NaN, infinity, NUL characters, unpaired surrogates)."""
    from threadline.codec.jsontext import dumps_doc
    from threadline.storage.dialect import dumps_json

    try:
        want = dumps_json(doc)
    except ValueError as exc:
        with pytest.raises(ValueError, match=re.escape(str(exc)[:20])):
            dumps_doc(doc)
        return
    assert json.loads(dumps_doc(doc)) == json.loads(want)  # texts differ only in a small float's exponent (1e-7, 1e-07)
