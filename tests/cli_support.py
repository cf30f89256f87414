"""Helpers of the CLI tests: run the real ``threadline`` command, check its one-line errors,
fingerprint databases byte for byte, and build a tool-calling agent (Send tasks).

``agent_graph(checkpointer)`` is LangGraph's prebuilt ``create_react_agent`` over a
scripted chat model: two rounds of tool calls (two parallel calls, then one), then a
long final answer. Each tool call runs as a ``Send`` (push) task of the ``tools`` node.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
EXE = ROOT / ".venv" / "bin" / "threadline"
if not EXE.exists():
    EXE = Path(sys.executable).parent / "threadline"

LONG_ANSWER = "Paris is sunny, Rome is sunny and Oslo is sunny. " * 12


def cli(*args: str, env: dict[str, str] | None = None, cwd: Any = None, columns: int = 80,
        input: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``threadline ARGS`` as a real process (no $THREADLINE_* from the caller's environment),
    failing after ``timeout`` seconds."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("THREADLINE_") or k == "THREADLINE_TEST_POSTGRES"}
    base.update({"COLUMNS": str(columns), "PYTHONPATH": str(TESTS)})
    base.pop("FORCE_COLOR", None)
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, env={**base, **(env or {})}, cwd=cwd,
                          input=input, timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess, code: int, *fragments: str) -> str:
    """Assert ``proc`` failed with ``code`` and exactly one line on stderr naming ``fragments``; returns it."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def sqlite_digest(path: Any) -> str:
    """SHA-256 over a SQLite database file and its -wal file's content (an empty or missing -wal holds nothing)."""
    h = hashlib.sha256()
    for suffix in ("", "-wal"):
        p = Path(f"{path}{suffix}")
        if p.exists() and p.stat().st_size:
            h.update(suffix.encode() + p.read_bytes())
    return h.hexdigest()


def pg_digest(url: str) -> str:
    """MD5 over every relation of the URL's schema (names and kinds) and every row of every table."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]
        rels = conn.execute(
            "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s ORDER BY 1", (schema,)
        ).fetchall()
        h = hashlib.md5(repr(rels).encode())
        for name, kind in rels:
            if kind == "r":
                rows = conn.execute(f'SELECT md5(COALESCE(string_agg(t::text, \'|\' ORDER BY t::text), \'\')) FROM "{schema}"."{name}" t')
                h.update(f"{name}:{rows.fetchone()[0]}".encode())
        return h.hexdigest()


@tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


class _ToolModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> "_ToolModel":
        return self


def agent_graph(checkpointer: Any = None, turn: int = 0) -> Any:
    """The agent; ``turn`` > 0 gives its messages other ids, for a later turn on the same thread."""
    t = f"-{turn}" if turn else ""
    replies = iter([
        AIMessage(content="", id=f"ai-1{t}", tool_calls=[
            {"name": "get_weather", "args": {"city": "Paris"}, "id": f"call-1{t}"},
            {"name": "get_weather", "args": {"city": "Rome"}, "id": f"call-2{t}"},
        ]),
        AIMessage(content="", id=f"ai-2{t}", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": f"call-3{t}"}]),
        AIMessage(content=LONG_ANSWER, id=f"ai-3{t}"),
    ])
    return create_react_agent(_ToolModel(messages=replies), [get_weather], checkpointer=checkpointer)


def run_agent(saver: Any, thread_id: str = "agent-1") -> dict:
    return agent_graph(saver).invoke({"messages": [("user", "weather in Paris, Rome and Oslo?")]},
                                     {"configurable": {"thread_id": thread_id}})
