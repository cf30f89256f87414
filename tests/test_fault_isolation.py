"""One damaged thread never takes a listing down, and ``fsck --deep`` finds what a reader trips on.

Three threads of a real LangGraph graph (``write`` then ``approve``, which waits on
``interrupt()``) on SQLite, Postgres and Redis; one of them, ``bad``, is then damaged behind the
saver's back: the blob of its head's ``log`` value deleted (the SQL row, the Redis
hash field), the bytes of its ``text`` value changed, or its record made unreadable. Every
listing — the library's ``list_threads`` / ``search_threads`` / ``inbox`` / ``stats``, the CLI's
``threads`` / ``inbox`` / ``stats`` / ``health``, the UI's threads, inbox, thread and stats pages
— lists the other threads and shows ``bad`` as damaged with the command that explains it, and
that command (``fsck --deep --thread bad``) does name the damage. ``fsck --repair`` on a
database with every kind of damage it repairs leaves every readable checkpoint readable, with
the same state.
"""

from __future__ import annotations

import json
import operator
import re
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import create_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from threadline import codec, lifecycle, read
from threadline.errors import CorruptRowError
from threadline.lifecycle import health
from threadline.storage import rows as R
from threadline.storage.ops import Q
from threadline.web import UIConfig

import web_helpers as wh
from backends import Backend, make_backend
from cli_support import cli

KINDS = ("sqlite", "postgres", "redis")
THREADS = ("ok-1", "bad", "ok-2")


class State(TypedDict):
    text: str
    log: Annotated[list, operator.add]


# past the length a document keeps a str (``storage.inline``): ``text`` has blob rows, which these tests damage
LONG = " " + "x" * 300


def _write(state: State) -> dict:
    return {"text": state["text"] + "!", "log": [f"wrote {state['text']}"]}


def _approve(state: State) -> dict:
    answer = interrupt({"question": f"approve {state['text']}?"})
    return {"text": f"{state['text']} ({answer})", "log": ["approved"]}


def graph(saver: Any) -> Any:
    g = StateGraph(State)
    g.add_node("write", _write)
    g.add_node("approve", _approve)
    g.add_edge(START, "write")
    g.add_edge("write", "approve")
    g.add_edge("approve", END)
    return g.compile(checkpointer=saver)


def config(thread_id: str, checkpoint_id: str | None = None) -> dict:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", **({"checkpoint_id": checkpoint_id} if checkpoint_id else {})}}


@contextmanager
def raw_redis(b: Backend) -> Iterator[tuple[Any, Any]]:
    """A raw redis-py client on ``b``'s server (plain or cluster) and the key layout of its prefix."""
    import redis
    from redis.cluster import RedisCluster

    url = b.url.split("?prefix=")[0]
    if url.startswith("redis+cluster://"):
        host, port = url[len("redis+cluster://"):].split(",")[0].rsplit(":", 1)
        client = RedisCluster(host=host, port=int(port))
    else:
        client = redis.Redis.from_url(url)
    with b.open() as saver:
        try:
            yield client, saver.dialect
        finally:
            client.close()


class Damage:
    """Damage made behind the saver's back, the same on every backend."""

    def __init__(self, b: Backend) -> None:
        self.b = b
        self.redis = b.kind.startswith("redis")

    def delete_blob(self, tid: str, channel: str, version: str) -> None:
        if self.redis:
            with raw_redis(self.b) as (client, d):
                assert client.hdel(d.keys(tid).bl, f"\x00{channel}\x00{version}") == 1
        else:
            self.b.sql("DELETE FROM threadline_blobs WHERE thread_id = ? AND checkpoint_ns = '' AND channel = ? AND version = ?",
                       (tid, channel, version))

    def corrupt_blob(self, tid: str, channel: str, version: str) -> None:
        """The value's bytes changed (its type and base kept): its seal no longer matches."""
        if self.redis:
            from threadline.storage.redis import layout as L

            with raw_redis(self.b) as (client, d):
                key, field = d.keys(tid).bl, f"\x00{channel}\x00{version}"
                tag, data, base = L.unpack_blob(client.hget(key, field), "test")
                client.hset(key, field, L.pack_blob(tag, b"\x00garbage" + (data or b"")[8:], base))
        else:
            self.b.sql("UPDATE threadline_blobs SET blob = ? WHERE thread_id = ? AND checkpoint_ns = '' AND channel = ? AND version = ?",
                       (b"\x00garbage", tid, channel, version))

    def corrupt_record(self, tid: str) -> None:
        """The thread's record metadata made something other than a JSON object."""
        if self.redis:
            with raw_redis(self.b) as (client, d):
                client.hset(d.keys(tid).rec, "metadata", "[1, 2]")
        else:
            self.b.sql("UPDATE threadline_thread_records SET metadata = ? WHERE thread_id = ?", ("[1, 2]", tid))

    def delete_checkpoint(self, tid: str, cid: str) -> None:
        if self.redis:
            with raw_redis(self.b) as (client, d):
                client.hdel(d.keys(tid).ck, f"\x00{cid}")
                client.zrem(d.keys(tid).ids, f"\x00{cid}")
        else:
            self.b.sql("DELETE FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_id = ?", (tid, cid))


def head_version(saver: Any, tid: str, channel: str) -> str:
    """The stored version key of ``channel`` at the head of ``tid``."""
    return R.version_key(saver.get_tuple(config(tid)).checkpoint["channel_versions"][channel])


def populated(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Backend:
    b = make_backend(kind, tmp_path, request)
    with b.open() as saver:
        app = graph(saver)
        for tid in THREADS:
            app.invoke({"text": tid + LONG, "log": []}, config(tid))
            lifecycle.update_thread(saver, tid, {"owner": f"owner of {tid}"})
    return b


DAMAGES = ("missing_value_blob", "corrupt_value", "unreadable_record")


def damage(b: Backend, how: str) -> None:
    with b.open() as saver:
        log, text = head_version(saver, "bad", "log"), head_version(saver, "bad", "text")
    if how == "missing_value_blob":
        Damage(b).delete_blob("bad", "log", log)
    elif how == "corrupt_value":
        Damage(b).corrupt_blob("bad", "text", text)
    else:
        Damage(b).corrupt_record("bad")


def _json(*args: str, code: int = 0) -> Any:
    proc = cli(*args, "--json")
    assert proc.returncode == code, (args, proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


# --- the readers agree on a channel named without a blob ----------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_status_reads_a_channel_named_without_a_blob_as_get_state_does(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A checkpoint naming a ``branch:to:`` channel at a version neither its parent nor its own put
    stored, without a value (``put`` records it as possibly without a blob, as a batch migration's
    checkpoint does): ``get_state`` reads it as empty, and so do the status, the listings and
    ``fsck --deep``."""
    b = populated(kind, tmp_path, request)
    with b.open() as saver:
        app = graph(saver)
        tup = saver.get_tuple(config("bad"))
        ck = create_checkpoint(tup.checkpoint, None, 3)
        ck["channel_versions"] = {**tup.checkpoint["channel_versions"], "branch:to:approve": "00000000000000000000000000000099.0"}
        ck["channel_values"] = {ch: v for ch, v in tup.checkpoint["channel_values"].items() if ch != "branch:to:approve"}
        saver.put(tup.config, ck, {"source": "update", "step": 3, "parents": {}}, {})
        state = app.get_state(config("bad"))
        status = read.thread_status(saver, "bad")
        assert status.kind == "done" and status.next == list(state.next) == []
        page = read.list_threads(saver, with_status=True)
        assert not page.damaged and {t.thread_id: t.status.kind for t in page.threads}["bad"] == "done"
    listed = _json("threads", "--db", b.url)
    assert {t["thread_id"] for t in listed["threads"]} == set(THREADS) and listed["damaged"] == 0
    assert _json("fsck", "--deep", "--db", b.url)["ok"]


# --- every listing isolates a damaged thread ---------------------------------------------------------


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("kind", KINDS)
def test_every_listing_shows_the_damaged_thread_and_lists_the_rest(kind: str, how: str, tmp_path: Path,
                                                                  request: pytest.FixtureRequest) -> None:
    b = populated(kind, tmp_path, request)
    damage(b, how)
    fsck_bad = f"threadline fsck --deep --thread {shlex.quote('bad')}"

    # the library
    with b.open() as saver:
        page = read.list_threads(saver, with_status=True)
        assert [t.thread_id for t in page.damaged] == ["bad"] and page.total == 3
        bad = page.damaged[0]
        assert bad.damage.command == fsck_bad and bad.damage.error == "CorruptRowError" and "bad" in bad.damage.message
        ok = {t.thread_id: t for t in page.threads if t.damage is None}
        assert set(ok) == {"ok-1", "ok-2"} and all(t.status.kind == "interrupted" for t in ok.values())
        found = read.search_threads(saver, status="interrupted", limit=10)
        assert {t.thread_id for t in found} == set(THREADS) and [t.thread_id for t in found if t.damage] == ["bad"]
        items = read.inbox(saver)
        assert sorted(i.thread_id for i in items if i.damage is None) == ["ok-1", "ok-2"]
        assert [i.thread_id for i in items if i.damage is not None] == ["bad"]
        top = read.stats(saver, top=10).top_threads
        assert {t.thread_id for t in top} == set(THREADS)
        assert [t.thread_id for t in top if t.damage] == (["bad"] if how == "unreadable_record" else [])
        checked = health.check(saver)
        assert checked.threads["checked"] == 3 and checked.threads["damaged"] == 1 and checked.status == "degraded"
        assert checked.threads["first"]["thread_id"] == "bad" and checked.threads["first"]["command"] == fsck_bad

    # the CLI: exit 1 (a problem found), every thread printed
    listed = _json("threads", "--db", b.url, code=1)
    assert {t["thread_id"] for t in listed["threads"]} == set(THREADS) and listed["damaged"] == 1
    assert [t["damage"]["command"] for t in listed["threads"] if t["damage"]] == [fsck_bad]
    human = cli("threads", "--db", b.url, columns=200)
    assert human.returncode == 1 and "ok-1" in human.stdout and "ok-2" in human.stdout and "Traceback" not in human.stderr
    assert "damaged bad: CorruptRowError" in " ".join(human.stdout.split()) and fsck_bad in human.stdout.replace("\n", "")
    inbox = _json("inbox", "--db", b.url, code=1)
    assert sorted(i["thread_id"] for i in inbox) == sorted(THREADS) and [i["thread_id"] for i in inbox if i["damage"]] == ["bad"]
    stats = _json("stats", "--db", b.url, code=1 if how == "unreadable_record" else 0)
    assert {t["thread_id"] for t in stats["top_threads"]} == set(THREADS)
    probe = _json("health", "--db", b.url, code=1)
    assert probe["status"] == "degraded" and probe["threads"]["damaged"] == 1 and any(fsck_bad in p for p in probe["problems"])

    # the command each listing names explains the damage
    explained = _json(*shlex.split(fsck_bad)[1:], "--db", b.url, code=1)
    assert not explained["ok"] and explained["threads_checked"] == 1
    assert {f["thread_id"] for f in explained["findings"]} == {"bad"}
    expected = {"missing_value_blob": "dangling_blob", "corrupt_value": "unreadable_value", "unreadable_record": "unreadable_record"}[how]
    assert expected in explained["by_kind"], explained
    if how == "missing_value_blob":
        assert '"log"' in json.dumps(explained["findings"]) or "'log'" in json.dumps(explained["findings"])

    # the UI: every page answers, the damaged thread badged with its error and command
    with wh.client(UIConfig(db=b.url)) as c:
        start = c.get("/")
        assert start.status_code == 200, start.text
        rows = re.findall(r'<tr data-thread="([^"]*)"', start.text)
        assert sorted(rows) == sorted(THREADS)
        if how == "unreadable_record":  # the threads page reads no record: nothing there trips on it
            assert start.text.count('data-status="interrupted"') == 3
        else:
            assert start.text.count('data-status="damaged"') == 1 and fsck_bad in start.text
            assert start.text.count('data-status="interrupted"') == 2
        page = c.get("/thread", params={"thread_id": "bad"})
        assert page.status_code == 200 and 'data-status="damaged"' in page.text and fsck_bad in page.text
        assert c.get("/thread", params={"thread_id": "ok-1"}).status_code == 200
        box = c.get("/inbox")
        assert box.status_code == 200 and 'data-thread="bad"' in box.text and fsck_bad in box.text
        assert box.text.count('class="inbox-item"') == (3 if how == "unreadable_record" else 2)
        assert c.get("/stats").status_code == 200


# --- fsck --deep names every damage a reader trips on ------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_fsck_finds_every_missing_name_a_checkpoint_references(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Each kind of name a checkpoint references, missing: a string's blob, a list's blob, the
    parent checkpoint; and a value that does not open. ``fsck`` names each (the unreadable
    value with ``--deep``), and every one of them makes the reader fail that ``fsck`` points to."""
    b = populated(kind, tmp_path, request)
    with b.open() as saver:
        for tid in ("t-branch", "t-value", "t-parent", "t-bytes"):
            graph(saver).invoke({"text": tid + LONG, "log": []}, config(tid))
        branch, value = head_version(saver, "t-branch", "text"), head_version(saver, "t-value", "log")
        bytes_ = head_version(saver, "t-bytes", "text")
        parent = saver.get_tuple(config("t-parent")).parent_config["configurable"]["checkpoint_id"]
    hurt = Damage(b)
    hurt.delete_blob("t-branch", "text", branch)
    hurt.delete_blob("t-value", "log", value)
    hurt.delete_checkpoint("t-parent", parent)
    hurt.corrupt_blob("t-bytes", "text", bytes_)
    with b.open() as saver:
        for tid in ("t-branch", "t-value", "t-bytes"):
            with pytest.raises(CorruptRowError):
                saver.get_tuple(config(tid))
        shallow = lifecycle.fsck(saver)
        deep = lifecycle.fsck(saver, deep=True)
    kinds = {(f.thread_id, f.kind) for f in shallow.findings}
    assert {("t-branch", "dangling_blob"), ("t-value", "dangling_blob"), ("t-parent", "broken_parent")} <= kinds
    assert not {tid for tid, _ in kinds} & set(THREADS)
    deep_kinds = {(f.thread_id, f.kind) for f in deep.findings}
    assert ("t-bytes", "unreadable_value") in deep_kinds and kinds <= deep_kinds
    named = next(f for f in shallow.findings if f.thread_id == "t-branch")
    assert "text" in named.detail and branch in named.detail


# --- fsck --repair never makes a readable checkpoint unreadable -------------------------------------


def rows_of(q: Q) -> Any:
    return (yield q)


def every_checkpoint(saver: Any) -> dict[tuple[str, str, str], Any]:
    """Every checkpoint of the database read by its id: its state and pending writes as JSON, or
    the error that stops it."""
    out: dict[tuple[str, str, str], Any] = {}
    for tid in saver.run(read.all_thread_ids_op(saver.dialect)):
        for node in read.thread_history(saver, tid).ordered():
            key = (tid, node.checkpoint_ns, node.checkpoint_id)
            try:
                tup = saver.get_tuple(config(tid, node.checkpoint_id))
                out[key] = read.jsonable({"values": tup.checkpoint["channel_values"], "writes": tup.pending_writes})
            except CorruptRowError as exc:
                out[key] = CorruptRowError(str(exc))
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_fsck_repair_never_makes_a_readable_checkpoint_unreadable(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    b = populated(kind, tmp_path, request)
    with b.open() as saver:
        app = graph(saver)
        for tid in ("t-mid", "t-value", "t-head"):
            for turn in range(3):  # a log long enough to be stored as deltas on the pending writes
                app.invoke({"text": f"{tid} {turn} " + "x" * 300, "log": []}, config(tid))
                app.invoke(Command(resume="yes"), config(tid))
        if not kind.startswith("redis"):  # (none are written on Redis)
            refs = saver.run(rows_of(Q(saver.dialect.THREAD_BLOBS_LIKE, ("t-mid", codec.DELTA_REF + "%"))))
            assert refs, "the log is stored as deltas referencing pending writes"
        history = [n.checkpoint_id for n in read.thread_history(saver, "t-mid").ordered()]
        value = head_version(saver, "t-value", "log")
        text = head_version(saver, "bad", "text")
    hurt = Damage(b)
    hurt.delete_checkpoint("t-mid", history[len(history) // 2])  # broken parent, orphan writes and blobs
    hurt.delete_blob("t-value", "log", value)  # a dangling blob: reported, never repaired
    hurt.delete_blob("bad", "text", text)
    hurt.corrupt_record("ok-2")
    with b.open() as saver:
        before = every_checkpoint(saver)
    readable = {k for k, v in before.items() if not isinstance(v, Exception)}
    assert readable and len(readable) < len(before)
    repaired = _json("fsck", "--repair", "--deep", "--db", b.url, code=1)
    assert any(f["repaired"] for f in repaired["findings"]) and not repaired["ok"]
    assert {"orphan_writes", "broken_parent", "dangling_blob", "unreadable_record"} <= set(repaired["by_kind"])
    with b.open() as saver:
        after = every_checkpoint(saver)
    assert {k: after.get(k) for k in readable} == {k: before[k] for k in readable}


@pytest.mark.parametrize("cluster", (False, True), ids=("redis", "redis-cluster"))
def test_a_redis_value_without_framing_is_listed_damaged_and_found(cluster: bool, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A Redis hash value that is not threadline's framing at all (not merely a changed payload):
    the statement reading it raises at the listing's step for that thread, so the listing goes
    on; ``fsck`` reports the thread, checks the others and exits 1 (it stopped at that thread)."""
    b = populated("redis-cluster" if cluster else "redis", tmp_path, request)
    with b.open() as saver:
        version = head_version(saver, "bad", "text")
    with raw_redis(b) as (client, d):
        client.hset(d.keys("bad").bl, f"\x00text\x00{version}", b"not framed")
    with b.open() as saver:
        page = read.list_threads(saver, with_status=True)
        assert [t.thread_id for t in page.damaged] == ["bad"] and "not a threadline blob value" in page.damaged[0].damage.message
        assert {t.thread_id: t.status.kind for t in page.threads if t.status} == {"ok-1": "interrupted", "ok-2": "interrupted"}
        assert [i.thread_id for i in read.inbox(saver) if i.damage] == ["bad"]
    found = _json("fsck", "--deep", "--db", b.url, code=1)
    assert found["threads_checked"] == 3 and [(f["thread_id"], f["kind"]) for f in found["findings"]] == [("bad", "unreadable_row")]
