"""``threadline ui`` on Redis — plain Redis 7 and the local cluster — over HTTP: every page shows
what it shows on SQLite for the same history, and the actions the seam serves work.

One run of real LangGraph graphs (``lifecycle_graphs``: branches, subgraphs, an interrupt; the
demo agent; ``web_helpers``' errored, paused and hostile threads; small threads for paging)
writes to a SQLite saver and a Redis saver at once (``test_read_redis.Tee``: the same
checkpoint ids, versions and task ids on both). The pages of the two UIs are then compared as
HTML, with what differs by nature left out: the database's name in the header, the CSRF token,
times shown to the second (each saver stamps its own clock) and measured durations.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from typer.testing import CliRunner

from backends import Backend, make_backend
from test_read_redis import Tee, sizeless
from test_web_actions import _form
from threadline import RedisSaver, read
from threadline.cli import app
from threadline.demo import THREAD_ID
from threadline.web import UIConfig

import lifecycle_graphs as lg
import web_helpers as wh

BULK = [f"bulk-{i:02d}" for i in range(12)]
_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


class Pair(NamedTuple):
    """One history on SQLite (``sqlite``) and on Redis (``redis``), and what the run made."""

    sqlite: Backend
    redis: Backend
    facts: dict[str, Any]


@pytest.fixture(scope="module", params=("redis", "redis-cluster"))
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    directory = tmp_path_factory.mktemp("web-redis")
    sqlite, redis = make_backend("sqlite", directory, request), make_backend(request.param, directory, request)
    with sqlite.open() as a, redis.open() as b:
        tee = Tee(a, b)
        facts = {**lg.populate(tee), **wh.demo_on(tee), "hostile": wh.hostile(tee)}
        wh.errored(tee)
        wh.paused(tee)
        for i, tid in enumerate(BULK):
            wh.echo_turn(tee, tid, f"hello {i}")
    yield Pair(sqlite, redis, facts)


def normalized(text: str) -> str:
    """A page without what differs between two databases holding the same history."""
    text = re.sub(r'<span class="db" [^>]*>.*?</span>', "", text)
    text = re.sub(r'(name="csrf(?:-token)?" (?:content|value)=")[^"]*"', r'\1"', text)
    return _TIME.sub("TIME", text)


class Both:
    """The UI on the SQLite and on the Redis database of a ``Pair``, asked the same things."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b

    def get(self, path: str, **params: Any) -> Any:
        """The Redis response, after checking it equals the SQLite one (status and normalized page)."""
        ra, rb = self.a.get(path, params=params), self.b.get(path, params=params)
        assert rb.status_code == ra.status_code, (path, params, rb.text[:500])
        if rb.headers["content-type"].startswith("application/json"):
            assert rb.json() == ra.json(), (path, params)
        else:
            assert normalized(rb.text) == normalized(ra.text), (path, params)
        return rb



@pytest.fixture(scope="module")
def both(pair: Pair) -> Iterator[Both]:
    """Both UIs, writable."""
    with wh.client(UIConfig(db=pair.sqlite.url)) as a, wh.client(UIConfig(db=pair.redis.url)) as b:
        assert b.app.state.db.backend == "redis" and not b.app.state.db.read_only
        yield Both(a, b)


def page_ids(text: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r'<tr data-thread="([^"]*)"', text)]


def stats_data(text: str) -> dict[str, Any]:
    return json.loads(html.unescape(re.search(r'<script type="application/json" id="stats-data">(.*?)</script>', text, re.S).group(1)))


def test_threads_search_sort_paging_and_status(both: Both) -> None:
    everything = both.get("/", sort="thread_id", limit=500)
    ids = page_ids(everything.text)
    assert len(ids) == 19 and ids == sorted(ids) and "19 threads" in everything.text
    rows = {tid: everything.text.split(f'data-thread="{html.escape(tid)}"', 1)[1].split("</tr>", 1)[0] for tid in ("t-paused", "t-error", "t-answer")}
    assert 'data-status="interrupted"' in rows["t-paused"] and "ship it?" in rows["t-paused"]
    assert 'data-status="errored"' in rows["t-error"] and "the model timed out &lt;b&gt;" in rows["t-error"]
    assert 'data-status="done"' in rows["t-answer"]
    for params in ({"q": "bulk-0?", "sort": "thread_id"}, {"q": "bulk-1"}, {"q": "t-*", "sort": "thread_id"}, {"q": "zzz"},
                   {"q": "evil"}, {"q": "a[1]"}, {"meta": "user=ada"}, {"meta": '{"source": "loop", "step": 1}', "sort": "thread_id"},
                   {"meta": "user=nobody"}, {"sort": "checkpoints"}, {"sort": "size"}, {"sort": "thread_id", "limit": 5, "offset": 5},
                   {"sort": "thread_id", "limit": 5, "offset": 15}):
        both.get("/", **params)
        both.get("/rows", **params)
    assert page_ids(both.get("/", meta="user=ada").text) == ["t-answer"]
    assert sorted(page_ids(both.get("/", q="bulk-0?").text)) == BULK[:10]
    assert page_ids(both.get("/", sort="checkpoints").text)[0] == "t-research"
    # the default order (last update) lists the same threads; ties within a second may differ
    assert sorted(page_ids(both.b.get("/", params={"limit": 500}).text)) == ids
    for params in ({"meta": "nonsense"}, {"sort": "bogus"}, {"offset": "-1"}, {"limit": "x"}, {"meta": '{"a": {"b": [1, {"c": 2}]}} '}):
        both.get("/", **params)
    assert both.get("/", sort="bogus").status_code == 400


def test_thread_pages_graph_and_namespaces(pair: Pair, both: Both) -> None:
    with pair.sqlite.open() as a:
        threads = read.list_threads(a, limit=100).threads
        for t in threads:
            both.get("/thread", thread_id=t.thread_id)
            both.get("/thread/header", thread_id=t.thread_id)
            for ns in read.thread_history(a, t.thread_id, include_subgraphs=True).nodes:
                both.get("/api/graph", thread_id=t.thread_id, ns=ns)
                if ns:
                    both.get("/thread", thread_id=t.thread_id, ns=ns)
    layout = both.get("/api/graph", thread_id=THREAD_ID).json()
    assert layout["lanes"] == 2 and [n["id"] for n in layout["nodes"] if n.get("fork")] == [pair.facts["branch_point"]]
    assert any(n.get("interrupted") for n in layout["nodes"]) and any(n.get("error") for n in both.get("/api/graph", thread_id="t-error").json()["nodes"])
    assert any(n.get("subgraphs") for n in both.get("/api/graph", thread_id="t-research").json()["nodes"])
    for missing in ({"thread_id": "nope"}, {"thread_id": "t-research", "ns": "nope"}):
        assert both.get("/api/graph", **missing).status_code == 404
    assert both.get("/thread", thread_id="nope").status_code == 404
    assert both.get("/thread").status_code == 400


def test_checkpoints_panels_and_diffs(pair: Pair, both: Both) -> None:
    with pair.sqlite.open() as a:
        for tid in (THREAD_ID, "t-research", "t-interrupt", "t-error", pair.facts["hostile"]):
            history = read.thread_history(a, tid, include_subgraphs=True)
            for ns, nodes in history.nodes.items():
                for cid in nodes:
                    both.get("/checkpoint", thread_id=tid, ns=ns, checkpoint_id=cid)
                    both.get("/panel", thread_id=tid, ns=ns, checkpoint_id=cid)
                ids = list(nodes)
                for x, y in zip(ids, ids[1:]):
                    both.get("/diff", thread_id=tid, ns=ns, a=x, b=y)
        tips = [n.checkpoint_id for n in read.thread_history(a, THREAD_ID).ordered() if not n.children]
    head = both.get("/checkpoint", thread_id=THREAD_ID)  # no id: redirected to the head
    assert 'class="msg msg-tool' in head.text and "Produced by" in head.text and str(head.url).rsplit("=", 1)[1] in tips
    assert "Do you have accident insurance?" in both.get("/diff", thread_id=THREAD_ID, a=tips[0], b=tips[1]).text
    assert "&lt;script&gt;window.__pwned = 1; alert(1)&lt;/script&gt;" in both.get("/checkpoint", thread_id=pair.facts["hostile"]).text
    assert both.get("/checkpoint", thread_id=THREAD_ID, checkpoint_id="nope").status_code == 404
    assert both.get("/checkpoint", thread_id="nope").status_code == 404
    assert both.get("/diff", thread_id=THREAD_ID, a=tips[0]).status_code == 400


def test_stats_and_change_markers(pair: Pair, both: Both) -> None:
    for scope in ({}, {"thread_id": "t-research"}, {"thread_id": THREAD_ID}):
        ra, rb = both.a.get("/stats", params=scope), both.b.get("/stats", params=scope)
        assert ra.status_code == rb.status_code == 200
        da, db = stats_data(ra.text), stats_data(rb.text)
        for key in ("tables", "sources", "dedup", "deltas", "tasks"):
            assert sizeless(db[key]) == sizeless(da[key]), key
        assert [(d["node"], d["tasks"]) for d in db["durations"]] == [(d["node"], d["tasks"]) for d in da["durations"]]
        assert all(d["avg_ms"] >= 0 for d in db["durations"])
        for key in ("checkpoints", "writes", "write_bytes"):  # checkpoint_bytes: ``sizeless``
            assert sum(p[key] for p in db["timeline"]["points"]) == sum(p[key] for p in da["timeline"]["points"]), key
        assert db["timeline"]["bucket_seconds"] == da["timeline"]["bucket_seconds"]
    assert db["deltas"]["blobs"] > 0 and db["tables"]["checkpoints"]["rows"] > 0
    assert both.get("/stats", thread_id="nope").status_code == 404
    markers = both.a.get("/api/changes").json(), both.b.get("/api/changes").json()
    assert markers[1]["marker"][1] == markers[0]["marker"][1] == 19 and markers[1]["marker"][0] > 0
    one = both.a.get("/api/changes", params={"thread_id": "t-interrupt"}).json(), both.b.get("/api/changes", params={"thread_id": "t-interrupt"}).json()
    assert one[1]["head"] == one[0]["head"] and one[1]["marker"][1::2] == one[0]["marker"][1::2]  # checkpoints, writes


@pytest.mark.parametrize("kind", ("redis", "redis-cluster"))
def test_live_updates_and_actions_on_redis(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Rollback, fork, edit-and-branch, and the delete and prune previews run through the seam on Redis."""
    url = make_backend(kind, tmp_path, request).url
    with RedisSaver.from_conn_string(url) as saver:
        saver.setup()
        facts = wh.demo_on(saver)
        history = read.thread_history(saver, THREAD_ID)
        with wh.client(UIConfig(db=url, graph="threadline.demo:build_graph")) as c:
            before = c.get("/api/changes", params={"thread_id": THREAD_ID}).json()
            everything = c.get("/api/changes").json()
            preview = c.get("/confirm/rollback", params={"thread_id": THREAD_ID, "checkpoint_id": facts["branch_point"]})
            assert preview.status_code == 200 and "one new checkpoint" in preview.text
            done = c.post("/do/rollback", data=_form(preview.text), follow_redirects=False)
            assert done.status_code == 303 and "Rolled+back" in done.headers["location"]
            assert c.post("/do/rollback", data=_form(preview.text)).status_code == 409  # the head moved: stale
            after = c.get("/api/changes", params={"thread_id": THREAD_ID}).json()
            assert after["head"] != before["head"] and after["marker"] != before["marker"]
            assert c.get("/api/graph", params={"thread_id": THREAD_ID}).json()["head"] == after["head"]

            preview = c.get("/confirm/fork", params={"thread_id": THREAD_ID, "checkpoint_id": facts["branch_point"], "to_thread": "copy-1"})
            done = c.post("/do/fork", data=_form(preview.text), follow_redirects=False)
            assert done.status_code == 303 and "copy-1" in done.headers["location"]
            assert "copy-1" in page_ids(c.get("/").text) and c.get("/api/changes").json() != everything
            assert c.get("/confirm/fork", params={"thread_id": THREAD_ID, "checkpoint_id": facts["branch_point"], "to_thread": "copy-1"}).status_code == 409

            head = read.state_at(saver, THREAD_ID)
            csrf = re.search(r'name="csrf-token" content="([^"]+)"', c.get("/").text).group(1)
            edit = {"thread_id": THREAD_ID, "checkpoint_id": head.checkpoint_id, "channel": "messages", "csrf": csrf,
                    "value": json.dumps([{"type": "human", "content": "A new question?", "id": "new-1"}]), "as_node": "generate_response"}
            preview = c.post("/confirm/edit", data=edit)
            assert preview.status_code == 200 and preview.text.count('class="change-label added"') == 1
            assert c.post("/do/edit", data=_form(preview.text), follow_redirects=False).status_code == 303
            assert read.state_at(saver, THREAD_ID).values["messages"][-1].id == "new-1"

            for action, params in (("delete", {"thread_id": THREAD_ID, "checkpoint_id": history.head}), ("prune", {"keep_last": "2"}),
                                   ("prune", {"thread_id": THREAD_ID, "keep_last": "2"})):
                preview = c.get(f"/confirm/{action}", params=params)  # lifecycle runs on Redis: previews work
                assert preview.status_code == 200 and "Traceback" not in preview.text, preview.text[:300]
        assert len(read.thread_history(saver, THREAD_ID).nodes[""]) == len(history.nodes[""]) + 2  # rollback, edit


def test_read_only_missing_and_unreachable_redis(redis_target: Any) -> None:
    url = f"{redis_target.url}{'&' if '?' in redis_target.url else '?'}prefix={redis_target.prefix}"
    runner = CliRunner()
    # nothing under the prefix: refused, and nothing created there
    for command in (["ui", "--db", url, "--no-browser", "--port", "0"], ["ui", "--db", url, "--no-browser", "--port", "0", "--read-only"]):
        r = runner.invoke(app, command)
        assert r.exit_code == 2 and "holds no threadline keys under this key prefix" in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert redis_target.keys() == []
    down = runner.invoke(app, ["ui", "--db", "redis://127.0.0.1:1/0?prefix=x", "--no-browser", "--port", "0"])
    assert down.exit_code == 2 and "cannot connect to Redis at" in down.output and len(down.output.strip().splitlines()) == 1
    with RedisSaver.from_conn_string(url) as saver:
        saver.setup()
        wh.paused(saver)
    with wh.client(UIConfig(db=url, read_only=True)) as c:
        listing = c.get("/")
        assert page_ids(listing.text) == ["t-paused"] and 'data-status="interrupted"' in listing.text
        assert c.get("/checkpoint", params={"thread_id": "t-paused"}).status_code == 200
        assert c.get("/stats").status_code == 200 and c.get("/api/graph", params={"thread_id": "t-paused"}).status_code == 200
        refused = c.get("/confirm/rollback", params={"thread_id": "t-paused", "checkpoint_id": "x"})
        assert refused.status_code == 403 and "read-only" in refused.text
        assert "no threadline store" in c.get("/store").text


def test_db_help_names_redis() -> None:
    """Issue 42, finding 8: the ``--db`` help named SQLite and Postgres, not Redis, which the UI
    and every command serve."""
    for command in ("ui", "threads"):
        r = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert r.exit_code == 0 and "postgresql://" in r.output and "redis://…?prefix=…" in r.output, r.output
