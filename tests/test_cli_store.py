"""``threadline store`` and the Store counts of ``stats`` as real processes: SQLite files
(reads leave them byte for byte unchanged and create no tables) and one run on Postgres."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from threadline import SqliteSaver
from threadline.store import PostgresStore, SqliteStore

from cli_support import cli, one_line_error, pg_digest, sqlite_digest


def _tables(path: str) -> set[str]:
    return {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_put_get_search_ls_delete_round_trip(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    assert cli("store", "put", "users.123", "prefs", '{"theme": "dark", "n": 3}', "--db", db).returncode == 0
    done = cli("store", "put", "users.456", "prefs", '{"theme": "light", "n": 5}', "--db", db, "--json")
    assert json.loads(done.stdout) == {"done": "stored", "namespace": "users.456", "key": "prefs"}
    with SqliteStore.from_conn_string(db) as store:  # what the CLI stored is what the library reads
        store.put(("docs",), "readme", {"text": "Hello World"})
        assert store.get(("users", "123"), "prefs").value == {"theme": "dark", "n": 3}
    before = sqlite_digest(db)

    assert json.loads(cli("store", "ls", "--db", db, "--json").stdout) == ["docs", "users.123", "users.456"]
    assert json.loads(cli("store", "ls", "users", "--db", db, "--json").stdout) == ["users.123", "users.456"]
    assert json.loads(cli("store", "ls", "--max-depth", "1", "--db", db, "--json").stdout) == ["docs", "users"]
    assert cli("store", "ls", "--db", db).stdout.split() == ["docs", "users.123", "users.456"]

    item = json.loads(cli("store", "get", "users.123", "prefs", "--db", db, "--json").stdout)
    assert item["namespace"] == "users.123" and item["key"] == "prefs" and item["value"] == {"theme": "dark", "n": 3}
    assert item["created_at"] == item["updated_at"] and item["created_at"].endswith("+00:00")
    shown = cli("store", "get", "users.123", "prefs", "--db", db)
    assert shown.returncode == 0 and json.loads(shown.stdout.split("\n", 1)[1]) == {"theme": "dark", "n": 3}

    def keys(*args: str) -> list[tuple[str, str]]:
        proc = cli("store", "search", *args, "--db", db, "--json")
        assert proc.returncode == 0, proc.stderr
        return [(i["namespace"], i["key"]) for i in json.loads(proc.stdout)]

    assert keys() == [("docs", "readme"), ("users.456", "prefs"), ("users.123", "prefs")]  # last updated first
    assert keys("users") == [("users.456", "prefs"), ("users.123", "prefs")]
    assert keys("users", "--filter", "theme=dark") == [("users.123", "prefs")]
    assert keys("--filter", 'n={"$gt": 4}') == [("users.456", "prefs")]
    assert keys("--query", "WORLD") == [("docs", "readme")]
    assert keys("--limit", "1", "--offset", "1") == [("users.456", "prefs")]
    table = cli("store", "search", "users", "--db", db)
    assert "users.123" in table.stdout and '"theme": "light"' in table.stdout
    assert sqlite_digest(db) == before  # reads wrote nothing

    gone = cli("store", "delete", "users.123", "prefs", "--db", db, "--json")
    assert json.loads(gone.stdout)["done"] == "deleted"
    one_line_error(cli("store", "get", "users.123", "prefs", "--db", db), 2, "no item 'prefs'", "users.123")
    one_line_error(cli("store", "delete", "users.123", "prefs", "--db", db), 2, "nothing deleted")


def test_bad_input_is_one_line_and_writes_need_a_named_database(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    one_line_error(cli("store", "put", "users.1", "k", '{"a": 1}', cwd=tmp_path), 2, "--db", "$THREADLINE_DB")
    assert not (tmp_path / "threadline-demo.db").exists()
    one_line_error(cli("store", "put", "users.1", "k", "[1, 2]", "--db", db), 2, "must be an object")
    one_line_error(cli("store", "put", "users.1", "k", "{nope", "--db", db), 2, "not valid JSON")
    one_line_error(cli("store", "put", "users..1", "k", "{}", "--db", db), 2, "empty label")
    one_line_error(cli("store", "search", "--filter", "novalue", "--db", db), 2, "KEY=VALUE")
    one_line_error(cli("store", "ls", "--db", str(tmp_path / "missing.db")), 2, "does not exist")
    assert not (tmp_path / "missing.db").exists()
    env_put = cli("store", "put", "users.1", "k", '{"a": 1}', env={"THREADLINE_DB": db})
    assert env_put.returncode == 0, env_put.stderr


def test_reads_on_a_database_without_a_store_create_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "saver.db")
    with SqliteSaver.from_conn_string(db) as saver:
        saver.setup()
    before, tables = sqlite_digest(db), _tables(db)
    for args in (("ls",), ("search", "users"), ("get", "users.1", "k")):
        one_line_error(cli("store", *args, "--db", db), 2, "no threadline store in this database")
    assert sqlite_digest(db) == before and _tables(db) == tables


def test_stats_counts_store_items_and_cache_entries(tmp_path: Path) -> None:
    db = str(tmp_path / "all.db")
    with SqliteSaver.from_conn_string(db) as saver:
        saver.setup()
    plain = json.loads(cli("stats", "--db", db, "--json").stdout)
    assert "store_items" not in plain and "cache_entries" not in plain
    for i in range(3):
        assert cli("store", "put", "ns", f"k{i}", "{}", "--db", db).returncode == 0
    from threadline.cache import SqliteCache

    with SqliteCache.from_conn_string(db) as cache:
        cache.set({(("node",), "h1"): ({"x": 1}, None), (("node",), "h2"): ({"x": 2}, 60)})
    data = json.loads(cli("stats", "--db", db, "--json").stdout)
    assert data["store_items"] == 3 and data["cache_entries"] == 2
    text = cli("stats", "--db", db).stdout
    assert "store items" in text and "cache entries" in text


def test_store_commands_on_postgres(pg_url: str) -> None:
    assert cli("store", "put", "users.123", "prefs", '{"theme": "dark"}', "--db", pg_url).returncode == 0
    with PostgresStore.from_conn_string(pg_url) as store:
        assert store.get(("users", "123"), "prefs").value == {"theme": "dark"}
    before = pg_digest(pg_url)
    assert json.loads(cli("store", "ls", "--db", pg_url, "--json").stdout) == ["users.123"]
    found = json.loads(cli("store", "search", "users", "--filter", "theme=dark", "--db", pg_url, "--json").stdout)
    assert [(i["namespace"], i["key"], i["value"]) for i in found] == [("users.123", "prefs", {"theme": "dark"})]
    assert json.loads(cli("store", "get", "users.123", "prefs", "--db", pg_url, "--json").stdout)["value"] == {"theme": "dark"}
    assert pg_digest(pg_url) == before
    assert cli("store", "delete", "users.123", "prefs", "--db", pg_url).returncode == 0
    assert json.loads(cli("store", "search", "--db", pg_url, "--json").stdout) == []
