"""Bulk state correction and a thread from a JSON state (issue 34 §8) on a real graph, SQLite
and Postgres: the preview writes nothing, apply writes one update checkpoint a thread, a rerun
is a no-op, an interrupted run resumes; the CLI's bad input is one line, exit 2."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage
from typer.testing import CliRunner

from life34_graphs import build, cfg, graph
from threadline.cli import app
from threadline.errors import ConfigError, NotFoundError
from threadline.lifecycle.bulk import MARK, bulk_edit, create_thread


def _threads(saver):
    g = build(saver)
    for tid, user in (("u-1", "ada"), ("u-2", "ada"), ("u-3", "bob")):
        g.invoke({"messages": [HumanMessage(content=f"hello {tid}", id=f"h-{tid}")]},
                 {"configurable": {"thread_id": tid, "user": user}})
    return g


@pytest.mark.parametrize("kind", ("sqlite", "postgres"))
def test_bulk_edit_previews_applies_once_and_resumes(kind, fresh_backend):
    b = fresh_backend(kind)
    with b.open() as saver:
        g = _threads(saver)
        edit = {"profile": {"plan": "pro"}, "labels": ["migrated"]}
        before = b.snapshot()
        preview = bulk_edit(saver, graph, edit, metadata={"user": "ada"})
        assert [(t.thread_id, t.status) for t in preview.threads] == [("u-1", "would edit"), ("u-2", "would edit")]
        assert preview.threads[0].changes == {"profile": "set", "labels": "+1 items"}
        assert b.snapshot() == before  # a preview writes nothing
        # interrupted after the first thread …
        def stop(done, total, tid):
            raise KeyboardInterrupt
        with pytest.raises(KeyboardInterrupt):
            bulk_edit(saver, graph, edit, threads=["u-*"], metadata={"user": "ada"}, apply=True, progress=stop)
        # … and resumed: the first is skipped, the second edited
        done = bulk_edit(saver, graph, edit, threads=["u-*"], metadata={"user": "ada"}, apply=True)
        assert [(t.thread_id, t.status) for t in done.threads] == [("u-1", "already applied"), ("u-2", "edited")]
        for tid in ("u-1", "u-2"):
            state = g.get_state(cfg(tid))
            assert state.values["profile"] == {"plan": "pro"} and state.values["labels"] == ["hello", "migrated"]
            tup = saver.get_tuple(cfg(tid))
            assert tup.metadata["source"] == "update" and tup.metadata[MARK] == done.mark
        assert g.get_state(cfg("u-3")).values.get("profile") is None
        after = b.snapshot()
        again = bulk_edit(saver, graph, edit, metadata={"user": "ada"}, apply=True)
        assert {t.status for t in again.threads} == {"already applied"} and b.snapshot() == after
        # an edit that changes nothing is skipped
        same = bulk_edit(saver, graph, {"labels": ["hello"]}, threads=["u-3"], apply=True)
        assert [t.status for t in same.threads] == ["unchanged"]
        with pytest.raises(NotFoundError, match="no thread matches"):
            bulk_edit(saver, graph, edit, threads=["zz-*"])
        with pytest.raises(ConfigError, match="no channel 'nope'"):
            bulk_edit(saver, graph, {"nope": 1}, threads=["u-1"])


@pytest.mark.parametrize("kind", ("sqlite", "postgres", "redis"))
def test_create_thread_from_a_json_state(kind, fresh_backend, tmp_path):
    b = fresh_backend(kind)
    state = {"messages": [{"type": "human", "content": "hi", "id": "h-1"}], "profile": {"plan": "free"}, "turns": 3}
    with b.open() as saver:
        cid = create_thread(saver, graph, "fixture", json.loads(json.dumps(state)))
        snap = build(saver).get_state(cfg("fixture"))
        assert snap.config["configurable"]["checkpoint_id"] == cid
        assert [m.content for m in snap.values["messages"]] == ["hi"] and snap.values["turns"] == 3
        assert snap.next == ("reply",)
        build(saver).invoke(None, cfg("fixture"))  # the thread runs on from there
        assert build(saver).get_state(cfg("fixture")).values["turns"] == 4
        with pytest.raises(ConfigError, match="already exists"):
            create_thread(saver, graph, "fixture", state)


def test_cli_edit_and_create_thread_with_bad_input(tmp_path):
    from threadline import open_saver

    db = str(tmp_path / "e.db")
    run = lambda *args: CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})  # noqa: E731
    spec = "life34_graphs:graph"
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "turns": 1}))
    made = run("create-thread", "fx-1", "--state", str(state), "--graph", spec, "--db", db)
    assert made.exit_code == 0 and "created" in made.output, made.output
    with open_saver(db) as saver:
        _threads(saver)
    preview = run("edit", "u-*", "--set", 'profile={"plan": "pro"}', "--graph", spec, "--db", db)
    assert preview.exit_code == 0 and "3 thread(s) would edit" in preview.output, preview.output
    applied = run("edit", "--where", "user=ada", "--set", 'profile={"plan": "pro"}', "--graph", spec, "--apply", "--json", "--db", db)
    assert applied.exit_code == 0 and json.loads(applied.stdout)["counts"]["edited"] == 2
    rerun = run("edit", "--where", "user=ada", "--set", 'profile={"plan": "pro"}', "--graph", spec, "--apply", "--db", db)
    assert "0 thread(s) edited, 2 already applied" in rerun.output
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    for args, fragment in (
        (("create-thread", "fx-1", "--state", str(state), "--graph", spec), "already exists"),
        (("create-thread", "fx-2", "--state", str(bad_json), "--graph", spec), "is not JSON"),
        (("create-thread", "fx-2", "--state", str(tmp_path / "missing.json"), "--graph", spec), "cannot read the state file"),
        (("create-thread", "fx-2", "--state", str(state)), "pass --graph"),
        (("edit", "u-1", "--set", "profile={oops", "--graph", spec), "not JSON"),
        (("edit", "u-1", "--set", "profile", "--graph", spec), "CHANNEL=JSON"),
        (("edit", "u-1", "--graph", spec), "give the state edit"),
        (("edit", "ghost", "--set", "turns=1", "--graph", spec), "unknown thread 'ghost'"),
        (("edit", "--set", "turns=1", "--graph", spec), "select the threads"),
    ):
        bad = run(*args, "--db", db)
        lines = [x for x in bad.stderr.splitlines() if x.strip()]
        assert bad.exit_code == 2 and len(lines) == 1 and fragment in lines[0], (args, bad.stderr)
