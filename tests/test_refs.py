"""Deltas that reference pending writes (``codec.refs``): each message is stored once.

* the codec, pure: a reference only for exactly the writes' items, spliced back into the
  delta it stands for, malformed references refused;
* on every backend, a real LangGraph loop (two messages per superstep): the messages
  channel's deltas reference the writes, and a saver with nothing cached reads every
  checkpoint back exactly;
* lifecycle with shared content: prune, delete, delete_for_runs, retention, fork, copy_thread
  and rollback leave every remaining checkpoint readable (values exactly as before), fsck
  (deep) clean, and the thread continues;
* a write ignored because its key was already stored is never referenced; a referenced
  write that is damaged or missing fails loudly (``CorruptRowError``).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, MessagesState, StateGraph

from backends import Backend
from threadline import codec
from threadline.codec import BlobCodec, Keyring
from threadline.codec.serde import default_serde
from threadline.errors import CorruptRowError
from threadline.lifecycle import RetentionPolicy, fork, fsck, rollback
from threadline.lifecycle.retention import prune as retention_prune
from threadline.storage import ops

SERDE = default_serde()
KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="


def raw(items: list) -> bytes:
    """The item bytes of a write of ``items``."""
    found = codec.write_items(*SERDE.dumps_typed(items))
    assert found is not None
    return bytes(found[1])


def body(items: list) -> tuple[int, bytes]:
    """What a saver remembers of a write of ``items``: the digest of its item bytes."""
    return codec.item_digest(raw(items))


def delta_payload(base: list, new: list) -> bytes:
    found = codec.make_delta(codec.container(SERDE.dumps_typed(base)[1]), codec.container(SERDE.dumps_typed(new)[1]), max_depth=8)
    assert found is not None and found[0] == codec.DELTA_LIST
    return found[1]


# --- the codec, pure --------------------------------------------------------------


def test_a_reference_only_for_exactly_the_writes_items_and_it_splices_back() -> None:
    base, added = [f"item {i} " * 8 for i in range(8)], ["c" * 60, "d" * 70]
    payload = delta_payload(base, base + added)
    both = codec.refs.make_ref(payload, "ck", [("t1", 0, body(added))])
    assert both is not None
    header, cid, refs = codec.ref_of(both, "here")
    assert (cid, refs) == ("ck", [("t1", 0)])
    assert codec.splice(header, [(2, raw(added))]) == payload
    split = codec.refs.make_ref(payload, "ck", [("t1", 0, body(added[:1])), ("t2", 0, body(added[1:]))])
    assert codec.ref_of(split, "here")[2] == [("t1", 0), ("t2", 0)]
    one = codec.refs.make_ref(payload, "ck", [("t1", 0, body(added)), ("t2", 3, body(["zzz"]))])
    assert codec.ref_of(one, "here")[2] == [("t1", 0)]
    assert codec.refs.make_ref(payload, "ck", [("t1", 0, body(["c" * 60]))]) is None
    assert codec.refs.make_ref(payload, "ck", [("t1", 0, body(["c" * 59 + "x", "d" * 70]))]) is None  # same length
    assert codec.refs.make_ref(payload, "ck", []) is None



def test_a_topic_value_is_a_reference_on_the_empty_list_or_stored_whole() -> None:
    """A value that is not a list is one item of the channel it is written to (a ``Topic``
    appends each ``Send``): a list of such writes on the empty list is a reference to them,
    however large the delta; one that is not exactly their items is stored whole."""
    bc = BlobCodec()
    sends = [{"node": "tools", "arg": f"{i} " * 200} for i in range(2)]
    tag, data = SERDE.dumps_typed(sends)
    empty = codec.Entry(bc.candidate(*SERDE.dumps_typed([]), []), "msgpack+sum", 11)
    items = [codec.write_items(*SERDE.dumps_typed(s)) for s in sends]
    writes = [(f"t{i}", 0, codec.item_digest(body)) for i, (_, body) in enumerate(items)]
    stored, payload, is_delta, _ = bc.encode_blob(tag, data, bc.candidate(tag, data, sends), empty, ("ck", writes))
    assert (stored, is_delta) == ("delta-ref:msgpack", True) and len(payload) < 150
    header, cid, refs = codec.ref_in(stored, payload, "here")
    assert (cid, refs) == ("ck", [("t0", 0), ("t1", 0)])
    rows = {"1": ("msgpack", b"\x90", None), "2": ("delta-list:msgpack", codec.splice(header, items), "1")}
    assert codec.resolve(rows, "2", "here")[2].serialized() == data
    stored, payload, is_delta, _ = bc.encode_blob(tag, data, bc.candidate(tag, data, sends), empty, ("ck", writes[:1]))
    assert not is_delta and codec.decompress(stored, payload, "here") == ("msgpack", data)

@pytest.mark.parametrize("tail", [b"", b"not json", b'["ck"]', b'["ck", []]', b'["ck", [["t", "0"]]]', b'[1, [["t", 0]]]', b"\xff"])
def test_malformed_references_are_corrupt_rows(tail: bytes) -> None:
    with pytest.raises(CorruptRowError):
        codec.ref_of(b"\x00" * 23 + tail, "here")


def test_decode_and_resolve_refuse_a_reference_read_on_its_own() -> None:
    with pytest.raises(CorruptRowError, match="delta"):
        codec.decode(SERDE, "delta-ref:msgpack", b"\x00" * 30, "here")
    rows = {"1": ("msgpack", SERDE.dumps_typed(["x" * 40])[1], None), "2": ("delta-ref:msgpack", b"\x00" * 30, "1")}
    with pytest.raises(CorruptRowError, match="pending writes"):
        codec.resolve(rows, "2", "here")


def test_remembered_writes_are_bounded_by_count_and_bytes() -> None:
    digest = codec.item_digest(b"x" * 400_000)  # remembered, not the bytes: a large write costs what a small one does
    cache = codec.BlobCache(max_bytes=4000, max_writes=3)
    for i in range(5):
        cache.add_writes(("t", "", f"c{i}"), [("chat", "~", "task", 0, digest)])
    assert cache.writes(("t", "", "c0"), "chat") == [] and cache.writes(("t", "", "c4"), "chat") == [("task", 0, digest)]
    assert cache.writes(("t", "", "c2"), "chat") == []  # two remembered writes count more than a quarter of max_bytes
    big = codec.BlobCache(max_bytes=4 << 20)
    for i in range(256):
        big.add_writes(("t", "", f"c{i}"), [("chat", "~", "task", 0, digest)])
    assert big.writes(("t", "", "c0"), "chat") == [("task", 0, digest)] and big.nbytes < 256 * 700
    cache.forget_threads(["t"])
    assert cache.writes(("t", "", "c4"), "chat") == []


# --- a real LangGraph loop on every backend --------------------------------------------


def loop_graph(saver: Any, steps: int):
    """Each superstep appends an AI message with a tool call and the tool's answer (~300 chars each)."""

    def agent(state: MessagesState) -> dict:
        n = len(state["messages"])
        ai = AIMessage(content=f"thinking {n} " + "lorem ipsum dolor " * 16, id=f"ai-{n}",
                       tool_calls=[{"name": "search", "args": {"q": f"q{n}"}, "id": f"call-{n}", "type": "tool_call"}])
        return {"messages": [ai, ToolMessage(content=f"found {n} " + "sit amet elit " * 20, tool_call_id=f"call-{n}", id=f"tool-{n}")]}

    def route(state: MessagesState) -> str:
        last_human = max(i for i, m in enumerate(state["messages"]) if isinstance(m, HumanMessage))
        return END if len(state["messages"]) - last_human - 1 >= 2 * steps else "agent"

    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", route, ["agent", END])
    return b.compile(checkpointer=saver)


def grow(saver: Any, thread_id: str, steps: int = 12, run_id: str | None = None) -> None:
    config = {"configurable": {"thread_id": thread_id, **({"run_id": run_id} if run_id else {})}, "recursion_limit": 4 * steps}
    # "sync": each superstep's writes are stored before the next checkpoint (with "async"
    # durability the next put may come first; its delta then holds the items itself)
    message = HumanMessage(content="start " * 40, id=f"h-{thread_id}-{run_id}")
    loop_graph(saver, steps).invoke({"messages": [message]}, config, durability="sync")


def everything(saver: Any, thread_id: str) -> dict:
    """(checkpoint_ns, checkpoint_id) → the serializer's bytes of its values and pending writes."""
    return {
        (t.config["configurable"]["checkpoint_ns"], t.config["configurable"]["checkpoint_id"]): (
            SERDE.dumps_typed(t.checkpoint["channel_values"]),
            SERDE.dumps_typed(t.pending_writes),
        )
        for t in saver.list({"configurable": {"thread_id": thread_id}})
    }


def refs_of(b: Backend, thread_id: str) -> int:
    return b.sql("SELECT COUNT(*) FROM threadline_blobs WHERE thread_id = ? AND type LIKE 'delta-ref:%'", (thread_id,))[0][0]


def opened(b: Backend, bc: BlobCodec = BlobCodec()):
    class Opener:
        def __enter__(self):
            self.cm = b.open()
            saver = self.cm.__enter__()
            saver.blob_codec = BlobCodec(max_depth=bc.max_depth, keys=bc.keys)  # nothing cached
            return saver

        def __exit__(self, *exc):
            return self.cm.__exit__(*exc)

    return Opener()


def test_messages_are_stored_once_and_read_back_exactly(sync_backend: Backend) -> None:
    with opened(sync_backend) as saver:
        grow(saver, "t", 15)
        before = everything(saver, "t")
    assert refs_of(sync_backend, "t") >= 10
    # the messages channel holds no message bytes of its own between snapshots
    kinds = dict(sync_backend.sql("SELECT type, COUNT(*) FROM threadline_blobs WHERE channel = 'messages' GROUP BY type"))
    assert not [k for k in kinds if k.startswith("delta-list:")], kinds
    with opened(sync_backend) as saver:
        assert everything(saver, "t") == before



def test_a_topic_value_references_the_sends_that_hold_it(sync_backend: Backend) -> None:
    """A prebuilt agent's tool calls are ``Send`` tasks, each carrying the whole state: LangGraph
    stores them as pending writes on ``__pregel_tasks`` and then as that channel's value. The
    value is stored once, as a reference to those writes on the empty list the channel held
    (the first round, with no earlier value, whole), by a new saver too once it read the
    thread; a saver with nothing cached reads every checkpoint back exactly, as many Sends as
    the official saver returns, and after the referenced writes' checkpoints are deleted
    (their items copied in first) the rest too."""
    from cli_support import agent_graph
    from langgraph.checkpoint.memory import InMemorySaver

    tasks = "SELECT type, COUNT(*) FROM threadline_blobs WHERE thread_id = 'a' AND channel = '__pregel_tasks' GROUP BY type"
    refs = "SELECT COUNT(*) FROM threadline_blobs WHERE thread_id = 'a' AND channel = '__pregel_tasks' AND type LIKE 'delta-ref:%'"
    official = InMemorySaver()
    for turn in range(2):
        with opened(sync_backend) as saver:  # the second turn: a new saver, as a new process
            agent_graph(saver, turn).invoke({"messages": [("user", "weather?")]}, {"configurable": {"thread_id": "a"}})
            before = everything(saver, "a")
        agent_graph(official, turn).invoke({"messages": [("user", "weather?")]}, {"configurable": {"thread_id": "a"}})
        # each turn's second round (one Send) on the emptied []; the second turn's first round (two)
        # too. LangGraph saves a task's writes from its background executor, so under load a put can
        # come before a Send's writes are remembered and store that value whole (a reference is an
        # optimization, best-effort): the new saver references at least one of its first round's.
        found = sync_backend.sql(refs)[0][0]
        assert [1, 2][turn] <= found <= [1, 3][turn], sync_backend.sql(tasks)

    def sends(saver: Any) -> list[int]:
        return [len(t.checkpoint["channel_values"].get("__pregel_tasks", [])) for t in saver.list({"configurable": {"thread_id": "a"}})]

    with opened(sync_backend) as saver:
        assert everything(saver, "a") == before
        assert sends(saver) == sends(official) and max(sends(saver)) == 2
        ids = sorted(cid for _, cid in before)
        saver.run(ops.delete_checkpoints(saver.dialect, [("a", "", c) for c in ids[::2]], saver.blob_codec), write=True)
    with opened(sync_backend) as saver:
        after = everything(saver, "a")
        assert set(after) < set(before) and all(after[k] == before[k] for k in after)
        assert not [f for f in fsck(saver, deep=True).findings if f.kind != "broken_parent"]


async def test_async_savers_write_and_read_references(async_backend: Backend) -> None:
    async with async_backend.open() as saver:
        config: dict = {"configurable": {"thread_id": "a", "checkpoint_ns": ""}}
        chat: list[str] = [f"start {i} " * 30 for i in range(4)]
        for step in range(6):
            chat = chat + [f"m{step}.{i} " + "words " * 30 for i in range(2)]
            ck = empty_checkpoint()
            ck["id"] = str(uuid6(clock_seq=-1))
            ck["channel_values"] = {"chat": chat}
            ck["channel_versions"] = {"chat": str(step + 1)}
            config = await saver.aput(config, ck, {"step": step}, {"chat": str(step + 1)})
            await saver.aput_writes(config, [("chat", [f"m{step + 1}.{i} " + "words " * 30 for i in range(2)])], f"task-{step}")
        saver.blob_codec.cache.clear()
        assert (await saver.aget_tuple(config)).checkpoint["channel_values"]["chat"] == chat
    assert refs_of(async_backend, "a") >= 4


OPERATIONS = ["prune", "delete_checkpoints", "delete_for_runs", "retention", "fork", "copy_thread", "rollback"]


@pytest.mark.parametrize("encrypted", [False, True], ids=["checksum", "encrypted"])
@pytest.mark.parametrize("operation", OPERATIONS)
def test_lifecycle_keeps_checkpoints_with_shared_content_readable(sync_backend: Backend, operation: str, encrypted: bool) -> None:
    bc = BlobCodec(max_depth=5, keys=Keyring([KEY]) if encrypted else None)
    runs = [str(uuid.uuid4()) for _ in range(3)]
    with opened(sync_backend, bc) as saver:
        for run in runs:
            grow(saver, "life", 6, run)
        grow(saver, "other", 6)
        before, other = everything(saver, "life"), everything(saver, "other")
        ids = sorted(cid for _, cid in before)
        assert refs_of(sync_backend, "life") >= 10
        kept = "life"
        if operation == "prune":
            saver.prune(["life"], strategy="keep_latest")
            # the kept head's deltas referenced writes that went: their items were copied in
            copied = "SELECT COUNT(*) FROM threadline_blobs WHERE thread_id = 'life' AND channel = 'messages' AND type LIKE 'delta-list:%'"
            assert sync_backend.sql(copied)[0][0] > 0
        elif operation == "delete_checkpoints":  # every other checkpoint: kept deltas reference deleted writes
            saver.run(ops.delete_checkpoints(saver.dialect, [("life", "", c) for c in ids[::2]], saver.blob_codec), write=True)
        elif operation == "delete_for_runs":
            saver.delete_for_runs(runs[:2])
        elif operation == "retention":
            retention_prune(saver, RetentionPolicy(keep_last=2), thread_ids=["life"])
        elif operation == "fork":
            fork(saver, "life", ids[len(ids) // 2], "forked")
            saver.delete_thread("life")
            kept = "forked"
        elif operation == "copy_thread":
            saver.copy_thread("life", "copied")
            saver.delete_thread("life")
            kept = "copied"
        else:
            rollback(saver, "life", ids[len(ids) // 2])
            saver.prune(["life"], strategy="keep_latest")
    with opened(sync_backend, bc) as saver:
        after = everything(saver, kept)
        assert after
        if operation in ("copy_thread",):
            assert after == before
        elif operation not in ("fork", "rollback"):
            assert set(after) < set(before) and all(after[k] == before[k] for k in after)
        else:  # a new checkpoint holding the values of the one branched from
            target = before[("", ids[len(ids) // 2])][0]
            assert [v for v, _ in after.values()] == [target]
        assert everything(saver, "other") == other
        # the raw delete leaves the parent links of kept children dangling (the lifecycle's re-parents)
        findings = [f for f in fsck(saver, deep=True).findings if (f.kind, operation) != ("broken_parent", "delete_checkpoints")]
        assert not findings, findings
        # and the thread keeps going on top of what was kept
        state = loop_graph(saver, 2).get_state({"configurable": {"thread_id": kept}})
        grow(saver, kept, 2, str(uuid.uuid4()))
        grown = loop_graph(saver, 2).get_state({"configurable": {"thread_id": kept}})
        assert len(grown.values["messages"]) == len(state.values["messages"]) + 5
    with opened(sync_backend, bc) as saver:
        assert everything(saver, kept)
        assert not [f for f in fsck(saver, deep=True).findings if (f.kind, operation) != ("broken_parent", "delete_checkpoints")]


def test_an_ignored_write_is_never_referenced(sync_backend: Backend) -> None:
    """put_writes of a key already stored keeps the stored write (insert-or-ignore): a delta
    whose items are the ignored write's must hold them itself."""
    with sync_backend.open() as saver:
        config: dict = {"configurable": {"thread_id": "i", "checkpoint_ns": ""}}
        chat = [f"first {i} " * 30 for i in range(6)]
        config = put(saver, config, {"chat": chat}, "1")
        stored, ignored = ["stored " * 60], ["ignored " * 60]
        saver.put_writes(config, [("chat", stored)], "task")
        saver.put_writes(config, [("chat", ignored)], "task")  # same (task_id, idx): ignored
        child = put(saver, config, {"chat": chat + ignored}, "2")
        assert refs_of(sync_backend, "i") == 0
        sibling = put(saver, config, {"chat": chat + stored}, "3")  # the stored write is referenced
        assert refs_of(sync_backend, "i") == 1
        saver.blob_codec.cache.clear()
        assert saver.get_tuple(child).checkpoint["channel_values"]["chat"] == chat + ignored
        assert saver.get_tuple(sibling).checkpoint["channel_values"]["chat"] == chat + stored
        assert saver.get_tuple(config).pending_writes == [("task", "chat", stored)]


def put(saver: Any, config: dict, values: dict, version: str) -> dict:
    ck = empty_checkpoint()
    ck["id"] = str(uuid6(clock_seq=-1))
    ck["channel_values"], ck["channel_versions"] = values, {ch: version for ch in values}
    return saver.put(config, ck, {"step": int(version)}, dict(ck["channel_versions"]))


@pytest.mark.parametrize("damage", ["flip", "delete"])
def test_a_damaged_or_missing_referenced_write_fails_loudly(sync_backend: Backend, damage: str) -> None:
    with opened(sync_backend) as saver:
        grow(saver, "d", 6)
        head = saver.get_tuple({"configurable": {"thread_id": "d"}}).config
        first = saver.get_tuple(head).parent_config["configurable"]["checkpoint_id"]  # its writes: the head's items
    where = "thread_id = 'd' AND channel = 'messages' AND checkpoint_id = ?"
    if damage == "flip":
        (data,) = sync_backend.sql(f"SELECT blob FROM threadline_writes WHERE {where}", (first,))[0]
        data = bytes(data)
        sync_backend.sql(f"UPDATE threadline_writes SET blob = ? WHERE {where}", (data[:-1] + bytes([data[-1] ^ 1]), first))
    else:
        sync_backend.sql(f"DELETE FROM threadline_writes WHERE {where}", (first,))
    with opened(sync_backend) as saver:
        with pytest.raises(CorruptRowError):
            saver.get_tuple(head)
        # fsck names it: without --deep when the writes are gone, with --deep in any case
        quick = [f for f in fsck(saver).findings if f.kind == "dangling_ref"]
        if damage == "delete":
            assert len(quick) == 1 and quick[0].checkpoint_id == first and not quick[0].repairable, quick
            assert "missing" in quick[0].detail and "threadline restore" in quick[0].detail
        else:
            assert quick == []  # the writes are there: only decoding them finds the damage
        assert "unreadable_value" in {f.kind for f in fsck(saver, deep=True).findings}
