"""The scripted demo run behind ``threadline demo``: turns, an interrupt, a restart, time travel.

``run_demo(db_path)`` drives the insurance agent (``threadline.demo.agent``) on a
real SQLite file through ``SqliteSaver`` and narrates each step with rich:

1. two user turns (greeting, then a medical-insurance request); the second stops
   at ``interrupt()`` — the advisor wants to call ``get_quote`` and needs approval;
2. the saver is closed and a fresh ``SqliteSaver`` + graph are opened on the same
   file (as a restarted process would), which resume with ``Command(resume=…)``;
3. time travel: an earlier checkpoint is picked from ``get_state_history`` and the
   graph is invoked from it with a different user message, forming a new branch
   (the old branch stays; seed 000 §③ "回滚 = 新建分支");
4. the thread's checkpoint tree and what is on disk (rows and bytes per table).

Everything is deterministic except checkpoint/message ids and timestamps.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.types import Command, StateSnapshot
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from threadline.demo.agent import compile_graph, new_id
from threadline.storage.schema import LOGICAL_TABLES, table
from threadline.backends.sqlite import SqliteSaver
from threadline.backends.sqliteconn import path_of

THREAD_ID = "thread_abc123"
TURNS = [
    "Hi there!",
    "I'm 28 with a budget of 5,000 a year. Can you recommend medical insurance?",
]
RESUME = {"approved": True}
BRANCH_MESSAGE = "Actually, forget medical insurance. Do you have accident insurance?"
TABLES = ("checkpoints", "blobs", "writes", "threads", "migrations")  # shown in the disk summary
# Bytes a table's rows carry (serialized payloads), by table.
PAYLOAD_SQL = {
    "checkpoints": "SELECT COALESCE(SUM(length(CAST(checkpoint AS BLOB)) + length(CAST(metadata AS BLOB))), 0) FROM threadline_checkpoints",
    "blobs": "SELECT COALESCE(SUM(length(blob)), 0) FROM threadline_blobs",
    "writes": "SELECT COALESCE(SUM(length(blob)), 0) FROM threadline_writes",
}


@dataclass
class TableStat:
    rows: int
    payload_bytes: int | None  # serialized bytes held in the table's value columns
    page_bytes: int | None  # pages on disk, table + its indexes (``dbstat``; None if unavailable)


@dataclass
class DemoResult:
    """What the run did, for tests and callers."""

    db_path: str
    thread_id: str
    interrupt: dict[str, Any] | None = None
    resumed: bool = False
    branch_point: str | None = None
    branch_children: list[str] = field(default_factory=list)
    checkpoint_count: int = 0
    tables: dict[str, TableStat] = field(default_factory=dict)
    file_bytes: int = 0


class NotADemoDatabase(Exception):
    """The file at the demo path holds something other than a previous demo run."""


def thread_config(checkpoint_id: str | None = None) -> dict:
    conf: dict[str, Any] = {"thread_id": THREAD_ID}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def short(checkpoint_id: str | None) -> str:
    """A checkpoint id shortened to its last 8 hex digits (unique enough to read a tree)."""
    return "…" + checkpoint_id[-8:] if checkpoint_id else "—"


# --- the database file ------------------------------------------------------


def remove_previous(path: str, *, force: bool = False) -> bool:
    """Delete a previous demo database (and its -wal/-shm files). Returns True if one was removed.

    Raises ``NotADemoDatabase`` when the file is not SQLite or holds threads other
    than the demo's, unless ``force``: the demo never silently deletes real data.
    """
    if not os.path.exists(path):
        return False
    if not force:
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
                threads = {r[0] for r in conn.execute(f"SELECT thread_id FROM {table('threads')}")} if table("threads") in tables else set()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise NotADemoDatabase(f"{path} exists and is not a readable SQLite database ({exc})") from exc
        # a demo database of an earlier release has the same tables without the prefix
        if tables - {*LOGICAL_TABLES, *map(table, LOGICAL_TABLES)} or threads - {THREAD_ID}:
            raise NotADemoDatabase(f"{path} holds data that is not from `threadline demo` (tables or threads besides {THREAD_ID!r})")
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return True


def disk_summary(conn: sqlite3.Connection) -> dict[str, TableStat]:
    """Rows, payload bytes and on-disk page bytes per threadline table."""
    try:
        pages = dict(conn.execute(
            "SELECT COALESCE(m.tbl_name, d.name), SUM(d.pgsize) FROM dbstat d "
            "LEFT JOIN sqlite_schema m ON m.name = d.name GROUP BY 1"
        ).fetchall())
    except sqlite3.Error:  # SQLite built without SQLITE_ENABLE_DBSTAT_VTAB
        pages = None
    stats = {}
    for name in TABLES:
        rows = conn.execute(f"SELECT COUNT(*) FROM {table(name)}").fetchone()[0]
        payload = conn.execute(PAYLOAD_SQL[name]).fetchone()[0] if name in PAYLOAD_SQL else None
        stats[name] = TableStat(rows, payload, None if pages is None else pages.get(table(name), 0))
    return stats


def sharing_summary(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """(channel references in all checkpoints, bytes if every checkpoint stored every channel, blob bytes stored)."""
    refs, full = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(length(b.blob)), 0) FROM threadline_checkpoints c "
        "JOIN json_each(c.checkpoint, '$.channel_versions') j "
        "LEFT JOIN threadline_blobs b ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns "
        "AND b.channel = j.key AND b.version = j.value"
    ).fetchone()
    stored = conn.execute("SELECT COALESCE(SUM(length(blob)), 0) FROM threadline_blobs").fetchone()[0]
    return refs, full, stored


# --- narration ----------------------------------------------------------------


def _clip(text: str, width: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def describe_message(m: BaseMessage) -> str:
    if isinstance(m, HumanMessage):
        return f"user: {_clip(m.content)}"
    if isinstance(m, AIMessage):
        calls = ", ".join(f"{tc['name']}({', '.join(f'{k}={v!r}' for k, v in tc['args'].items())})" for tc in m.tool_calls)
        parts = [_clip(m.content)] if m.content else []
        if calls:
            parts.append(f"→ tool call {calls}")
        return "advisor: " + " ".join(parts)
    if isinstance(m, ToolMessage):
        return f"tool {m.name}: {_clip(m.content)}"
    return f"{m.type}: {_clip(m.content)}"


def describe_update(update: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(channel, what was written) per channel a node wrote; one entry per appended message."""
    if not update:
        return [("", "(no channel changes)")]
    lines = []
    for channel, value in update.items():
        if channel == "messages":
            for m in value if isinstance(value, list) else [value]:
                lines.append(("messages +=", describe_message(m)))
        elif channel == "search_results":
            lines.append(("search_results =", ", ".join(f"{p['product_id']} {p['name']} {p['price']}/yr" for p in value)))
        else:
            lines.append((f"{channel} =", json.dumps(value, ensure_ascii=False)))
    return lines


class Narrator:
    def __init__(self, console: Console) -> None:
        self.console = console

    def section(self, title: str) -> None:
        self.console.print()
        self.console.rule(Text(title, style="bold"))

    def say(self, text: str, style: str | None = None) -> None:
        self.console.print(Text(text, style=style or ""))

    def stream(self, graph: Any, payload: Any, config: dict) -> dict[str, Any] | None:
        """Run the graph, printing each node's channel updates; return the interrupt value if it paused."""
        paused = None
        for chunk in graph.stream(payload, config, stream_mode="updates"):
            for node, update in chunk.items():
                if node == "__interrupt__":
                    paused = update[0].value
                    body = Text(f"{paused.get('question', '')}\n", style="bold")
                    shown = {k: v for k, v in paused.items() if k != "question"}
                    body.append(f"interrupt value: {json.dumps(shown, ensure_ascii=False)}", style="")
                    self.console.print(Panel(body, title="⏸ interrupt: human approval needed", border_style="yellow", expand=False))
                    continue
                self.console.print(Text(f"  ▸ {node}", style="cyan"))
                grid = Table.grid(padding=(0, 1))
                grid.add_column(width=4)
                grid.add_column(no_wrap=True, style="dim", width=16)
                grid.add_column(overflow="fold")
                for channel, text in describe_update(update):
                    grid.add_row("", channel, text)
                self.console.print(grid)
        return paused


def count_checkpoints(saver: SqliteSaver) -> int:
    return sum(1 for _ in saver.list(thread_config()))


# --- the checkpoint tree ----------------------------------------------------------


def checkpoint_tree(history: list[StateSnapshot], head_id: str | None) -> tuple[Tree, dict[str, list[str]]]:
    """A rich Tree of a thread's checkpoints (from ``get_state_history``) and the children map.

    A chain is drawn flat; each branch point opens one subtree per child. Per
    checkpoint: shortened id, step, source, the node(s) whose writes produced it
    (the tasks of its parent), message count and state (interrupt, turn end, head).
    """
    by_id = {s.config["configurable"]["checkpoint_id"]: s for s in history}
    parent_of = {cid: (s.parent_config or {}).get("configurable", {}).get("checkpoint_id") for cid, s in by_id.items()}
    children: dict[str, list[str]] = defaultdict(list)
    for cid in sorted(by_id):
        if parent_of[cid] in by_id:
            children[parent_of[cid]].append(cid)
    roots = sorted(cid for cid in by_id if parent_of[cid] not in by_id)

    def label(cid: str) -> Text:
        s = by_id[cid]
        parent = by_id.get(parent_of[cid] or "")
        source = s.metadata.get("source", "?")
        writer = "user input" if source == "input" else ", ".join(t.name for t in parent.tasks) if parent else "—"
        t = Text()
        t.append(short(cid), style="bold")
        t.append(f" step {s.metadata.get('step', '?'):>2} {source:<5} ← {writer:<17} {len(s.values.get('messages', []))} msg")
        notes = []
        if s.interrupts:
            notes.append("⏸ resumed" if children.get(cid) else "⏸ pending")
        elif not s.next and source != "input":
            notes.append("■ turn end")
        if len(children.get(cid, [])) > 1:
            notes.append(f"⑂ {len(children[cid])} branches")
        if cid == head_id:
            notes.append("◆ HEAD")
        elif not children.get(cid):
            notes.append("◇ tip")
        if notes:
            t.append("  " + " ".join(notes), style="yellow")
        return t

    def add_chain(node: Tree, cid: str) -> None:
        while True:
            kids = children.get(cid, [])
            if len(kids) == 1:
                node.add(label(cid))
                cid = kids[0]
                continue
            branch = node.add(label(cid))
            for i, kid in enumerate(kids, 1):
                add_chain(branch.add(Text(f"branch {i} (from {short(cid)})", style="magenta")), kid)
            return

    tree = Tree(Text(f"thread {THREAD_ID}  ({len(by_id)} checkpoints)", style="bold"))
    for root in roots:
        add_chain(tree, root)
    return tree, dict(children)


# --- the run --------------------------------------------------------------------


def run_demo(db: str, console: Console | None = None, *, force: bool = False) -> DemoResult:
    """Run the whole scenario on a fresh SQLite file at ``db`` (a path or ``sqlite:///path``).

    Raises ``NotADemoDatabase`` if ``db`` exists and does not look like a previous
    demo database (pass ``force=True`` to delete it anyway).
    """
    console = console or Console()
    say = Narrator(console)
    path = path_of(db)
    if path == ":memory:":
        raise ValueError("the demo needs a database file, not :memory:")
    result = DemoResult(db_path=path, thread_id=THREAD_ID)

    if remove_previous(path, force=force):
        say.say(f"Removed the previous demo database {path}; starting from a fresh file.", "dim")
    say.say(f"Database: {os.path.abspath(path)}   thread_id: {THREAD_ID}", "dim")

    # 1. Two user turns; the second stops at the approval interrupt.
    with SqliteSaver.from_conn_string(path) as saver:
        graph = compile_graph(saver)
        for n, text in enumerate(TURNS, 1):
            say.section(f"Turn {n}")
            say.say(f"user: {text}", "bold green")
            before = count_checkpoints(saver)
            result.interrupt = say.stream(graph, {"messages": [HumanMessage(text, id=new_id())]}, thread_config())
            say.say(f"  checkpoints on thread: {count_checkpoints(saver)} (+{count_checkpoints(saver) - before} this turn)", "dim")
        if result.interrupt is None:
            raise RuntimeError("the scenario expected the agent to stop for approval at the get_quote call")
        say.say("The run is paused. Its state, including the pending interrupt, is in the database file.", "dim")

    # 2. A fresh saver on the same file, as a restarted process would open it.
    say.section("Restart: close the saver, open a fresh one, resume")
    say.say("Closed the SqliteSaver. Opening a new SqliteSaver and graph on the same file…")
    with SqliteSaver.from_conn_string(path) as saver:
        graph = compile_graph(saver)
        state = graph.get_state(thread_config())
        pending = [i.value for i in state.interrupts]
        say.say(f"  loaded {short(state.config['configurable']['checkpoint_id'])}: next = {list(state.next)}, "
                f"pending interrupt: {pending[0]['tool']}({json.dumps(pending[0]['args'])})" if pending else "  no pending interrupt?!")
        say.say(f"human: approve → Command(resume={RESUME})", "bold green")
        before = count_checkpoints(saver)
        again = say.stream(graph, Command(resume=RESUME), thread_config())
        result.resumed = again is None and not graph.get_state(thread_config()).next
        say.say(f"  checkpoints on thread: {count_checkpoints(saver)} (+{count_checkpoints(saver) - before} after resume)", "dim")

        # 3. Time travel: fork from the end of turn 1.
        say.section("Time travel: branch from an earlier checkpoint")
        history = list(graph.get_state_history(thread_config()))
        turn_ends = [s for s in reversed(history) if not s.next and s.metadata.get("source") == "loop"]
        target = turn_ends[0]  # oldest first: the end of turn 1 (greeting answered)
        target_id = target.config["configurable"]["checkpoint_id"]
        say.say(f"get_state_history: {len(history)} checkpoints. Picked {short(target_id)} "
                f"(step {target.metadata['step']}, end of turn 1, {len(target.values['messages'])} messages).")
        say.say(f"user (on the new branch): {BRANCH_MESSAGE}", "bold green")
        say.stream(graph, {"messages": [HumanMessage(BRANCH_MESSAGE, id=new_id())]}, thread_config(target_id))

        history = list(graph.get_state_history(thread_config()))
        head = graph.get_state(thread_config())
        head_id = head.config["configurable"]["checkpoint_id"]
        tree, children = checkpoint_tree(history, head_id)
        result.branch_point = target_id
        result.branch_children = children.get(target_id, [])
        by_id = {s.config["configurable"]["checkpoint_id"]: s for s in history}
        say.say(f"\n{short(target_id)} now has {len(result.branch_children)} children; both branches are kept:")
        for i, child in enumerate(result.branch_children, 1):
            tip = child
            while children.get(tip):
                tip = children[tip][-1]
            msgs = by_id[tip].values.get("messages", [])
            say.say(f"  branch {i} tip {short(tip)}: {len(msgs)} messages, last: {describe_message(msgs[-1])}")
        say.say(f"get_state(thread) now returns the newest checkpoint, {short(head_id)} (branch {len(result.branch_children)}).", "dim")

        # 4. The tree and the disk.
        say.section("The thread's checkpoint tree")
        console.print(tree)
        say.say("…id = last 8 hex digits of checkpoint_id; ← the node(s) whose writes made the checkpoint; "
                "msg = messages in its state; ⏸ = stopped at interrupt(); a branch's first checkpoint has the branch point as parent_checkpoint_id.", "dim")
        result.checkpoint_count = len(history)
        result.tables = disk_summary(saver.conn)
        refs, full, stored = sharing_summary(saver.conn)

    result.file_bytes = os.path.getsize(path)
    say.section("What is on disk")
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("table")
    table.add_column("rows", justify="right")
    table.add_column("payload bytes", justify="right")
    table.add_column("on-disk bytes (pages)", justify="right")
    for name, st in result.tables.items():
        table.add_row(name, str(st.rows), "—" if st.payload_bytes is None else f"{st.payload_bytes:,}",
                      "n/a" if st.page_bytes is None else f"{st.page_bytes:,}")
    console.print(table)
    leftovers = [s for s in ("-wal", "-shm") if os.path.exists(path + s)]
    say.say(f"file {path}: {result.file_bytes:,} bytes" + (f" (+ {', '.join(leftovers)} files)" if leftovers else ""))
    say.say(f"{result.checkpoint_count} checkpoints reference {refs} (channel, version) pairs; "
            f"{result.tables['blobs'].rows} blob rows hold them. A channel's value is stored only when it changes; "
            f"unchanged channels (and both branches) share the stored blob.")
    say.say(f"blob bytes stored: {stored:,}; storing every channel at every checkpoint would take {full:,}.")
    say.say("payload bytes = serialized values; pages include indexes and free space (SQLite dbstat).", "dim")
    say.section("See it in your browser")
    db_arg = "" if path == "threadline-demo.db" else f" --db {path}"
    say.say(f"threadline ui{db_arg}", "bold green")
    say.say("shows the thread as a branch graph — both branches, the interrupt — with each checkpoint's messages, "
            "writes and diffs. Add --graph threadline.demo:build_graph to edit a checkpoint and branch from it.")
    return result
