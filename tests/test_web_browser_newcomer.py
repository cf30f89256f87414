"""What a newcomer saw wrong in ``threadline ui`` (issue 31, item 12), in Chromium driven by
Playwright (see ``test_web_browser``): the task-duration chart names a prebuilt agent's tool
calls by their node and draws tasks of 0 ms; the branch graph's labels stay clear of every
lane's line; a thread id holding a direction override is isolated from the page's text."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from cli_support import run_agent
from test_web_browser import Tab, browser  # noqa: F401  (the browser fixture)
from threadline import SqliteSaver, lifecycle
from threadline.demo import THREAD_ID
from threadline.read.names import resolve_checkpoint
from threadline.web import UIConfig

import web_helpers as wh

RLO_ID = "order-\u202eevil-42"  # U+202E RIGHT-TO-LEFT OVERRIDE inside a thread id


def test_task_durations_name_send_tasks_by_node_and_draw_0_ms(browser: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "agent.db")
    with SqliteSaver.from_conn_string(path) as saver:
        run_agent(saver)  # create_react_agent: its tool calls run as Send tasks of "tools"
    with sqlite3.connect(path) as conn:  # every task finished at its step's start: 0 ms
        conn.execute("UPDATE threadline_writes SET created_at = (SELECT c.created_at FROM threadline_checkpoints c WHERE "
                     "c.thread_id = threadline_writes.thread_id AND c.checkpoint_ns = threadline_writes.checkpoint_ns AND "
                     "c.checkpoint_id = threadline_writes.checkpoint_id)")
    with wh.running(UIConfig(db=path, read_only=True)) as url:
        tab = Tab(browser, url, "durations")
        page = tab.page
        page.goto(f"{tab.base}/stats")
        tab.wait_until("window.tlCharts && window.tlCharts['chart-durations']")
        labels = page.evaluate("window.tlCharts['chart-durations'].data.labels")
        assert "tools" in labels and "agent" in labels, labels
        assert not any("pregel" in str(label) or "~" in str(label) for label in labels), labels
        values = page.evaluate("window.tlCharts['chart-durations'].data.datasets.map(d => d.data)")
        assert all(v == 0 for series in values for v in series), values
        # a 0 ms bar is still drawn: every bar of both series is a few pixels tall
        heights = page.evaluate("window.tlCharts['chart-durations'].data.datasets.map((d, i) => "
                                "window.tlCharts['chart-durations'].getDatasetMeta(i).data.map(b => Math.abs(b.base - b.y)))")
        assert all(h >= 2 for series in heights for h in series), heights
        note = page.locator("#durations-note")
        assert note.is_visible() and "within 1 ms" in note.inner_text()
        # the per-node table and the chart name the same nodes
        rows = page.locator("table tbody tr td:first-child").all_inner_texts()
        assert set(labels) <= set(rows) | {"__start__"}
        tab.shot("stats-durations")
        tab.close()


def test_labels_start_right_of_every_lane(browser: Any, tmp_path: Path) -> None:
    path = wh.demo_db(str(tmp_path / "demo.db"))
    with SqliteSaver.from_conn_string(path) as saver:  # a third lane: a rollback to before the fork point
        lifecycle.rollback(saver, THREAD_ID, resolve_checkpoint(saver, THREAD_ID, "step:1"))
    with wh.running(UIConfig(db=path, read_only=True)) as url:
        tab = Tab(browser, url, "lanes")
        page = tab.page
        page.locator(f'tr[data-thread="{THREAD_ID}"] a').click()
        timings = tab.graph_ready()
        assert timings["lanes"] == 3
        found = page.evaluate("""() => {
            const cy = window.tlGraph.cy;
            const lanesRight = Math.max(...cy.nodes().map(n => n.position('x') + n.outerWidth() / 2));
            const edgesRight = Math.max(...cy.edges().map(e => e.boundingBox({includeLabels: false}).x2));
            const labels = cy.nodes().map(n => ({id: n.id(), lane: n.data('node').lane,
                x1: n.boundingBox({includeNodes: false, includeEdges: false, includeLabels: true, includeOverlays: false}).x1}));
            return {lanesRight, edgesRight, labels};
        }""")
        assert {n["lane"] for n in found["labels"]} == {0, 1, 2}
        clear = min(n["x1"] for n in found["labels"])
        assert clear > found["lanesRight"] and clear > found["edgesRight"], found
        # and they line up in one column, whatever the lane
        assert max(n["x1"] for n in found["labels"]) - clear < 10, found["labels"]
        tab.shot("three-lanes")
        tab.close()


ISOLATED = """() => {
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const bad = [];
    let seen = 0;
    for (let t = walker.nextNode(); t; t = walker.nextNode()) {
        if (!t.data.includes('\\u202e')) continue;
        seen += 1;
        const bdi = t.parentElement.closest('bdi');
        if (!bdi || getComputedStyle(bdi).unicodeBidi !== 'isolate') bad.push(t.parentElement.outerHTML.slice(0, 120));
    }
    return {seen, bad, title: document.title};
}"""


def test_thread_ids_with_a_direction_override_are_isolated(browser: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "bidi.db")
    with SqliteSaver.from_conn_string(path) as saver:
        wh.echo_turn(saver, RLO_ID, "first")
        wh.echo_turn(saver, RLO_ID, "second")
        head, parent = (resolve_checkpoint(saver, RLO_ID, name) for name in ("HEAD", "HEAD^"))
    tid = quote(RLO_ID)
    with wh.running(UIConfig(db=path)) as url:
        tab = Tab(browser, url, "bidi")
        page = tab.page
        pages = {
            "threads": "/",
            "thread": f"/thread?thread_id={tid}",
            "checkpoint": f"/checkpoint?thread_id={tid}&checkpoint_id={head}",
            "diff": f"/diff?thread_id={tid}&a={parent}&b={head}",
            "stats": f"/stats?thread_id={tid}",
            "rollback": f"/confirm/rollback?thread_id={tid}&checkpoint_id={head}",
            "fork": f"/confirm/fork?thread_id={tid}&checkpoint_id={head}&to_thread={quote(RLO_ID + '-copy')}",
            "prune": f"/confirm/prune?thread_id={tid}&keep_last=1",
        }
        for name, path_ in pages.items():
            page.goto(tab.base + path_)
            found = page.evaluate(ISOLATED)
            assert found["seen"] >= 1 and not found["bad"], (name, found)
            if name in ("thread", "checkpoint", "diff"):
                assert f"\u2068{RLO_ID}\u2069" in found["title"], (name, found["title"])
            if name == "threads":
                assert page.locator("#thread-count").inner_text().startswith("1 thread ·")
            tab.shot(f"bidi-{name}")
        tab.close()


def test_the_prune_forms_say_per_branch_and_offer_per_thread(browser: Any, tmp_path: Path) -> None:
    path = wh.demo_db(str(tmp_path / "demo.db"))
    with wh.running(UIConfig(db=path)) as url:
        tab = Tab(browser, url, "prune-per")
        page = tab.page
        listing = page.locator("details", has_text="Prune threads")
        listing.locator("summary").click()
        assert "checkpoints of each branch" in " ".join(listing.inner_text().split())
        page.locator(f'tr[data-thread="{THREAD_ID}"] a').click()
        tab.graph_ready()
        form = page.locator("details", has_text="Prune this thread")
        form.locator("summary").click()
        form.locator("input[name=keep_last]").fill("3")
        for per, kept, words in (("branch", 6, "of each branch"), ("thread", 3, "of the thread")):
            form.locator("select[name=keep_last_per]").select_option(per)
            form.get_by_role("button", name="Preview…").click()
            text = " ".join(page.locator("section.confirm").inner_text().split())
            assert f"keep the last 3 checkpoints {words}" in text, text
            assert f"Removes {17 - kept} checkpoint(s)" in text, text
            tab.shot(f"confirm-prune-{per}")
            page.go_back()
            form = page.locator("details", has_text="Prune this thread")
            if not form.evaluate("d => d.open"):
                form.locator("summary").click()
        tab.close()
