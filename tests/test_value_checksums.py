"""Value rows' unkeyed checksums (``codec.seal``, storage format 2): a ``+sum`` row written now holds
xxh3-64 of its associated data and payload (envelope ``C1 03``); a row written before (BLAKE2b-64,
``C1 01``) reads as it did; either refuses a damaged or moved row; and a release that knows only
the earlier envelope refuses the database by its schema version instead of calling rows damaged."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from backends import Backend
from bad_input_access import cfg, ckpt
from threadline.codec.seal import STREAM_MIN, Row, xxh3
from threadline.errors import CorruptRowError, SchemaError
from threadline.storage import rows as R
from threadline.storage.ops import schema as schema_ops
from threadline.storage.schema import LATEST_VERSION


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
    with pytest.raises(SchemaError, match=rf"written by a newer threadline \(schema version {LATEST_VERSION}"):
        _read(b, cfg("t"))


# --- checkpoint rows on a backend without JSON text (Postgres): ``c3:`` ---------------------------


def _checksums(b: Backend) -> dict[str, str]:
    return {r[0]: r[1] for r in b.sql("SELECT checkpoint_id, checksum FROM threadline_checkpoints WHERE thread_id = 't'")}


def test_checkpoint_rows_get_the_checksum_their_backend_reads_back(sync_backend: Backend) -> None:
    """SQLite keeps the JSON text (``x3:`` covers it); Postgres's JSONB does not: ``c3:``, xxh3-128 of the
    parsed JSON's sorted text, computed here independently from the row as read back."""
    import orjson

    b = sync_backend
    one, two = _thread(b)
    found = _checksums(b)
    assert {c[:3] for c in found.values()} == ({"c3:"} if b.is_postgres else {"x3:"})
    if b.is_postgres:
        for cid, parent, doc, meta, checksum in b.sql(
            "SELECT checkpoint_id, parent_checkpoint_id, checkpoint, metadata, checksum FROM threadline_checkpoints WHERE thread_id = 't'"
        ):
            doc, meta = (orjson.loads(v) if isinstance(v, str) else v for v in (doc, meta))
            text = orjson.dumps([["t", "", cid], parent, doc, meta], option=orjson.OPT_SORT_KEYS)
            assert checksum == "c3:" + xxhash.xxh3_128_hexdigest(text)
    assert _read(b, two)[0]["y"] == 2


@pytest.mark.parametrize("odd", [1e16, -1.5e20, -0.0, 2**70])
def test_numbers_jsonb_changes_take_the_canonical_checksum(sync_backend: Backend, odd: Any) -> None:
    """A float JSONB gives back as an integer (1e16 and up, written with an exponent), -0.0 (given back
    as 0.0) and an integer beyond 64 bits (which orjson does not write) take ``b2:``, and read back."""
    b = sync_backend
    with b.open() as saver:
        config = saver.put(cfg("t"), ckpt({"y": 1}, {"y": "1"}), {"step": 0, "odd": odd}, {"y": "1"})
        found = saver.get_tuple(config)
    assert found.metadata["odd"] == odd  # as the official PostgresSaver, JSONB gives an integral float back as an integer
    assert set(_checksums(b).values()).pop()[:3] == ("b2:" if b.is_postgres else "x3:")


def test_a_changed_checkpoint_row_is_refused_and_b2_rows_read(sync_backend: Backend) -> None:
    from threadline.codec import seal

    b = sync_backend
    one, two = _thread(b)
    cid = two["configurable"]["checkpoint_id"]
    if b.is_postgres:  # a row written before migration 19: its checksum canonical, BLAKE2b
        parent, doc, meta = b.sql("SELECT parent_checkpoint_id, checkpoint, metadata FROM threadline_checkpoints WHERE checkpoint_id = ?", (cid,))[0]
        old = "b2:" + hashlib.blake2b(seal._content(("t", "", cid), parent, doc, meta), digest_size=8).hexdigest()
        b.sql("UPDATE threadline_checkpoints SET checksum = ? WHERE checkpoint_id = ?", (old, cid))
        assert _read(b, two)[0]["y"] == 2
        b.sql("UPDATE threadline_checkpoints SET checksum = ? WHERE checkpoint_id = ?", (_checksums(b)[one["configurable"]["checkpoint_id"]], cid))
    else:
        b.sql("UPDATE threadline_checkpoints SET metadata = replace(metadata, '\"step\":1', '\"step\":7') WHERE checkpoint_id = ?", (cid,))
    with pytest.raises(CorruptRowError, match="checksum mismatch"):
        _read(b, two)


class _Text(str):
    """A str subclass: plain JSON for json, not for orjson (``jsontext.dumps_plain`` says so)."""


_SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1e16, -1.5e20, -0.0, 1e-7, 0.1])
    | st.builds(_Text, st.text(max_size=4))
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=4), inner, max_size=3) | st.dictionaries(st.integers(0, 9), inner, max_size=2),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(meta=st.dictionaries(st.text(max_size=6), _JSON, max_size=4), extra=_JSON)
def test_a_put_checksums_plain_data_as_it_would_its_text(meta: dict, extra: Any) -> None:
    """A put hands the checksum its checkpoint and metadata as they are when both are plain JSON data
    (``jsontext.dumps_plain``): the ``c3:``, ``b2:`` or keyed checksum is then the one of their texts
    parsed back, as a read computes it — for numbers JSONB rewrites, integers beyond 64 bits, tuples,
    integer keys and str subclasses alike."""
    from threadline.codec.jsontext import dumps_plain
    from threadline.codec.keyring import Keyring
    from threadline.codec.seal import checkpoint_checksum

    doc = {"v": 4, "id": "1f0-ab", "channel_versions": {"messages": "0001.0"}, "versions_seen": {"n": extra}}
    try:
        doc_json, meta_json, plain = dumps_plain(doc, meta)
    except ValueError:
        return  # NaN, NUL or a lone surrogate: the put refuses it before any checksum
    key = ("t", "", "1f0-ab")
    for keys in (None, Keyring(["AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="])):
        from_text = checkpoint_checksum(keys, key, "1f0-aa", doc_json, meta_json)
        given = checkpoint_checksum(keys, key, "1f0-aa", doc_json, meta_json, plain=(doc, meta) if plain else None)
        assert given == from_text
        read_back = checkpoint_checksum(keys, key, "1f0-aa", json.loads(doc_json), json.loads(meta_json))  # as Postgres's JSONB gives them
        assert given == read_back


@pytest.mark.parametrize("signs", [0, 63, 64, 200])
def test_a_number_jsonb_rewrites_is_found_among_many_signs(signs: int) -> None:
    """``c3:`` gives way to ``b2:`` for a float JSONB gives back as an integer (``e+``) or -0.0, found
    however many other ``+`` and ``-`` the document holds before it (every id holds ``-`` signs)."""
    from threadline.codec.seal import _unstable

    noise = b'"' + b"+-" * signs + b'"'
    for number, rewritten in ((b"1.5e+20", True), (b"-0.0", True), (b"-0.5", False), (b"12", False)):
        assert _unstable(b"[" + noise + b"," + number + b"]") is rewritten


@settings(max_examples=60, deadline=None)
@given(ad=st.binary(max_size=64), size=st.sampled_from([0, 1, STREAM_MIN - 1, STREAM_MIN, STREAM_MIN + 1, 10_000, 70_000]), seed=st.integers(0, 255),
       wide=st.booleans(), view=st.booleans())
def test_a_digest_fed_in_two_parts_is_the_digest_of_the_joined_bytes(ad: bytes, size: int, seed: int, wide: bool, view: bool) -> None:
    """``seal.xxh3`` hashes a large payload without joining it to its associated data first: the digest
    must be the one-shot digest of the joined bytes, or rows sealed before would no longer open."""
    payload = bytes((seed + i) % 256 for i in range(size))
    one_shot = (xxhash.xxh3_128_digest if wide else xxhash.xxh3_64_digest)(ad + payload)
    assert xxh3(ad, memoryview(payload) if view else payload, wide=wide) == one_shot
