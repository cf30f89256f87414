"""Fuzzing stored rows: a damaged row loads exactly or raises CorruptRowError, nothing else.

A database is filled by real LangGraph runs and direct puts (messages, dict merges,
integer sums, subgraph namespaces, an interrupt, list and dict deltas, deltas that
reference pending writes, zstd-compressed values and writes), once with checksums and
once encrypted. A write is read by its checkpoint and by every checkpoint whose delta
chain references it. Hypothesis then mutates one
stored field at a time — flips bits, truncates, appends bytes, re-tags, nulls — of a
random blob, write or checkpoint row (its value bytes, type tag, checkpoint JSON,
metadata, parent link or checksum), loads every checkpoint that reads that row with
``get_tuple`` (nothing cached) and restores the field. Each load must return exactly
what the undamaged database returned or raise ``CorruptRowError``: never another value,
never another exception.

``THREADLINE_FUZZ_MUTATIONS`` sets the mutations stored per backend and codec (default
150; ``make fuzz`` runs 10,000); a draw that changes nothing or that the database refuses
(invalid JSON in a JSONB column, a NULL where one is not allowed) is not counted. The
counts are printed at the end of each test.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from contextlib import contextmanager
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from backends import Backend
from lifecycle_graphs import cfg, populate
from threadline import codec
from threadline.codec import BlobCodec, Keyring
from threadline.storage import rows as R
from threadline.errors import CorruptRowError
from threadline.storage.dialect import POSTGRES

MUTATIONS = int(os.environ.get("THREADLINE_FUZZ_MUTATIONS", "150"))
KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
CODECS = {"checksum": lambda: BlobCodec(), "encrypted": lambda: BlobCodec(keys=Keyring([KEY]))}
TAGS = ["msgpack", "json", "null", "bytes", "bytearray", "empty", "pickle", "msgpack+zstd", "delta-list:msgpack",
        "delta-dict:msgpack", "delta-list:msgpack+zstd", "msgpack+sum", "msgpack+gcm", "msgpack+zstd+sum",
        "delta-list:msgpack+sum", "delta-dict:msgpack+gcm", "delta-ref:msgpack+sum", "delta-ref:msgpack+gcm", "msgpack+aes",
        "x", ""]


def _fill(saver: Any) -> None:
    populate(saver)
    config = cfg("deltas")
    log: list[str] = []
    notes: dict[str, Any] = {}
    # "chat" grows by the items of the parent's pending write: its deltas reference the writes (codec.refs)
    said = [[f"said {step}.{i} " + "sed do eiusmod tempor " * (8 + step % 5) for i in range(2)] for step in range(15)]
    chat: list[str] = []
    for step in range(14):
        log = log + [f"entry {step}.{i} " + "lorem ipsum dolor sit amet " * 2 for i in range(5)]
        notes = {**notes, f"k{step}": {"step": step, "text": "consectetur adipiscing " * (step % 3 + 1)}}
        chat = chat + said[step]
        ck = empty_checkpoint()
        ck["id"] = str(uuid6(clock_seq=-1))
        ck["channel_values"] = {"log": log, "notes": notes, "n": step, "chat": chat}
        ck["channel_versions"] = {"log": str(step + 1), "notes": str(step + 1), "n": str(step + 1), "chat": str(step + 1)}
        config = saver.put(config, ck, {"source": "loop", "step": step, "run_id": f"r{step % 3}"}, dict(ck["channel_versions"]))
        saver.put_writes(config, [("log", ["w " * 400]), ("n", step), ("chat", said[step + 1])], f"task-{step}", f"~{step}")


class Raw:
    """One connection behind the saver's back: read rows, set a field, restore it."""

    def __init__(self, b: Backend) -> None:
        self.b = b
        if b.is_postgres:
            import psycopg

            self.conn: Any = psycopg.connect(b.url, autocommit=True)
        else:
            self.conn = sqlite3.connect(b.url, isolation_level=None)

    def sql(self, text: str, params: tuple = ()) -> list[tuple]:
        cur = self.conn.execute(POSTGRES.sql(text) if self.b.is_postgres else text, params)
        return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in cur.fetchall()] if cur.description else []

    def set(self, table: str, column: str, value: Any, key: tuple, cols: tuple) -> bool:
        """Store ``value`` in one field; False when the database refuses it (a type it cannot hold)."""
        where = " AND ".join(f"{c} = ?" for c in cols)
        cast = "CAST(? AS TEXT)" if isinstance(value, bytes) and column != "blob" and not self.b.is_postgres else "?"
        try:
            self.sql(f"UPDATE threadline_{table} SET {column} = {cast} WHERE {where}", (value, *key))
        except Exception as exc:  # the database refused the value (NOT NULL, invalid JSON or UTF-8, NUL)
            if self.b.is_postgres or isinstance(exc, sqlite3.IntegrityError):
                return False
            raise
        return True


ROWS = {
    "blobs": (("thread_id", "checkpoint_ns", "channel", "version"), ("type", "blob")),
    "writes": (("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"), ("type", "blob")),
    "checkpoints": (("thread_id", "checkpoint_ns", "checkpoint_id"), ("checkpoint", "metadata", "parent_checkpoint_id", "checksum")),
}


@contextmanager
def fuzz_database(b: Backend, codec: BlobCodec) -> Iterator[tuple[Any, Raw, dict, dict]]:
    """(saver, raw connection, expected tuple per checkpoint, the checkpoints reading each row)."""
    with b.open() as saver:
        saver.blob_codec = codec
        _fill(saver)
        saver.blob_codec.cache.clear()
        raw = Raw(b)
        expected = {}
        for t in saver.list(None):
            c = t.config["configurable"]
            expected[(c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])] = _shape(t)
        readers: dict[tuple, set] = {}
        bases = {tuple(r[:4]): r[4] for r in raw.sql("SELECT thread_id, checkpoint_ns, channel, version, base_version FROM threadline_blobs")}
        for key in expected:
            t = saver.get_tuple({"configurable": dict(zip(("thread_id", "checkpoint_ns", "checkpoint_id"), key))})
            readers.setdefault(("checkpoints", key), set()).add(key)
            for ch, v in t.checkpoint["channel_versions"].items():
                blob = (key[0], key[1], ch, str(v))
                while blob in bases:
                    readers.setdefault(("blobs", blob), set()).add(key)
                    blob = (*blob[:3], bases[blob]) if bases[blob] else None  # type: ignore[assignment]
        for w in raw.sql("SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx FROM threadline_writes"):
            readers.setdefault(("writes", tuple(w)), set()).add(tuple(w[:3]))
        for blob, cks in list(readers.items()):  # a write is also read by the checkpoints whose deltas reference it
            if blob[0] == "blobs":
                for w in _referenced_writes(saver.blob_codec, raw, blob[1]):
                    readers.setdefault(("writes", w), set()).update(cks)
        assert any(k[0] == "writes" and len(v) > 1 for k, v in readers.items()), "no delta references a write"
        try:
            yield saver, raw, expected, readers
        finally:
            raw.conn.close()


def _referenced_writes(bc: BlobCodec, raw: Raw, blob: tuple) -> list[tuple]:
    """The write keys a blob row's delta references (``codec.refs``; none for another row)."""
    cols = "thread_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?"
    (tag, data, base), = raw.sql(f"SELECT type, blob, base_version FROM threadline_blobs WHERE {cols}", blob)
    if not tag.startswith(codec.DELTA_REF):
        return []
    tag, data = bc.open(R.blob_row_ref(*blob, base), tag, data)
    _, cid, refs = codec.ref_in(tag, data, blob)
    return [(blob[0], blob[1], cid, task, idx) for task, idx in refs]


def _shape(t: Any) -> Any:
    parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
    return (t.checkpoint, t.metadata, t.pending_writes, parent)


def _mutate(original: Any, column: str, draw: Any, tags: list[str]) -> Any:
    """A damaged version of one stored field (or the sentinel ``...`` when the draw changes nothing)."""
    if column == "type":
        choice = draw(st.sampled_from(tags))
        return choice if choice != original else ...
    op = draw(st.sampled_from(["flip", "flip", "truncate", "extend", "null"]))
    if op == "null" or original is None:
        return None if original is not None else ...
    raw = original.encode("utf-8", "surrogatepass") if isinstance(original, str) else bytes(original)
    if op == "flip" and raw:
        i = draw(st.integers(0, len(raw) - 1))
        raw = raw[:i] + bytes([raw[i] ^ draw(st.integers(1, 255))]) + raw[i + 1 :]
    elif op == "truncate" and raw:
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    else:
        raw = raw + draw(st.binary(min_size=1, max_size=8))
    if isinstance(original, str):
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw  # stored as bytes: SQLite keeps them (CAST to TEXT), Postgres refuses them
    return raw


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_damaged_rows_load_exactly_or_raise_corrupt_row_error(sync_backend: Backend, codec: str) -> None:
    b = sync_backend
    outcomes: Counter[str] = Counter()
    with fuzz_database(b, CODECS[codec]()) as (saver, raw, expected, readers):
        targets = sorted(readers, key=repr)
        tags = sorted(set(TAGS) | {r[0] for r in raw.sql("SELECT type FROM threadline_blobs UNION SELECT type FROM threadline_writes")})

        @settings(max_examples=MUTATIONS, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
        @given(st.data())
        def mutate_and_load(data: Any) -> None:
            table, key = data.draw(st.sampled_from(targets))
            cols, fields = ROWS[table]
            column = data.draw(st.sampled_from(fields))
            read = f"{column}::text" if b.is_postgres and column in ("checkpoint", "metadata") else column  # JSONB as its text
            (original,) = raw.sql(f"SELECT {read} FROM threadline_{table} WHERE " + " AND ".join(f"{c} = ?" for c in cols), key)[0]
            damaged = _mutate(original, column, data.draw, tags)
            if damaged is ...:
                outcomes["unchanged"] += 1
                reject()  # not a mutation: does not count towards MUTATIONS
            if not raw.set(table, column, damaged, key, cols):
                outcomes["refused by the database"] += 1
                reject()
            try:
                for ck in sorted(readers[(table, key)]):
                    saver.blob_codec.cache.clear()
                    config = {"configurable": dict(zip(("thread_id", "checkpoint_ns", "checkpoint_id"), ck))}
                    try:
                        got = saver.get_tuple(config)
                    except CorruptRowError:
                        outcomes["CorruptRowError"] += 1
                        continue
                    except Exception as exc:
                        outcomes["other exception"] += 1
                        raise AssertionError(f"{table} {key} {column}: {type(exc).__name__}: {exc}") from exc
                    if got is None or _shape(got) != expected[ck]:
                        outcomes["wrong value"] += 1
                        raise AssertionError(f"{table} {key} {column} = {damaged!r}: checkpoint {ck} loaded as another value")
                    outcomes["exact"] += 1
            finally:
                assert raw.set(table, column, original, key, cols)
            outcomes["mutations"] += 1

        mutate_and_load()
    print(f"\nfuzz {b.kind}/{codec}: {dict(outcomes)}")
    assert outcomes["wrong value"] == 0 and outcomes["other exception"] == 0
    assert outcomes["CorruptRowError"] > 0


def test_a_checksum_column_of_any_text_is_a_corrupt_row(sync_backend: Backend) -> None:
    """Found by the fuzz test: a checksum with non-ASCII text (or not text at all) failed with TypeError."""
    b = sync_backend
    with b.open() as saver:
        stored = saver.put(cfg("t"), empty_checkpoint(), {"step": 0}, {})
        for bad in ("b2:0123456789abcdef\u0080", "hm:00000000:" + "é" * 32, "", "b2:"):
            b.sql("UPDATE threadline_checkpoints SET checksum = ?", (bad,))
            with pytest.raises(CorruptRowError):
                saver.get_tuple(stored)
        if not b.is_postgres:
            b.sql("UPDATE threadline_checkpoints SET checksum = x'0102'")  # a BLOB in a TEXT column
            with pytest.raises(CorruptRowError, match="not text"):
                saver.get_tuple(stored)
