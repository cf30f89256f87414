"""The browser's Store page over HTTP: namespaces, items with collapsible values, search by
namespace prefix, paging, escaping, and a database without a Store left untouched."""

from __future__ import annotations

import html
import re
import sqlite3
from pathlib import Path

from threadline import SqliteSaver
from threadline.store import SqliteStore
from threadline.web import UIConfig

import web_helpers as wh
from cli_support import sqlite_digest

EVIL = '<script>window.__pwned=1</script>'


def _db(tmp_path: Path) -> str:
    path = str(tmp_path / "both.db")
    with SqliteSaver.from_conn_string(path) as saver:
        wh.echo_turn(saver, "t-1", "hello")
    with SqliteStore.from_conn_string(path) as store:
        store.put(("users", "123"), "prefs", {"theme": "dark", "langs": ["en", "fr"], "deep": {"a": {"b": 1}}})
        store.put(("users", "456"), "prefs", {"theme": "light"})
        store.put(("docs",), EVIL, {"title": EVIL})
        for i in range(55):
            store.put(("bulk",), f"k{i:02d}", {"i": i})
    return path


def _keys(text: str) -> list[str]:
    return [html.unescape(k) for k in re.findall(r'<tr data-key="([^"]*)"', text)]


def test_store_page_lists_namespaces_items_and_searches_by_prefix(tmp_path: Path) -> None:
    path = _db(tmp_path)
    with wh.client(UIConfig(db=path)) as c:
        assert 'href="/store"' in c.get("/").text  # linked from the nav
        page = c.get("/store")
        assert page.status_code == 200
        listed = re.search(r'<ul class="namespaces" id="store-namespaces">(.*?)</ul>', page.text, re.S).group(1)
        assert re.findall(r">([^<]+)</a>", listed) == ["bulk", "docs", "users.123", "users.456"]
        assert len(_keys(page.text)) == 50 and 'rel="next"' in page.text  # newest first, one page
        users = c.get("/store", params={"ns": "users"}).text
        assert sorted(_keys(users)) == ["prefs", "prefs"] and "bulk" not in _keys(users)
        assert '<details class="j"><summary>' in users  # values fold
        assert "created (UTC)" in users and re.search(r"<td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d</td>", users)
        one = c.get("/store", params={"ns": "users.123"}).text
        assert "dark" in one and "light" not in one and "fr" in one
        second = c.get("/store", params={"ns": "bulk", "offset": 50}).text
        assert sorted(_keys(second)) == [f"k{i:02d}" for i in range(5)] and 'rel="prev"' in second
        bad = c.get("/store", params={"ns": "users..1"})
        assert bad.status_code == 400 and "empty label" in bad.text


def test_store_page_escapes_keys_and_values(tmp_path: Path) -> None:
    with wh.client(UIConfig(db=_db(tmp_path))) as c:
        text = c.get("/store", params={"ns": "docs"}).text
        assert EVIL not in text and html.escape(EVIL) in text and _keys(text) == [EVIL]


def test_store_page_without_a_store_creates_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "plain.db")
    with SqliteSaver.from_conn_string(path) as saver:
        wh.echo_turn(saver, "t-1", "hello")
    before = sqlite_digest(path)
    with wh.client(UIConfig(db=path, read_only=True)) as c:
        page = c.get("/store")
        assert page.status_code == 200 and "no threadline store in this database" in page.text
    assert sqlite_digest(path) == before
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not any(t.startswith("threadline_store") for t in tables)
