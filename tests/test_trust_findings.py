"""The nine findings of the adversarial review ("Trust the bytes"), each a regression test
on SQLite and Postgres.

1. ``threadline import`` / adoption never run code stored in a crafted official database.
2. A decompression bomb is refused before anything is allocated.
3. Damaged rows never load as a plausible wrong value: flipped bytes, msgpack trailing
   bytes, a missing blob (the checkpoint fails instead of silently losing a channel).
4. ``fsck`` reports a checkpoint with malformed ``channel_versions`` and goes on.
5. ``delete_for_runs`` never leaves a child pointing at a deleted parent.
6. Opening a saver takes no write lock when the schema is current; a foreign lock is a
   one-line ``BackendError``.
7. Bad keys, oversized keys and filters, a float ``limit`` and lone surrogates are
   threadline errors, the same on every backend, never raw driver errors.
8. Inspection paths construct nothing from stored rows; no mode ever calls ``enum.Enum``.
9. A parent-link cycle is detected at once by ``get_delta_channel_history``.
"""

from __future__ import annotations

import json
import operator
import sqlite3
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Annotated, Any, TypedDict

import ormsgpack
import pytest
from langgraph.graph import END, START, StateGraph
from typer.testing import CliRunner

from backends import Backend
from bad_input_access import CANARY, Canary, cfg, ckpt
from threadline import BackendError, ConfigError, CorruptRowError, FilterError, lifecycle
from threadline import read as H
from threadline.cli import app
from threadline.transfer.official import import_langgraph

runner = CliRunner()
TESTS = Path(__file__).resolve().parent


def cli(*args: str, code: int | None = 0) -> Any:
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    if code is not None:
        assert result.exit_code == code, (args, result.exit_code, result.output, result.exception)
    return result


# --- 1. import and adoption never run stored code ----------------------------------------------


def _ext(code: int, *parts: Any) -> bytes:
    return ormsgpack.packb(ormsgpack.Ext(code, ormsgpack.packb(parts)))


def _official_with_payloads(b: Backend, marker_dir: Path) -> tuple[Path, Path]:
    """An official saver's database (of ``b``'s kind) whose thread ``t`` holds an ``os.system``
    payload in a channel value and a ``subprocess.Popen`` payload in a pending write."""
    system, popen = marker_dir / "system-ran", marker_dir / "popen-ran"
    if b.is_postgres:
        from langgraph.checkpoint.postgres import PostgresSaver as Official
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver as Official
    with Official.from_conn_string(b.url) as saver:
        saver.setup()
        c = ckpt({"x": ["placeholder"]}, {"x": "1"})
        stored = saver.put(cfg("t"), c, {"source": "input", "step": -1}, {"x": "1"})
        saver.put_writes(stored, [("x", ["placeholder"])], "task-1")
    value = ormsgpack.Ext(1, ormsgpack.packb(("os", "system", [f"touch {system}"])))
    write = _ext(2, "subprocess", "Popen", {"args": ["touch", str(popen)]})
    if b.is_postgres:
        b.sql("UPDATE checkpoint_blobs SET type = 'msgpack', blob = ? WHERE channel = 'x'", (ormsgpack.packb([value]),))
        b.sql("UPDATE checkpoint_writes SET type = 'msgpack', blob = ?", (write,))
    else:
        (raw,) = b.sql("SELECT checkpoint FROM checkpoints")[0]
        doc = ormsgpack.unpackb(raw)
        doc["channel_values"] = {"x": [value]}
        b.sql("UPDATE checkpoints SET checkpoint = ?", (ormsgpack.packb(doc),))
        b.sql("UPDATE writes SET type = 'msgpack', value = ?", (write,))
    return system, popen


def test_f1_import_and_adoption_never_run_code_from_an_official_database(sync_backend: Backend, tmp_path: Path) -> None:
    b = sync_backend
    system, popen = _official_with_payloads(b, tmp_path)
    target = str(tmp_path / "target.db")
    from threadline import open_saver

    # the library import
    with open_saver(str(tmp_path / "lib.db")) as saver:
        report = import_langgraph(b.url, saver)
        assert report.ok, report.to_json()
        got = saver.get_tuple(cfg("t"))
        assert got is not None and got.pending_writes
    # the CLI import
    cli("import", b.url, "--db", target, code=None)
    # adoption on first touch: a threadline saver on the same database
    with b.open() as saver:
        assert saver.get_tuple(cfg("t")) is not None
    assert not system.exists() and not popen.exists(), "a stored constructor ran"


# --- 2. decompression bomb -----------------------------------------------------------------------


def _zstd_rle_frame(content_size: int) -> bytes:
    """A valid zstd frame of ``content_size`` zero bytes made of RLE blocks: ~4 bytes per 128 KiB."""
    out = bytearray(b"\x28\xb5\x2f\xfd\xe0" + content_size.to_bytes(8, "little"))
    left = content_size
    while left:
        n = min(left, 128 * 1024)
        left -= n
        out += ((n << 3) | (1 << 1) | (1 if not left else 0)).to_bytes(3, "little") + b"\x00"
    return bytes(out)


def test_f2_decompression_bomb_is_refused_before_allocating(sync_backend: Backend) -> None:
    """A 67 KB ``msgpack+zstd`` row whose frame declares 2.05 GiB: refused with CorruptRowError
    naming the limit, and nothing near its size is allocated."""
    from threadline import limits

    b = sync_backend
    bomb = _zstd_rle_frame(2_200_000_000)
    assert len(bomb) < 70_000
    with b.open() as saver:
        stored = saver.put(cfg("t"), ckpt({"x": [1, 2]}, {"x": "1"}), {"step": 0}, {"x": "1"})
        b.sql("UPDATE threadline_blobs SET type = 'msgpack+zstd', blob = ?", (bomb,))
        saver.blob_codec.cache.clear()
        tracemalloc.start()
        try:
            with pytest.raises(CorruptRowError, match="limit"):
                saver.get_tuple(stored)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 32 << 20, f"{peak} bytes allocated"
        # the configured limit is the one enforced
        b.sql("UPDATE threadline_blobs SET blob = ?", (_zstd_rle_frame(3 << 20),))
        with limits.override(max_value_bytes=1 << 20):
            with pytest.raises(CorruptRowError, match="max_value_bytes"):
                saver.get_tuple(stored)


# --- 3. no silent wrong values ------------------------------------------------------------------


def _flip_each_byte(b: Backend, saver: Any, stored: dict, where: str, params: tuple, expected: Any) -> tuple[int, int]:
    """Flip every byte of one blob row in turn (two ways); each load is exact or CorruptRowError."""
    (orig,) = b.sql(f"SELECT blob FROM threadline_blobs WHERE {where}", params)[0]
    errors = exact = 0
    for i in range(len(orig)):
        for mask in (0x01, 0xFF):
            bad = bytearray(orig)
            bad[i] ^= mask
            b.sql(f"UPDATE threadline_blobs SET blob = ? WHERE {where}", (bytes(bad), *params))
            saver.blob_codec.cache.clear()
            try:
                got = saver.get_tuple(stored).checkpoint["channel_values"]["x"]
            except CorruptRowError:
                errors += 1
                continue
            assert got == expected and type(got) is type(expected), (i, mask, got)
            exact += 1
    b.sql(f"UPDATE threadline_blobs SET blob = ? WHERE {where}", (orig, *params))
    return errors, exact


def test_f3_flipped_bytes_in_snapshots_never_load_as_another_value(sync_backend: Backend) -> None:
    b = sync_backend
    big = [f"item {i} " * 20 for i in range(20)]  # compressed: msgpack+zstd
    small = ["a", 1, 2.5, None, True, {"k": "v"}]  # plain msgpack
    with b.open() as saver:
        one = saver.put(cfg("zstd"), ckpt({"x": big}, {"x": "1"}), {"step": 0}, {"x": "1"})
        two = saver.put(cfg("plain"), ckpt({"x": small}, {"x": "1"}), {"step": 0}, {"x": "1"})
        types = dict(b.sql("SELECT thread_id, type FROM threadline_blobs"))
        assert "zstd" in types["zstd"] and "zstd" not in types["plain"], types
        for stored, tid, value in ((one, "zstd", big), (two, "plain", small)):
            errors, exact = _flip_each_byte(b, saver, stored, "thread_id = ?", (tid,), value)
            assert errors > 0


def test_f3_trailing_bytes_and_retagged_rows_are_refused(sync_backend: Backend) -> None:
    """A delta row re-tagged ``msgpack`` used to load as ``1`` (msgpack trailing bytes ignored)."""
    b = sync_backend
    with b.open() as saver:
        config = cfg("t")
        items = [f"message number {i} " * 4 for i in range(40)]  # ~3 KB: room for a delta (delta_piece_bytes)
        versions = {"x": "1"}
        config = saver.put(config, ckpt({"x": items}, versions), {"step": 0}, versions)
        config = saver.put(config, ckpt({"x": items + ["one more"]}, {"x": "2"}), {"step": 1}, {"x": "2"})
        (tag,) = b.sql("SELECT type FROM threadline_blobs WHERE version = '2'")[0]
        assert tag.startswith("delta-list:"), tag
        for retag in ("msgpack", "msgpack+zstd", "json", "bytes", "null", "empty", tag.replace("delta-list:", "delta-dict:")):
            b.sql("UPDATE threadline_blobs SET type = ? WHERE version = '2'", (retag,))
            saver.blob_codec.cache.clear()
            with pytest.raises(CorruptRowError):
                saver.get_tuple(config)
        # a legacy (unsealed) msgpack row with bytes after its value
        b.sql("UPDATE threadline_blobs SET type = 'msgpack', blob = ?, base_version = NULL WHERE version = '2'", (ormsgpack.packb(1) + b"\x02",))
        with pytest.raises(CorruptRowError, match="trailing|after"):
            saver.get_tuple(config)


class Items(TypedDict):
    items: Annotated[list[int], operator.add]


def _items_graph(saver: Any) -> Any:
    g = StateGraph(Items)
    g.add_node("step", lambda s: {"items": [len(s["items"])]})
    g.add_edge(START, "step")
    g.add_edge("step", END)
    return g.compile(checkpointer=saver)


def test_f3_a_missing_blob_fails_the_checkpoint_instead_of_dropping_the_channel(sync_backend: Backend) -> None:
    b = sync_backend
    thread = cfg("t")
    with b.open() as saver:
        graph = _items_graph(saver)
        for _ in range(4):
            graph.invoke({"items": [0]}, thread)
        state = graph.get_state(thread).values["items"]
        assert len(state) == 8
        head = saver.get_tuple(thread)
        version = head.checkpoint["channel_versions"]["items"]
        b.sql("DELETE FROM threadline_blobs WHERE channel = 'items' AND version = ?", (str(version),))
        saver.blob_codec.cache.clear()
        with pytest.raises(CorruptRowError, match="items"):
            saver.get_tuple(thread)
        with pytest.raises(CorruptRowError, match="items"):
            graph.invoke({"items": [0]}, thread)  # resuming never silently restarts the state
        with pytest.raises(CorruptRowError):
            list(saver.list(thread))


# --- 4. fsck reports and goes on -----------------------------------------------------------------


def test_f4_fsck_reports_malformed_channel_versions_and_goes_on(db) -> None:
    b, facts = db
    (cid,) = b.sql("SELECT checkpoint_id FROM threadline_checkpoints WHERE thread_id = 't-answer' ORDER BY checkpoint_id LIMIT 1")[0]
    (doc,) = b.sql("SELECT checkpoint FROM threadline_checkpoints WHERE checkpoint_id = ?", (cid,))[0]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    doc["channel_versions"] = ["not", "a", "mapping"]
    b.sql("UPDATE threadline_checkpoints SET checkpoint = ? WHERE checkpoint_id = ?", (json.dumps(doc), cid))
    b.sql("DELETE FROM threadline_threads WHERE thread_id = 't-research'")  # something repairable elsewhere
    with b.open() as saver:
        report = lifecycle.fsck(saver)
        assert report.threads_checked == 3
        kinds = {(f.kind, f.thread_id) for f in report.findings}
        assert ("unreadable_checkpoint", "t-answer") in kinds, kinds
        assert ("thread_index", "t-research") in kinds, kinds
        repaired = lifecycle.fsck(saver, repair=True)
        assert any(f.repaired and f.thread_id == "t-research" for f in repaired.findings)
        assert not [f for f in lifecycle.fsck(saver).findings if f.thread_id != "t-answer"]
    result = cli("fsck", "--db", b.url, "--json", code=1)
    assert json.loads(result.stdout)["threads_checked"] == 3


# --- 5. delete_for_runs keeps the parent chain whole --------------------------------------------


def test_f5_delete_for_runs_leaves_no_broken_parent(sync_backend: Backend) -> None:
    b = sync_backend
    with b.open() as saver:
        config = cfg("t")
        for i, run in enumerate(["r1", "r2", "r2", "r3"]):
            config = saver.put(config, ckpt({"n": i}, {"n": str(i + 1)}), {"step": i, "run_id": run}, {"n": str(i + 1)})
        ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg("t"))][::-1]
        saver.delete_for_runs(["r2"])
        left = {t.config["configurable"]["checkpoint_id"]: t.parent_config for t in saver.list(cfg("t"))}
        assert set(left) == {ids[0], ids[3]}
        assert left[ids[3]]["configurable"]["checkpoint_id"] == ids[0]  # re-parented onto the nearest kept ancestor
        assert not [f for f in lifecycle.fsck(saver).findings if f.kind == "broken_parent"]


# --- 6. no write lock to open; a foreign lock is a BackendError -----------------------------------


HOLD_SQLITE = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE threadline_threads SET updated_at = updated_at")
print("locked", flush=True)
sys.stdin.readline()
conn.rollback()
"""

HOLD_POSTGRES = """
import psycopg, sys
conn = psycopg.connect(sys.argv[1])
conn.execute("SELECT pg_advisory_xact_lock(%s)", (0x7468726C,))
conn.execute("UPDATE threadline_threads SET updated_at = updated_at")
print("locked", flush=True)
sys.stdin.readline()
conn.rollback()
"""


def test_f6_opening_takes_no_write_lock_and_a_foreign_lock_is_a_backend_error(sync_backend: Backend) -> None:
    b = sync_backend
    with b.open() as saver:
        saver.put(cfg("t"), ckpt({"n": 1}, {"n": "1"}), {"step": 0}, {"n": "1"})
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_POSTGRES if b.is_postgres else HOLD_SQLITE, b.url],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with b.open() as saver:  # setup has nothing to do: no lock wanted
            assert saver.get_tuple(cfg("t")).checkpoint["channel_values"] == {"n": 1}
        cli("show", "t", "--db", b.url)
        if not b.is_postgres:
            from threadline import SqliteSaver

            conn = sqlite3.connect(b.url, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=50")
            saver = SqliteSaver(conn)
            with pytest.raises(BackendError, match="locked"):
                saver.put(cfg("t"), ckpt({"n": 2}, {"n": "2"}), {"step": 1}, {"n": "2"})
            conn.close()
    finally:
        holder.communicate("\n", timeout=30)


# --- 7. bad keys and arguments are threadline errors ----------------------------------------------


async def test_f7_bad_keys_and_arguments_are_threadline_errors(backend: Backend) -> None:
    from bad_input_access import Api

    from threadline import limits
    from threadline.errors import FilterTooLargeError, KeyTooLongError, ValueTooLargeError

    lone = "a\ud800b"
    async with _opened(backend) as saver:
        api = Api(saver, backend.is_async)
        stored = await api.call("put", cfg("t"), ckpt({"x": 1}, {"x": "1"}), {"step": 0}, {"x": "1"})
        before = backend.snapshot()
        bad_puts = [
            (cfg("a" * 100_000), ckpt({"x": 1}, {"x": "1"}), {"x": "1"}, KeyTooLongError),
            (cfg(lone), ckpt({"x": 1}, {"x": "1"}), {"x": "1"}, ConfigError),
            (cfg("t", ns=lone), ckpt({"x": 1}, {"x": "1"}), {"x": "1"}, ConfigError),
            (cfg("t"), ckpt({"x\x00": 1}, {"x\x00": "1"}), {"x\x00": "1"}, ConfigError),
            (cfg("t"), ckpt({lone: 1}, {lone: "1"}), {lone: "1"}, ConfigError),
            (cfg("t"), ckpt({"x": 1}, {"x": "1\x00"}), {"x": "1\x00"}, ConfigError),
            (cfg("t"), {**ckpt({"x": 1}, {"x": "1"}), "id": "c\x00"}, {"x": "1"}, ConfigError),
            (cfg("t"), {**ckpt({"x": 1}, {"x": "1"}), "id": "c" * 10_000}, {"x": "1"}, KeyTooLongError),
        ]
        for config, c, new, error in bad_puts:
            with pytest.raises(error):
                await api.call("put", config, c, {"step": 1}, new)
        with pytest.raises(ConfigError):
            await api.call("put", cfg("t"), ckpt({"x": 1}, {"x": "1"}), {"step": 1, "note": lone}, {"x": "1"})
        with limits.override(max_value_bytes=1000):
            with pytest.raises(ValueTooLargeError, match="max_value_bytes"):
                await api.call("put", cfg("t"), ckpt({"x": "v" * 5000}, {"x": "2"}), {"step": 1}, {"x": "2"})
            with pytest.raises(ValueTooLargeError):
                await api.call("put_writes", stored, [("x", "v" * 5000)], "task")
        for writes, task_id, task_path in (
            ([("x\x00", 1)], "task", ""),
            ([("x", 1)], "task\x00", ""),
            ([("x", 1)], "task", "path\x00"),
            ([(lone, 1)], "task", ""),
            ([("x", 1)], lone, ""),
            ([("x", 1)], "task", lone),
            ([("x", 1)], "t" * 10_000, ""),
        ):
            with pytest.raises(ConfigError):
                await api.call("put_writes", stored, writes, task_id, task_path)
        for config in (cfg("t", cid="c\x00"), cfg("t", cid=lone), cfg(lone), cfg("t" * 100_000)):
            with pytest.raises(ConfigError):
                await api.call("get_tuple", config)
            with pytest.raises(ConfigError):
                await api.list(config)
        with pytest.raises(ConfigError):
            await api.call("get_delta_channel_history", config=stored, channels=["x\x00"])
        with pytest.raises(ConfigError):
            await api.call("delete_for_runs", [lone])
        with pytest.raises(FilterTooLargeError, match="max_filter_keys"):
            await api.list(None, filter={f"k{i}": i for i in range(2000)})
        with pytest.raises(FilterError):
            await api.list(None, filter={"k": lone})
        for limit in (1.5, "3", True):
            with pytest.raises(ConfigError, match="limit"):
                await api.list(None, limit=limit)
        assert backend.snapshot() == before


class _opened:
    def __init__(self, backend: Backend) -> None:
        self.cm = backend.open()
        self.is_async = backend.is_async

    async def __aenter__(self) -> Any:
        return await self.cm.__aenter__() if self.is_async else self.cm.__enter__()

    async def __aexit__(self, *exc: Any) -> None:
        if self.is_async:
            await self.cm.__aexit__(*exc)
        else:
            self.cm.__exit__(*exc)


# --- 8. inspection constructs nothing; enum.Enum is never called ----------------------------------

def test_f8_inspection_paths_construct_nothing(sync_backend: Backend, tmp_path: Path) -> None:
    b = sync_backend
    payload = _ext(2, Canary.__module__, "Canary", {"note": "constructed"})
    pwn = _ext(1, "enum", "Enum", ["Pwn", "A B"])
    with b.open() as saver:
        # lists: values with blob rows (a small str would be kept in the checkpoint's document)
        a = saver.put(cfg("t"), ckpt({"x": ["plain"], "e": ["plain"]}, {"x": "1", "e": "1"}), {"step": 0}, {"x": "1", "e": "1"})
        saver.put_writes(a, [("x", "w")], "task-1")
        head = saver.put(a, ckpt({"x": ["plain2"], "e": ["plain"]}, {"x": "2", "e": "1"}), {"step": 1}, {"x": "2"})
    # rewrite the values as a crafted database would hold them (legacy, unsealed rows)
    b.sql("UPDATE threadline_blobs SET type = 'msgpack', blob = ? WHERE channel = 'x'", (payload,))
    b.sql("UPDATE threadline_blobs SET type = 'msgpack', blob = ? WHERE channel = 'e'", (pwn,))
    b.sql("UPDATE threadline_writes SET type = 'msgpack', blob = ?", (payload,))
    CANARY.clear()
    with b.open() as saver:
        view = H.state_at(saver, "t")
        assert view.values["x"] == {"note": "constructed"}
        assert not isinstance(view.values["e"], type)
        H.diff(saver, "t", a["configurable"]["checkpoint_id"], head["configurable"]["checkpoint_id"])
        H.latest_values(saver, "x")
        lifecycle.fsck(saver, deep=True)
        for command in (("show", "t"), ("latest", "x"), ("fsck", "--deep")):
            cli(*command, "--db", b.url, "--json", code=None)
        assert CANARY == [], "a stored data class was constructed on an inspection path"
        # the graph's own convenience stays: in LangGraph's default mode get_tuple rebuilds it
        got = saver.get_tuple(cfg("t")).checkpoint["channel_values"]
        assert isinstance(got["x"], Canary) and not isinstance(got["e"], type)
    import enum

    assert not [c for c in enum.Enum.__subclasses__() if c.__name__ == "Pwn"]


# --- 9. parent cycles ------------------------------------------------------------------------------


def test_f9_a_parent_cycle_is_detected_at_once(sync_backend: Backend) -> None:
    b = sync_backend
    with b.open() as saver:
        one = saver.put(cfg("t"), ckpt({"n": 1}, {"n": "1"}), {"step": 0}, {"n": "1"})
        two = saver.put(one, ckpt({"n": 2}, {"n": "2"}), {"step": 1}, {"n": "2"})
        b.sql("UPDATE threadline_checkpoints SET parent_checkpoint_id = ? WHERE checkpoint_id = ?",
              (two["configurable"]["checkpoint_id"], one["configurable"]["checkpoint_id"]))
        with pytest.raises(CorruptRowError, match="checksum"):  # the row's checksum covers its parent
            saver.get_delta_channel_history(config=two, channels=["n"])
        b.sql("UPDATE threadline_checkpoints SET checksum = NULL")  # as a database written before checksums
        # the walk ends where it loops (at once, not a million levels later), as the official
        # savers' walk ends on a cycle that re-puts make on SQLite
        assert set(saver.get_delta_channel_history(config=two, channels=["n"])) == {"n"}
        assert H.thread_history(saver, "t").head == two["configurable"]["checkpoint_id"]
