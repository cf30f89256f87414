"""Erasure (``threadline erase``, ``lifecycle.erase.erase``): a user's threads (by id pattern or
metadata) and Store items deleted in one resumable job with a receipt, the space given back, and
nothing of them findable afterwards; other users untouched. Real graphs on SQLite and Postgres
(and Redis for the threads); the command through typer's CliRunner."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from lifecycle_graphs import build_graph, human
from threadline import open_saver
from threadline.cli import app
from threadline.errors import ConfigError
from threadline.lifecycle import erase as E
from threadline.read import list_threads
from threadline.store import open_store

from backends import Backend

runner = CliRunner()
USERS = {"user-42-a": "u42", "user-42-b": "u42", "user-420-a": "u420", "user-7-a": "u7"}


def _fill(saver, store) -> None:
    g = build_graph(saver)
    for tid, user in USERS.items():
        g.invoke(human(f"secret question of {user}", "h1"), {"configurable": {"thread_id": tid}, "metadata": {"user": user}})
    if store is not None:
        for user in set(USERS.values()):
            store.put(("users", user, "memories"), "m1", {"text": f"secret of {user}"})
            store.put(("users", user), "profile", {"name": user})


def _state(saver, tid: str):
    return build_graph(saver).get_state({"configurable": {"thread_id": tid}}).values


def test_erase_a_user_leaves_nothing_findable(sync_backend: Backend, tmp_path) -> None:
    with sync_backend.open() as saver, open_store(sync_backend.url) as store:
        _fill(saver, store)
        others = {t: _state(saver, t) for t in ("user-420-a", "user-7-a")}
        want = {t: sum(1 for _ in saver.list({"configurable": {"thread_id": t}})) for t in ("user-42-a", "user-42-b")}
        sel = E.Selection("user-42-*", None, (("users", "u42"),))
        r = E.erase(saver, sel, store=store, receipt=str(tmp_path / "receipt.json"), database="test")
        assert r.status == "complete" and not r.problems and r.threads == ["user-42-a", "user-42-b"]
        assert r.rows["checkpoints"] == sum(want.values()) and r.rows["blobs"] > 0 and r.rows["writes"] > 0
        assert r.store_items == {"users.u42": 2} and r.verified == {"threads": [], "store_items": 0, "objects": 0}
        assert r.space is not None and r.space.bytes_before is not None
        # nothing of u42 left: no thread listed or stored, no row of its threads, no Store item
        assert {t.thread_id for t in list_threads(saver).threads} == {"user-420-a", "user-7-a"}
        rows = sync_backend.snapshot()
        assert not [row for rows_ in rows.values() for row in rows_ if any("user-42-" in str(v) for v in row)]
        assert store.search(("users", "u42"), refresh_ttl=False) == [] and ("users", "u42") not in store.list_namespaces()
        assert len(store.search(("users",), limit=100, refresh_ttl=False)) == 4
        assert {t: _state(saver, t) for t in others} == others
        doc = json.loads((tmp_path / "receipt.json").read_text())
        assert doc["status"] == "complete" and doc["counts"]["threads"] == 2 and doc["counts"]["store_items"] == 2
        assert doc["selection"] == {"thread_pattern": "user-42-*", "where": None, "store_namespaces": ["users.u42"]}


def test_erase_by_metadata_and_exact_ids(tmp_path) -> None:
    url = str(tmp_path / "m.db")
    with open_saver(url) as saver:
        _fill(saver, None)
        assert E.erase(saver, E.Selection(where={"user": "u7"})).threads == ["user-7-a"]
        assert E.erase(saver, E.Selection("user-42-a")).threads == ["user-42-a"]  # exactly, not a prefix
        assert E.erase(saver, E.Selection("user-42", where={"user": "u42"})).threads == []
        assert {t.thread_id for t in list_threads(saver).threads} == {"user-42-b", "user-420-a"}


def test_dry_run_changes_nothing(sync_backend: Backend, tmp_path) -> None:
    with sync_backend.open() as saver:
        _fill(saver, None)
        before = sync_backend.snapshot()
        r = E.erase(saver, E.Selection("user-42-*"), dry_run=True, receipt=str(tmp_path / "preview.json"))
        assert r.status == "dry-run" and r.threads == ["user-42-a", "user-42-b"] and r.rows["checkpoints"] > 0 and r.space is None
        assert sync_backend.snapshot() == before
        with pytest.raises(ConfigError, match="exists"):
            E.erase(saver, E.Selection("user-42-*"), dry_run=True, receipt=str(tmp_path / "preview.json"))


def test_an_interrupted_erasure_resumes_its_receipt(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, receipt = str(tmp_path / "r.db"), str(tmp_path / "receipt.json")
    with open_saver(url) as saver:
        _fill(saver, None)
        real = E.erase_thread_op
        calls = []

        def dies_on_the_second(d, tid, bc):
            calls.append(tid)
            if len(calls) == 2:
                raise ConnectionError("the server went away")
            return real(d, tid, bc)

        monkeypatch.setattr(E, "SAVE_EVERY", 1)
        monkeypatch.setattr(E, "erase_thread_op", dies_on_the_second)
        with pytest.raises(ConnectionError):
            E.erase(saver, E.Selection("user-42-*"), receipt=receipt)
        doc = json.loads(open(receipt).read())
        assert doc["status"] == "incomplete" and doc["threads"] == ["user-42-a"]
        first = doc["counts"]["checkpoints"]
        monkeypatch.setattr(E, "erase_thread_op", real)
        r = E.erase(saver, E.Selection("user-42-*"), receipt=receipt)
        assert r.status == "complete" and r.threads == ["user-42-a", "user-42-b"] and r.rows["checkpoints"] > first
        assert json.loads(open(receipt).read())["counts"]["threads"] == 2
        with pytest.raises(ConfigError, match="finished erasure or of another selection"):
            E.erase(saver, E.Selection("user-7-*"), receipt=receipt)


def test_redis_threads(redis_target) -> None:
    url = f"{redis_target.url}{'&' if '?' in redis_target.url else '?'}prefix={redis_target.prefix}"
    with open_saver(url) as saver:
        _fill(saver, None)
        r = E.erase(saver, E.Selection("user-42-*"))
        assert r.threads == ["user-42-a", "user-42-b"] and r.verified == {"threads": [], "store_items": 0, "objects": 0} and r.space is None
        assert not [k for k in redis_target.keys() if b"user-42-" in (k if isinstance(k, bytes) else k.encode())]
        assert {t.thread_id for t in list_threads(saver).threads} == {"user-420-a", "user-7-a"}


def _cli(*args: str, code: int) -> str:
    result = runner.invoke(app, ["erase", *args], env={"COLUMNS": "200"})
    assert result.exit_code == code, (args, result.output, result.exception)
    return result.output


def test_cli(tmp_path) -> None:
    url = str(tmp_path / "c.db")
    with open_saver(url) as saver, open_store(url) as store:
        _fill(saver, store)
    out = _cli("--db", url, "--thread-pattern", "user-42-*", "--store-namespace", "users.u42", "--dry-run", code=0)
    assert out.startswith("would erase 2 thread(s)") and "2 Store item(s) under users.u42" in out
    receipt = tmp_path / "receipt.json"
    doc = json.loads(_cli("--db", url, "--thread-pattern", "user-42-*", "--store-namespace", "users.u42",
                          "--receipt", str(receipt), "--yes", "--json", code=0))
    assert doc["status"] == "complete" and doc["counts"]["threads"] == 2 and doc["verified"] == {"threads": [], "store_items": 0, "objects": 0}
    assert doc["space"]["bytes_after"] < doc["space"]["bytes_before"]
    assert json.loads(receipt.read_text())["threads"] == ["user-42-a", "user-42-b"]
    out = _cli("--db", url, "--where", "user=u7", "--yes", code=0)
    assert out.startswith("erased 1 thread(s)") and "verified" in out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "erase needs a selection"),
        (["--thread-pattern", "*"], "would match every thread"),
        (["--store-namespace", "users..u42"], "empty label"),
        (["--where", "user"], "expects KEY=VALUE"),
        (["--thread-pattern", "user-42-*"], "pass --yes to confirm"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(tmp_path, args: list[str], fragment: str) -> None:
    url = str(tmp_path / "b.db")
    with open_saver(url) as saver:
        _fill(saver, None)
    out = _cli("--db", url, *args, code=2)
    assert fragment in " ".join(out.split()) and "Traceback" not in out
    with open_saver(url) as saver:
        assert list_threads(saver).total == 4
