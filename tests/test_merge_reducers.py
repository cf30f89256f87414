"""Merge through reducers when both sides reach the same value (issue 42 §5), on a real graph,
SQLite, Postgres and Redis: a counter ``Annotated[int, operator.add]`` at 1 at the fork point,
raised by 2 on each branch, merges to 5 (not "unchanged: 3"); a list ``operator.add`` to which
each branch appended the same item holds it twice; the preview (API and CLI) shows what
``--apply`` then writes. A change a reducer cannot fold in (an item removed) replaces the
value when the target did not touch the channel, and is a conflict when it did."""

from __future__ import annotations

import json
import operator
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from typer.testing import CliRunner

from threadline.cli import app
from threadline.errors import ConfigError
from threadline.lifecycle.merge import merge
from threadline.read import names


class State(TypedDict, total=False):
    total: Annotated[int, operator.add]
    items: Annotated[list, operator.add]
    note: str  # no reducer: equal values on both sides are one value


def step(state: State) -> dict:
    return {"total": 1, "items": ["a"], "note": "start"}


def build(checkpointer=None):
    b = StateGraph(State)
    b.add_node("step", step)
    b.add_edge(START, "step")
    b.add_edge("step", END)
    return b.compile(checkpointer=checkpointer)


graph = build()


def cfg(checkpoint_id: str | None = None) -> dict:
    return {"configurable": {"thread_id": "t", **({"checkpoint_id": checkpoint_id} if checkpoint_id else {})}}


def _two_branches(saver, change: dict) -> tuple:
    """Thread "t": one run (total 1, items [a]), then the same ``change`` on two branches from it."""
    g = build(saver)
    g.invoke({}, cfg())
    fork = names.resolve_checkpoint(saver, "t", "HEAD")
    ids = []
    for _ in range(2):
        g.update_state(cfg(fork), change)
        ids.append(names.resolve_checkpoint(saver, "t", "HEAD"))
    return g, fork, ids[0], ids[1]


@pytest.mark.parametrize("kind", ("sqlite", "postgres", "redis"))
def test_both_sides_reach_the_same_value_through_a_reducer(kind, fresh_backend):
    with fresh_backend(kind).open() as saver:
        g, fork, source, target = _two_branches(saver, {"total": 2, "items": ["x"], "note": "same"})
        assert g.get_state(cfg(source)).values == g.get_state(cfg(target)).values == {"total": 3, "items": ["a", "x"], "note": "same"}
        preview = merge(saver, g, cfg(source), into=cfg(target))
        by = {c.channel: c for c in preview.channels}
        assert not preview.conflicts
        assert by["total"].applies and by["total"].update == 2 and by["total"].result == 5 and by["total"].summary == "3 → 5"
        assert by["items"].applies and by["items"].update == ["x"] and by["items"].result == ["a", "x", "x"]
        assert by["items"].summary == "+1 items"
        assert not by["note"].applies and by["note"].result == "same"  # no reducer: the same value once
        done = merge(saver, g, cfg(source), into=cfg(target), apply=True)
        after = g.get_state(cfg()).values
        assert after == {"total": 5, "items": ["a", "x", "x"], "note": "same"}
        assert {c.channel: c.result for c in done.channels} == {c.channel: c.result for c in preview.channels}  # the preview told the truth
        # "target" leaves the source's change out, as before
        kept = merge(saver, g, cfg(source), into=cfg(target), choose={"total": "target", "items": "target"})
        assert {c.channel: c.result for c in kept.channels} == {"total": 3, "items": ["a", "x"], "note": "same"}


@pytest.mark.parametrize("kind", ("sqlite", "postgres", "redis"))
def test_a_change_the_reducer_cannot_fold_in(kind, fresh_backend):
    from langgraph.types import Overwrite

    with fresh_backend(kind).open() as saver:
        g = build(saver)
        g.invoke({}, cfg())
        g.update_state(cfg(), {"items": ["b"]})
        fork = names.resolve_checkpoint(saver, "t", "HEAD")
        g.update_state(cfg(fork), {"items": Overwrite(["b"])})  # the source removed "a"
        source = names.resolve_checkpoint(saver, "t", "HEAD")
        g.update_state(cfg(fork), {"total": 4})  # the target did not touch items
        target = names.resolve_checkpoint(saver, "t", "HEAD")
        done = merge(saver, g, cfg(source), into=cfg(target), apply=True)
        items = {c.channel: c for c in done.channels}["items"]
        assert items.replaces and not items.conflict
        assert g.get_state(cfg()).values["items"] == ["b"] and g.get_state(cfg()).values["total"] == 5
        # the target changed items too: a conflict, not a silent pick
        g.update_state(cfg(fork), {"items": ["c"]})
        other = names.resolve_checkpoint(saver, "t", "HEAD")
        preview = merge(saver, g, cfg(source), into=cfg(other))
        assert preview.unresolved == ["items"]
        with pytest.raises(ConfigError, match="conflicts on items"):
            merge(saver, g, cfg(source), into=cfg(other), apply=True)
        taken = merge(saver, g, cfg(source), into=cfg(other), apply=True, choose={"items": "source"})
        assert g.get_state(cfg(taken.checkpoint_id)).values["items"] == ["b"]


def test_cli_preview_shows_the_reducers_result(tmp_path):
    from threadline import open_saver

    db = str(tmp_path / "m.db")
    with open_saver(db) as saver:
        _, _, source, _ = _two_branches(saver, {"total": 2, "items": ["x"]})
    run = lambda *args: CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})  # noqa: E731
    spec = "test_merge_reducers:graph"
    preview = run("merge", "t", source[-8:], "--into", "HEAD", "--graph", spec, "--db", db)
    assert preview.exit_code == 0, preview.output
    assert "3 → 5" in preview.output and "unchanged" not in preview.output
    done = run("merge", "t", source[-8:], "--into", "HEAD", "--graph", spec, "--apply", "--json", "--db", db)
    assert done.exit_code == 0, done.output
    channels = {c["channel"]: c for c in json.loads(done.stdout)["channels"]}
    assert channels["total"]["result"] == 5 and channels["items"]["result"] == ["a", "x", "x"]
    with open_saver(db) as saver:
        assert build(saver).get_state(cfg()).values["total"] == 5
