"""What a process pays for threadline when it uses little of it: ``cryptography`` is loaded by
the first keyring, not by ``import threadline``; zstd objects are shared by every thread
through pools (LangGraph writes from worker threads it starts anew), each lent to one thread
at a time, and never rebuilt per thread; an async SQLite operation is one hand-over to
aiosqlite's thread, not one per statement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from threadline.codec import tags

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _run(code: str) -> dict:
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_cryptography_is_loaded_by_the_first_keyring_only(tmp_path: Path) -> None:
    code = f"""
import json, os, sys
from threadline import SqliteSaver
from threadline.codec import Keyring
db = {str(tmp_path / "t.db")!r}
config = {{"configurable": {{"thread_id": "t", "checkpoint_ns": ""}}}}
checkpoint = {{"v": 4, "id": "1", "ts": "2026-01-01T00:00:00+00:00", "channel_values": {{"a": ["x" * 300] * 3}},
              "channel_versions": {{"a": "1"}}, "versions_seen": {{}}}}
with SqliteSaver.from_conn_string(db) as saver:
    saver.put(config, checkpoint, {{}}, {{"a": "1"}})
    plain = saver.get_tuple(config).checkpoint["channel_values"]["a"] == checkpoint["channel_values"]["a"]
before = "cryptography" in sys.modules
keys = Keyring([os.urandom(32)])
keys.key_ids  # the keys are read (and the cipher module loaded) on first use
print(json.dumps({{"plain": plain, "before": before, "after": "cryptography" in sys.modules}}))
"""
    found = _run(code)
    assert found == {"plain": True, "before": False, "after": True}


def test_zstd_objects_are_shared_by_threads_one_at_a_time() -> None:
    """Eight threads compress and decompress at once, with and without the dictionary: every
    frame reads back exactly, and the pools grow by at most one object per thread that ran."""

    def held() -> dict:
        pools = {**{("c", k): p for k, p in tags._COMPRESSORS.items()}, **{("d", k): p for k, p in tags._DECOMPRESSORS.items()}}
        return {k: len(p._idle) for k, p in pools.items()}

    before = held()
    values = [bytes(f"message {i} " * (20 + i % 50), "utf-8") for i in range(40)] + [os.urandom(200) + b"a" * 70_000]
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work() -> None:
        try:
            start.wait()
            for _ in range(60):
                for v in values:
                    tag, packed = tags.compress("msgpack", v)
                    assert tags.decompress(tag, packed, "test")[1] == v
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    after = held()
    grown = {k: n - before.get(k, 0) for k, n in after.items()}
    assert grown and all(0 <= g <= 8 for g in grown.values()), grown
    assert any(after[k] > 0 for k in after if k[0] == "c") and any(after[k] > 0 for k in after if k[0] == "d")


async def test_an_async_sqlite_operation_is_one_call_into_aiosqlites_thread(tmp_path: Path) -> None:
    from threadline import AsyncSqliteSaver

    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    checkpoint = {"v": 4, "id": "1", "ts": "2026-01-01T00:00:00+00:00", "channel_values": {"a": ["x" * 300] * 3},
                  "channel_versions": {"a": "1"}, "versions_seen": {}}
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
        calls: list[Any] = []
        execute = saver.conn._execute

        async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append(fn)
            return await execute(fn, *args, **kwargs)

        saver.conn._execute = counted  # type: ignore[method-assign]
        stored = await saver.aput(config, checkpoint, {"step": 1}, {"a": "1"})
        await saver.aput_writes(stored, [("a", ["y"] * 3), ("b", 2)], "task-1")
        got = await saver.aget_tuple(config)
        listed = [t async for t in saver.alist(config)]
        assert len(calls) == 4  # put (blobs, checkpoint row, thread index, commit), put_writes, get_tuple, one page of list
    assert got is not None and got.checkpoint["channel_values"]["a"] == checkpoint["channel_values"]["a"]
    assert sorted((w[1], w[2]) for w in got.pending_writes) == [("a", ["y"] * 3), ("b", 2)]
    assert [t.checkpoint["id"] for t in listed] == ["1"]


# What a command or an import may load (issue 44): LangGraph only where a command reads or writes
# checkpoints, a driver or framework only where its feature runs. The venv has every extra
# installed, so a module missing from a listing was not imported, not merely absent.
OPTIONAL = ("psycopg", "psycopg_pool", "redis", "starlette", "uvicorn", "jinja2", "pyarrow", "duckdb", "cryptography",
            "obstore", "opentelemetry", "sqlite_vec")
LANGGRAPH = ("langgraph", "langchain_core", "langsmith")


def _loaded_by_command(args: list[str], cwd: Path) -> list[str]:
    """The top-level packages of ``OPTIONAL + LANGGRAPH`` that ``threadline ARGS`` imports (run in
    a fresh process, through the console script's own entry ``threadline.cli._run``)."""
    code = (
        "import json, sys\n"
        f"sys.argv = ['threadline', *{args!r}]\n"
        "import threadline.cli as cli\n"
        "status = cli._run()\n"
        f"names = {OPTIONAL + LANGGRAPH!r}\n"
        "print(json.dumps([status, sorted({m.split('.')[0] for m in sys.modules} & set(names))]), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC},
                          cwd=cwd, timeout=120)
    status, loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert status == 0, done.stderr
    return loaded


def test_help_and_version_import_no_langgraph_driver_or_framework(tmp_path: Path) -> None:
    for args in (["--help"], ["--version"], ["threads", "--help"], ["export", "--help"], ["store", "--help"]):
        assert _loaded_by_command(args, tmp_path) == [], args


def _graph_threads(db: str, *, interrupted: bool) -> None:
    """A LangGraph graph run to its end on thread ``done`` of ``db`` (a path or URL), and with
    ``interrupted``, run on thread ``waiting`` until its ``interrupt()``."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    from threadline import open_saver

    class State(TypedDict):
        question: str
        answer: str

    def answer(state: State) -> dict:
        return {"answer": interrupt({"ask": state["question"]}) if state["question"] == "ask me" else "42"}

    builder = StateGraph(State)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    with open_saver(db) as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"question": "what?"}, {"configurable": {"thread_id": "done"}})
        if interrupted:
            graph.invoke({"question": "ask me"}, {"configurable": {"thread_id": "waiting"}})


# LangGraph's checkpoint base and serializer (both import LangChain); its serializer's type constants
# (``langgraph.checkpoint.serde.types``, ``.base``) are light and load with threadline's rows
LANGGRAPH_HEAVY = ("langgraph.checkpoint.base", "langgraph.checkpoint.serde.jsonplus")


def _listed(db: str, cwd: Path) -> tuple[dict, list[str]]:
    """``threadline threads --json --db DB`` in a fresh process: its page, and which of
    ``OPTIONAL + LANGGRAPH`` (top-level packages) and ``LANGGRAPH_HEAVY`` it loaded."""
    code = (
        "import io, json, sys, contextlib\n"
        f"sys.argv = ['threadline', 'threads', '--json', '--db', {db!r}]\n"
        "import threadline.cli as cli\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    status = cli._run()\n"
        f"names = {OPTIONAL + LANGGRAPH!r}\n"
        "loaded = {m.split('.')[0] for m in sys.modules} & set(names)\n"
        f"loaded |= set({LANGGRAPH_HEAVY!r}) & set(sys.modules)\n"
        "print(json.dumps([status, json.loads(out.getvalue()), sorted(loaded)]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC},
                          cwd=cwd, timeout=120)
    assert done.returncode == 0, done.stderr
    status, page, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert status == 0, done.stderr
    return page, loaded


def test_listing_finished_threads_imports_no_langgraph_driver_or_framework(tmp_path: Path) -> None:
    """``threadline threads`` on a SQLite file whose threads have finished their runs decodes no
    value: it loads no LangGraph (LangChain's import is most of a command's start-up), no other
    backend's driver, no web framework, no Parquet, no cipher (issue 44: ``threads`` ≤ 0.6 s)."""
    db = str(tmp_path / "app.db")
    _graph_threads(db, interrupted=False)
    page, loaded = _listed(db, tmp_path)
    assert [(t["thread_id"], t["status"]["kind"]) for t in page["threads"]] == [("done", "done")]
    assert loaded == ["langgraph"]  # its light type constants only (LANGGRAPH_HEAVY)


def test_listing_finished_threads_on_postgres_imports_no_langgraph(pg_url: str, tmp_path: Path) -> None:
    """The same on Postgres: psycopg (the backend's driver) and nothing of LangGraph's base."""
    _graph_threads(pg_url, interrupted=False)
    page, loaded = _listed(pg_url, tmp_path)
    assert [(t["thread_id"], t["status"]["kind"]) for t in page["threads"]] == [("done", "done")]
    assert loaded == ["langgraph", "psycopg", "psycopg_pool"]


def test_listing_an_interrupted_thread_decodes_its_interrupt_on_demand(tmp_path: Path) -> None:
    """A thread waiting on ``interrupt()`` is listed with its question: the serializer (and
    LangGraph with it) loads when that value is decoded; no driver or web framework does."""
    db = str(tmp_path / "app.db")
    _graph_threads(db, interrupted=True)
    page, loaded = _listed(db, tmp_path)
    status = {t["thread_id"]: t["status"] for t in page["threads"]}
    assert status["done"]["kind"] == "done" and status["waiting"]["kind"] == "interrupted"
    assert [i["value"] for i in status["waiting"]["interrupts"]] == [{"ask": "ask me"}]
    # the interrupt is LangGraph's ``Interrupt``: ``langgraph.types`` loads langsmith, which loads
    # opentelemetry when it is installed (LangGraph's own imports)
    assert "langgraph.checkpoint.serde.jsonplus" in loaded and not set(loaded) & (set(OPTIONAL) - {"opentelemetry"}), loaded


def test_importing_the_sqlite_saver_loads_no_other_feature() -> None:
    """``from threadline import SqliteSaver`` imports LangGraph's checkpoint base and nothing of
    the other backends, the CLI, the web app, export or encryption."""
    code = (
        "import json, sys\n"
        "from threadline import SqliteSaver\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({OPTIONAL + ('typer', 'rich')!r}))))"
    )
    assert _run(code) == []


def test_the_saver_loads_its_operations_when_constructed_not_imported(tmp_path: Path) -> None:
    """``from threadline import SqliteSaver`` defines the class only: the engine (the dialect's
    SQL, the codec, the rows, the statement loop, the lease a put is fenced by, TTL, metrics,
    limits), the operations of setup, put and get, the default serializer and the object store's
    settings load when the first saver is constructed (so its first put or get pays no import);
    adoption and a thread's own TTL when first used (issue 44: the import no slower than the
    official saver's)."""
    construction = ("threadline.codec", "threadline.codec.serde", "threadline.objectstore", "threadline.storage.dialect",
                    "threadline.storage.rows", "threadline.storage.runner", "threadline.storage.ops.lease",
                    "threadline.ttl", "threadline.metrics", "threadline.limits", "threadline.storage.ops.read",
                    "threadline.storage.ops.schema", "threadline.storage.ops.write")
    later = ("threadline.storage.adopt", "threadline.storage.ops.sweep")
    code = f"""
import json, sqlite3, sys
from threadline import SqliteSaver
imported = sorted(set({construction + later!r}) & set(sys.modules))
saver = SqliteSaver(sqlite3.connect({str(tmp_path / "t.db")!r}, check_same_thread=False))  # nothing run yet
constructed = sorted(set({construction + later!r}) & set(sys.modules))
print(json.dumps({{"imported": imported, "constructed": constructed}}))
"""
    assert _run(code) == {"imported": [], "constructed": sorted(construction)}


def test_a_sync_sqlite_saver_loads_only_its_own_path(tmp_path: Path) -> None:
    """``from threadline import SqliteSaver``, a saver opened on a file, a put and a get load
    neither aiosqlite (the async saver's) nor Postgres's SQL, the whole-thread maintenance
    operations (delete, copy, prune), the delta history or the URL registry (``open_saver``'s);
    each loads when first used (issue 44: the import no slower than the official saver's)."""
    deferred = ("aiosqlite", "threadline.storage.dialect.postgres", "threadline.storage.ops.maintain",
                "threadline.storage.ops.delta_history", "threadline.backends.registry")
    code = f"""
import json, sys
from threadline import SqliteSaver
config = {{"configurable": {{"thread_id": "t", "checkpoint_ns": ""}}}}
checkpoint = {{"v": 4, "id": "1", "ts": "2026-01-01T00:00:00+00:00", "channel_values": {{"a": ["x"] * 3}},
              "channel_versions": {{"a": "1"}}, "versions_seen": {{}}}}
with SqliteSaver.from_conn_string({str(tmp_path / "t.db")!r}) as saver:
    saver.put(config, checkpoint, {{}}, {{"a": "1"}})
    got = saver.get_tuple(config).checkpoint["channel_values"]["a"]
    before = sorted(set({deferred!r}) & set(sys.modules))
    saver.delete_thread("t")
    gone = saver.get_tuple(config) is None
print(json.dumps({{"got": got, "before": before, "gone": gone, "after": "threadline.storage.ops.maintain" in sys.modules}}))
"""
    assert _run(code) == {"got": ["x"] * 3, "before": [], "gone": True, "after": True}
