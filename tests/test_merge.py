"""Branch merge (issue 34 §1) through the graph's reducers on a real graph, SQLite and Postgres:
``add_messages`` and a custom reducer (both sides' changes, no choice needed), a conflict on a
channel without a reducer with both choices, the merge recorded in the
metadata and shown in ``history``; the CLI previews first and reports bad input in one line."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage
from typer.testing import CliRunner

from life34_graphs import build, cfg, chat, graph
from threadline import read
from threadline.cli import app
from threadline.errors import ConfigError
from threadline.lifecycle.merge import merge
from threadline.read import names
from threadline.web import queries
from threadline.web.layout import lay_out


def _branches(saver):
    """Thread "t": one turn, then two branches from it: B (the older) adds "beta" and sets the
    profile's plan "basic", A (the head) adds "gamma" and sets it "pro"."""
    g = chat(saver, "t", "alpha one")
    fork = names.resolve_checkpoint(saver, "t", "HEAD")
    g.invoke({"messages": [HumanMessage(content="beta two", id="h-b")]}, cfg("t", fork))
    g.update_state(cfg("t"), {"profile": {"plan": "basic"}})
    b = names.resolve_checkpoint(saver, "t", "HEAD")
    g.invoke({"messages": [HumanMessage(content="gamma three", id="h-g")]}, cfg("t", fork))
    g.update_state(cfg("t"), {"profile": {"plan": "pro"}})
    a = names.resolve_checkpoint(saver, "t", "HEAD")
    return g, fork, a, b


@pytest.mark.parametrize("kind", ("sqlite", "postgres", "redis"))
def test_merge_through_add_messages_and_a_custom_reducer(kind, fresh_backend):
    b_ = fresh_backend(kind)
    with b_.open() as saver:
        g, fork, a, b = _branches(saver)
        preview = merge(saver, graph, cfg("t", b), into=cfg("t", a))
        assert preview.fork_point == fork and not preview.applied
        by = {c.channel: c for c in preview.channels}
        # changed on both sides through a reducer: the source's change folds into the target's, no choice
        assert not by["messages"].conflict and not by["labels"].conflict and by["messages"].applies and by["labels"].applies
        assert by["profile"].conflict  # no reducer, two different values
        assert not by["turns"].conflict and by["turns"].changed_source and by["turns"].changed_target  # both to 2
        assert preview.unresolved == ["profile"]
        before = b_.stored("t")
        with pytest.raises(ConfigError, match="conflicts on profile"):
            merge(saver, graph, cfg("t", b), into=cfg("t", a), apply=True)
        assert b_.stored("t") == before  # a refused merge writes nothing
        done = merge(saver, graph, cfg("t", b), into=cfg("t", a), apply=True, choose={"profile": "source", "turns": "target"})
        state = g.get_state(cfg("t")).values
        assert [m.content for m in state["messages"]] == ["alpha one", "re: alpha one", "gamma three", "re: gamma three",
                                                          "beta two", "re: beta two"]
        assert state["labels"] == ["alpha", "beta", "gamma"]  # the custom reducer's union
        assert state["profile"] == {"plan": "basic"} and state["turns"] == 2  # the source's profile, the target's turns
        assert {c.channel: c.result for c in done.channels}["labels"] == ["alpha", "beta", "gamma"]
        tup = saver.get_tuple(cfg("t"))
        assert tup.metadata["merge"] == {"source": b, "target": a, "fork_point": fork} and tup.metadata["source"] == "update"
        assert tup.parent_config["configurable"]["checkpoint_id"] == a
        node = read.thread_history(saver, "t").nodes[""][done.checkpoint_id]
        assert node.merged == {"source": b, "target": a, "fork_point": fork}
        # the browser's branch graph: the merge checkpoint's second parent is the source's row
        laid = lay_out(saver.run(queries.tree_op(saver.dialect, "t", "")))
        ids = [n["id"] for n in laid["nodes"]]
        assert laid["nodes"][ids.index(done.checkpoint_id)]["merge"] == ids.index(b)
        # the other choice: the target's messages and labels stay, the source's turns are taken
        g.invoke({"messages": [HumanMessage(content="delta four", id="h-d")]}, cfg("t", fork))
        c = names.resolve_checkpoint(saver, "t", "HEAD")
        other = merge(saver, graph, cfg("t", c), into=cfg("t", done.checkpoint_id), apply=True,
                      choose={"messages": "target", "labels": "target", "turns": "source"})
        state = g.get_state(cfg("t", other.checkpoint_id)).values
        assert len(state["messages"]) == 6 and state["labels"] == ["alpha", "beta", "gamma"] and state["turns"] == 2
        with pytest.raises(ConfigError, match="already in the history"):
            merge(saver, graph, cfg("t", fork), into=cfg("t", a))
        with pytest.raises(ConfigError, match="'source' or 'target'"):
            merge(saver, graph, cfg("t", b), into=cfg("t", a), choose={"messages": "both"})


def test_a_change_on_one_side_only_merges_without_a_choice(tmp_path):
    from threadline import open_saver

    with open_saver(str(tmp_path / "m.db")) as saver:
        g = chat(saver, "t", "alpha one")
        fork = names.resolve_checkpoint(saver, "t", "HEAD")
        g.update_state(cfg("t", fork), {"profile": {"plan": "pro"}, "labels": ["vip"]})
        side = names.resolve_checkpoint(saver, "t", "HEAD")
        g.update_state(cfg("t", fork), {"turns": 5, "messages": [HumanMessage(content="note", id="h-n")]})
        head = names.resolve_checkpoint(saver, "t", "HEAD")
        done = merge(saver, graph, cfg("t", side), into=cfg("t", head), apply=True)
        state = g.get_state(cfg("t")).values
        assert state["profile"] == {"plan": "pro"} and state["labels"] == ["alpha", "vip"] and state["turns"] == 5
        assert [m.content for m in state["messages"]] == ["alpha one", "re: alpha one", "note"] and not done.conflicts


def test_cli_merge_preview_apply_and_bad_input(tmp_path):
    from threadline import open_saver

    db = str(tmp_path / "m.db")
    with open_saver(db) as saver:
        _, fork, a, b = _branches(saver)
    run = lambda *args: CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})  # noqa: E731
    spec = "life34_graphs:graph"
    preview = run("merge", "t", b[-8:], "--into", "HEAD", "--graph", spec, "--db", db)
    assert preview.exit_code == 0, preview.output
    assert "conflict" in preview.output and "preview" in preview.output
    with open_saver(db) as saver:
        assert names.resolve_checkpoint(saver, "t", "HEAD") == a  # nothing written
    bad = run("merge", "t", b[-8:], "--into", "HEAD", "--graph", spec, "--apply", "--db", db)
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and "--take CHANNEL=source|target" in bad.stderr
    done = run("merge", "t", b[-8:], "--into", "HEAD", "--graph", spec, "--apply", "--take", "profile=source",
               "--take", "turns=target", "--json", "--db", db)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["applied"] is True
    assert "merge of" in run("history", "t", "--db", db).output
    for args, fragment in (
        (("--take", "messages=both"), "'source' or 'target'"),
        (("--take", "messages"), "CHANNEL=source|target"),
        (("--take", "nochannel=source"), "no channel 'nochannel'"),
    ):
        bad = run("merge", "t", b[-8:], "--into", a[-8:], "--graph", spec, *args, "--db", db)
        assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and fragment in bad.stderr, (args, bad.stderr)
    bad = run("merge", "t", "nosuchtag", "--into", "HEAD", "--graph", spec, "--db", db)
    assert bad.exit_code == 2 and "no checkpoint 'nosuchtag'" in bad.stderr
    bad = run("merge", "t", b[-8:], "--into", "HEAD", "--graph", "nomodule:graph", "--db", db)
    assert bad.exit_code == 2 and "cannot import module 'nomodule'" in bad.stderr
