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
12. A special value validly sealed but of a shape LangGraph cannot take (a checkpoint's stored
    pending sends or its TASKS channel that is no list), or a stored pending-sends entry of a
    shape threadline never writes, is a ``CorruptRowError``, never a raw error in LangGraph.
"""

from __future__ import annotations

import base64
import json
import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.serde.types import INTERRUPT, TASKS
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from typer.testing import CliRunner

from backends import Backend
from bad_input_access import cfg, ckpt, cid_of
from threadline import codec, lifecycle
from threadline.cli import app
from threadline.codec import BlobCodec, Keyring
from threadline.errors import CorruptRowError, EncryptionError
from threadline.storage import rows as R

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

    def forged_rows() -> list:
        return [b.sql("SELECT type, blob FROM threadline_blobs WHERE channel = 'y' AND version = '2'"),
                b.sql("SELECT metadata, checksum FROM threadline_checkpoints WHERE checkpoint_id = ?", (cid_of(one),))]

    forged = forged_rows()
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
    assert forged_rows() == forged  # left as they were
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


def test_r4_a_value_turned_into_an_empty_row_is_refused(sync_backend: Backend, format1_puts: None) -> None:
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


def test_r4_empty_rows_of_earlier_releases_load_until_sealed(sync_backend: Backend, format1_puts: None) -> None:
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


# --- 12. special values of the wrong shape ---------------------------------------------------------


class Fan(TypedDict, total=False):
    items: Annotated[list, operator.add]
    n: int


def _fan_graph(saver: Any) -> Any:
    """Send fan-out, then an interrupt: Sends stored as TASKS writes and values, an interrupt write."""
    def ask(state: Fan) -> dict:
        return {"items": [interrupt("ok?")]}

    g = StateGraph(Fan)
    g.add_node("start", lambda state: {})
    g.add_node("work", lambda state: {"items": [state["n"]]})
    g.add_node("ask", ask)
    g.add_edge(START, "start")
    g.add_conditional_edges("start", lambda state: [Send("work", {"n": i}) for i in range(2)], ["work"])
    g.add_edge("work", "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=saver)


def _reseal(b: Backend, saver: Any, channel: str, value: Any) -> None:
    """Replace every stored value of ``channel`` by ``value``, validly sealed to its row (as anyone
    can without keys: the checksum is not secret)."""
    key = "thread_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?"
    for r in b.sql("SELECT thread_id, checkpoint_ns, channel, version, base_version FROM threadline_blobs "
                   "WHERE channel = ? AND type <> 'empty'", (channel,)):
        tag, data = saver.blob_codec.store(R.blob_row_ref(*r), *codec.encode(saver.serde, value))
        b.sql(f"UPDATE threadline_blobs SET type = ?, blob = ? WHERE {key}", (tag, data, *r[:4]))


def test_r12_a_tasks_channel_that_is_no_list_is_a_corrupt_row(sync_backend: Backend) -> None:
    """LangGraph keeps its Sends in the TASKS channel as a list; another type, validly sealed,
    used to reach LangGraph and fail there with a raw TypeError."""
    b = sync_backend
    thread = cfg("t")
    with b.open() as saver:
        graph = _fan_graph(saver)
        graph.invoke({"items": []}, thread)
        assert graph.get_state(thread).interrupts
        assert lifecycle.fsck(saver, deep=True).ok  # genuine Sends pass every check
    b.sql("CREATE TABLE kept_blobs AS SELECT * FROM threadline_blobs")
    for bad in (5, "work", {"node": "work", "arg": {"n": 0}}, None):
        with b.open() as saver:
            _reseal(b, saver, TASKS, bad)
            graph = _fan_graph(saver)
            for read in (lambda: list(saver.list(thread)), lambda: graph.get_state(thread),
                         lambda: list(graph.get_state_history(thread)), lambda: graph.invoke(Command(resume="yes"), thread)):
                saver.blob_codec.cache.clear()
                with pytest.raises(CorruptRowError, match=TASKS):
                    read()
            assert not lifecycle.fsck(saver, deep=True).ok
        b.sql("DELETE FROM threadline_blobs")
        b.sql("INSERT INTO threadline_blobs SELECT * FROM kept_blobs")
    with b.open() as saver:  # restored: it resumes
        assert _fan_graph(saver).invoke(Command(resume="yes"), thread)["items"] == [0, 1, "yes"]


def test_r12_stored_pending_sends_of_the_wrong_shape_are_corrupt_rows(sync_backend: Backend) -> None:
    """A LangGraph < v4 checkpoint's ``pending_sends``, sealed to the checkpoint, decoding to no
    list, or stored in a shape threadline never writes: a CorruptRowError on every path."""
    b = sync_backend
    with b.open() as saver:
        c = {**ckpt({"items": [1]}, {"items": "1"}), "v": 3, "pending_sends": [Send("work", {"n": 0})]}
        stored = saver.put(cfg("t"), c, {"step": 0}, {"items": "1"})
        assert saver.get_tuple(stored).checkpoint["pending_sends"] == [Send("work", {"n": 0})]
        saver.copy_thread("t", "copy")  # sealed again to the copy
        assert saver.get_tuple(cfg("copy")).checkpoint["pending_sends"] == [Send("work", {"n": 0})]
        saver.delete_thread("copy")
        key = ("t", "", cid_of(stored))

        def store(entry: Any) -> None:
            (doc, meta) = b.sql("SELECT checkpoint, metadata FROM threadline_checkpoints")[0]
            doc, meta = (json.loads(x) if isinstance(x, str) else x for x in (doc, meta))
            doc[R.SENDS] = entry
            b.sql("UPDATE threadline_checkpoints SET checkpoint = ?, checksum = ?",
                  (json.dumps(doc), saver.blob_codec.checkpoint_checksum(key, None, doc, meta)))
            saver.blob_codec.cache.clear()

        for bad in (5, "work", {"node": "work"}):
            tag, data = saver.blob_codec.store(R.sends_ref(*key), *codec.encode(saver.serde, bad))
            store([tag, base64.b64encode(data).decode()])
            with pytest.raises(CorruptRowError, match="pending_sends"):
                saver.get_tuple(stored)
            with pytest.raises(CorruptRowError, match="pending_sends"):
                _fan_graph(saver).get_state(stored)
        for entry in ({"0": tag}, [tag], [tag, "not base64!"], tag):  # shapes threadline never writes
            store(entry)
            with pytest.raises(CorruptRowError, match="pending_sends"):
                saver.get_tuple(stored)
            with pytest.raises(CorruptRowError, match="pending_sends"):
                saver.copy_thread("t", "copy")
            assert not lifecycle.rekey(saver).ok
