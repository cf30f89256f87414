"""Value rows' unkeyed checksums (``codec.seal``, storage format 2): a ``+sum`` row written now holds
xxh3-64 of its associated data and payload (envelope ``C1 03``); a row written before (BLAKE2b-64,
``C1 01``) reads as it did; either refuses a damaged or moved row; and a release that knows only
the earlier envelope refuses the database by its schema version instead of calling rows damaged."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import xxhash

from backends import Backend
from bad_input_access import cfg, ckpt
from threadline.codec.seal import Row
from threadline.errors import CorruptRowError, SchemaError
from threadline.storage import rows as R
from threadline.storage.ops import schema as schema_ops


def _thread(b: Backend) -> tuple[dict, dict]:
    """Thread ``t``: two checkpoints (a list channel that grows, a scalar) and a pending write."""
    with b.open() as saver:
        one = saver.put(cfg("t"), ckpt({"x": ["a" * 300], "y": 1}, {"x": "1", "y": "1"}), {"step": 0}, {"x": "1", "y": "1"})
        two = saver.put(one, ckpt({"x": ["a" * 300, "b" * 300], "y": 2}, {"x": "2", "y": "2"}), {"step": 1}, {"x": "2", "y": "2"})
        saver.put_writes(two, [("x", ["c" * 300])], "task-1")
    return one, two


def _read(b: Backend, config: dict) -> Any:
    with b.open() as saver:
        found = saver.get_tuple(config)
        return found.checkpoint["channel_values"], found.pending_writes


def _blob(b: Backend, channel: str, version: str) -> tuple[str, bytes, str | None]:
    return b.sql("SELECT type, blob, base_version FROM threadline_blobs WHERE thread_id = 't' AND channel = ? AND version = ?", (channel, version))[0]


def test_value_rows_are_sealed_with_xxh3(sync_backend: Backend) -> None:
    b = sync_backend
    _, two = _thread(b)
    rows = b.sql("SELECT checkpoint_ns, channel, version, type, blob, base_version FROM threadline_blobs WHERE thread_id = 't'")
    writes = b.sql("SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob FROM threadline_writes WHERE thread_id = 't'")
    assert rows and writes
    for ns, channel, version, tag, data, base in rows:
        inner = tag[: -len("+sum")]
        assert tag.endswith("+sum") and data[:2] == b"\xc1\x03", (channel, version, tag, data[:2])
        ad = R.blob_row_ref("t", ns, channel, version, base).ad(inner)
        assert data[2:10] == xxhash.xxh3_64_digest(ad + data[10:])  # the digest, computed here independently
    for ns, cid, task_id, idx, channel, tag, data in writes:
        ad = R.write_row_ref("t", ns, cid, task_id, idx, channel).ad(tag[: -len("+sum")])
        assert data[:2] == b"\xc1\x03" and data[2:10] == xxhash.xxh3_64_digest(ad + data[10:])
    assert _read(b, two)[0] == {"x": ["a" * 300, "b" * 300], "y": 2}


def _as_blake2b(row: Row, tag: str, data: bytes) -> bytes:
    """A ``C1 03`` envelope rewritten as an earlier release sealed it: ``C1 01`` and BLAKE2b-64."""
    inner, payload = tag[: -len("+sum")], data[10:]
    h = hashlib.blake2b(row.ad(inner), digest_size=8)
    h.update(payload)
    return b"\xc1\x01" + h.digest() + payload


def test_rows_sealed_with_blake2b_read_as_before(sync_backend: Backend) -> None:
    b = sync_backend
    one, two = _thread(b)
    want_one, want_two = _read(b, one), _read(b, two)
    for ns, channel, version, tag, data, base in b.sql("SELECT checkpoint_ns, channel, version, type, blob, base_version FROM threadline_blobs"):
        old = _as_blake2b(R.blob_row_ref("t", ns, channel, version, base), tag, data)
        b.sql("UPDATE threadline_blobs SET blob = ? WHERE thread_id = 't' AND channel = ? AND version = ?", (old, channel, version))
    for ns, cid, task_id, idx, channel, tag, data in b.sql(
        "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob FROM threadline_writes"
    ):
        old = _as_blake2b(R.write_row_ref("t", ns, cid, task_id, idx, channel), tag, data)
        b.sql("UPDATE threadline_writes SET blob = ? WHERE task_id = ? AND idx = ?", (old, task_id, idx))
    assert {bytes(r[0][:2]) for r in b.sql("SELECT blob FROM threadline_blobs")} == {b"\xc1\x01"}
    assert _read(b, one) == want_one and _read(b, two) == want_two


@pytest.mark.parametrize("head", [b"\xc1\x03", b"\xc1\x01"])
def test_a_damaged_or_moved_row_is_refused_under_either_envelope(sync_backend: Backend, head: bytes) -> None:
    b = sync_backend
    one, two = _thread(b)
    tag, data, base = _blob(b, "x", "2")
    sealed = data if head == b"\xc1\x03" else _as_blake2b(R.blob_row_ref("t", "", "x", "2", base), tag, data)
    damaged = sealed[:-1] + bytes([sealed[-1] ^ 1])
    b.sql("UPDATE threadline_blobs SET blob = ? WHERE thread_id = 't' AND channel = 'x' AND version = '2'", (damaged,))
    with pytest.raises(CorruptRowError, match="checksum mismatch"):
        _read(b, two)
    # the same bytes, intact, under another version of the channel (moved from its row)
    moved = _blob(b, "x", "1")
    b.sql("UPDATE threadline_blobs SET blob = ? WHERE thread_id = 't' AND channel = 'x' AND version = '2'", (sealed,))
    assert _read(b, two)[0]["x"] == ["a" * 300, "b" * 300]
    b.sql("UPDATE threadline_blobs SET type = ?, blob = ? WHERE thread_id = 't' AND channel = 'x' AND version = '1'", (tag, sealed))
    with pytest.raises(CorruptRowError):
        _read(b, one)
    assert moved[1] != sealed


def test_a_release_before_the_envelope_refuses_the_database(sync_backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    b = sync_backend
    _thread(b)
    assert max(r[0] for r in b.sql("SELECT v FROM threadline_migrations")) >= 19
    monkeypatch.setattr(schema_ops, "LATEST_VERSION", 18)  # what a release before it knows
    with pytest.raises(SchemaError, match=r"written by a newer threadline \(schema version 19"):
        _read(b, cfg("t"))
