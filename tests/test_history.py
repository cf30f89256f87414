"""threadline.read on databases written by real LangGraph runs (SQLite and Postgres)."""

from __future__ import annotations

import time

import pytest
from langchain_core.messages import AIMessage, RemoveMessage

from lifecycle_graphs import build_graph, cfg, populate
from threadline import NotFoundError, open_saver
from threadline import read as H
from threadline import lifecycle as L


def snapshot_next(g, thread_id, checkpoint_id=None):
    conf = {"thread_id": thread_id}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return g.get_state({"configurable": conf})


def test_threads_listing_filters_and_paging(db):
    backend, _ = db
    url = backend.url
    with open_saver(url) as saver:
        page = H.list_threads(saver)
        assert page.total == 3 and page.next_offset is None
        assert [t.thread_id for t in page.threads] == ["t-interrupt", "t-answer", "t-research"]  # most recent first
        g = build_graph(saver)
        for t in page.threads:
            snap = g.get_state(cfg(t.thread_id))
            assert t.head_checkpoint_id == snap.config["configurable"]["checkpoint_id"]
            assert t.head_step == snap.metadata["step"]
            assert t.bytes > 0 and t.checkpoint_count > 0 and t.created_at <= t.updated_at
        research = next(t for t in page.threads if t.thread_id == "t-research")
        assert research.checkpoint_count == backend.sql("SELECT COUNT(*) FROM threadline_checkpoints WHERE thread_id = ?", ("t-research",))[0][0]
        assert [t.thread_id for t in H.list_threads(saver, metadata={"user": "ada"}).threads] == ["t-answer"]
        assert H.list_threads(saver, metadata={"user": "nobody"}).total == 0
        assert H.list_threads(saver, idle_for=3600).total == 0
        assert H.list_threads(saver, idle_for=3600, now=time.time() + 7200).total == 3
        assert H.list_threads(saver, active_within=3600).total == 3
        first = H.list_threads(saver, limit=2)
        assert len(first.threads) == 2 and first.next_offset == 2
        rest = H.list_threads(saver, limit=2, offset=first.next_offset)
        assert [t.thread_id for t in rest.threads] == ["t-research"] and rest.next_offset is None
        by_size = H.list_threads(saver, order_by="bytes")
        assert by_size.threads[0].thread_id == "t-research"
        with pytest.raises(ValueError):
            H.list_threads(saver, limit=0)


def test_history_tree_shows_branches_writers_and_subgraphs(db):
    backend, facts = db
    url = backend.url
    with open_saver(url) as saver:
        h = H.thread_history(saver, "t-research", include_subgraphs=True)
        root = h.nodes[""]
        assert h.fork_points == [facts["fork_point"]]
        fork = root[facts["fork_point"]]
        assert len(fork.children) == 2 and all(root[c].source == "input" for c in fork.children)
        assert root[h.head].is_head and root[h.head].on_head_path
        # exactly one branch is on the head's path
        assert sum(root[c].on_head_path for c in fork.children) == 1
        # the parallel fan-out step was written by both search nodes
        assert any(n.writers == ["search_a", "search_b"] for n in root.values())
        assert all(n.writers == ["__input__"] for n in root.values() if n.source == "input")
        # parent links form the tree
        for n in root.values():
            assert n.parent_checkpoint_id is None or n.checkpoint_id in root[n.parent_checkpoint_id].children
        # three runs of the `review` subgraph, each anchored under the root checkpoint it started from
        subs = [ns for ns in h.nodes if ns]
        assert len(subs) == 3 and all(ns.startswith("review:") for ns in subs)
        anchored = [s for n in root.values() for s in n.subgraphs]
        assert sorted(anchored) == sorted(subs)
        for n in root.values():
            for s in n.subgraphs:
                assert "review" in [w for c in n.children for w in root[c].writers]
        assert H.thread_history(saver, "t-research").nodes.keys() == {""}
        with pytest.raises(NotFoundError):
            H.thread_history(saver, "no-such-thread")


def test_state_at_matches_langgraph_get_state_everywhere(db):
    backend, _ = db
    url = backend.url
    with open_saver(url) as saver:
        g = build_graph(saver)
        for tid in ("t-research", "t-answer", "t-interrupt"):
            for snap in g.get_state_history(cfg(tid)):
                cid = snap.config["configurable"]["checkpoint_id"]
                view = H.state_at(saver, tid, cid)
                # LangGraph also shows never-written reducer channels at their default (hits: 0); storage has no value
                assert H.jsonable(view.values) == H.jsonable({k: v for k, v in snap.values.items() if k in view.values}), (tid, cid)
                assert all(not snap.values[k] for k in snap.values if k not in view.values), (tid, cid)
                assert view.next == sorted(snap.next, key=lambda n: (n != "__start__", n)), (tid, cid, view.next, snap.next)
                assert view.computed_by == "stored" and not view.pending_applied
            head = H.state_at(saver, tid)
            live = g.get_state(cfg(tid))
            assert head.is_head and head.checkpoint_id == live.config["configurable"]["checkpoint_id"]
            assert list(head.next) == list(live.next)
            assert [i["id"] for i in head.interrupts] == [i.id for i in live.interrupts]
            with_graph = H.state_at(saver, tid, graph=build_graph())
            assert H.jsonable(with_graph.values) == H.jsonable(live.values)
            assert with_graph.computed_by == "graph"
        interrupted = H.state_at(saver, "t-interrupt")
        assert interrupted.next == ["approve"]
        assert interrupted.interrupts and interrupted.interrupts[0]["value"] == {"question": "approve the answer?"}
        assert [w.channel for w in interrupted.pending_writes] == ["__interrupt__"]
        assert interrupted.pending_writes[0].node == "approve" and interrupted.pending_writes[0].idx == -3
        with pytest.raises(NotFoundError):
            H.state_at(saver, "t-answer", "1f000000-0000-6000-8000-000000000000")


def test_state_at_head_applies_finished_writes_only_with_the_graph(tmp_path):
    # seed 003: a finished task's pending writes are folded into the LATEST state only
    with open_saver(str(tmp_path / "x.db")) as saver:
        populate(saver)
        g = build_graph(saver)
        head = g.get_state(cfg("t-interrupt"))
        approve_task = head.tasks[0].id
        saver.put_writes(head.config, [("notes", {"manual": 1})], approve_task, "~__pregel_pull, approve")
        stored = H.state_at(saver, "t-interrupt")
        assert "manual" not in stored.values["notes"] and not stored.pending_applied
        assert stored.next == ["approve"]  # it also raised an interrupt: still waiting
        applied = H.state_at(saver, "t-interrupt", graph=build_graph())
        assert applied.values["notes"]["manual"] == 1 and applied.pending_applied
        assert applied.values == dict(g.get_state(cfg("t-interrupt")).values)
        historical = H.state_at(saver, "t-interrupt", stored.checkpoint_id, graph=build_graph())
        assert "manual" not in historical.values["notes"] and not historical.pending_applied


def test_diff_messages_by_id_and_dicts_by_key(db):
    backend, facts = db
    url = backend.url
    with open_saver(url) as saver:
        g = build_graph(saver)
        before = g.get_state(cfg("t-answer"))
        msgs = before.values["messages"]
        g.update_state(cfg("t-answer"), {"messages": [AIMessage(content="edited answer", id=msgs[1].id), RemoveMessage(id=msgs[2].id),
                                                      AIMessage(content="new", id="ai-new")],
                                         "notes": {"extra": 1, "classified": "changed"}})
        after = g.get_state(cfg("t-answer"))
        d = H.diff(saver, "t-answer", before.config["configurable"]["checkpoint_id"], after.config["configurable"]["checkpoint_id"])
        m = d.channels["messages"]["messages"]
        assert [x["id"] for x in m["added"]] == ["ai-new"]
        assert [e["id"] for e in m["edited"]] == [msgs[1].id] and m["edited"][0]["after"]["content"] == "edited answer"
        assert [x["id"] for x in m["removed"]] == [msgs[2].id]
        keys = d.channels["notes"]["keys"]
        assert keys["added"] == {"extra": 1} and keys["changed"]["classified"]["after"] == "changed" and keys["removed"] == {}
        assert "route" in d.unchanged and "route" not in d.channels  # same version: never decoded
        # across the fork: the two branch heads differ in messages and route
        h = H.thread_history(saver, "t-research")
        a, b = h.nodes[""][facts["fork_point"]].children
        leaf = {c: c for c in (a, b)}
        for c in list(leaf):
            cur = c
            while h.nodes[""][cur].children:
                cur = h.nodes[""][cur].children[0]
            leaf[c] = cur
        d2 = H.diff(saver, "t-research", leaf[a], leaf[b])
        assert d2.channels["route"] == {"kind": "changed", "before": "answer", "after": "research"}
        assert d2.channels["messages"]["messages"]["added"] and d2.channels["messages"]["messages"]["removed"]
        same = H.diff(saver, "t-research", leaf[a], leaf[a])
        assert same.channels == {}
    assert H.diff_values({"x": 1}, {"y": 2}) == {"x": {"kind": "removed", "before": 1}, "y": {"kind": "added", "after": 2}}


def test_audit_writes_in_execution_order_and_task_stats(db):
    backend, _ = db
    url = backend.url
    with open_saver(url) as saver:
        h = H.thread_history(saver, "t-research")
        fan_out = next(n for n in h.ordered() if n.children and h.nodes[""][n.children[0]].writers == ["search_a", "search_b"])
        writes = H.audit(saver, "t-research", fan_out.checkpoint_id)
        assert {w.node for w in writes} == {"search_a", "search_b"}
        assert [w.created_at for w in writes] == sorted(w.created_at for w in writes)
        for node in ("search_a", "search_b"):
            assert [w.idx for w in writes if w.node == node] == [0, 1, 2]
        raw = backend.sql("SELECT task_id, idx, length(blob) FROM threadline_writes WHERE thread_id = ? AND checkpoint_id = ?",
                      ("t-research", fan_out.checkpoint_id))
        assert sorted((r[0], r[1], r[2] or 0) for r in raw) == sorted((w.task_id, w.idx, w.bytes) for w in writes)
        assert len(H.audit(saver, "t-research")) == backend.sql("SELECT COUNT(*) FROM threadline_writes WHERE thread_id = ? AND checkpoint_ns = ''",
                                                               ("t-research",))[0][0]
        everything = H.audit(saver, "t-research", checkpoint_ns=None)
        assert any(w.checkpoint_ns.startswith("review:") for w in everything)
        one = H.task_stats(saver, "t-research", fan_out.checkpoint_id)
        assert {t.node for t in one.tasks} == {"search_a", "search_b"}
        assert one.writes == 6 and one.blobs > 0 and one.new_blobs_bytes is not None
        whole = H.task_stats(saver)
        total = backend.sql("SELECT COUNT(*), SUM(COALESCE(length(blob), 0)) FROM threadline_writes WHERE checkpoint_ns = ''")[0]
        assert whole.writes == total[0] and whole.writes_bytes == total[1]
        assert sum(t.writes for t in whole.tasks) == whole.writes
        classify = next(t for t in whole.tasks if t.node == "classify")
        assert classify.tasks == 5 and classify.avg_bytes == round(classify.total_bytes / classify.writes, 1)
        assert H.task_stats(saver, since=time.time() + 60).writes == 0


def test_latest_value_resolves_through_heads_after_rollback(db):
    backend, facts = db
    url = backend.url
    with open_saver(url) as saver:
        g = build_graph(saver)
        got = {r.thread_id: r for r in H.latest_values(saver, "messages")}
        assert set(got) == {"t-research", "t-answer", "t-interrupt"}
        for tid, r in got.items():
            assert H.jsonable(r.value) == H.jsonable(g.get_state(cfg(tid)).values["messages"]) or tid == "t-interrupt"
        # roll t-research back to the end of its first turn: the head references an OLDER messages version
        L.rollback(saver, "t-research", facts["fork_point"])
        newest = backend.sql("SELECT MAX(version) FROM threadline_blobs WHERE thread_id = ? AND channel = 'messages' AND checkpoint_ns = ''",
                         ("t-research",))[0][0]
        r = H.latest_values(saver, "messages", ["t-research"])[0]
        assert r.version != newest
        assert H.jsonable(r.value) == H.jsonable(g.get_state(cfg("t-research")).values["messages"])
        assert [m["content"] for m in H.jsonable(r.value)] == ["what is a checkpoint?", "research done: 5 hits", "draft reviewed"]
        assert H.latest_values(saver, "approved", ["t-interrupt"])[0].present is False
        assert H.latest_values(saver, "messages", ["nope"]) == []
        assert len(H.latest_values(saver, "messages", limit=1)) == 1


def test_stats_counts_bytes_and_dedup(db):
    backend, _ = db
    url = backend.url
    with open_saver(url) as saver:
        s = H.stats(saver, top=2)
    for table in ("checkpoints", "blobs", "writes"):
        assert s.tables[table]["rows"] == backend.sql(f"SELECT COUNT(*) FROM threadline_{table}")[0][0]
    assert s.tables["blobs"]["bytes"] == backend.sql("SELECT COALESCE(SUM(length(blob)), 0) FROM threadline_blobs")[0][0]
    by_size = [r[0] for r in backend.sql("SELECT thread_id FROM threadline_threads ORDER BY bytes DESC, thread_id")]
    assert s.threads == 3 and [t.thread_id for t in s.top_threads] == by_size[: len(s.top_threads)]
    assert s.references > s.tables["blobs"]["rows"] and s.dedup_ratio > 1
    assert s.logical_blob_bytes > s.tables["blobs"]["bytes"] and s.bytes_dedup_ratio > 1
    assert s.sources["input"] == 10 and s.namespaces == 8


async def test_read_models_run_on_async_savers(tmp_path):
    from threadline import aopen_saver

    url = str(tmp_path / "a.db")
    with open_saver(url) as saver:
        populate(saver)
    async with aopen_saver(url) as saver:
        page = await saver.arun(H.threads_op(saver.dialect))
        assert page.total == 3
        tree = await saver.arun(H.history_op(saver.dialect, "t-research"))
        assert tree.fork_points
        latest = await saver.arun(H.latest_op(saver.dialect, saver.serde, "route", ["t-answer"]))
        assert latest[0].value == "answer"
        head = (await saver.arun(H.history_op(saver.dialect, "t-answer"))).head
        parent = (await saver.arun(H.history_op(saver.dialect, "t-answer"))).nodes[""][head].parent_checkpoint_id
        r = await saver.arun(L.rollback_op(saver.dialect, saver.serde, "t-answer", parent), write=True)
        assert r.parent_checkpoint_id == parent
        plan = await saver.arun(L.prune_thread_op(saver.dialect, "t-answer", L.RetentionPolicy(keep_last=2), dry_run=True))
        assert plan.checkpoints and not plan.executed
