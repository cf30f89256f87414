"""``threadline ui`` over HTTP: the pages, the JSON the branch graph is drawn from, the actions
and the security around them, on real databases written by real LangGraph graphs (the demo
agent, ``lifecycle_graphs``, ``web_helpers``), through Starlette's TestClient."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from threadline import SqliteSaver, lifecycle, read
from threadline.demo import THREAD_ID
from threadline.web import UIConfig
from threadline.web.pages import parse_metadata
from threadline.storage.dialect import POSTGRES, SQLITE

import lifecycle_graphs as lg
import web_helpers as wh
from web_helpers import demo_path  # noqa: F401  (a fixture)


@pytest.fixture(scope="module")
def mixed_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Threads of every status: lifecycle graphs (subgraphs, fan-out, branches, a waiting interrupt),
    an errored one, a paused one, hostile content, and 75 small threads for paging."""
    path = str(tmp_path_factory.mktemp("mixed") / "mixed.db")
    with SqliteSaver.from_conn_string(path) as saver:
        lg.populate(saver)
        wh.errored(saver)
        wh.paused(saver)
        wh.hostile(saver)
        for i in range(75):
            wh.echo_turn(saver, f"bulk-{i:03d}", f"hello {i}")
    return path


def page_ids(text: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r'<tr data-thread="([^"]*)"', text)]


# --- access ---------------------------------------------------------------------------


def test_token_cookie_host_and_headers(demo_path: str) -> None:
    config = UIConfig(db=demo_path, port=8765)
    from starlette.testclient import TestClient

    from threadline.web import create_app

    with TestClient(create_app(config), base_url=config.guard.origin) as c:
        denied = c.get("/")
        assert denied.status_code == 403 and "token" in denied.text and THREAD_ID not in denied.text
        assert c.get("/?token=wrong").status_code == 403
        assert c.get("/api/graph", params={"thread_id": THREAD_ID}).status_code == 403
        ok = c.get(f"/?token={config.guard.token}", follow_redirects=False)
        assert ok.status_code == 303 and ok.headers["location"] == "/"
        cookie = ok.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and config.guard.cookie in cookie
        page = c.get("/")
        assert page.status_code == 200 and THREAD_ID in page.text
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
        assert page.headers["x-frame-options"] == "DENY" and page.headers["x-content-type-options"] == "nosniff"
        # DNS rebinding: another host name is refused even with the cookie, loopback names too
        for host in ("evil.example:8765", "localhost:8765", "127.0.0.1:8765"):
            assert c.get("/", headers={"host": host}).status_code == 400
        # static files need no token and hold no data
        assert c.get("/static/app.css", cookies={}).status_code == 200


# --- threads --------------------------------------------------------------------------


def test_threads_search_sort_paging_and_status(mixed_path: str) -> None:
    with wh.client(UIConfig(db=mixed_path)) as c:
        first = c.get("/")
        assert "81 threads · 1–50" in first.text  # 3 lifecycle threads, errored, paused, hostile, 75 bulk
        ids = page_ids(first.text)
        assert len(ids) == 50
        second = c.get("/", params={"offset": 50})
        assert not set(page_ids(second.text)) & set(ids)
        assert 'rel="prev"' in second.text
        # prefix, glob, no match
        assert sorted(page_ids(c.get("/", params={"q": "bulk-07"}).text)) == [f"bulk-07{i}" for i in range(5)]
        assert sorted(page_ids(c.get("/", params={"q": "bulk-0?4"}).text)) == [f"bulk-0{i}4" for i in range(8)]
        assert sorted(page_ids(c.get("/", params={"q": "t-*", "sort": "thread_id"}).text)) == [
            "t-answer", "t-error", "t-interrupt", "t-paused", "t-research"]
        assert "No thread matches" in c.get("/", params={"q": "zzz"}).text
        # sort by checkpoints: the research thread (two turns + a branch) has the most
        assert page_ids(c.get("/", params={"sort": "checkpoints"}).text)[0] == "t-research"
        by_id = page_ids(c.get("/", params={"sort": "thread_id", "limit": 500}).text)
        assert by_id == sorted(by_id)
        # metadata filter
        assert page_ids(c.get("/", params={"meta": "user=ada"}).text) == ["t-answer"]
        assert c.get("/", params={"meta": "nonsense"}).status_code == 400
        assert c.get("/", params={"sort": "bogus"}).status_code == 400
        # statuses, with the interrupt value and the stored error
        rows = c.get("/", params={"q": "t-", "limit": 10}).text
        def row(tid: str) -> str:
            return rows.split(f'data-thread="{tid}"', 1)[1].split("</tr>", 1)[0]
        assert 'data-status="interrupted"' in row("t-paused") and "ship it?" in row("t-paused")
        assert 'data-status="interrupted"' in row("t-interrupt") and "approve the answer?" in row("t-interrupt")
        assert 'data-status="errored"' in row("t-error") and "the model timed out &lt;b&gt;" in row("t-error")
        assert 'data-status="done"' in row("t-answer")
        # an archived thread (read.records) is hidden unless asked for
        with SqliteSaver.from_conn_string(mixed_path) as saver:
            lifecycle.update_thread(saver, "t-answer", {"title": "<b>Refunds</b>"}, archived=True)
        try:
            assert "t-answer" not in page_ids(c.get("/", params={"q": "t-", "limit": 10}).text)
            assert "t-answer" in page_ids(c.get("/", params={"q": "t-", "limit": 10, "archived": "1"}).text)
            page = c.get("/thread", params={"thread_id": "t-answer"})  # its page still opens, with its record
            assert page.status_code == 200 and "archived" in page.text and "&lt;b&gt;Refunds&lt;/b&gt;" in page.text
        finally:
            with SqliteSaver.from_conn_string(mixed_path) as saver:
                lifecycle.update_thread(saver, "t-answer", {"title": None}, archived=False)


def test_glob_and_metadata_parsing() -> None:
    assert SQLITE.thread_glob("user-*") == ("thread_id GLOB ?", "user-*")
    assert SQLITE.thread_glob("a[1]") == ("thread_id GLOB ?", "a[[]1]*")
    assert POSTGRES.thread_glob("u_1%?") == ("thread_id LIKE ? ESCAPE '\\'", "u\\_1\\%_")
    assert POSTGRES.thread_glob("abc") == ("thread_id LIKE ? ESCAPE '\\'", "abc%")
    assert parse_metadata("source=loop, step=3, ok=true") == {"source": "loop", "step": 3, "ok": True}
    assert parse_metadata('{"user": {"id": 1}}') == {"user": {"id": 1}}
    with pytest.raises(ValueError, match="key=value"):
        parse_metadata("source")


# --- the thread as a picture ------------------------------------------------------------


def test_demo_graph_has_two_branches_and_the_interrupt(demo_path: str) -> None:
    with wh.client(UIConfig(db=demo_path)) as c:
        page = c.get("/thread", params={"thread_id": THREAD_ID})
        assert page.status_code == 200 and 'data-status="done"' in page.text
        layout = c.get("/api/graph", params={"thread_id": THREAD_ID}).json()
    with SqliteSaver.from_conn_string(demo_path) as saver:
        history = read.thread_history(saver, THREAD_ID)
    nodes = layout["nodes"]
    assert [n["id"] for n in nodes] == list(history.nodes[""])
    assert layout["head"] == history.head and sum(bool(n.get("head")) for n in nodes) == 1
    forks = [n for n in nodes if n.get("fork")]
    assert [n["id"] for n in forks] == history.fork_points and len(forks) == 1
    assert layout["lanes"] == 2
    # the head's branch is lane 0, straight from the root; the old branch has lane 1
    assert all(n["lane"] == 0 for n in nodes if n.get("on_head_path"))
    old = [n for n in nodes if not n.get("on_head_path")]
    assert old and all(n["lane"] == 1 for n in old)
    assert [n for n in nodes if n.get("interrupted")] and all(not n.get("on_head_path") for n in nodes if n.get("interrupted"))
    assert all(n["parent"] < row for row, n in enumerate(nodes) if "parent" in n)


def test_layout_agrees_with_the_read_model(mixed_path: str, demo_path: str) -> None:
    """The graph's narrower tree query gives the tree ``read.thread_history`` gives."""
    for path, tid in ((demo_path, THREAD_ID), (mixed_path, "t-research"), (mixed_path, "t-interrupt"), (mixed_path, "t-error")):
        with SqliteSaver.from_conn_string(path) as saver:
            full = read.thread_history(saver, tid, include_subgraphs=True)
            with wh.client(UIConfig(db=path)) as c:
                for ns, nodes in full.nodes.items():
                    layout = c.get("/api/graph", params={"thread_id": tid, "ns": ns}).json()
                    ns_head = max(nodes)
                    assert layout["head"] == ns_head
                    got = {n["id"]: n for n in layout["nodes"]}
                    assert list(got) == list(nodes)
                    for cid, node in nodes.items():
                        n = got[cid]
                        assert n.get("writers", []) == node.writers, (tid, ns, cid)
                        parent = layout["nodes"][n["parent"]]["id"] if "parent" in n else None
                        assert parent == (node.parent_checkpoint_id if node.parent_checkpoint_id in nodes else None)
                        assert n.get("fork", False) == node.is_fork_point
                        assert n.get("interrupted", False) == node.interrupted
                        assert sorted(n.get("subgraphs", [])) == sorted(node.subgraphs)
                        if not ns:
                            assert n.get("on_head_path", False) == node.on_head_path


def test_subgraph_namespaces_and_errors(mixed_path: str) -> None:
    with wh.client(UIConfig(db=mixed_path)) as c:
        root = c.get("/api/graph", params={"thread_id": "t-research"}).json()
        anchors = [n for n in root["nodes"] if n.get("subgraphs")]
        assert anchors
        ns = anchors[0]["subgraphs"][0]
        page = c.get("/thread", params={"thread_id": "t-research"})
        assert 'id="ns-select"' in page.text and html.escape(ns) in page.text
        sub = c.get("/api/graph", params={"thread_id": "t-research", "ns": ns}).json()
        assert sub["nodes"] and all(n["id"] not in {r["id"] for r in root["nodes"]} for n in sub["nodes"])
        err = c.get("/api/graph", params={"thread_id": "t-error"}).json()
        assert any(n.get("error") for n in err["nodes"])
        assert c.get("/thread", params={"thread_id": "nope"}).status_code == 404
        assert c.get("/api/graph", params={"thread_id": "t-research", "ns": "nope"}).status_code == 404


# --- a checkpoint, a diff, stats ----------------------------------------------------------


def test_checkpoint_page_transcript_writes_audit(demo_path: str) -> None:
    with SqliteSaver.from_conn_string(demo_path) as saver:
        history = read.thread_history(saver, THREAD_ID)
        stopped = next(n for n in history.ordered() if n.interrupted)
    with wh.client(UIConfig(db=demo_path)) as c:
        head = c.get("/checkpoint", params={"thread_id": THREAD_ID})  # no id: redirected to the head
        assert head.status_code == 200 and history.head in str(head.url)
        text = head.text
        assert 'class="msg msg-user' in text and 'class="msg msg-assistant' in text and 'class="msg msg-tool' in text
        assert "→ search_catalog" in text and "accident insurance" in text
        assert "Produced by" in text and "generate_response" in text and "~__pregel_pull, generate_response" in text
        at_interrupt = c.get("/checkpoint", params={"thread_id": THREAD_ID, "checkpoint_id": stopped.checkpoint_id}).text
        assert "Why it stopped" in at_interrupt and "tool_approval" in at_interrupt and "get_quote" in at_interrupt
        assert "call_tool" in at_interrupt and "__interrupt__" in at_interrupt  # the pending write, by task
        assert "~__pregel_pull, call_tool" in at_interrupt  # its task_path
        panel = c.get("/panel", params={"thread_id": THREAD_ID, "checkpoint_id": stopped.checkpoint_id}).text
        assert "<b>answered</b> in call_tool" in panel and "Set as A" in panel  # resumed: shown with its answer (issue 30)
        assert c.get("/checkpoint", params={"thread_id": THREAD_ID, "checkpoint_id": "nope"}).status_code == 404


def test_diff_of_the_two_branch_tips(demo_path: str) -> None:
    with SqliteSaver.from_conn_string(demo_path) as saver:
        history = read.thread_history(saver, THREAD_ID)
        tips = [n.checkpoint_id for n in history.ordered() if not n.children]
        expected = read.diff(saver, THREAD_ID, tips[0], tips[1])
    with wh.client(UIConfig(db=demo_path)) as c:
        text = c.get("/diff", params={"thread_id": THREAD_ID, "a": tips[0], "b": tips[1]}).text
    assert set(expected.channels) == set(re.findall(r'data-channel="([^"]+)"', text))
    added = expected.channels["messages"]["messages"]["added"]
    assert added and text.count('class="change-label added"') == len(added)
    assert "Do you have accident insurance?" in text  # the new branch's question, added
    assert "swap A and B" in text


def test_stats_page_has_chart_data(mixed_path: str) -> None:
    with wh.client(UIConfig(db=mixed_path)) as c:
        text = c.get("/stats").text
        data = json.loads(html.unescape(re.search(r'<script type="application/json" id="stats-data">(.*?)</script>', text, re.S).group(1)))
        assert data["tables"]["checkpoints"]["rows"] > 0 and data["tables"]["blobs"]["bytes"] > 0
        assert data["timeline"]["points"] and sum(p["checkpoints"] for p in data["timeline"]["points"]) == data["tables"]["checkpoints"]["rows"]
        assert {t["node"] for t in data["tasks"]} >= {"classify", "reply"}
        assert {d["node"] for d in data["durations"]} >= {"classify", "reply"} and all(d["avg_ms"] >= 0 for d in data["durations"])
        assert data["dedup"]["logical_bytes"] >= data["dedup"]["stored_bytes"] > 0
        assert "loop" in data["sources"] and 'id="chart-timeline"' in text
        one = c.get("/stats", params={"thread_id": "t-research"}).text
        assert "of <code><bdi>t-research</bdi></code>" in one


def test_live_change_marker(tmp_path: Path) -> None:
    path = str(tmp_path / "live.db")
    with SqliteSaver.from_conn_string(path) as saver:
        wh.echo_turn(saver, "t-live", "one")
        with wh.client(UIConfig(db=path)) as c:
            before = c.get("/api/changes", params={"thread_id": "t-live"}).json()
            everything = c.get("/api/changes").json()
            wh.echo_turn(saver, "t-live", "two")
            after = c.get("/api/changes", params={"thread_id": "t-live"}).json()
            assert after != before and after["head"] != before["head"]
            assert c.get("/api/changes").json() != everything
            layout = c.get("/api/graph", params={"thread_id": "t-live"}).json()
            assert layout["head"] == after["head"] and len(layout["nodes"]) == 6
            assert after["head"] in c.get("/thread/header", params={"thread_id": "t-live"}).text


# --- security of values -------------------------------------------------------------------


def test_hostile_content_is_escaped_everywhere(mixed_path: str) -> None:
    raw = [wh.HOSTILE_ID, *wh.PAYLOADS[:4], "<img src=x onerror=alert(1)>", "<script>x</script>"]
    with SqliteSaver.from_conn_string(mixed_path) as saver:
        head = read.thread_history(saver, wh.HOSTILE_ID).head
    with wh.client(UIConfig(db=mixed_path)) as c:
        pages = [
            c.get("/", params={"q": "evil"}).text,
            c.get("/thread", params={"thread_id": wh.HOSTILE_ID}).text,
            c.get("/checkpoint", params={"thread_id": wh.HOSTILE_ID, "checkpoint_id": head}).text,
            c.get("/panel", params={"thread_id": wh.HOSTILE_ID, "checkpoint_id": head}).text,
            c.get("/stats", params={"thread_id": wh.HOSTILE_ID}).text,
            c.get("/confirm/rollback", params={"thread_id": wh.HOSTILE_ID, "checkpoint_id": head}).text,
            c.get("/", params={"q": '"><script>'}).text,
        ]
        for text in pages:
            for payload in raw:
                if payload.startswith("javascript:"):
                    continue
                assert payload not in text, payload
            assert "<script>window.__pwned" not in text and "onerror=\"window" not in text
            assert not re.search(r"""href\s*=\s*["']?\s*javascript:""", text, re.I)
            # every script tag is ours: served from /static, or inert JSON
            for tag in re.findall(r"<script[^>]*>", text):
                assert re.fullmatch(r'<script src="/static/[\w./-]+">', tag) or tag == '<script type="application/json" id="stats-data">', tag
        assert "&lt;script&gt;window.__pwned = 1; alert(1)&lt;/script&gt;" in pages[2]  # shown, as text
        layout = c.get("/api/graph", params={"thread_id": wh.HOSTILE_ID})
        assert layout.headers["content-type"].startswith("application/json")


# --- Postgres -----------------------------------------------------------------------------


def test_postgres_pages_and_read_only_session() -> None:
    from backends import PgSchemas, in_ci, pg_dsn, postgres_unavailable, with_search_path

    from threadline.backends.postgres import PostgresSaver

    reason = postgres_unavailable()
    if reason:
        if in_ci():
            pytest.fail(f"CI=true and Postgres tests cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    schemas = PgSchemas()
    schema = schemas.create()
    try:
        url = with_search_path(pg_dsn(), schema)
        with PostgresSaver.from_conn_string(url) as saver:
            facts = wh.demo_on(saver)
            wh.paused(saver)
        with wh.client(UIConfig(db=url, read_only=True)) as c:
            listing = c.get("/").text
            assert page_ids(listing) and THREAD_ID in page_ids(listing)
            assert 'data-status="interrupted"' in listing and "ship it?" in listing
            layout = c.get("/api/graph", params={"thread_id": THREAD_ID}).json()
            assert layout["lanes"] == 2 and [n["id"] for n in layout["nodes"] if n.get("fork")] == [facts["branch_point"]]
            assert any(n.get("interrupted") for n in layout["nodes"])
            cp = c.get("/checkpoint", params={"thread_id": THREAD_ID}).text
            assert 'class="msg msg-tool' in cp and "Produced by" in cp
            assert "Do you have accident insurance?" in c.get("/diff", params={"thread_id": THREAD_ID, "a": facts["branch_point"], "b": layout["head"]}).text
            assert "chart-tables" in c.get("/stats").text and page_ids(c.get("/", params={"q": "thread_*"}).text) == [THREAD_ID]
            saver = c.app.state.db.saver
            assert c.app.state.db.read_only
            with pytest.raises(Exception, match="read-only"):  # a rollback that writes (the head's would not)
                lifecycle.rollback(saver, THREAD_ID, facts["branch_point"])
    finally:
        schemas.drop(schema)
