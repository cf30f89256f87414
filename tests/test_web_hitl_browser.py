"""Humans in the loop in a real browser (issue 30): Playwright driving Debian's Chromium against
``threadline ui --graph`` served by uvicorn, on SQLite and Postgres, with a real agent whose refund
tool waits for approval. An interrupt is answered from the inbox and the thread page, the resumed
run's messages stream in and the branch graph grows; a replay from three checkpoints back forks a
branch drawn in the graph; ``--read-only`` refuses runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import hitl_agent as A
import web_helpers as wh
from test_web_browser import Tab, browser  # noqa: F401  (the module's Chromium fixture)
from threadline import open_saver
from threadline.web import UIConfig

GRAPH = "hitl_agent:build_graph"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        db = str(tmp_path / "hitl.db")
    else:
        from backends import fresh_postgres_url

        db = fresh_postgres_url(request)
    with open_saver(db) as saver:
        for tid in ("refund-1", "refund-2"):
            A.start(saver, tid)
    return db


def _nodes(page: Any) -> int:
    return page.evaluate("window.tlGraph.cy.nodes().length")


def test_answer_stream_grow_and_replay(browser: Any, url: str, request: pytest.FixtureRequest) -> None:
    config = UIConfig(db=url, graph=GRAPH, poll_seconds=0.3)
    with wh.running(config) as link:
        tab = Tab(browser, link, f"hitl-{request.node.callspec.id}")
        page = tab.page
        page.goto(f"{tab.base}/inbox")
        assert page.locator("#inbox-count").inner_text() == "2"
        items = page.locator(".inbox-item")
        assert items.count() == 2 and "approve this refund?" in items.first.inner_text()
        tab.shot("inbox")

        # answer refund-2 from the inbox itself: reject, and the run streams into the page
        second = page.locator('.inbox-item[data-thread="refund-2"]')
        second.locator("button.reject").click()
        second.locator(".run-log .ev.done").wait_for(timeout=20_000)
        assert "refund rejected by a person" in second.locator(".run-log").inner_text()

        # open refund-1 from the inbox, approve on its page: the messages stream in, the graph grows
        page.locator('.inbox-item[data-thread="refund-1"] h2 a').click()
        tab.graph_ready()
        page.locator("#agent[data-ready='1']").wait_for(timeout=10_000)
        assert page.evaluate("window.tlAgent.cy.nodes('.next').map(n => n.id())") == ["tools"]
        assert page.evaluate("window.tlAgent.cy.edges('.conditional').length") >= 1
        before = _nodes(page)
        card = page.locator("#answer-card")
        card.locator("button.approve").click()
        card.locator(".run-log .ev.done").wait_for(timeout=20_000)
        log = card.locator(".run-log").inner_text()
        assert "tools  tool [call-1]: refunded 42 on order 7" in log and "agent  ai: Done: refunded 42 on order 7" in log
        tab.wait_until(f"window.tlGraph.cy.nodes().length > {before}")
        grown = _nodes(page)
        tab.shot("answered")

        # replay from three checkpoints back: a branch appears in the graph
        layout = page.evaluate("fetch(document.getElementById('graph').dataset.graphUrl).then(r => r.json())")
        rows = layout["nodes"]
        row = next(i for i, n in enumerate(rows) if n["id"] == layout["head"])
        for _ in range(3):
            row = rows[row]["parent"]
        target = rows[row]["id"]
        page.evaluate("id => window.tlGraph.select(id, 'a')", target)
        page.locator("#panel button[data-run='replay']").click()
        page.locator("#run-log .ev.done").wait_for(timeout=20_000)
        assert "waiting for an answer" in page.locator("#run-log").inner_text()
        tab.wait_until(f"window.tlGraph.cy.nodes().length > {grown}")
        tab.wait_until("window.tlGraph.cy.nodes('.fork').length >= 1")
        assert page.evaluate(f"window.tlGraph.cy.getElementById('{target}').hasClass('fork')")
        tab.shot("replayed")
        page.goto(f"{tab.base}/inbox")
        assert page.locator("#inbox-count").inner_text() == "1"  # the replay stopped at the approval again
        tab.close()


def test_read_only_refuses_runs(browser: Any, tmp_path: Path) -> None:
    db = str(tmp_path / "ro.db")
    with open_saver(db) as saver:
        A.start(saver, "ro-1")
    config = UIConfig(db=db, graph=GRAPH, read_only=True)
    with wh.running(config) as link:
        tab = Tab(browser, link, "hitl-read-only")
        page = tab.page
        page.goto(f"{tab.base}/inbox")
        assert page.locator(".inbox-item").count() == 1 and page.locator("button.approve").count() == 0
        status, text = page.evaluate("""() => fetch('/run/resume', {method: 'POST', headers: {'X-CSRF-Token': TL.csrf},
            body: new URLSearchParams({thread_id: 'ro-1', value: 'true'})}).then(async r => [r.status, await r.text()])""")
        assert status == 403 and "read-only" in text
        tab.problems.clear()  # the refused fetch is logged by the browser as an error
        tab.close()
