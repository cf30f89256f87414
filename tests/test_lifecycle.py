"""threadline.lifecycle on databases written by real LangGraph runs (SQLite and Postgres):
rollback and fork are resumable by LangGraph, delete/prune never break what is kept,
fsck finds and safely repairs damage, rebuild recomputes values from writes."""

from __future__ import annotations

import time
from typing import Annotated, TypedDict

import pytest
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from lifecycle_graphs import build_graph, cfg, graph, human
from threadline import NotFoundError, UnsafeOperationError, open_saver
from threadline import read as H
from threadline import lifecycle as L
from threadline.errors import ConfigError


def count(backend, table, where="", params=()):
    return backend.sql(f"SELECT COUNT(*) FROM threadline_{table} {where}", params)[0][0]


def every_tuple(saver):
    """Every checkpoint's full tuple (values and pending writes), as comparable data."""
    out = {}
    for t in saver.list(None):
        c = t.config["configurable"]
        out[(c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])] = (
            H.jsonable(t.checkpoint["channel_values"]),
            H.jsonable(t.pending_writes),
            t.parent_config and t.parent_config["configurable"]["checkpoint_id"],
        )
    return out


def step_checkpoint(saver, thread_id, step, *, on_head_path=True):
    h = H.thread_history(saver, thread_id)
    return next(n for n in h.ordered() if n.step == step and n.on_head_path == on_head_path).checkpoint_id


def test_rollback_is_a_new_branch_sharing_blobs_and_langgraph_resumes(db):
    backend, facts = db
    url = backend.url
    with open_saver(url) as saver:
        g = build_graph(saver)
        target = step_checkpoint(saver, "t-research", 1)  # after classify: next = search_a, search_b
        blobs, checkpoints = count(backend, "blobs"), count(backend, "checkpoints")
        old_head = H.state_at(saver, "t-research").checkpoint_id
        r = L.rollback(saver, "t-research", target)
        assert count(backend, "blobs") == blobs and count(backend, "checkpoints") == checkpoints + 1  # no blob copied, nothing deleted
        assert r.parent_checkpoint_id == target and r.previous_head == old_head and r.blobs_copied == 0
        docs = dict(backend.sql("SELECT checkpoint_id, checkpoint FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_id IN (?, ?)",
                            ("t-research", target, r.checkpoint_id)))
        import json

        a, b = (json.loads(docs[k]) if isinstance(docs[k], str) else docs[k] for k in (target, r.checkpoint_id))
        assert a["channel_versions"] == b["channel_versions"] and a["versions_seen"] == b["versions_seen"]
        snap = g.get_state(cfg("t-research"))
        assert snap.config["configurable"]["checkpoint_id"] == r.checkpoint_id
        assert snap.next == ("search_a", "search_b")
        assert snap.metadata["threadline_op"] == "rollback" and snap.metadata["forked_from"]["checkpoint_id"] == target
        # the old branch is still there
        h = H.thread_history(saver, "t-research")
        assert old_head in h.nodes[""] and len(h.nodes[""][target].children) == 2
        # LangGraph continues from the rollback head: re-runs the fan-out, reaches the first turn's end state again
        out = g.invoke(None, cfg("t-research"))
        expected = H.state_at(saver, "t-research", facts["fork_point"]).values
        assert H.jsonable(out) == H.jsonable(expected)
        assert g.get_state(cfg("t-research")).next == ()
        # a new turn continues the rolled-back conversation
        out = g.invoke(human("one more?", "h9"), cfg("t-research"))
        assert [m.id for m in out["messages"]][:2] == ["h1", "ai-research-1"] and out["messages"][-3].id == "h9"
        with pytest.raises(NotFoundError):
            L.rollback(saver, "t-research", "1f000000-0000-6000-8000-000000000000")


def test_rollback_of_an_interrupted_checkpoint_then_resume(db):
    backend, _ = db
    url = backend.url
    with open_saver(url) as saver:
        g = build_graph(saver)
        head = g.get_state(cfg("t-interrupt"))
        # finish the interrupted run, then roll back to the interrupted checkpoint and answer differently
        g.invoke(Command(resume=True), cfg("t-interrupt"))
        assert g.get_state(cfg("t-interrupt")).values["approved"] is True
        L.rollback(saver, "t-interrupt", head.config["configurable"]["checkpoint_id"])
        assert g.get_state(cfg("t-interrupt")).next == ("approve",)
        g.invoke(None, cfg("t-interrupt"))  # re-runs approve: interrupts again
        assert g.get_state(cfg("t-interrupt")).interrupts
        out = g.invoke(Command(resume=False), cfg("t-interrupt"))
        assert out["approved"] is False and out["notes"]["decision"] is False


def test_fork_starts_a_new_resumable_thread_and_leaves_the_source_alone(db):
    backend, _ = db
    url = backend.url
    with open_saver(url) as saver:
        g = build_graph(saver)
        source_rows = backend.sql("SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id FROM threadline_checkpoints WHERE thread_id = ? "
                                   "ORDER BY 1, 2", ("t-answer",))
        target = step_checkpoint(saver, "t-answer", 1)  # after classify: next = answer
        r = L.fork(saver, "t-answer", target, "t-copy")
        assert r.thread_id == "t-copy" and r.parent_checkpoint_id is None and r.blobs_copied > 0
        assert count(backend, "checkpoints", "WHERE thread_id = ?", ("t-copy",)) == 1
        assert source_rows == backend.sql("SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id FROM threadline_checkpoints "
                                           "WHERE thread_id = ? ORDER BY 1, 2", ("t-answer",))
        copy = g.get_state(cfg("t-copy"))
        original = g.get_state({"configurable": {"thread_id": "t-answer", "checkpoint_id": target}})
        assert copy.values == original.values and copy.next == original.next == ("answer",)
        assert copy.metadata["user"] == "ada"  # user metadata is carried
        out = g.invoke(None, cfg("t-copy"))
        assert H.jsonable(out) == H.jsonable(g.get_state(cfg("t-answer")).values)
        assert [t.thread_id for t in H.list_threads(saver, thread_ids=["t-copy"]).threads] == ["t-copy"]
        with pytest.raises(UnsafeOperationError):
            L.fork(saver, "t-answer", target, "t-copy")
        with pytest.raises(ConfigError):
            L.fork(saver, "t-answer", target, "t-answer")
        assert L.fsck(saver).ok


def test_delete_checkpoint_refuses_with_children_and_handles_them_when_told(db):
    backend, facts = db
    url = backend.url
    with open_saver(url) as saver:
        before = every_tuple(saver)
        fork_point = facts["fork_point"]
        with pytest.raises(UnsafeOperationError, match="with_descendants"):
            L.delete_checkpoint(saver, "t-research", fork_point)
        # dry run: nothing changes
        plan = L.delete_checkpoint(saver, "t-research", fork_point, mode="reparent", dry_run=True)
        assert not plan.executed and every_tuple(saver) == before
        assert plan.checkpoints == [("", fork_point)] and len(plan.reparented) == 2
        done = L.delete_checkpoint(saver, "t-research", fork_point, mode="reparent")
        assert done.executed and done.bytes_freed == plan.bytes_freed
        after = every_tuple(saver)
        gone = {k for k in before if k not in after}
        assert gone == {("t-research", "", fork_point)}
        parent = before[("t-research", "", fork_point)][2]
        for key, (values, writes, par) in after.items():
            old = before[key]
            assert (values, writes) == old[:2], key  # every kept state unchanged
            assert par == (parent if old[2] == fork_point else old[2])
        assert L.fsck(saver).ok
        # delete a subtree: the branch that was made by time travel, including its subgraph run
        h = H.thread_history(saver, "t-research", include_subgraphs=True)
        branch = next(c for c, n in h.nodes[""].items() if n.parent_checkpoint_id == parent and not n.on_head_path)
        subtree = {branch}
        todo = [branch]
        while todo:
            c = todo.pop()
            subtree |= set(h.nodes[""][c].children)
            todo += h.nodes[""][c].children
        subs = {ns for c in subtree for ns in h.nodes[""][c].subgraphs}
        assert subs
        plan = L.delete_checkpoint(saver, "t-research", branch, mode="with_descendants")
        deleted = set(plan.checkpoints)
        assert {("", c) for c in subtree} <= deleted and {ns for ns, _ in deleted if ns} == subs
        assert plan.blobs > 0 and plan.writes > 0
        assert count(backend, "checkpoints", "WHERE thread_id = ? AND checkpoint_ns IN (" + ",".join("?" * len(subs)) + ")",
                     ("t-research", *subs)) == 0
        remaining = every_tuple(saver)
        assert all(remaining[k][:2] == before[k][:2] for k in remaining if k in before)
        assert L.fsck(saver, deep=True).ok
        th = H.list_threads(saver, thread_ids=["t-research"]).threads[0]
        assert th.checkpoint_count == count(backend, "checkpoints", "WHERE thread_id = ?", ("t-research",))
        # deleting the head moves the head back one step
        head = H.state_at(saver, "t-answer")
        L.delete_checkpoint(saver, "t-answer", head.checkpoint_id)
        assert H.state_at(saver, "t-answer").checkpoint_id == head.parent_checkpoint_id
        with pytest.raises(ConfigError):
            L.delete_checkpoint(saver, "t-answer", head.parent_checkpoint_id, mode="sideways")


def _branches(tree):
    """Each branch of the root namespace as its checkpoint_ids, head first, back to a root."""
    nodes = tree.nodes[""]
    out = []
    for head in (cid for cid, n in nodes.items() if not n.children):
        path, cur = [], head
        while cur in nodes:
            path.append(cur)
            cur = nodes[cur].parent_checkpoint_id
        out.append(path)
    return out


def test_prune_policies_dry_run_then_apply_keep_everything_readable(db):
    backend, facts = db
    url = backend.url
    with open_saver(url) as saver:
        g = build_graph(saver)
        before = every_tuple(saver)
        heads = {t: H.jsonable(g.get_state(cfg(t)).values) for t in ("t-research", "t-answer", "t-interrupt")}
        policy = L.RetentionPolicy(keep_last=3)
        dry = L.prune(saver, policy, dry_run=True)
        assert every_tuple(saver) == before and dry.checkpoints > 0 and dry.bytes_freed > 0
        size_before = sum(t.bytes for t in H.list_threads(saver).threads)
        seen = []
        real = L.prune(saver, policy, progress=lambda done, total, tid: seen.append((done, total, tid)))
        assert seen[-1][0] == seen[-1][1] == 3
        assert real.checkpoints == dry.checkpoints and real.bytes_freed == dry.bytes_freed
        assert {p.thread_id: p.checkpoints for p in real.plans} == {p.thread_id: p.checkpoints for p in dry.plans}
        size_after = sum(t.bytes for t in H.list_threads(saver).threads)
        # threads.bytes counts value payloads (blobs, writes); bytes_freed also counts checkpoint rows
        assert 0 < size_before - size_after < real.bytes_freed
        for t in ("t-answer", "t-interrupt"):
            assert count(backend, "checkpoints", "WHERE thread_id = ? AND checkpoint_ns = ''", (t,)) == 3
        for t in heads:
            assert H.jsonable(g.get_state(cfg(t)).values) == heads[t]
        # t-research has two branches (time travel): the newest 3 of each; the fork point is far behind both
        tree = H.thread_history(saver, "t-research")
        assert len(tree.ordered()) == 6 and facts["fork_point"] not in tree.nodes[""]
        assert sorted(len(path) for path in _branches(tree)) == [3, 3]
        after = every_tuple(saver)
        for key, (values, writes, parent) in after.items():
            assert (values, writes) == before[key][:2], key
        assert L.fsck(saver, deep=True).ok
        # the interrupted thread still resumes
        assert g.invoke(Command(resume=True), cfg("t-interrupt"))["approved"] is True
        # older_than: age two checkpoints; the head is never removed
        ids = [n.checkpoint_id for n in H.thread_history(saver, "t-answer").ordered()]
        backend.sql("UPDATE threadline_checkpoints SET created_at = ? WHERE thread_id = ?", (time.time() - 10 * 86400, "t-answer"))
        aged = L.prune(saver, L.RetentionPolicy(older_than=86400), thread_ids=["t-answer"])
        assert [cid for ns, cid in aged.plans[0].checkpoints if ns == ""] == ids[:-1]
        assert [n.checkpoint_id for n in H.thread_history(saver, "t-answer").ordered()] == ids[-1:]
        assert H.jsonable(g.get_state(cfg("t-answer")).values) == heads["t-answer"]
        # idle: whole threads go
        backend.sql("UPDATE threadline_threads SET updated_at = ? WHERE thread_id = ?", (time.time() - 100 * 86400, "t-answer"))
        idle_dry = L.prune(saver, L.RetentionPolicy(idle_longer_than=30 * 86400), dry_run=True)
        assert idle_dry.threads_deleted == ["t-answer"]
        L.prune(saver, L.RetentionPolicy(idle_longer_than=30 * 86400))
        for table in ("checkpoints", "blobs", "writes", "threads"):
            assert count(backend, table, "WHERE thread_id = ?", ("t-answer",)) == 0
        assert L.fsck(saver).ok
        with pytest.raises(ConfigError):
            L.RetentionPolicy()


def test_fsck_finds_damage_repairs_the_safe_part_and_rebuild_restores_blobs(db):
    backend, _ = db
    url = backend.url
    with open_saver(url) as saver:
        assert L.fsck(saver, deep=True).ok
        h = H.thread_history(saver, "t-answer")
        nodes = h.ordered()
        victim = nodes[2]  # a loop checkpoint: its `messages` blob will go missing
        victim_state = H.state_at(saver, "t-answer", victim.checkpoint_id)
        doc = victim_state.channel_versions
        backend.sql("DELETE FROM threadline_blobs WHERE thread_id = ? AND channel = 'messages' AND version = ?", ("t-answer", doc["messages"]))
        backend.sql("INSERT INTO threadline_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, blob, created_at) "
                     "VALUES (?, '', ?, 't', 0, 'x', '', 'null', NULL, 0)", ("t-answer", "1f000000-dead-6000-8000-000000000000"))
        backend.sql("INSERT INTO threadline_blobs (thread_id, checkpoint_ns, channel, version, type, blob, base_version) "
                     "VALUES (?, '', 'junk', '1', 'null', NULL, NULL)", ("t-answer",))
        backend.sql("UPDATE threadline_checkpoints SET parent_checkpoint_id = ?, checksum = NULL WHERE thread_id = ? AND checkpoint_id = ?",  # a row written before checksums
                ("1f000000-0000-6000-8000-00000000beef", "t-interrupt", H.thread_history(saver, "t-interrupt").ordered()[3].checkpoint_id))
        backend.sql("UPDATE threadline_threads SET checkpoint_count = 99 WHERE thread_id = ?", ("t-research",))
        backend.sql("INSERT INTO threadline_blobs (thread_id, checkpoint_ns, channel, version, type, blob, base_version) "
                     "VALUES ('ghost', '', 'x', '1', 'null', NULL, NULL)")
        report = L.fsck(saver)
        kinds = {(f.kind, f.thread_id) for f in report.findings}
        assert ("dangling_blob", "t-answer") in kinds and ("orphan_writes", "t-answer") in kinds
        assert ("orphan_blobs", "t-answer") in kinds and ("broken_parent", "t-interrupt") in kinds
        assert ("thread_index", "t-research") in kinds and ("orphan_blobs", "ghost") in kinds
        assert not report.ok and not any(f.repaired for f in report.findings)
        dangling = [f for f in report.findings if f.kind == "dangling_blob"]
        assert {f.checkpoint_id for f in dangling} >= {victim.checkpoint_id} and not any(f.repairable for f in dangling)
        repaired = L.fsck(saver, repair=True)
        assert all(f.repaired for f in repaired.findings if f.repairable)
        left = L.fsck(saver)
        assert {f.kind for f in left.findings} == {"dangling_blob"}
        assert count(backend, "blobs", "WHERE thread_id = 'ghost'") == 0
        assert count(backend, "writes", "WHERE checkpoint_id = '1f000000-dead-6000-8000-000000000000'") == 0
        # recovery from writes (seed 000): recompute the missing blob and put it back
        r = L.rebuild(saver, graph, "t-answer", victim.checkpoint_id)
        assert r.missing == ["messages"] and not r.differs and not r.restored
        r = L.rebuild(saver, graph, "t-answer", victim.checkpoint_id, apply=True)
        assert r.restored == ["messages"]
        assert L.fsck(saver, deep=True).ok
        g = build_graph(saver)
        restored = g.get_state(cfg("t-answer", checkpoint_id=victim.checkpoint_id)).values["messages"]
        assert H.jsonable(restored) == H.jsonable(victim_state.values["messages"]) and restored


def test_rebuild_recomputes_every_loop_checkpoint_exactly(db):
    backend, _ = db
    url = backend.url
    with open_saver(url) as saver:
        checked = 0
        for tid in ("t-research", "t-answer", "t-interrupt"):
            h = H.thread_history(saver, tid, include_subgraphs=True)
            for n in h.ordered(""):
                if n.source != "loop":
                    with pytest.raises(UnsafeOperationError):
                        L.rebuild(saver, graph, tid, n.checkpoint_id)
                    continue
                r = L.rebuild(saver, graph, tid, n.checkpoint_id)
                assert not r.differs and not r.missing, (tid, n.step, r.differs)
                assert "messages" in r.matches or n.step == 0
                checked += 1
        assert checked >= 20


def _extend(state, batches):
    out = list(state or [])
    for b in batches:
        out.extend(b)
    return out


class DeltaState(TypedDict, total=False):
    log: Annotated[list, DeltaChannel(_extend, snapshot_frequency=50)]


def _delta_graph(saver):
    def step(state):
        return {"log": [len(state.get("log") or [])]}

    b = StateGraph(DeltaState)
    b.add_node("step", step)
    b.add_edge(START, "step")
    b.add_edge("step", END)
    return b.compile(checkpointer=saver)


def test_delta_channel_rollback_is_a_sibling_and_prune_keeps_delta_ancestors(tmp_path):
    with open_saver(str(tmp_path / "d.db")) as saver:
        g = _delta_graph(saver)
        for _ in range(4):
            g.invoke({"log": ["in"]}, cfg("d"))
        full = g.get_state(cfg("d")).values["log"]
        hist = list(g.get_state_history(cfg("d")))
        if not any(s.metadata.get("counters_since_delta_snapshot") for s in hist):
            pytest.skip("this LangGraph version snapshots DeltaChannel values every step")
        target = hist[3]
        r = L.rollback(saver, "d", target.config["configurable"]["checkpoint_id"])
        assert r.parent_checkpoint_id == (target.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        assert g.get_state(cfg("d")).values == target.values
        L.prune(saver, L.RetentionPolicy(keep_last=1))
        assert g.get_state(cfg("d")).values == target.values  # the delta ancestors were kept
        assert len(full) > len(target.values["log"])
        assert L.fsck(saver).ok
        with pytest.raises(UnsafeOperationError):
            L.fork(saver, "d", r.checkpoint_id, "d2")
