"""The one rule of what keeps a checkpoint readable (threadline.storage.liveness), alone and
as every caller applies it: prune(keep_latest), lifecycle's plans and the DeltaChannel history."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph

from threadline import SqliteSaver
from threadline.lifecycle.thread import _load_thread_op
from threadline.storage.liveness import Lineage, delta_channels, live_blobs

# One namespace "": a ← b ← c ← d (d newest). Channel "log" has a stored value at a and c.
PARENTS = {("", "a"): None, ("", "b"): "a", ("", "c"): "b", ("", "d"): "c"}
VERSIONS = {
    ("", "a"): {"log": 1, "other": 1},
    ("", "b"): {"log": 2, "other": 1},
    ("", "c"): {"log": 3, "other": 1},
    ("", "d"): {"log": 4, "other": 1},
}
STORED = {("", "log", "1"), ("", "log", "3"), ("", "other", "1")}


def lineage(parents=PARENTS, stored=STORED) -> Lineage:
    return Lineage(parents, VERSIONS.__getitem__, stored)


def test_walk_stops_at_the_nearest_ancestor_storing_the_value_and_includes_it() -> None:
    assert lineage().walk("", "c", "log") == (["c"], "3")
    assert lineage().walk("", "b", "log") == (["b", "a"], "1")


def test_walk_without_a_stored_value_reaches_the_root() -> None:
    assert lineage(stored=set()).walk("", "c", "log") == (["c", "b", "a"], None)
    assert lineage().walk("", None, "log") == ([], None)


def test_walk_ends_at_a_parent_that_is_not_stored_and_at_a_cycle() -> None:
    assert lineage({k: v for k, v in PARENTS.items() if k != ("", "a")}).walk("", "b", "log") == (["b"], None)
    looped = {**PARENTS, ("", "a"): "c"}  # a corrupted parent link: a → c → b → a
    assert lineage(looped, stored=set()).walk("", "c", "log") == (["c", "b", "a"], None)


def test_needs_is_every_delta_channel_walk_and_ignores_what_is_not_a_mapping() -> None:
    meta = {"counters_since_delta_snapshot": {"log": 1, "other": 1}}
    assert delta_channels(meta) == ["log", "other"]
    assert lineage().needs("", "c", meta) == {"c"}
    assert lineage().needs("", "b", meta) == {"b", "a"}
    assert lineage().needs("", "c", {"counters_since_delta_snapshot": ["log"]}) == set()
    assert lineage().needs("", "c", {}) == set()


def test_live_blobs_follow_delta_bases_transitively() -> None:
    bases = {("", "log", "3"): "2", ("", "log", "2"): "1", ("", "log", "1"): None, ("", "log", "9"): None, ("", "x", "5"): "4"}
    live = live_blobs([("", "log", "3"), ("", "x", "5")], bases)
    assert live == {("", "log", "3"), ("", "log", "2"), ("", "log", "1"), ("", "x", "5"), ("", "x", "4")}
    assert ("", "log", "9") not in live  # stored, referenced by nothing: garbage


class State(TypedDict, total=False):
    log: Annotated[list, DeltaChannel(operator.add, snapshot_frequency=3)]


def _graph(saver: SqliteSaver):
    b = StateGraph(State)
    b.add_node("step", lambda state: {"log": [len(state.get("log") or [])]})
    b.add_edge(START, "step")
    b.add_edge("step", END)
    return b.compile(checkpointer=saver)


def test_prune_lifecycle_and_delta_history_apply_the_same_rule(tmp_path) -> None:
    cfg = {"configurable": {"thread_id": "t"}}
    with SqliteSaver.from_conn_string(str(tmp_path / "l.db")) as saver:
        g = _graph(saver)
        for _ in range(5):
            g.invoke({"log": ["in"]}, cfg)
        head = saver.get_tuple(cfg)
        if not head.metadata.get("counters_since_delta_snapshot"):
            pytest.skip("this LangGraph version snapshots DeltaChannel values every step")
        t = saver.run(_load_thread_op(saver.dialect, "t"))
        head_id = head.config["configurable"]["checkpoint_id"]
        need = t.delta_requirements("", head_id)
        assert need  # the head rebuilds its value from ancestors' writes
        # get_delta_channel_history reads the writes of exactly those ancestors
        history = saver.get_delta_channel_history(config=head.config, channels=["log"])["log"]
        ancestors = [saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": c}}) for c in need]
        expected = sorted(repr(w[2]) for tup in ancestors for w in tup.pending_writes if w[1] == "log")
        assert expected and sorted(repr(w[2]) for w in history["writes"]) == expected
        values = g.get_state(cfg).values
        saver.prune(["t"], strategy="keep_latest")
        kept = {tup.config["configurable"]["checkpoint_id"] for tup in saver.list(cfg)}
        assert kept == {head_id} | need
        assert g.get_state(cfg).values == values
        after = saver.run(_load_thread_op(saver.dialect, "t"))
        assert set(after.blob_sizes) == after.live_blobs(after.rows)  # gc_blobs left exactly the live blobs
