"""The official ``langgraph-checkpoint-postgres`` prune tests (``tests/test_prune.py`` of its
3.2.0 sdist), ported to public calls and run on threadline's savers.

The official tests read the saver's tables through the private ``saver._cursor()``; here a
thread's rows are what the public API returns (``list`` over every namespace, each tuple's
pending writes and channel values). The tests that hook ``_cursor()`` to run a second
writer between two official prune statements test the official statement order, which
threadline does not have (one transaction per batch): they are not ported.

``keep_latest`` refuses a thread that uses a ``DeltaChannel`` exactly when the official
``PostgresSaver`` refuses it — metadata counters, the ``delta_writes_versioned`` marker, or a
stored ``_DeltaSnapshot`` value — with its message, on Postgres. The official ``SqliteSaver``
has no ``prune``; threadline's prunes such a thread on SQLite and keeps every ancestor the
latest checkpoint rebuilds its delta channels from, so ``get_delta_channel_history`` reads the
same before and after.
"""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import uuid4

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import TASKS, _DeltaSnapshot

from backends import Backend


async def _call(saver: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    if _is_async(saver):
        return await getattr(saver, f"a{method}")(*args, **kwargs)
    return getattr(saver, method)(*args, **kwargs)


def _is_async(saver: Any) -> bool:
    return hasattr(saver, "loop")


async def _tuples(saver: Any, thread_id: str) -> list[Any]:
    config = {"configurable": {"thread_id": thread_id}}
    if _is_async(saver):
        return [t async for t in saver.alist(config)]
    return list(saver.list(config))


async def _rows(saver: Any, thread_id: str) -> dict[str, list[tuple]]:
    """The thread as the public API shows it: its checkpoints (every namespace), their pending
    writes, and the channel values each holds (channel, version, value)."""
    found = await _tuples(saver, thread_id)
    key = lambda t: (t.config["configurable"]["checkpoint_ns"], t.config["configurable"]["checkpoint_id"])  # noqa: E731
    return {
        "checkpoints": sorted(key(t) for t in found),
        "writes": sorted((*key(t), w[0], w[1], repr(w[2])) for t in found for w in t.pending_writes or []),
        "values": sorted(
            (*key(t), ch, str(t.checkpoint["channel_versions"].get(ch)), repr(v)) for t in found for ch, v in t.checkpoint["channel_values"].items()
        ),
    }


async def _put(
    saver: Any,
    thread_id: str,
    parent: dict | None,
    step: int,
    values: dict[str, Any],
    versions: dict[str, str],
    *,
    ns: str = "",
    metadata: dict[str, Any] | None = None,
    v: int = 4,
    checkpoint_id: str | None = None,
) -> dict:
    config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    checkpoint = empty_checkpoint()
    checkpoint.update(v=v, id=checkpoint_id or str(uuid6(clock_seq=step)), channel_values=values, channel_versions=versions)
    new_versions = {k: versions[k] for k in values}
    return await _call(saver, "put", config, checkpoint, {"source": "loop", "step": step, "parents": {}, **(metadata or {})}, new_versions)


async def _three_checkpoints(saver: Any, thread_id: str, ns: str = "", metadata: dict[str, Any] | None = None) -> dict:
    parent = None
    steps = [
        ({"a": [1], "s": ["shared"]}, {"a": "1", "s": "1"}),
        ({"a": [1, 2]}, {"a": "2", "s": "1"}),
        ({"a": [1, 2, 3]}, {"a": "3", "s": "1"}),
    ]
    for step, (values, versions) in enumerate(steps):
        parent = await _put(saver, thread_id, parent, step, values, versions, ns=ns, metadata=metadata)
        await _call(saver, "put_writes", parent, [("a", step)], str(uuid4()))
    return parent


async def _delta_thread(saver: Any, thread_id: str, evidence: str) -> dict:
    """A thread using a DeltaChannel ``m``, as the official tests write one; returns its head."""
    if evidence == "counters":
        first = await _put(saver, thread_id, None, 0, {"m": [1]}, {"m": "1"})
        return await _put(saver, thread_id, first, 1, {}, {"m": "2"}, metadata={"counters_since_delta_snapshot": {"m": [1, 1]}})
    if evidence == "snapshot":
        first = await _put(saver, thread_id, None, 0, {"m": _DeltaSnapshot([1])}, {"m": "1"})
        await _call(saver, "put_writes", first, [("m", 2)], str(uuid4()))
        return await _put(saver, thread_id, first, 1, {}, {"m": "2"})
    marker = {"delta_writes_versioned": True}
    first = await _put(saver, thread_id, None, 0, {"m": [1]}, {"m": "1"}, metadata=marker)
    return await _put(saver, thread_id, first, 1, {"m": [1, 2]}, {"m": "2"}, metadata=marker)


async def _history(saver: Any, head: dict) -> Any:
    return await _call(saver, "get_delta_channel_history", config=head, channels=["m"])


async def test_keep_latest_keeps_each_namespace_head_with_its_writes_and_blobs(saver: Any) -> None:
    thread_id, other_id = str(uuid4()), str(uuid4())
    heads = {ns: await _three_checkpoints(saver, thread_id, ns) for ns in ("", "sub:1")}
    await _three_checkpoints(saver, other_id)
    before = {ns: await _call(saver, "get_tuple", h) for ns, h in heads.items()}
    other_before = await _rows(saver, other_id)

    await _call(saver, "prune", [thread_id])

    rows = await _rows(saver, thread_id)
    assert rows["checkpoints"] == [(ns, heads[ns]["configurable"]["checkpoint_id"]) for ns in ("", "sub:1")]
    assert sorted({(ns, cid) for ns, cid, *_ in rows["writes"]}) == rows["checkpoints"]
    assert [(ns, ch, ver) for ns, _, ch, ver, _ in rows["values"]] == [
        (ns, ch, ver) for ns in ("", "sub:1") for ch, ver in (("a", "3"), ("s", "1"))
    ]
    for ns, head in heads.items():
        assert await _call(saver, "get_tuple", head) == before[ns]._replace(parent_config=None)
    assert await _rows(saver, other_id) == other_before


@pytest.mark.parametrize("evidence", ["counters", "snapshot", "versioned"])
async def test_keep_latest_refuses_a_batch_with_a_delta_channel_thread(backend: Backend, saver: Any, evidence: str) -> None:
    ordinary_id, delta_id = str(uuid4()), str(uuid4())
    await _three_checkpoints(saver, ordinary_id)
    head = await _delta_thread(saver, delta_id, evidence)
    before = [await _rows(saver, t) for t in (ordinary_id, delta_id)]
    history = await _history(saver, head)

    if backend.is_postgres:  # as the official PostgresSaver: nothing is pruned
        with pytest.raises(NotImplementedError, match=f"^keep_latest can't prune threads that use a DeltaChannel: {delta_id}$"):
            await _call(saver, "prune", [ordinary_id, delta_id])
        assert [await _rows(saver, t) for t in (ordinary_id, delta_id)] == before
    else:  # the official SqliteSaver has no prune: threadline's keeps what the head rebuilds from
        await _call(saver, "prune", [ordinary_id, delta_id])
        assert len((await _rows(saver, ordinary_id))["checkpoints"]) == 1
    assert await _history(saver, head) == history


async def test_keep_latest_names_every_refused_thread_in_order(backend: Backend, saver: Any) -> None:
    """The official message lists every DeltaChannel thread of the batch, sorted, joined by ', '."""
    if not backend.is_postgres:
        pytest.skip("the refusal is the official PostgresSaver's; SQLite prunes such threads keeping their history")
    ids = sorted(str(uuid4()) for _ in range(2))
    await _delta_thread(saver, ids[1], "snapshot")
    await _delta_thread(saver, ids[0], "counters")
    with pytest.raises(NotImplementedError) as caught:
        await _call(saver, "prune", [ids[1], str(uuid4()), ids[0]])
    assert str(caught.value) == f"keep_latest can't prune threads that use a DeltaChannel: {ids[0]}, {ids[1]}"


async def test_keep_latest_keeps_the_snapshot_history_of_a_thread_without_markers(backend: Backend, saver: Any) -> None:
    """The issue's loss: a thread put directly (no metadata markers) whose channel holds a
    ``_DeltaSnapshot`` kept ``{'writes': [...], 'seed': _DeltaSnapshot([1])}`` → ``{'writes': []}``."""
    thread_id = str(uuid4())
    head = await _delta_thread(saver, thread_id, "snapshot")
    history = await _history(saver, head)
    assert history["m"]["seed"] == _DeltaSnapshot([1]) and [w[2] for w in history["m"]["writes"]] == [2]
    try:
        await _call(saver, "prune", [thread_id])
    except NotImplementedError:
        assert backend.is_postgres
    assert await _history(saver, head) == history


async def test_keep_latest_prunes_a_thread_storing_a_plain_true(saver: Any) -> None:
    thread_id = str(uuid4())
    first = await _put(saver, thread_id, None, 0, {"flag": True, "a": [1]}, {"flag": "1", "a": "1"})
    head = await _put(saver, thread_id, first, 1, {"flag": True}, {"flag": "2", "a": "1"})

    await _call(saver, "prune", [thread_id])

    assert (await _rows(saver, thread_id))["checkpoints"] == [("", head["configurable"]["checkpoint_id"])]


async def test_keep_latest_keeps_the_parent_holding_a_pre_v4_heads_sends(backend: Backend, saver: Any) -> None:
    thread_id = str(uuid4())
    first = await _put(saver, thread_id, None, 0, {}, {}, v=1)
    await _call(saver, "put_writes", first, [(TASKS, "send-1")], str(uuid4()))
    second = await _put(saver, thread_id, first, 1, {}, {}, v=1)
    head = await _put(saver, thread_id, second, 2, {}, {}, v=1)
    await _call(saver, "put_writes", second, [(TASKS, "send-2")], str(uuid4()))

    await _call(saver, "prune", [thread_id])

    assert (await _rows(saver, thread_id))["checkpoints"] == [
        ("", second["configurable"]["checkpoint_id"]),
        ("", head["configurable"]["checkpoint_id"]),
    ]
    loaded = await _call(saver, "get_tuple", head)
    if backend.is_postgres:  # the official PostgresSaver reads a pre-v4 head's sends from its parent; SqliteSaver never
        assert loaded.checkpoint["channel_values"][TASKS] == ["send-2"]
    assert [w[2] for w in (await _call(saver, "get_tuple", second)).pending_writes] == ["send-2"]
    assert loaded.parent_config["configurable"]["checkpoint_id"] == second["configurable"]["checkpoint_id"]
    assert (await _call(saver, "get_tuple", second)).parent_config is None


async def test_delete_removes_every_row_of_the_threads(saver: Any) -> None:
    ordinary_id, delta_id, other_id = str(uuid4()), str(uuid4()), str(uuid4())
    await _three_checkpoints(saver, ordinary_id)
    await _delta_thread(saver, delta_id, "counters")
    await _three_checkpoints(saver, other_id)
    other_before = await _rows(saver, other_id)

    await _call(saver, "prune", [ordinary_id, delta_id], strategy="delete")

    empty = {"checkpoints": [], "writes": [], "values": []}
    assert await _rows(saver, ordinary_id) == empty
    assert await _rows(saver, delta_id) == empty
    assert await _rows(saver, other_id) == other_before


async def test_unknown_strategy_changes_nothing(saver: Any) -> None:
    thread_id = str(uuid4())
    await _three_checkpoints(saver, thread_id)
    before = await _rows(saver, thread_id)

    with pytest.raises(ValueError, match="^Unknown prune strategy: 'keep_all'"):
        await _call(saver, "prune", [thread_id], strategy="keep_all")

    assert await _rows(saver, thread_id) == before


async def test_async_saver_prune_runs_from_another_thread_only(backend: Backend, saver: Any) -> None:
    if not backend.is_async:
        pytest.skip("an async saver's rule")
    thread_id = str(uuid4())
    head = await _three_checkpoints(saver, thread_id)

    with pytest.raises(asyncio.InvalidStateError):
        saver.prune([thread_id])
    await asyncio.to_thread(saver.prune, [thread_id])

    assert (await _rows(saver, thread_id))["checkpoints"] == [("", head["configurable"]["checkpoint_id"])]


@pytest.mark.parametrize("strategy", ["keep_latest", "delete"])
async def test_prune_rejects_a_single_thread_id_string(saver: Any, strategy: str) -> None:
    for thread_id in ("ab", "a", "b"):
        await _three_checkpoints(saver, thread_id)
    before = [await _rows(saver, t) for t in ("ab", "a", "b")]

    with pytest.raises(TypeError, match="not a str"):
        await _call(saver, "prune", "ab", strategy=strategy)

    assert [await _rows(saver, t) for t in ("ab", "a", "b")] == before


async def test_keep_latest_deletes_a_subgraph_call_with_the_checkpoint_it_started_from(saver: Any) -> None:
    thread_id = str(uuid4())
    older = await _put(saver, thread_id, None, 0, {}, {})
    head = await _put(saver, thread_id, older, 1, {}, {})
    unsaved = str(uuid6(clock_seq=2))
    started_from = {
        "finished:1": older["configurable"]["checkpoint_id"],
        "interrupted:2": head["configurable"]["checkpoint_id"],
        "running:3": unsaved,
        "checkpointer_true": older["configurable"]["checkpoint_id"],
    }
    for ns, root in started_from.items():
        await _three_checkpoints(saver, thread_id, ns, metadata={"parents": {"": root}})

    await _call(saver, "prune", [thread_id])

    rows = await _rows(saver, thread_id)
    assert {ns for ns, *_ in rows["checkpoints"]} == {"", "interrupted:2", "running:3", "checkpointer_true"}
    assert {ns for ns, *_ in rows["writes"]} == {"interrupted:2", "running:3", "checkpointer_true"}
    assert {ns for ns, *_ in rows["values"]} == {"interrupted:2", "running:3", "checkpointer_true"}


async def test_keep_latest_keeps_writes_saved_before_their_checkpoint(saver: Any) -> None:
    thread_id = str(uuid4())
    head = await _three_checkpoints(saver, thread_id)
    next_id = str(uuid6(clock_seq=3))
    next_config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": next_id}}
    await _call(saver, "put_writes", next_config, [("a", 4)], str(uuid4()))

    await _call(saver, "prune", [thread_id])
    await _put(saver, thread_id, head, 3, {}, {"a": "3", "s": "1"}, checkpoint_id=next_id)

    loaded = await _call(saver, "get_tuple", next_config)
    assert [value for _, _, value in loaded.pending_writes] == [4]
