"""``threadline ui``'s actions over HTTP — rollback, fork, delete, prune, edit-and-branch —
with their previews, CSRF and staleness guards, read-only mode and the ``threadline ui``
command, on copies of the real demo database."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pytest

from threadline import SqliteSaver, lifecycle, read
from threadline.read.names import resolve_checkpoint
from threadline.demo import THREAD_ID
from threadline.web import UIConfig

import web_helpers as wh
from web_helpers import demo_copy, demo_path  # noqa: F401  (fixtures)


def _form(text: str) -> dict[str, str]:
    """The hidden fields of the confirmation form on a page."""
    form = text.split('class="confirm-form"', 1)[1].split("</form>", 1)[0]
    return {html.unescape(k): html.unescape(v) for k, v in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form)}


def test_rollback_preview_confirm_and_guards(demo_copy: str) -> None:
    with SqliteSaver.from_conn_string(demo_copy) as saver:
        history = read.thread_history(saver, THREAD_ID)
    target = history.fork_points[0]
    config = UIConfig(db=demo_copy)
    with wh.client(config) as c:
        preview = c.get("/confirm/rollback", params={"thread_id": THREAD_ID, "checkpoint_id": target})
        assert preview.status_code == 200
        assert "one new checkpoint" in preview.text and history.head in preview.text and "Nothing is deleted" in preview.text
        assert 'class="change-label removed"' in preview.text  # the head's later messages go
        form = _form(preview.text)
        assert form["guard"] == history.head and form["checkpoint_id"] == target
        # no CSRF token, a wrong one, or another origin: refused, nothing written
        no_csrf = {k: v for k, v in form.items() if k != "csrf"}
        assert c.post("/do/rollback", data=no_csrf).status_code == 403
        assert c.post("/do/rollback", data={**form, "csrf": "x"}).status_code == 403
        assert c.post("/do/rollback", data=form, headers={"origin": "http://evil.example"}).status_code == 403
        assert c.post("/do/rollback", data=form, headers={"sec-fetch-site": "cross-site"}).status_code == 403
        assert c.get("/do/rollback").status_code == 405
        with SqliteSaver.from_conn_string(demo_copy) as saver:
            assert read.thread_history(saver, THREAD_ID).head == history.head
        done = c.post("/do/rollback", data=form, headers={"origin": config.guard.origin}, follow_redirects=False)
        assert done.status_code == 303 and "Rolled+back" in done.headers["location"]
        # the same confirmation again: the head moved, so it is refused as stale
        stale = c.post("/do/rollback", data=form)
        assert stale.status_code == 409 and "review the rollback again" in html.unescape(stale.text)
    with SqliteSaver.from_conn_string(demo_copy) as saver:
        after = read.thread_history(saver, THREAD_ID)
        new = after.nodes[""][after.head]
        assert new.parent_checkpoint_id == target and new.metadata["threadline_op"] == "rollback"
        assert len(after.nodes[""]) == len(history.nodes[""]) + 1


def test_fork_delete_and_prune(demo_copy: str) -> None:
    with SqliteSaver.from_conn_string(demo_copy) as saver:
        history = read.thread_history(saver, THREAD_ID)
    fork_point = history.fork_points[0]
    with wh.client(UIConfig(db=demo_copy)) as c:
        preview = c.get("/confirm/fork", params={"thread_id": THREAD_ID, "checkpoint_id": fork_point, "to_thread": "copy-1"})
        assert "one root checkpoint" in preview.text and "copy-1" in preview.text
        r = c.post("/do/fork", data=_form(preview.text), follow_redirects=False)
        assert r.status_code == 303 and "copy-1" in r.headers["location"]
        assert c.get("/confirm/fork", params={"thread_id": THREAD_ID, "checkpoint_id": fork_point, "to_thread": "copy-1"}).status_code == 409

        refused = c.get("/confirm/delete", params={"thread_id": THREAD_ID, "checkpoint_id": fork_point})
        assert "child checkpoint" in refused.text and 'class="confirm-form"' not in refused.text
        preview = c.get("/confirm/delete", params={"thread_id": THREAD_ID, "checkpoint_id": fork_point, "mode": "reparent"})
        form = _form(preview.text)
        with SqliteSaver.from_conn_string(demo_copy) as saver:
            plan = lifecycle.delete_checkpoint(saver, THREAD_ID, fork_point, mode="reparent", dry_run=True)
        assert f"{len(plan.checkpoints)} checkpoint(s)" in preview.text and f"{plan.writes} pending write(s)" in preview.text
        assert "Re-attaches 2 child checkpoint(s)" in preview.text
        r = c.post("/do/delete", data=form, follow_redirects=False)
        assert r.status_code == 303
        with SqliteSaver.from_conn_string(demo_copy) as saver:
            assert fork_point not in read.thread_history(saver, THREAD_ID).nodes[""]

        preview = c.get("/confirm/prune", params={"thread_id": THREAD_ID, "keep_last": "3"})
        form = _form(preview.text)
        assert "Prune thread" in preview.text and json.loads(form["guards"]).keys() == {THREAD_ID}
        # the guard: a write between preview and confirmation leaves the thread alone
        with SqliteSaver.from_conn_string(demo_copy) as saver:
            # a rollback past the kept three: what pruning removes changes (a rollback to the head writes nothing)
            lifecycle.rollback(saver, THREAD_ID, resolve_checkpoint(saver, THREAD_ID, "HEAD~3"))
        r = c.post("/do/prune", data=form, follow_redirects=False)
        assert "changed+since+the+preview" in r.headers["location"]
        form = _form(c.get("/confirm/prune", params={"thread_id": THREAD_ID, "keep_last": "3"}).text)
        r = c.post("/do/prune", data=form, follow_redirects=False)
        assert r.status_code == 303 and "Pruned" in r.headers["location"]
        nothing = c.get("/confirm/prune", params={"thread_id": THREAD_ID, "keep_last": "3"})
        assert "Nothing to prune" in nothing.text
        assert c.get("/confirm/prune", params={"keep_last": "0"}).status_code == 400
    with SqliteSaver.from_conn_string(demo_copy) as saver:
        root = [n for n in read.thread_history(saver, THREAD_ID).ordered()]
        assert len(root) == 9  # keep_last: the newest 3 of each branch (the demo's two and the rollback's)


def test_edit_and_branch_applies_the_graphs_reducers(demo_copy: str) -> None:
    with SqliteSaver.from_conn_string(demo_copy) as saver:
        head = read.state_at(saver, THREAD_ID)
        before_ids = [m.id for m in head.values["messages"]]
    first = head.values["messages"][0]
    edited = [{"type": "human", "id": first.id, "content": "Hello, edited!"}, {"type": "human", "content": "A new question?", "id": "new-1"}]
    config = UIConfig(db=demo_copy, graph="threadline.demo:build_graph")
    with wh.client(config) as c:
        page = c.get("/checkpoint", params={"thread_id": THREAD_ID, "checkpoint_id": head.checkpoint_id}).text
        assert 'id="edit-channel"' in page and "retrieve_context" in page
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', page).group(1)
        params = {"thread_id": THREAD_ID, "checkpoint_id": head.checkpoint_id, "channel": "messages",
                  "value": json.dumps(edited), "as_node": "generate_response", "csrf": csrf}
        assert c.post("/confirm/edit", data={k: v for k, v in params.items() if k != "csrf"}).status_code == 403
        preview = c.post("/confirm/edit", data=params)
        assert preview.status_code == 200
        assert 'class="change-label edited"' in preview.text and "Hello, edited!" in preview.text
        assert preview.text.count('class="change-label added"') == 1 and "A new question?" in preview.text
        with SqliteSaver.from_conn_string(demo_copy) as saver:  # the preview wrote nothing
            assert read.thread_history(saver, THREAD_ID).head == head.checkpoint_id
        r = c.post("/do/edit", data=_form(preview.text), follow_redirects=False)
        assert r.status_code == 303
        bad = c.post("/confirm/edit", data={**params, "value": "{not json"})
        assert bad.status_code == 400 and "not valid JSON" in bad.text
    with SqliteSaver.from_conn_string(demo_copy) as saver:
        new = read.state_at(saver, THREAD_ID)
        assert new.parent_checkpoint_id == head.checkpoint_id and new.metadata["source"] == "update"
        msgs = new.values["messages"]
        assert [m.id for m in msgs] == [*before_ids, "new-1"]  # replaced by id, appended
        assert msgs[0].content == "Hello, edited!" and msgs[0].type == "human"
    with wh.client(UIConfig(db=demo_copy)) as c:
        assert "--graph" in c.post("/confirm/edit", data={**params, "csrf": c.app.state.guard.csrf}).text


def test_read_only(demo_copy: str) -> None:
    with SqliteSaver.from_conn_string(demo_copy) as saver:
        head = read.thread_history(saver, THREAD_ID).head
    with wh.client(UIConfig(db=demo_copy, read_only=True)) as c:
        page = c.get("/checkpoint", params={"thread_id": THREAD_ID, "checkpoint_id": head}).text
        assert "read-only" in page and "Act on this checkpoint" not in page and "/confirm/" not in page
        assert "Prune threads" not in c.get("/").text
        assert c.get("/confirm/rollback", params={"thread_id": THREAD_ID, "checkpoint_id": head}).status_code == 403
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', page).group(1)
        r = c.post("/do/rollback", data={"csrf": csrf, "thread_id": THREAD_ID, "checkpoint_id": head, "guard": head})
        assert r.status_code == 403
        # the connection itself refuses writes
        saver = c.app.state.db.saver
        with pytest.raises(Exception, match="readonly|read-only"):  # a rollback that writes (the head's would not)
            lifecycle.rollback(saver, THREAD_ID, read.thread_history(saver, THREAD_ID).nodes[""][head].parent_checkpoint_id)


def test_unwritable_file_opens_read_only(demo_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file this process cannot write is browsed read-only, with the reason shown (tests run as
    root, who may write anything, so the permission check is what is replaced here)."""
    monkeypatch.setattr(os, "access", lambda path, mode: mode != os.W_OK)
    with wh.client(UIConfig(db=demo_path)) as c:
        assert c.app.state.db.read_only and "not writable" in c.app.state.db.reason
        page = c.get("/")
        assert 'class="badge ro"' in page.text and "not writable" in page.text
        assert c.get("/confirm/prune", params={"keep_last": "1"}).status_code == 403


def test_demo_ends_pointing_at_the_ui(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from threadline.demo import run_demo

    out = io.StringIO()
    run_demo(str(tmp_path / "d.db"), Console(file=out, width=200))
    tail = out.getvalue().strip().splitlines()[-3:]
    assert f"threadline ui --db {tmp_path / 'd.db'}" in "\n".join(tail)


def test_cli_ui_options_and_busy_port(demo_path: str) -> None:
    import socket

    from typer.testing import CliRunner

    from threadline.cli import app

    runner = CliRunner()
    out = runner.invoke(app, ["ui", "--help"]).output
    for option in ("--db", "--host", "--port", "--no-browser", "--read-only", "--graph"):
        assert option in out
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = runner.invoke(app, ["ui", "--db", demo_path, "--port", str(port), "--no-browser"])
    assert r.exit_code == 1 and "pass another --port" in r.output
    r = runner.invoke(app, ["ui", "--db", demo_path + ".missing", "--no-browser"])
    assert r.exit_code == 2 and "no SQLite database" in r.output


