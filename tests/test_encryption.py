"""Encryption at rest: AES-256-GCM after delta encoding and compression, bound to the row.

* an encrypted database round-trips through every saver operation (sync and async, SQLite
  and Postgres), a real LangGraph graph, the lifecycle tools and the CLI, and every value
  row is encrypted, every checkpoint checksum keyed;
* a ciphertext moved to another row (another version, channel, thread, write) is detected;
* plaintext rows are refused when encryption is required, and read when it is not;
* keys come from a list, a callable, a file or the environment; several read, one writes;
* ``threadline rekey`` encrypts, rotates and decrypts, online and resumable, verified;
* storage amplification stays within 10 % of the unencrypted database.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from backends import Backend
from lifecycle_graphs import build_graph, cfg, populate, resume_interrupt
from threadline import lifecycle
from threadline import read as H
from threadline.cli import app
from threadline.codec import GCM, BlobCodec, Keyring
from threadline.codec.keyring import key_id
from threadline.errors import ConfigError, CorruptRowError, EncryptionError

K1 = base64.b64encode(bytes(range(32))).decode()
K2 = bytes(range(100, 132)).hex()
runner = CliRunner()


def enc(*keys: str, require: bool = True) -> BlobCodec:
    return BlobCodec(keys=Keyring(list(keys or (K1,)), require=require))


def kid(key: str) -> str:
    raw = base64.b64decode(key) if len(key) != 64 else bytes.fromhex(key)
    return key_id(raw).hex()


def cli(*args: str, env: dict | None = None, code: int | None = 0) -> Any:
    result = runner.invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})
    if code is not None:
        assert result.exit_code == code, (args, result.exit_code, result.output, result.exception)
    return result


def every_value_encrypted(b: Backend, key: str = K1) -> None:
    rows = b.sql("SELECT type, blob FROM threadline_blobs UNION ALL SELECT type, blob FROM threadline_writes")
    assert rows
    for tag, data in rows:
        assert tag == "empty" or (tag.endswith(GCM) and data[2:6].hex() == kid(key)), tag
    for (checksum,) in b.sql("SELECT checksum FROM threadline_checkpoints"):
        assert checksum.startswith(f"hm:{kid(key)}:"), checksum


def state_of(saver: Any) -> dict:
    return {t.config["configurable"]["checkpoint_id"]: (t.checkpoint["channel_values"], t.pending_writes, t.metadata)
            for t in saver.list(None)}


# --- every operation --------------------------------------------------------------------------------


def test_a_real_graph_round_trips_encrypted_with_every_saver_operation(sync_backend: Backend) -> None:
    b = sync_backend
    with b.open() as saver:
        saver.blob_codec = enc()
        facts = populate(saver)
        resume_interrupt(saver)
        g = build_graph(saver)
        history = [s.values for s in g.get_state_history(cfg("t-research"))]
        before = state_of(saver)
        saver.copy_thread("t-answer", "t-copy")
        assert [t.checkpoint for t in saver.list(cfg("t-copy"))] == [t.checkpoint for t in saver.list(cfg("t-answer"))]
        saver.get_delta_channel_history(config=cfg("t-research"), channels=["messages"])
    every_value_encrypted(b)
    with b.open() as saver:  # a new saver, nothing cached
        saver.blob_codec = enc()
        assert {k: v for k, v in state_of(saver).items() if k in before} == before
        assert [s.values for s in build_graph(saver).get_state_history(cfg("t-research"))] == history
        g = build_graph(saver)
        g.invoke({"messages": [("user", "more")]}, cfg("t-copy"))
        saver.delete_for_runs(["nobody"])
        saver.prune(["t-copy"], strategy="keep_latest")
        assert len(list(saver.list(cfg("t-copy")))) == 1
        saver.delete_thread("t-copy")
        assert not list(saver.list(cfg("t-copy")))
        # the lifecycle tools
        branch = lifecycle.rollback(saver, "t-research", facts["fork_point"])
        fork = lifecycle.fork(saver, "t-answer", H.thread_history(saver, "t-answer").head, "t-fork")
        assert g.get_state(cfg("t-fork")).values == g.get_state(cfg("t-answer")).values
        assert g.get_state(branch.config).values == g.get_state({"configurable": {"thread_id": "t-research", "checkpoint_id": facts["fork_point"]}}).values
        assert fork.blobs_copied > 0
        plan = lifecycle.prune(saver, lifecycle.RetentionPolicy(keep_last=2), thread_ids=["t-research"])
        assert plan.plans
        report = lifecycle.fsck(saver, deep=True)
        assert report.ok, report.to_json()
        assert H.state_at(saver, "t-answer").values["messages"]
    every_value_encrypted(b)


async def test_async_savers_round_trip_encrypted(async_backend: Backend) -> None:
    async with async_backend.open() as saver:
        saver.blob_codec = enc()
        g = build_graph(saver)
        await g.ainvoke({"messages": [("user", "hello?")]}, cfg("a"))
        state = (await g.aget_state(cfg("a"))).values
    async with async_backend.open() as saver:
        saver.blob_codec = enc()
        assert (await build_graph(saver).aget_state(cfg("a"))).values == state
    every_value_encrypted(async_backend)


# --- binding to the row --------------------------------------------------------------------------


def test_a_ciphertext_moved_to_another_row_is_detected(sync_backend: Backend) -> None:
    b = sync_backend
    with b.open() as saver:
        saver.blob_codec = enc()
        populate(saver)
    moves = [
        # another version of the same channel
        ("blobs", "SELECT thread_id, channel, version FROM threadline_blobs WHERE type <> 'empty' AND thread_id = 't-answer' ORDER BY channel, version"),
        # a write of another task
        ("writes", "SELECT thread_id, task_id, idx FROM threadline_writes WHERE thread_id = 't-research' ORDER BY checkpoint_id, task_id, idx"),
    ]
    for table, query in moves:
        rows = b.sql(query)
        src, dst = rows[0], rows[1]
        key = ("channel", "version") if table == "blobs" else ("task_id", "idx")
        where = f"thread_id = ? AND {key[0]} = ? AND {key[1]} = ?"
        (data,) = b.sql(f"SELECT blob FROM threadline_{table} WHERE {where}", src)[0]
        (tag,) = b.sql(f"SELECT type FROM threadline_{table} WHERE {where}", src)[0]
        (orig_tag, orig) = b.sql(f"SELECT type, blob FROM threadline_{table} WHERE {where}", dst)[0]
        b.sql(f"UPDATE threadline_{table} SET type = ?, blob = ? WHERE {where}", (tag, data, *dst))
        with b.open() as saver:
            saver.blob_codec = enc()
            with pytest.raises(CorruptRowError, match="authenticate"):
                for _ in saver.list(cfg(dst[0])):
                    pass
            report = lifecycle.fsck(saver, deep=True)
            assert any(f.kind == "unreadable_value" for f in report.findings)
        b.sql(f"UPDATE threadline_{table} SET type = ?, blob = ? WHERE {where}", (orig_tag, orig, *dst))
    # a blob copied under another thread's key
    (tag, data, ch, v) = b.sql("SELECT type, blob, channel, version FROM threadline_blobs WHERE thread_id = 't-answer' AND type <> 'empty' LIMIT 1")[0]
    b.sql("UPDATE threadline_blobs SET type = ?, blob = ? WHERE thread_id = 't-research' AND channel = ? AND type <> 'empty'", (tag, data, ch))
    with b.open() as saver:
        saver.blob_codec = enc()
        with pytest.raises(CorruptRowError, match="authenticate"):
            list(saver.list(cfg("t-research")))


# --- fail closed, keys -----------------------------------------------------------------------------


def test_plaintext_is_refused_when_required_and_missing_keys_are_named(sync_backend: Backend) -> None:
    b = sync_backend
    with b.open() as saver:  # written without encryption
        populate(saver)
        plain = state_of(saver)
    with b.open() as saver:
        saver.blob_codec = enc()
        with pytest.raises(EncryptionError, match="rekey"):
            saver.get_tuple(cfg("t-answer"))
        saver.blob_codec = enc(require=False)  # while migrating
        assert state_of(saver) == plain
        lifecycle.rekey(saver)
    every_value_encrypted(b)
    with b.open() as saver:  # no keys at all
        with pytest.raises(EncryptionError, match=kid(K1)):
            saver.get_tuple(cfg("t-answer"))
        saver.blob_codec = enc(K2)  # the wrong key
        with pytest.raises(EncryptionError, match=kid(K1)):
            saver.get_tuple(cfg("t-answer"))
        saver.blob_codec = enc()
        assert state_of(saver) == plain


def test_keys_from_a_callable_a_file_and_the_environment(tmp_path: Path) -> None:
    calls = []

    def kms() -> list[str]:
        calls.append(1)
        return [K2, K1]

    ring = Keyring(kms)
    assert calls == []  # fetched on first use
    assert ring.key_ids == [kid(K2), kid(K1)] and calls == [1]
    ring.refresh()
    assert calls == [1, 1]
    keyfile = tmp_path / "keys"
    keyfile.write_text(f"# rotated 2025\n{K2}\n\n{K1}  # the old one\n")
    assert Keyring.from_file(keyfile).key_ids == [kid(K2), kid(K1)]
    assert Keyring.from_env({}) is None
    env = Keyring.from_env({"THREADLINE_ENCRYPTION_KEY": K2, "THREADLINE_ENCRYPTION_OLD_KEYS": K1})
    assert env.key_ids == [kid(K2), kid(K1)] and env.require
    assert Keyring.from_env({"THREADLINE_ENCRYPTION_KEY_FILE": str(keyfile), "THREADLINE_ENCRYPTION_REQUIRED": "false"}).require is False
    read_only = Keyring.from_env({"THREADLINE_ENCRYPTION_OLD_KEYS": K1})
    assert read_only.writer is None and read_only.key_ids == [kid(K1)]
    for bad in ("short", base64.b64encode(b"x" * 16).decode(), ""):
        with pytest.raises(ConfigError, match="32 random bytes") as info:
            Keyring([bad])
        assert not bad or bad not in str(info.value)
    with pytest.raises(ConfigError, match="cannot read"):
        Keyring.from_file(tmp_path / "missing")


# --- rotation -------------------------------------------------------------------------------------


def test_rekey_rotates_online_resumable_and_verified(sync_backend: Backend) -> None:
    b = sync_backend
    with b.open() as saver:
        saver.blob_codec = enc(K1)
        populate(saver)
        before = state_of(saver)
    with b.open() as saver:
        saver.blob_codec = enc(K2, K1)  # new key writes, the old one still reads
        g = build_graph(saver)
        g.invoke({"messages": [("user", "written during the rotation")]}, cfg("t-new"))
        dry = lifecycle.rekey(saver, dry_run=True)
        assert dry.resealed["blobs"] > 0 and dry.ok
        first = lifecycle.rekey(saver, thread_ids=["t-answer"])  # stopped after one thread …
        assert first.ok and first.resealed["blobs"] > 0
        rest = lifecycle.rekey(saver)  # … resumes: t-answer and t-new are current
        assert rest.ok and rest.key_id == kid(K2)
        assert rest.resealed["blobs"] == dry.resealed["blobs"] - first.resealed["blobs"]
        again = lifecycle.rekey(saver)
        assert again.resealed == {"checkpoints": 0, "blobs": 0, "writes": 0}
    every_value_encrypted(b, K2)
    with b.open() as saver:
        saver.blob_codec = enc(K2)  # the old key is gone
        assert {k: v for k, v in state_of(saver).items() if k in before} == before
        saver.blob_codec = BlobCodec(keys=Keyring([K2], write=False, require=False))
        assert lifecycle.rekey(saver).key_id is None  # decrypt
        saver.blob_codec = BlobCodec()
        assert {k: v for k, v in state_of(saver).items() if k in before} == before


# --- the CLI ------------------------------------------------------------------------------------------


def test_cli_reads_an_encrypted_database_with_keys_from_the_environment(db: tuple[Backend, dict], tmp_path: Path) -> None:
    b, facts = db
    keyfile = tmp_path / "key"
    keyfile.write_text(K1 + "\n")
    env = {"THREADLINE_ENCRYPTION_KEY_FILE": str(keyfile), "THREADLINE_ENCRYPTION_REQUIRED": "false"}
    out = json.loads(cli("rekey", "--db", b.url, "--json", env=env).stdout)
    assert out["ok"] and out["key_id"] == kid(K1) and out["resealed"]["blobs"] > 0
    every_value_encrypted(b)
    env["THREADLINE_ENCRYPTION_REQUIRED"] = "true"
    head = json.loads(cli("show", "t-answer", "--db", b.url, "--json", env=env).stdout)
    assert head["values"]["messages"]
    cli("history", "t-research", "--db", b.url, env=env)
    cli("latest", "messages", "--db", b.url, env=env)
    research = json.loads(cli("show", "t-research", "--db", b.url, "--json", env=env).stdout)["checkpoint_id"]
    cli("diff", "t-research", facts["fork_point"], research, "--db", b.url, env=env)
    assert json.loads(cli("fsck", "--deep", "--db", b.url, "--json", env=env).stdout)["ok"]
    cli("rollback", "t-research", facts["fork_point"], "--db", b.url, env=env)
    cli("fork", "t-answer", head["checkpoint_id"], "--to", "t-cli-fork", "--db", b.url, env=env)
    cli("prune", "--keep-last", "3", "--yes", "--db", b.url, env=env)
    cli("export", "--to", str(tmp_path / "parquet"), "--db", b.url, env=env)
    every_value_encrypted(b)
    by_option = json.loads(cli("--key-file", str(keyfile), "show", "t-answer", "--db", b.url, "--json",
                               env={"THREADLINE_ENCRYPTION_REQUIRED": "true"}).stdout)
    assert by_option["values"]["messages"] == head["values"]["messages"]
    failed = cli("show", "t-answer", "--db", b.url, env={}, code=1)
    assert kid(K1) in failed.output and "Traceback" not in failed.output


# --- amplification -----------------------------------------------------------------------------------


def _stored_bytes(b: Backend) -> int:
    size = "octet_length" if b.is_postgres else "length"
    total = 0
    for table, cols in (("checkpoints", ("checkpoint::text", "metadata::text", "checksum")) if b.is_postgres
                        else ("checkpoints", ("checkpoint", "metadata", "checksum")), ("blobs", ("blob",)), ("writes", ("blob",))):
        expr = " + ".join(f"COALESCE({size}({c}), 0)" for c in cols)
        total += b.sql(f"SELECT COALESCE(SUM({expr}), 0) FROM threadline_{table}")[0][0]
    return int(total)


def test_encryption_adds_at_most_ten_percent(fresh_backend: Any, sync_backend: Backend) -> None:
    kind = sync_backend.kind
    sizes = []
    for codec in (BlobCodec(), enc()):
        b = fresh_backend(kind)
        with b.open() as saver:
            saver.blob_codec = codec
            g = build_graph(saver)
            for turn in range(12):
                g.invoke({"messages": [("user", f"turn {turn}: " + "please look this up? " * 8)]}, cfg("t"))
        sizes.append(_stored_bytes(b))
    print(f"\nstored bytes {kind}: unencrypted {sizes[0]}, encrypted {sizes[1]} ({sizes[1] / sizes[0] - 1:+.1%})")
    assert sizes[1] <= sizes[0] * 1.10, sizes
