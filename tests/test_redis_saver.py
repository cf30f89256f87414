"""What only the Redis backend has to show (the contract itself runs in ``test_conformance``
and the LangGraph scenarios in ``test_langgraph*``, on plain Redis and the local cluster):
one hash tag per thread and no scanning command on any path, Redis's own expiry on all of
a thread's keys at once, a thread resumed by a fresh process, sealed and encrypted values,
and one clear threadline error for every fault (server down, wrong password, a key of the
wrong type, out of memory), nothing half-written.
"""

from __future__ import annotations

import base64
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
import textwrap
import threading
import time
from pathlib import Path

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, MessagesState, StateGraph
from langchain_core.messages import AIMessage

from redis_support import RedisTarget, free_ports
from threadline import BackendError, CorruptRowError, open_saver
from threadline.codec import BlobCodec, Keyring
from threadline.storage.redis.layout import THREAD_KEYS, pack_checkpoint, unpack_checkpoint

K1 = bytes(range(32)).hex()


def url_of(target: RedisTarget) -> str:
    return f"{target.url}{'&' if '?' in target.url else '?'}prefix={target.prefix}"


def chat() -> StateGraph:
    def reply(state: MessagesState) -> dict:
        return {"messages": [AIMessage(content=f"reply {len(state['messages'])}")]}

    b = StateGraph(MessagesState)
    b.add_node("reply", reply)
    b.add_edge(START, "reply")
    b.add_edge("reply", END)
    return b


def cfg(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}}


def test_a_thread_lives_in_one_slot_and_nothing_scans(tmp_path: Path) -> None:
    """Every key of a thread carries its hash tag; the saver never sends KEYS, SCAN or MODULE
    (watched with MONITOR on a server of this test's own: no other client's commands)."""
    seen: list[str] = []
    stop = threading.Event()
    with private_redis(tmp_path) as port:
        client = redis.Redis(port=port)

        def watch() -> None:
            with client.monitor() as m:
                for event in m.listen():
                    seen.append(event["command"].split(" ")[0].upper())
                    if stop.is_set() and event["command"].startswith("ECHO"):
                        return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        deadline, probe = time.monotonic() + 10, redis.Redis(port=port)
        while "ECHO" not in seen and time.monotonic() < deadline:  # MONITOR is listening
            probe.echo("ready")
            time.sleep(0.05)
        with open_saver(f"redis://127.0.0.1:{port}/0?prefix=p") as saver:
            g = chat().compile(checkpointer=saver)
            for i in range(3):
                g.invoke({"messages": [("user", f"hi {i}")]}, cfg("t-one"))
            g.get_state(cfg("t-one"))
            list(saver.list(None))
            saver.copy_thread("t-one", "t-two")
            saver.prune(["t-one"])
            saver.delete_thread("t-two")
        stop.set()
        probe.echo("done")
        watcher.join(5)
        assert "EVALSHA" in seen and "HGETALL" in seen
        assert not {"KEYS", "SCAN", "MODULE"} & set(seen), sorted(set(seen))
        thread_keys = [k.decode() for k in client.keys("*") if b"{t-one}" in k]  # the test's own look, after
        listed = client.hkeys(next(k for k in thread_keys if k.endswith(":wix")))
    # pruned: no writes (the writes' index holds only the latest checkpoint's blob list); no record, no tags
    assert sorted(k.rsplit(":", 1)[1] for k in thread_keys) == sorted((*THREAD_KEYS[:3], "wix", "th")) and listed == [b"latest_blobs"]
    slots = {redis.cluster.key_slot(k.encode()) for k in thread_keys}
    assert len(slots) == 1


def test_ttl_is_redis_expiry_on_every_key_of_a_thread(redis_target: RedisTarget) -> None:
    client = redis_target.client()
    with open_saver(url_of(redis_target), ttl={"default_ttl": 10, "refresh_on_read": True}) as saver:
        g = chat().compile(checkpointer=saver)
        g.invoke({"messages": [("user", "hi")]}, cfg("ttl-thread"))
        keys = [k for k in redis_target.keys() if b"{ttl-thread}" in k]
        ttls = [client.pttl(k) for k in keys]
        assert len(keys) == 6 and all(9 * 60_000 < t <= 10 * 60_000 for t in ttls), ttls
        for k in keys:
            client.pexpire(k, 1000)
        g.get_state(cfg("ttl-thread"))  # a read restarts the clock of all six keys
        assert all(client.pttl(k) > 9 * 60_000 for k in keys)
        # a thread's own TTL (configurable ttl_minutes): "never" keeps it
        g.invoke({"messages": [("user", "keep")]}, {"configurable": {"thread_id": "ttl-thread", "ttl_minutes": "never"}})
        assert all(client.pttl(k) == -1 for k in keys)
        # a put alone (no pending writes yet): the key its blob list creates expires with the thread
        saver.put(cfg("put-only"), {**empty_checkpoint(), "channel_values": {"a": [1]}, "channel_versions": {"a": "1"}}, {}, {"a": "1"})
        alone = [k for k in redis_target.keys() if b"{put-only}" in k]
        assert any(k.endswith(b":wix") for k in alone) and all(9 * 60_000 < client.pttl(k) <= 10 * 60_000 for k in alone)


def test_a_thread_expires_with_its_record_and_tags_and_a_tag_or_pin_keeps_it(redis_target: RedisTarget) -> None:
    """Redis expires whole threads: the record and tags keys get the thread's expiry (never left
    behind), and a thread with a tag or a pin does not expire until it has neither."""
    from threadline.lifecycle.records import update_thread
    from threadline.lifecycle.tags import pin, tag, unpin, untag

    client = redis_target.client()
    with open_saver(url_of(redis_target), ttl={"default_ttl": 10}) as saver:
        g = chat().compile(checkpointer=saver)
        g.invoke({"messages": [("user", "hi")]}, cfg("kept"))
        update_thread(saver, "kept", {"owner": "ada"})

        def ttls() -> dict[str, int]:
            return {k.decode().rsplit(":", 1)[1]: client.pttl(k) for k in redis_target.keys() if b"{kept}" in k and not k.endswith(b":lease")}

        found = ttls()
        assert set(found) == {"ck", "ids", "bl", "wr", "wix", "th", "rec"}, found
        assert all(9 * 60_000 < t <= 10 * 60_000 for t in found.values()), found  # the record expires with the thread
        latest = saver.get_tuple(cfg("kept")).config["configurable"]["checkpoint_id"]
        tag(saver, "kept", latest, "good")
        assert set(ttls()) == {*found, "tg"} and all(t == -1 for t in ttls().values()), ttls()  # tagged: kept whole
        pin(saver, "kept")
        untag(saver, "kept", "good")
        assert all(t == -1 for t in ttls().values()), ttls()  # still pinned
        unpin(saver, "kept")
        after = ttls()
        assert "tg" not in after and all(9 * 60_000 < t <= 10 * 60_000 for t in after.values()), after
        for k in redis_target.keys():
            if b"{kept}" in k:
                client.pexpire(k, 50)
        time.sleep(0.2)
        assert not [k for k in redis_target.keys() if b"{kept}" in k]  # nothing of it left behind


def test_tools_that_do_not_know_the_ttl_keep_the_threads_expiry(redis_target: RedisTarget) -> None:
    """The CLI and UI open a saver without the application's ``ttl=``: a tag or pin made there
    still keeps the thread, removing them gives the thread back the TTL its saver gave it, and a
    record written there expires with the thread."""
    from threadline.lifecycle.records import update_thread
    from threadline.lifecycle.tags import pin, unpin

    client = redis_target.client()

    def ttls() -> dict[str, int]:
        return {k.decode().rsplit(":", 1)[1]: client.pttl(k) for k in redis_target.keys() if b"{tool}" in k}

    with open_saver(url_of(redis_target), ttl={"default_ttl": 10}) as app:
        chat().compile(checkpointer=app).invoke({"messages": [("user", "hi")]}, cfg("tool"))
    with open_saver(url_of(redis_target)) as tool:  # no ttl=, as `threadline pin` opens it
        pin(tool, "tool")
        assert all(t == -1 for t in ttls().values()), ttls()
        unpin(tool, "tool")
        assert ttls() and all(9 * 60_000 < t <= 10 * 60_000 for t in ttls().values()), ttls()
        update_thread(tool, "tool", {"owner": "ada"})
        found = ttls()
        assert "rec" in found and all(9 * 60_000 < t <= 10 * 60_000 for t in found.values()), found


def test_an_interrupted_agent_resumes_in_a_fresh_process(any_redis_target: RedisTarget, tmp_path: Path) -> None:
    """A real graph stops at ``interrupt()`` in one process; another process resumes it."""
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent('''
        import json, sys
        from typing import TypedDict
        from langgraph.graph import END, START, StateGraph
        from langgraph.types import Command, interrupt
        from threadline import open_saver

        class S(TypedDict):
            log: list

        def ask(state):
            answer = interrupt({"question": "approve?"})
            return {"log": state["log"] + [f"answer:{answer}"]}

        b = StateGraph(S)
        b.add_node("prep", lambda s: {"log": s["log"] + ["prep"]})
        b.add_node("ask", ask)
        b.add_edge(START, "prep"); b.add_edge("prep", "ask"); b.add_edge("ask", END)
        url, step = sys.argv[1], sys.argv[2]
        with open_saver(url) as saver:
            g = b.compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "hitl"}}
            out = g.invoke({"log": []} if step == "start" else Command(resume="yes"), config)
            print(json.dumps({"out": out.get("log"), "next": list(g.get_state(config).next),
                              "interrupts": [i.value for i in out.get("__interrupt__", [])]}))
    '''))

    def run(step: str) -> str:
        done = subprocess.run([sys.executable, str(script), url_of(any_redis_target), step], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run("start") == '{"out": ["prep"], "next": ["ask"], "interrupts": [{"question": "approve?"}]}'
    assert run("resume") == '{"out": ["prep", "answer:yes"], "next": [], "interrupts": []}'


def test_encrypted_values_on_redis_refuse_tampering(redis_target: RedisTarget) -> None:
    codec = BlobCodec(keys=Keyring([K1]))
    with open_saver(url_of(redis_target), codec=codec) as saver:
        g = chat().compile(checkpointer=saver)
        g.invoke({"messages": [("user", "secret plan")]}, cfg("enc"))
    client = redis_target.client()
    blobs = next(k for k in redis_target.keys() if k.endswith(b"{enc}:bl"))
    stored = client.hgetall(blobs)
    assert stored and not any(b"secret plan" in v for v in stored.values())
    for field, value in stored.items():  # every version of the channel: one flipped bit each
        if field.startswith(b"\x00messages"):
            client.hset(blobs, field, value[:-1] + bytes([value[-1] ^ 1]))
    with open_saver(url_of(redis_target), codec=BlobCodec(keys=Keyring([K1]))) as saver:
        with pytest.raises(CorruptRowError):
            saver.get_tuple(cfg("enc"))


def test_checkpoint_rows_carry_x3_checksums_of_their_json_and_refuse_a_changed_text(redis_target: RedisTarget) -> None:
    """Storage format 2 on Redis: a checkpoint row keeps its JSON texts as written, so its checksum
    is ``x3:`` (xxh3-128 of those texts); a row whose text was changed behind threadline's back,
    still valid JSON, fails the read with CorruptRowError."""
    with open_saver(url_of(redis_target)) as saver:
        chat().compile(checkpointer=saver).invoke({"messages": [("user", "hi")]}, cfg("x3"))
    client = redis_target.client()
    rows = client.hgetall(next(k for k in redis_target.keys() if k.endswith(b"{x3}:ck")))
    unpacked = {f: unpack_checkpoint(v, "test") for f, v in rows.items()}
    assert rows and {row[-1][:3] for row in unpacked.values()} == {"x3:"}
    latest = max(rows)  # ns \0 checkpoint_id: uuid6 ids sort by time
    row = unpacked[latest]
    assert '"source":"loop"' in row[2] or '"source": "loop"' in row[2]
    row[2] = row[2].replace("loop", "LOOP")  # metadata JSON, still valid
    client.hset(next(k for k in redis_target.keys() if k.endswith(b"{x3}:ck")), latest, pack_checkpoint(row))
    with open_saver(url_of(redis_target)) as saver:
        with pytest.raises(CorruptRowError, match="checksum mismatch"):
            saver.get_tuple(cfg("x3"))


@contextmanager
def private_redis(directory: Path, *args: str) -> Iterator[int]:
    """A Redis server of this test's own on a free loopback port, with ``args``; its port."""
    port = free_ports(1)[0]
    subprocess.run(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "yes",
         "--dir", str(directory), "--pidfile", str(directory / f"redis-{port}.pid"), *args],
        check=True,
    )
    try:
        for _ in range(50):
            try:
                redis.Redis(port=port).ping()
                break
            except redis.AuthenticationError:
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        yield port
    finally:
        pid = directory / f"redis-{port}.pid"
        if pid.exists():
            os.kill(int(pid.read_text()), signal.SIGTERM)


def test_faults_are_one_line_threadline_errors(redis_target: RedisTarget, tmp_path: Path) -> None:
    port = free_ports(1)[0]
    with pytest.raises(BackendError, match="cannot connect to Redis at redis://127.0.0.1:") as down:
        with open_saver(f"redis://127.0.0.1:{port}/0"):
            pass
    assert "\n" not in str(down.value)
    with private_redis(tmp_path, "--requirepass", "right-password") as port:
        with pytest.raises(BackendError, match=r"redis://\*\*\*@127\.0\.0\.1.*refused the login") as auth:
            with open_saver(f"redis://:wrong-password@127.0.0.1:{port}/0"):
                pass
        assert "wrong-password" not in str(auth.value) and "\n" not in str(auth.value)
    # a key of another type planted where threadline keeps a thread
    redis_target.client().set(f"{redis_target.prefix}:{{planted}}:ids", "not a sorted set")
    with open_saver(url_of(redis_target)) as saver:
        with pytest.raises(BackendError, match="holds another kind of value"):
            saver.get_tuple(cfg("planted"))


def test_out_of_memory_is_a_clear_error_and_writes_nothing(tmp_path: Path) -> None:
    """A private server with a tiny maxmemory and noeviction: the put is refused whole."""
    with private_redis(tmp_path, "--maxmemory", "8mb", "--maxmemory-policy", "noeviction") as port:
        client = redis.Redis(port=port)
        url = f"redis://127.0.0.1:{port}/0"
        with open_saver(url) as saver:
            g = chat().compile(checkpointer=saver)
            g.invoke({"messages": [("user", "small")]}, cfg("oom"))
            before = g.get_state(cfg("oom"))
            for i in range(200):  # fill memory up to maxmemory
                try:
                    client.set(f"ballast{i}", b"x" * 100_000)
                except redis.OutOfMemoryError:
                    break
            with pytest.raises(BackendError, match="out of memory") as oom:
                g.invoke({"messages": [("user", base64.b64encode(os.urandom(300_000)).decode())]}, cfg("oom"))
            assert "\n" not in str(oom.value)
            client.delete(*[f"ballast{i}" for i in range(200)])
            after = g.get_state(cfg("oom"))
            assert after.values == before.values and after.config == before.config


def test_kill_9_at_any_point_leaves_the_thread_readable_and_resumable(any_redis_target: RedisTarget, tmp_path: Path) -> None:
    """A process running a graph in a loop is killed with SIGKILL at random moments; after each
    kill a fresh saver reads every checkpoint of the thread and the graph runs on."""
    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent('''
        import sys
        from langgraph.graph import END, START, MessagesState, StateGraph
        from langchain_core.messages import AIMessage
        from threadline import open_saver

        def reply(state):
            return {"messages": [AIMessage(content="reply " + "x" * 2000)]}

        b = StateGraph(MessagesState)
        b.add_node("reply", reply)
        b.add_edge(START, "reply"); b.add_edge("reply", END)
        with open_saver(sys.argv[1]) as saver:
            g = b.compile(checkpointer=saver)
            print("ready", flush=True)
            while True:
                g.invoke({"messages": [("user", "more")]}, {"configurable": {"thread_id": "killed"}})
    '''))
    rng = random.Random(7)
    url = url_of(any_redis_target)
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, str(script), url], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.3, 1.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with open_saver(url) as saver:
            g = chat().compile(checkpointer=saver)
            history = list(saver.list(cfg("killed")))
            for t in history:  # every stored checkpoint loads whole
                assert saver.get_tuple(t.config) is not None
            g.invoke(None, cfg("killed"))  # finish the run the kill cut short (a no-op after a whole one)
            before = len(g.get_state(cfg("killed")).values.get("messages", []))
            g.invoke({"messages": [("user", "after the kill")]}, cfg("killed"))
            assert len(g.get_state(cfg("killed")).values["messages"]) == before + 2


def _move_slot(node_ports: list[int], slot: int, keys: list[bytes] | None = None) -> int:
    """Move ``slot`` of the local cluster to another master, as ``redis-cli --cluster reshard``
    does (IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE). With ``keys``, migrate only those and
    leave the slot half-moved (MIGRATING/IMPORTING). Returns the new owner's port."""
    nodes = {p: redis.Redis(port=p) for p in node_ports}
    ids = {p: c.execute_command("CLUSTER", "MYID").decode() for p, c in nodes.items()}
    owner = next(p for p, c in nodes.items() if c.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) > 0)
    target = next(p for p in node_ports if p != owner)
    nodes[target].execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[owner])
    nodes[owner].execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target])
    moving = keys if keys is not None else nodes[owner].execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
    if moving:
        nodes[owner].execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", *moving)
    if keys is None:
        for c in nodes.values():
            c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", ids[target])
    for c in nodes.values():
        c.close()
    return target


def _finish_move(node_ports: list[int], slot: int, target: int) -> None:
    nodes = {p: redis.Redis(port=p) for p in node_ports}
    ids = {p: c.execute_command("CLUSTER", "MYID").decode() for p, c in nodes.items()}
    owner = next(p for p in node_ports if p != target and nodes[p].execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) > 0)
    rest = nodes[owner].execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
    if rest:
        nodes[owner].execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", *rest)
    for c in nodes.values():
        c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", ids[target])
        c.close()


def test_a_slot_moved_during_puts_loses_nothing(redis_cluster, redis_cluster_target: RedisTarget) -> None:
    """A reshard moves a thread's slot between puts (the client's next put gets MOVED and follows
    it), then leaves it half-moved mid-run (some of the thread's keys on each node: ASK/TRYAGAIN).
    Every put either stores whole or fails with one threadline error; the thread stays readable,
    and once the move finishes the graph runs on with nothing lost."""
    with open_saver(url_of(redis_cluster_target)) as saver:
        g = chat().compile(checkpointer=saver)
        g.invoke({"messages": [("user", "before the move")]}, cfg("moving"))
        keys = [k for k in redis_cluster_target.keys() if b"{moving}" in k]
        slot = redis.cluster.key_slot(keys[0])
        _move_slot(redis_cluster.ports, slot)
        g.invoke({"messages": [("user", "after the move")]}, cfg("moving"))  # MOVED, followed
        assert len(g.get_state(cfg("moving")).values["messages"]) == 4

        # half-moved: the checkpoint rows go ahead, the blobs and writes stay behind
        keys = sorted(k for k in redis_cluster_target.keys() if b"{moving}" in k)
        ahead = [k for k in keys if k.endswith((b":ck", b":ids"))]
        target = _move_slot(redis_cluster.ports, slot, ahead)
        try:
            g.invoke({"messages": [("user", "during the move")]}, cfg("moving"))
            failed = None
        except BackendError as exc:
            failed = exc
        _finish_move(redis_cluster.ports, slot, target)
        if failed is not None:
            assert "moving this thread's slot" in str(failed) and "\n" not in str(failed), failed
        state = g.get_state(cfg("moving"))
        history = list(g.get_state_history(cfg("moving")))
        assert all(s.values is not None for s in history)
        n = len(state.values["messages"])
        assert n in (4, 6) and (failed is None) == (n == 6), (n, failed)
        g.invoke({"messages": [("user", "after it finished")]}, cfg("moving"))
        assert len(g.get_state(cfg("moving")).values["messages"]) == n + 2
