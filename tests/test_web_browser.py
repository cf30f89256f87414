"""``threadline ui`` in a real browser: Playwright driving Debian's Chromium against the app
served by uvicorn, on the demo database (SQLite), on Postgres and on Redis.

Chromium comes from ``apt-get install chromium`` (the Makefile's install step tries; another
binary can be named in ``$THREADLINE_CHROMIUM``); Playwright's own browser download is never
used. Without Chromium these tests skip with the reason — except under ``CI=true``, where
that is a failure. Screenshots of every page
visited are saved under ``test-artifacts/ui/`` (or ``$THREADLINE_TEST_ARTIFACTS``).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from threadline import SqliteSaver, lifecycle, read
from threadline.demo import THREAD_ID
from threadline.web import UIConfig

import web_helpers as wh
from backends import in_ci

CHROMIUM = os.environ.get("THREADLINE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(os.environ.get("THREADLINE_TEST_ARTIFACTS") or Path(__file__).resolve().parent.parent / "test-artifacts") / "ui"


def _unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"CI=true and the browser tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set $THREADLINE_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[test]')")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Tab:
    """A page that records console errors, page errors and dialogs, and saves screenshots."""

    def __init__(self, browser: Any, url: str, name: str) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 950})
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: self.problems.append(f"console: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.base = url.split("/?")[0]
        self.name = name
        self.page.goto(url)  # the token URL: sets the cookie, redirects to the threads page

    def shot(self, what: str) -> None:
        self.page.screenshot(path=str(ARTIFACTS / f"{self.name}-{what}.png"), full_page=True)

    def graph_ready(self) -> dict:
        self.page.wait_for_selector("#graph[data-ready='1']", timeout=30_000)
        return self.page.evaluate("window.tlGraph.timings")

    def node_point(self, checkpoint_id: str) -> tuple[float, float]:
        box = self.page.locator("#graph").bounding_box()
        x, y = self.page.evaluate(
            "id => { const p = window.tlGraph.cy.getElementById(id).renderedPosition(); return [p.x, p.y]; }", checkpoint_id)
        return box["x"] + x, box["y"] + y

    def click_node(self, checkpoint_id: str, *, shift: bool = False, double: bool = False) -> None:
        x, y = self.node_point(checkpoint_id)
        if double:
            self.page.mouse.dblclick(x, y)
            return
        if shift:
            self.page.keyboard.down("Shift")
        self.page.mouse.click(x, y)
        if shift:
            self.page.keyboard.up("Shift")

    def wait_until(self, expression: str, timeout: float = 15.0) -> None:
        """Poll a JavaScript expression until it is truthy (``wait_for_function`` evaluates strings,
        which the page's Content-Security-Policy forbids)."""
        deadline = time.monotonic() + timeout
        while not self.page.evaluate(expression):
            assert time.monotonic() < deadline, f"timed out waiting for {expression}"
            self.page.wait_for_timeout(100)

    def close(self) -> None:
        assert not self.problems, self.problems
        self.page.close()


def walk_through(browser: Any, config: UIConfig, name: str, write: Any) -> None:
    """threads → thread (branch graph) → a checkpoint → diff → rollback, then a live update.

    ``write()`` adds a checkpoint to the demo thread behind the server's back.
    """
    with wh.running(config) as url:
        tab = Tab(browser, url, name)
        page = tab.page
        row = page.locator(f'tr[data-thread="{THREAD_ID}"]')
        assert row.locator("[data-status]").inner_text() == "done"
        tab.shot("threads")

        row.locator("a").click()
        timings = tab.graph_ready()
        assert timings["checkpoints"] == 17 and timings["lanes"] == 2
        layout = page.evaluate("fetch(document.getElementById('graph').dataset.graphUrl).then(r => r.json())")
        nodes = {n["id"]: n for n in layout["nodes"]}
        assert page.evaluate("window.tlGraph.cy.nodes().length") == 17
        assert page.evaluate("window.tlGraph.cy.nodes('.head').map(n => n.id())") == [layout["head"]]
        interrupted = next(i for i, n in nodes.items() if n.get("interrupted"))
        assert page.evaluate("window.tlGraph.cy.nodes('.interrupted').map(n => n.id())") == [interrupted]
        assert len(page.evaluate("window.tlGraph.cy.nodes('.fork').map(n => n.id())")) == 1
        tab.shot("thread")

        # click: the side panel shows the checkpoint; shift-click a second one: compare
        tab.click_node(interrupted)
        page.wait_for_selector("#panel h2")
        assert "answered in call_tool" in page.locator("#panel").inner_text()  # resumed: shown with its answer (issue 30)
        tab.click_node(layout["head"], shift=True)
        diff_link = page.locator("#diff-link")
        assert "disabled" not in (diff_link.get_attribute("class") or "")
        tab.shot("thread-picked")
        diff_link.click()
        page.wait_for_selector("section.change")
        assert page.locator('section.change[data-channel="messages"]').count() == 1
        assert "Do you have accident insurance?" in page.locator('section.change[data-channel="messages"]').inner_text()
        tab.shot("diff")

        # double-click the fork point: its checkpoint page, then roll back to it
        page.go_back()
        tab.graph_ready()
        fork_point = next(i for i, n in nodes.items() if n.get("fork"))
        tab.click_node(fork_point, double=True)
        page.wait_for_selector(".transcript")
        assert page.locator(".msg-user").count() >= 1 and page.locator(".msg-assistant").count() >= 1
        tab.shot("checkpoint")
        page.get_by_role("button", name="Rollback to here…").click()
        assert "Rollback to step" in page.locator("h1").inner_text()
        tab.shot("confirm-rollback")
        page.get_by_role("button", name="Confirm rollback").click()
        page.wait_for_selector("div.flash[role=status]")
        assert "Rolled back" in page.locator("div.flash[role=status]").inner_text()
        assert page.locator(".badge.head").count() == 1
        tab.shot("after-rollback")

        # live: a checkpoint written by someone else appears without reloading
        page.locator("nav.crumbs a").nth(1).click()
        tab.graph_ready()
        count = page.evaluate("window.tlGraph.cy.nodes().length")
        assert count == 18
        write()
        tab.wait_until(f"window.tlGraph.cy.nodes().length === {count + 1}")
        tab.wait_until("document.querySelector('#thread-header').textContent.includes('19')")
        tab.shot("live")

        page.goto(f"{tab.base}/stats")
        tab.wait_until("window.tlCharts && Object.keys(window.tlCharts).length === 7")
        tab.shot("stats")
        tab.close()


def test_demo_in_chromium(browser: Any, tmp_path: Path) -> None:
    path = wh.demo_db(str(tmp_path / "demo.db"))

    def write() -> None:
        with SqliteSaver.from_conn_string(path) as saver:
            lifecycle.rollback(saver, THREAD_ID, read.thread_history(saver, THREAD_ID).fork_points[0])

    walk_through(browser, UIConfig(db=path, graph="threadline.demo:build_graph", poll_seconds=0.3), "sqlite", write)


def test_store_page_in_chromium(browser: Any, tmp_path: Path) -> None:
    from threadline.store import SqliteStore

    path = wh.demo_db(str(tmp_path / "demo.db"))
    with SqliteStore.from_conn_string(path) as store:
        store.put(("users", "123"), "prefs", {"theme": "dark", "deep": {"colour": "teal"}})
        store.put(("docs",), "readme", {"text": "hello"})
    with wh.running(UIConfig(db=path)) as url:
        tab = Tab(browser, url, "store")
        page = tab.page
        page.locator("header nav a", has_text="Store").click()
        page.wait_for_selector("#store-namespaces")
        assert page.locator("#store-namespaces a").all_inner_texts() == ["docs", "users.123"]
        page.locator("#store-namespaces a", has_text="users.123").click()
        page.wait_for_selector("tr[data-key='prefs']")
        assert page.locator("tr[data-key]").count() == 1 and not page.get_by_text("teal").is_visible()
        page.locator("tr[data-key='prefs'] details.j > summary").first.click()
        page.locator("tr[data-key='prefs'] details.j details.j > summary").first.click()
        assert page.get_by_text("teal").is_visible()
        page.fill("input[name='ns']", "docs")
        page.locator("form.search button").click()
        page.wait_for_selector("tr[data-key='readme']")
        tab.shot("store")
        tab.close()


def test_edit_and_branch_in_chromium(browser: Any, tmp_path: Path) -> None:
    path = wh.demo_db(str(tmp_path / "demo.db"))
    with wh.running(UIConfig(db=path, graph="threadline.demo:build_graph")) as url:
        tab = Tab(browser, url, "edit")
        page = tab.page
        page.goto(f"{tab.base}/checkpoint?thread_id={THREAD_ID}")
        page.select_option("#edit-channel", "user_context")
        box = page.locator("#edit-value")
        assert '"intent": "accident_insurance"' in box.input_value()  # the box follows the channel
        box.fill('{"language": "en", "intent": "life_insurance", "age": 41}')
        page.get_by_role("button", name="Preview…").click()
        assert "Save the edit as a new branch?" in page.locator("h1").inner_text()
        changes = page.locator("table.keys").inner_text()
        assert "life_insurance" in changes and "accident_insurance" in changes and "age" in changes
        tab.shot("confirm-edit")
        page.get_by_role("button", name="Confirm edit").click()
        page.wait_for_selector("div.flash[role=status]")
        assert "Saved the edit of 'user_context'" in page.locator("div.flash[role=status]").inner_text()
        assert "life_insurance" in page.locator("main").inner_text()
        tab.close()
    with SqliteSaver.from_conn_string(path) as saver:
        head = read.state_at(saver, THREAD_ID)
        assert head.values["user_context"] == {"language": "en", "intent": "life_insurance", "age": 41}
        assert head.metadata["source"] == "update"


def test_postgres_in_chromium(browser: Any) -> None:
    from backends import PgSchemas, pg_dsn, postgres_unavailable, with_search_path

    from threadline.backends.postgres import PostgresSaver

    if reason := postgres_unavailable():
        if in_ci():
            pytest.fail(f"CI=true and Postgres tests cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    schemas = PgSchemas()
    schema = schemas.create()
    try:
        url = with_search_path(pg_dsn(), schema)
        with PostgresSaver.from_conn_string(url) as saver:
            wh.demo_on(saver)

        def write() -> None:
            with PostgresSaver.from_conn_string(url) as saver:
                lifecycle.rollback(saver, THREAD_ID, read.thread_history(saver, THREAD_ID).fork_points[0])

        walk_through(browser, UIConfig(db=url, poll_seconds=0.3), "postgres", write)
    finally:
        schemas.drop(schema)


def test_redis_in_chromium(browser: Any, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from backends import make_backend

    from threadline import RedisSaver

    url = make_backend("redis", tmp_path, request).url
    with RedisSaver.from_conn_string(url) as saver:
        saver.setup()
        wh.demo_on(saver)

    def write() -> None:
        with RedisSaver.from_conn_string(url) as saver:
            lifecycle.rollback(saver, THREAD_ID, read.thread_history(saver, THREAD_ID).fork_points[0])

    walk_through(browser, UIConfig(db=url, poll_seconds=0.3), "redis", write)


def test_hostile_content_is_inert_in_chromium(browser: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "hostile.db")
    with SqliteSaver.from_conn_string(path) as saver:
        tid = wh.hostile(saver)
        head = read.thread_history(saver, tid).head
    with wh.running(UIConfig(db=path)) as url:
        tab = Tab(browser, url, "hostile")
        page = tab.page
        visits = [
            ("threads", "/"),
            ("thread", None),
            ("checkpoint", f"/checkpoint?checkpoint_id={head}"),
            ("confirm", f"/confirm/rollback?checkpoint_id={head}"),
            ("stats", "/stats?"),
        ]
        for what, path_ in visits:
            if what == "thread":
                page.locator("td.tid a").first.click()
                tab.graph_ready()
                tab.click_node(head)
                page.wait_for_selector("#panel h2")
            elif what != "threads":
                page.goto(f"{tab.base}{path_}&thread_id={quote(tid)}")
            page.wait_for_load_state("load")
            page.wait_for_timeout(200)
            assert page.evaluate("window.__pwned") is None, what
            assert page.locator("img").count() == 0, what
            assert page.locator("a[href^='javascript' i]").count() == 0, what
            assert page.locator("script:not([src]):not([type='application/json'])").count() == 0, what
            tab.shot(what)
        # the payloads are on the page, as text
        page.goto(f"{tab.base}/checkpoint?checkpoint_id={head}&thread_id={quote(tid)}")
        text = page.locator("main").inner_text()
        assert wh.PAYLOADS[0] in text and wh.PAYLOADS[1] in text and wh.HOSTILE_ID in text
        assert not tab.dialogs
        tab.close()


def test_long_thread_is_drawn_by_window(browser: Any, tmp_path: Path) -> None:
    """A thread longer than the screen: Cytoscape holds the rows on screen, scrolling brings the others."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class Count(TypedDict):
        n: int

    g = StateGraph(Count)
    g.add_node("tick", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "tick")
    g.add_conditional_edges("tick", lambda s: "tick" if s["n"] < 400 else END, ["tick", END])
    path = str(tmp_path / "long.db")
    with SqliteSaver.from_conn_string(path) as saver:
        g.compile(checkpointer=saver).invoke({"n": 0}, {"configurable": {"thread_id": "long"}, "recursion_limit": 1000})
        history = read.thread_history(saver, "long")
    root = next(iter(history.nodes[""]))
    with wh.running(UIConfig(db=path, read_only=True)) as url:
        tab = Tab(browser, url, "long")
        page = tab.page
        page.goto(f"{tab.base}/thread?thread_id=long")
        timings = tab.graph_ready()
        assert timings["checkpoints"] == len(history.nodes[""]) == 402
        shown = page.evaluate("window.tlGraph.cy.nodes().length")
        assert 0 < shown < 200 and page.evaluate(f"window.tlGraph.cy.getElementById('{history.head}').nonempty()")
        assert page.evaluate(f"window.tlGraph.cy.getElementById('{root}').empty()")
        box = page.locator("#graph").bounding_box()
        page.mouse.move(box["x"] + 200, box["y"] + 200)
        for _ in range(40):  # scroll down to the oldest checkpoints
            page.mouse.wheel(0, 400)
        tab.wait_until(f"window.tlGraph.cy.getElementById('{root}').nonempty()")
        assert page.evaluate("window.tlGraph.cy.nodes().length") < 200
        assert page.evaluate(f"window.tlGraph.cy.getElementById('{history.head}').empty()")
        tab.shot("scrolled")
        tab.close()


@contextmanager
def other_server() -> Iterator[tuple[int, list[tuple[str, str]]]]:
    """Another program's web server on 127.0.0.1 (any free port): yields its port and the
    ``Host`` and ``Cookie`` headers of each request it gets (the browser's favicon requests too)."""
    import http.server
    import threading

    got: list[tuple[str, str]] = []

    class Other(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            got.append((self.headers.get("Host") or "", self.headers.get("Cookie") or ""))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    other = http.server.HTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        yield other.server_address[1], got
    finally:
        other.shutdown()
        other.server_close()


def test_cookie_reaches_no_other_local_server(browser: Any, tmp_path: Path) -> None:
    """Issue 42, finding 9: browsers send a host's cookies to every port of it, so a cookie the UI
    set for 127.0.0.1 went to every other server on 127.0.0.1 the browser visited, and replayed to
    the UI's port it read the database. The UI is served at a name of its own (``<random>.localhost``,
    which Chromium resolves to loopback itself: this machine's resolver does not know it), its cookie
    is host-only for that name, and any other Host is refused."""
    import urllib.error
    import urllib.request

    path = wh.demo_db(str(tmp_path / "demo.db"))
    with wh.running(UIConfig(db=path, read_only=True)) as url:
        ui = urlsplit(url)
        profile = browser.new_context()  # one browser profile: its cookies go with every tab
        profile.new_page().goto(url)  # the token URL: sets the cookie, redirects to the threads page
        assert THREAD_ID in profile.pages[0].locator("table").inner_text()
        [cookie] = [c for c in profile.cookies() if c["name"].startswith("threadline_ui_")]
        assert cookie["domain"] == ui.hostname  # host-only: no Domain attribute, so no leading dot
        elsewhere = profile.new_page()
        with other_server() as (port, got):
            for host in ("127.0.0.1", "localhost"):
                elsewhere.goto(f"http://{host}:{port}/")
        assert {host.split(":")[0] for host, _ in got} == {"127.0.0.1", "localhost"}
        assert not any("threadline_ui" in cookies for _, cookies in got), got
        # the cookie replayed to the UI's port under a loopback name (as another program would): refused
        for host in ("127.0.0.1", "localhost", "[::1]"):
            replay = urllib.request.Request(f"http://127.0.0.1:{ui.port}/api/graph?thread_id={quote(THREAD_ID)}", headers={
                "Host": f"{host}:{ui.port}", "Cookie": f"{cookie['name']}={cookie['value']}"})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(replay, timeout=30)
            body = refused.value.read().decode()
            assert refused.value.code == 400 and "open the URL" in body and '"nodes"' not in body and ui.hostname not in body
        # the browser itself at 127.0.0.1 gets the same page; at the UI's name it is answered
        answer = elsewhere.goto(f"http://127.0.0.1:{ui.port}/api/graph?thread_id={quote(THREAD_ID)}")
        assert answer.status == 400 and "open the URL" in elsewhere.content()
        answer = elsewhere.goto(f"{url.split('/?')[0]}/api/graph?thread_id={quote(THREAD_ID)}")
        assert answer.status == 200 and '"nodes"' in elsewhere.content()
        profile.close()


def test_launch_keeps_the_token_off_command_lines_and_out_of_other_servers(browser: Any, tmp_path: Path) -> None:
    """``threadline ui`` launches the browser with a private redirect file, never the token URL
    (issue 27, finding 10), at a ``<random>.localhost`` URL; a server on another port of 127.0.0.1
    that the browser then visits receives neither the token nor the cookie (issue 42, finding 9)."""
    import signal
    import stat
    import subprocess

    from cli_support import EXE

    demo_path = wh.demo_db(str(tmp_path / "demo.db"))
    launched = tmp_path / "launched.txt"
    recorder = tmp_path / "browser.sh"
    recorder.write_text(f'#!/bin/sh\necho "$@" >> {launched}\n')
    recorder.chmod(0o700)
    proc = subprocess.Popen([str(EXE), "ui", "--port", "0", "--db", demo_path], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "BROWSER": str(recorder)})
    try:
        url = (proc.stdout.readline() + proc.stdout.readline()).split()[-1]
        token = url.split("?token=")[1]
        assert urlsplit(url).hostname.endswith(".localhost")
        deadline = time.monotonic() + 30
        while not (launched.exists() and launched.read_text().strip()):
            assert time.monotonic() < deadline and proc.poll() is None, "the browser was not launched"
            time.sleep(0.1)
        [arg] = launched.read_text().split()
        assert token not in arg and arg.startswith("file://")
        page_file = Path(arg.removeprefix("file://"))
        assert stat.S_IMODE(page_file.stat().st_mode) == 0o600 and token in page_file.read_text()
        tab = Tab(browser, arg, "launch")
        tab.page.wait_for_selector(f'tr[data-thread="{THREAD_ID}"]', timeout=15_000)
        assert tab.page.url == url.split("?")[0]
        tab.shot("threads")

        with other_server() as (port, got):
            tab.page.goto(f"http://127.0.0.1:{port}/")
        assert got and not any("threadline_ui" in cookies or token in cookies for _, cookies in got), got
        tab.close()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert not page_file.exists()  # removed when the server stops
