"""Findings 1, 2, 4 and 12 of the second adversarial review (issue 27), each a regression test
on SQLite and Postgres: ways around the promise that someone who can write the database
cannot forge or alter a value when encryption is required.

1. ``rekey`` with encryption required treats plaintext value rows and checkpoint rows without
   a keyed checksum as unreadable: reported, left as they are, never sealed under the new key.
2. A saver whose keyring requires encryption adopts nothing from the official saver's tables
   unless adoption is enabled explicitly, and adoption never touches a thread threadline's
   own tables hold beyond what it adopted.
4. A value row turned into ``type='empty', blob=NULL`` is refused when encryption is required
   (empty rows are sealed like any other).
12. A special value (stored pending sends, a Send, interrupts) validly sealed but of the wrong
    shape is a ``CorruptRowError``, never a raw error in LangGraph.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from typer.testing import CliRunner

from backends import Backend
from bad_input_access import cfg, ckpt, cid_of
from threadline import lifecycle
from threadline.cli import app
from threadline.codec import BlobCodec, Keyring
from threadline.errors import CorruptRowError, EncryptionError

K1 = base64.b64encode(bytes(range(32))).decode()
K2 = bytes(range(100, 132)).hex()
runner = CliRunner()


def enc(*keys: str, require: bool = True) -> BlobCodec:
    return BlobCodec(keys=Keyring(list(keys or (K1,)), require=require))


def values(saver: Any, config: dict) -> dict:
    saver.blob_codec.cache.clear()
    return saver.get_tuple(config).checkpoint["channel_values"]


# --- 1. rotation never seals a forged row ------------------------------------------------------


def _encrypted_thread(b: Backend) -> tuple[dict, dict]:
    with b.open() as saver:
        saver.blob_codec = enc(K1)
        one = saver.put(cfg("t"), ckpt({"x": ["a"], "y": 1}, {"x": "1", "y": "1"}), {"step": 0}, {"x": "1", "y": "1"})
        two = saver.put(one, ckpt({"x": ["a", "b"], "y": 2}, {"x": "2", "y": "2"}), {"step": 1}, {"x": "2", "y": "2"})
    return one, two


def test_r1_rotation_reports_forged_plaintext_and_unkeyed_rows_and_leaves_them(sync_backend: Backend) -> None:
    b = sync_backend
    one, two = _encrypted_thread(b)
    # msgpack True in place of y's ciphertext; the first checkpoint's metadata edited, its checksum dropped
    b.sql("UPDATE threadline_blobs SET type = 'msgpack', blob = ? WHERE channel = 'y' AND version = '2'", (b"\xc3",))
    b.sql("UPDATE threadline_checkpoints SET metadata = ?, checksum = NULL WHERE checkpoint_id = ?",
          (json.dumps({"step": 0, "source": "forged"}), cid_of(one)))
    forged = {t: b.sql(q) for t, q in (
        ("blob", "SELECT type, blob FROM threadline_blobs WHERE channel = 'y' AND version = '2'"),
        ("checkpoint", f"SELECT metadata, checksum FROM threadline_checkpoints WHERE checkpoint_id = '{cid_of(one)}'"),
    )}
    with b.open() as saver:
        saver.blob_codec = enc(K2, K1)  # rotating: the new key writes, the old one reads
        with pytest.raises(EncryptionError, match="rekey"):
            values(saver, two)
        report = lifecycle.rekey(saver)
        assert not report.ok and len(report.unreadable) == 2, report.to_json()
        assert any("blob" in u and "'y'" in u for u in report.unreadable), report.unreadable
        assert any(cid_of(one) in u for u in report.unreadable), report.unreadable
        assert report.resealed["blobs"] == 3  # every genuine value moved to the new key
        for config in (one, two):
            with pytest.raises(EncryptionError):
                values(saver, config)
    assert {t: b.sql(q) for t, q in (
        ("blob", "SELECT type, blob FROM threadline_blobs WHERE channel = 'y' AND version = '2'"),
        ("checkpoint", f"SELECT metadata, checksum FROM threadline_checkpoints WHERE checkpoint_id = '{cid_of(one)}'"),
    )} == forged
    # the CLI says the same, and fails
    env = {"THREADLINE_ENCRYPTION_KEY": K2, "THREADLINE_ENCRYPTION_OLD_KEYS": K1, "COLUMNS": "200"}
    result = runner.invoke(app, ["rekey", "--db", b.url, "--json"], env=env)
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout)
    assert out["ok"] is False and len(out["unreadable"]) == 2
    assert out["resealed"] == {"checkpoints": 0, "blobs": 0, "writes": 0}


def test_r1_only_the_encrypt_mode_seals_plaintext(sync_backend: Backend) -> None:
    """Encrypting an existing database (``require=False``) is the one mode that seals plaintext."""
    b = sync_backend
    with b.open() as saver:  # checksums only
        config = saver.put(cfg("t"), ckpt({"x": [1, 2]}, {"x": "1"}), {"step": 0}, {"x": "1"})
        saver.put_writes(config, [("x", [3])], "task")
    with b.open() as saver:
        saver.blob_codec = enc(K1)
        refused = lifecycle.rekey(saver)
        assert not refused.ok and refused.resealed == {"checkpoints": 0, "blobs": 0, "writes": 0}
        saver.blob_codec = enc(K1, require=False)
        assert lifecycle.rekey(saver).ok
        saver.blob_codec = enc(K1)
        assert values(saver, config) == {"x": [1, 2]}
        assert lifecycle.rekey(saver).ok


# --- 2. official rows never override or inject threads ------------------------------------------


def _official_saver(b: Backend) -> Any:
    if b.is_postgres:
        from langgraph.checkpoint.postgres import PostgresSaver as Official
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver as Official
    return Official.from_conn_string(b.url)


def _forge_official(b: Backend, *threads: str) -> None:
    """Someone who can write the database puts a newer checkpoint of each thread in the official tables."""
    with _official_saver(b) as off:
        off.setup()
        for tid in threads:
            off.put(cfg(tid), ckpt({"x": "forged"}, {"x": "9"}), {"source": "input", "step": 9}, {"x": "9"})


def test_r2_encrypted_savers_adopt_nothing_unless_enabled_and_never_an_existing_thread(sync_backend: Backend) -> None:
    b = sync_backend
    with b.open() as saver:
        saver.blob_codec = enc()
        mine = saver.put(cfg("mine"), ckpt({"x": "real"}, {"x": "1"}), {"step": 0}, {"x": "1"})
    _forge_official(b, "mine", "injected")
    with b.open() as saver:  # the default: encryption required, so no adoption
        saver.blob_codec = enc()
        assert values(saver, cfg("mine")) == {"x": "real"}
        assert saver.get_tuple(cfg("injected")) is None and list(saver.list(cfg("injected"))) == []
        assert [cid_of(t.config) for t in saver.list(cfg("mine"))] == [cid_of(mine)]
    assert b.sql("SELECT COUNT(*) FROM threadline_adopted")[0][0] == 0
    with b.open(adopt=True) as saver:  # enabled explicitly: new threads only
        saver.blob_codec = enc()
        assert values(saver, cfg("mine")) == {"x": "real"}
        assert values(saver, cfg("injected")) == {"x": "forged"}
    assert b.sql("SELECT thread_id FROM threadline_adopted") == [("injected",)]


def test_r2_adoption_never_overrides_a_thread_threadline_wrote(sync_backend: Backend) -> None:
    """Without keys too: a thread threadline wrote, or continued after adopting it, stays its own."""
    b = sync_backend
    _forge_official(b, "adopted")
    with b.open() as saver:
        saver.put(cfg("mine"), ckpt({"x": "real"}, {"x": "1"}), {"step": 0}, {"x": "1"})
        adopted = saver.get_tuple(cfg("adopted")).config
        saver.put(adopted, ckpt({"x": "continued"}, {"x": "10"}), {"step": 10}, {"x": "10"})
    _forge_official(b, "mine", "adopted")
    with b.open() as saver:
        assert values(saver, cfg("mine")) == {"x": "real"}
        assert values(saver, cfg("adopted")) == {"x": "continued"}
        assert len(list(saver.list(cfg("adopted")))) == 2


# --- 4. an empty row is sealed like any value ----------------------------------------------------


def test_r4_a_value_turned_into_an_empty_row_is_refused(sync_backend: Backend) -> None:
    b = sync_backend
    with b.open() as saver:
        saver.blob_codec = enc()
        # "e" has a version and no value: an empty row, sealed like any other
        config = saver.put(cfg("t"), ckpt({"x": [1, 2]}, {"x": "1", "e": "1"}), {"step": 0}, {"x": "1", "e": "1"})
        assert values(saver, config) == {"x": [1, 2]}
    (sealed_empty,) = b.sql("SELECT blob FROM threadline_blobs WHERE channel = 'e'")[0]
    assert sealed_empty is not None
    for blob in (None, sealed_empty):  # unsealed, or the seal of another row
        b.sql("UPDATE threadline_blobs SET type = 'empty', blob = ? WHERE channel = 'x'", (blob,))
        with b.open() as saver:
            saver.blob_codec = enc(K2, K1)
            with pytest.raises(CorruptRowError, match="'x'"):
                values(saver, config)
            assert not lifecycle.fsck(saver, deep=True).ok
            report = lifecycle.rekey(saver)  # a rotation leaves it refused
            assert not report.ok and all("'x'" in u for u in report.unreadable), report.to_json()
            assert b.sql("SELECT type, blob FROM threadline_blobs WHERE channel = 'x'") == [("empty", blob)]
            with pytest.raises(CorruptRowError, match="'x'"):
                values(saver, config)
    b.sql("UPDATE threadline_blobs SET type = 'empty', blob = NULL WHERE channel = 'e'")
    with b.open() as saver:
        saver.blob_codec = enc(K2, K1)
        with pytest.raises(EncryptionError, match="'e'"):  # an unsealed empty row too
            saver.get_tuple(cfg("t"))


def test_r4_empty_rows_of_earlier_releases_load_until_sealed(sync_backend: Backend) -> None:
    """Unsealed (NULL) empty rows load without keys and while encrypting; rekey seals them."""
    b = sync_backend
    with b.open() as saver:
        config = saver.put(cfg("t"), ckpt({"x": 1}, {"x": "1", "e": "1"}), {"step": 0}, {"x": "1", "e": "1"})
    b.sql("UPDATE threadline_blobs SET blob = NULL WHERE channel = 'e'")
    with b.open() as saver:
        assert values(saver, config) == {"x": 1}
        saver.blob_codec = enc(require=False)
        assert values(saver, config) == {"x": 1}
        report = lifecycle.rekey(saver)
        assert report.ok and report.resealed["blobs"] == 2
        saver.blob_codec = enc()
        assert values(saver, config) == {"x": 1}
