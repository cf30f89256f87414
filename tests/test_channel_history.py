"""One channel through time (issue 34 §4): ``read.channel_history`` and ``history --channel``
on a real graph, SQLite and Postgres: versions, writers, sizes, summaries, branches."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage
from typer.testing import CliRunner

from life34_graphs import cfg, chat
from threadline import read
from threadline.cli import app
from threadline.errors import NotFoundError
from threadline.read.channel import summarize


@pytest.mark.parametrize("kind", ("sqlite", "postgres", "redis"))
def test_a_channel_through_time(kind, fresh_backend):
    b = fresh_backend(kind)
    with b.open() as saver:
        g = chat(saver, "t", "alpha one", "beta two")
        g.update_state(cfg("t"), {"profile": {"a": 1}})
        g.update_state(cfg("t"), {"profile": {"a": 2, "b": 3}})
        h = read.channel_history(saver, "t", "messages")
        assert [v.summary for v in h.versions] == ["set", "+1 items", "+1 items", "+1 items"]
        assert [v.writers for v in h.versions] == [["__start__"], ["reply"], ["__start__"], ["reply"]]
        assert [len(v.value) for v in h.versions] == [1, 2, 3, 4] and all(v.bytes > 0 for v in h.versions)
        assert h.versions[-1].value[-1].content == "re: beta two"
        profile = read.channel_history(saver, "t", "profile")
        assert [v.summary for v in profile.versions] == ["set", "changed keys a, +keys b"]
        assert [v.source for v in profile.versions] == ["update", "update"]
        turns = read.channel_history(saver, "t", "turns")
        assert [v.summary for v in turns.versions] == ["set", "1 → 2"]
        # a branch: time travel from the first turn; the head branch no longer holds "beta two"
        first = read.channel_history(saver, "t", "messages").versions[1].checkpoint_id
        g.invoke({"messages": [HumanMessage(content="gamma", id="h-g")]}, cfg("t", first))
        head = read.channel_history(saver, "t", "messages")
        assert [len(v.value) for v in head.versions] == [1, 2, 3, 4]
        assert head.versions[-1].value[-1].content == "re: gamma"
        every = read.channel_history(saver, "t", "messages", all_branches=True)
        assert len(every.versions) == 6 and sum(not v.on_head_branch for v in every.versions) == 2
        with pytest.raises(NotFoundError, match="never held a value"):
            read.channel_history(saver, "t", "nope")


def test_summaries():
    assert summarize([1, 2], [1, 2, 3, 4]) == "+2 items"
    assert summarize({"a": 1}, {"a": 1}) == "unchanged"
    assert summarize({"a": 1, "c": 0}, {"a": 2, "b": 1}) == "changed keys a, +keys b, -keys c"
    assert summarize("x" * 30, "x" * 35) == "+5 chars"
    assert summarize(object(), object()) == "replaced"
    assert summarize(None, [1], existed=False) == "set"
    assert summarize([1], None, present=False) == "cleared"


def test_cli_history_channel(tmp_path):
    from threadline import open_saver

    db = str(tmp_path / "c.db")
    with open_saver(db) as saver:
        chat(saver, "t", "alpha one", "beta two")
    run = CliRunner().invoke(app, ["history", "t", "--channel", "messages", "--db", db], env={"COLUMNS": "200"})
    assert run.exit_code == 0, run.output
    assert "+1 items" in run.output and "reply" in run.output
    data = json.loads(CliRunner().invoke(app, ["history", "t", "--channel", "labels", "--json", "--db", db]).stdout)
    assert [v["value"] for v in data["versions"]] == [["alpha"], ["alpha", "beta"]]
    bad = CliRunner().invoke(app, ["history", "t", "--channel", "nope", "--db", db])
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and "never held a value" in bad.stderr
    bad = CliRunner().invoke(app, ["history", "ghost", "--channel", "messages", "--db", db])
    assert bad.exit_code == 2 and "unknown thread 'ghost'" in bad.stderr


def test_the_thread_page_shows_tags_and_links_a_channel_through_time(tmp_path):
    import web_helpers as wh
    from threadline import open_saver
    from threadline.lifecycle import tags as T
    from threadline.web import UIConfig

    db = str(tmp_path / "w.db")
    with open_saver(db) as saver:
        chat(saver, "t", "alpha one", "beta two")
        T.tag(saver, "t", "HEAD~2", "golden")
        T.pin(saver, "t")
    with wh.client(UIConfig(db=db)) as c:
        page = c.get("/thread", params={"thread_id": "t"})
        assert page.status_code == 200 and "golden" in page.text and "pinned" in page.text
        assert "/channel?thread_id=t&amp;channel=messages" in page.text
        chan = c.get("/channel", params={"thread_id": "t", "channel": "labels"})
        assert chan.status_code == 200 and "+1 items" in chan.text and "beta" in chan.text
        assert c.get("/channel", params={"thread_id": "t", "channel": "nope"}).status_code == 404
