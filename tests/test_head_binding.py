"""Head rows are bound to their checkpoint row (``storage.heads``): a wide graph's head holds no
version (the row names them) and its empty channels as names, reads in one statement, and is never
served for another row; heads written before (entries with their versions) are still read."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import ormsgpack
import xxhash
from langgraph_scenarios import chain_builder

from threadline import SqliteSaver, lifecycle
from threadline.codec import PLAIN
from threadline.storage import heads as H


def _ran(db: str, nodes: int) -> tuple[dict, Any]:
    """A run of a ``nodes``-node chain on thread ``w`` of a new database ``db``: (its config, the latest tuple)."""
    config = {"configurable": {"thread_id": "w"}}
    with SqliteSaver.from_conn_string(db) as saver:
        chain_builder(nodes).compile(checkpointer=saver).invoke({"messages": [("user", "hi")]}, config)
        return config, saver.get_tuple(config)


def _head_row(db: str) -> tuple[str, str, bytes]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT checkpoint_id, type, data FROM threadline_heads WHERE thread_id = 'w'").fetchone()


def _read_alone(db: str, config: dict) -> tuple[Any, list[str]]:
    """A new saver's get_tuple of ``config`` and the statements it ran."""
    seen: list[str] = []
    with SqliteSaver.from_conn_string(db) as fresh:
        fresh.conn.set_trace_callback(seen.append)
        found = fresh.get_tuple(config)
        fresh.conn.set_trace_callback(None)
    return found, seen


def test_a_wide_graphs_head_holds_no_version(tmp_path: Path) -> None:
    db = str(tmp_path / "wide.db")
    config, latest = _ran(db, 40)
    versions = latest.checkpoint["channel_versions"]
    assert len(versions) > 40
    cid, kind, data = _head_row(db)
    assert cid == latest.config["configurable"]["checkpoint_id"] and kind == "head2+x3"
    assert not [v for v in versions.values() if str(v).encode() in data]
    # each of the 40 empty trigger channels costs its name and a few bytes, not a 51-byte version more
    assert len(data) < 40 * 51
    found, seen = _read_alone(db, config)
    assert len(seen) == 1 and "threadline_heads" in seen[0] and "threadline_blobs" not in seen[0], seen
    assert found == latest
    # the same values as read from the blobs, the record
    with SqliteSaver.from_conn_string(db) as saver:
        saver.conn.execute("DELETE FROM threadline_heads")
    found, seen = _read_alone(db, config)
    assert found == latest and any("threadline_blobs" in sql for sql in seen)


def test_a_head_is_served_only_with_the_checkpoint_row_it_was_written_with() -> None:
    key, checksum = ("t", "", "c1"), "x3:00112233445566778899aabbccddeeff"
    entries = {
        "messages": ("00000000000000000000000000000002.0.1", "msgpack", b"\x91\xa2hi", "msgpack+sum", 14),
        "branch:to:agent": ("00000000000000000000000000000003.0.2", "empty", b"", "empty", 10),
        "__start__": ("00000000000000000000000000000001.0.3", "empty", b"", "empty+gcm", 34),
    }
    kind, data = H.pack(PLAIN, key, entries, checksum)
    versions = {ch: e[0] for ch, e in entries.items()}
    assert H.unpack(PLAIN, key, kind, data, versions, checksum) == entries
    assert H.unpack(PLAIN, key, kind, data, versions, "x3:ffeeddccbbaa99887766554433221100") is None  # the row changed
    assert H.unpack(PLAIN, key, kind, data, {ch: v for ch, v in versions.items() if ch != "__start__"}, checksum) is None
    assert H.unpack(PLAIN, ("t", "", "c2"), kind, data, versions, checksum) is None  # sealed to its checkpoint
    assert H.unpack(PLAIN, key, kind, data[:-1] + bytes([data[-1] ^ 1]), versions, checksum) is None


def test_a_head_written_with_its_versions_is_read(tmp_path: Path) -> None:
    db = str(tmp_path / "legacy.db")
    config, latest = _ran(db, 5)
    cid, kind, data = _head_row(db)
    key = ("w", "", cid)
    with sqlite3.connect(db) as conn:
        (checksum,) = conn.execute("SELECT checksum FROM threadline_checkpoints WHERE checkpoint_id = ?", (cid,)).fetchone()
    entries = H.unpack(PLAIN, key, kind, data, {ch: str(v) for ch, v in latest.checkpoint["channel_versions"].items()}, checksum)
    assert entries
    # the head as written before: every entry with its version
    payload = ormsgpack.packb([[ch, *entry] for ch, entry in entries.items()])
    legacy = xxhash.xxh3_128_digest(H.head_ref(*key).ad(H.LEGACY) + payload) + payload
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE threadline_heads SET type = ?, data = ? WHERE thread_id = 'w'", (H.LEGACY + H.X3, legacy))
    found, seen = _read_alone(db, config)
    assert found == latest and len(seen) == 1 and "threadline_blobs" not in seen[0], seen
    with SqliteSaver.from_conn_string(db) as saver:
        assert not [f for f in lifecycle.fsck(saver, deep=True).findings if "head" in f.kind]
