"""The browser's humans-in-the-loop routes (issue 30) in process: the inbox page and its header
count, a resume streamed as server-sent events, replay and edit-and-run, the agent's shape, and the
refusals — no --graph, --read-only, no CSRF token — each in one line."""

from __future__ import annotations

from pathlib import Path

import hitl_agent as A
from threadline import open_saver, read
from threadline.web import UIConfig
from web_helpers import client

GRAPH = "hitl_agent:build_graph"


def _events(text: str) -> list[tuple[str, str]]:
    out = []
    for chunk in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        out.append((lines["event"], lines["data"]))
    return out


def _db(tmp_path: Path, *threads: str) -> str:
    path = str(tmp_path / "ui.db")
    with open_saver(path) as saver:
        for tid in threads:
            A.start(saver, tid)
    return path


def test_inbox_resume_replay_edit_and_shape(tmp_path: Path) -> None:
    path = _db(tmp_path, "r-1", "r-2")
    config = UIConfig(db=path, graph=GRAPH)
    with client(config) as c:
        page = c.get("/inbox").text
        assert 'id="inbox-count">2<' in page and page.count('class="inbox-item"') == 2 and "approve this refund?" in page
        csrf = config.guard.csrf
        r = c.post("/run/resume", data={"csrf": csrf, "thread_id": "r-1", "value": '{"approved": true}'})
        assert r.headers["content-type"].startswith("text/event-stream")
        events = _events(r.text)
        assert [e for e, _ in events] == ["started", "update", "update", "done"]
        assert "refunded 42 on order 7" in events[1][1] and '"kind": "done"' in events[-1][1]
        assert 'id="inbox-count">1<' in c.get("/inbox").text
        with open_saver(path) as saver:
            by_step = {t.metadata["step"]: t.config["configurable"]["checkpoint_id"] for t in saver.list({"configurable": {"thread_id": "r-1"}})}
            asked = by_step[1]
            r2_head = read.thread_status(saver, "r-2").checkpoint_id
        cp = c.get("/checkpoint", params={"thread_id": "r-1", "checkpoint_id": asked}).text
        assert "answered" in cp and "waiting for an answer" not in cp and "approved" in cp
        step0 = by_step[0]
        events = _events(c.post("/run/replay", data={"csrf": csrf, "thread_id": "r-1", "checkpoint_id": step0}).text)
        assert [e for e, _ in events][-1] == "done" and '"__interrupt__"' in events[-2][1]
        events = _events(c.post("/run/edit", data={"csrf": csrf, "thread_id": "r-2", "checkpoint_id": r2_head, "channel": "messages", "value": '[{"type": "human", "content": "and order 8?"}]',
            "as_node": "tools"}).text)
        assert events[-1][0] == "done", events
        shape = c.get("/api/agent").json()
        assert {n["id"] for n in shape["nodes"]} >= {"agent", "tools"}
        assert {(e["source"], e["target"], e["conditional"]) for e in shape["edges"]} >= {("agent", "tools", True), ("tools", "agent", False)}
        assert 'id="agent"' in c.get("/thread", params={"thread_id": "r-1"}).text
        bad = _events(c.post("/run/resume", data={"csrf": csrf, "thread_id": "r-1", "value": "true", "interrupt_id": "nope"}).text)
        assert bad[-1][0] == "error" and "does not wait on interrupt" in bad[-1][1]
        failed = _events(c.post("/run/resume", data={"csrf": csrf, "thread_id": "r-1", "value": '{"fail": true}'}).text)
        assert failed[-1][0] == "error" and "RuntimeError: the payment service is down" in failed[-1][1]  # shown where it happened
        r = c.post("/run/resume", data={"csrf": csrf, "thread_id": "r-1", "value": "{oops"})
        assert r.status_code == 400 and "not valid JSON" in r.text
        assert c.post("/run/resume", data={"thread_id": "r-1", "value": "true"}).status_code == 403  # no CSRF token


def test_refusals_without_graph_and_read_only(tmp_path: Path) -> None:
    path = _db(tmp_path, "w")
    config = UIConfig(db=path)
    with client(config) as c:
        page = c.get("/inbox").text
        assert "--graph module:factory" in page and "Approve" not in page
        r = c.post("/run/resume", data={"csrf": config.guard.csrf, "thread_id": "w", "value": "true"})
        assert r.status_code == 400 and "--graph module:factory" in r.text
        assert c.get("/api/agent").status_code == 404
    config = UIConfig(db=path, graph=GRAPH, read_only=True)
    with client(config) as c:
        assert "Approve" not in c.get("/inbox").text
        r = c.post("/run/resume", data={"csrf": config.guard.csrf, "thread_id": "w", "value": "true"})
        assert r.status_code == 403 and "read-only" in r.text
    with open_saver(path) as saver:
        assert read.thread_status(saver, "w").kind == "interrupted"
