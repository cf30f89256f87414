"""Actions that write: rollback, fork, delete a checkpoint, prune, edit-and-branch.

Each is two requests. ``GET /confirm/<action>`` (``POST`` for an edit) computes exactly what would change —
the lifecycle operation's own dry run where it has one (delete, prune), the state the
new checkpoint would carry otherwise — and shows it with a confirmation form. ``POST
/do/<action>`` (CSRF-checked) carries a *guard* from that preview (the head seen, or
a fingerprint of the plan) and runs the operation in one transaction that first
checks the guard, so nothing different from what was confirmed is ever written; a
changed database answers 409 and asks to review again. All are refused when the
database is read-only.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from threadline import lifecycle, read
from threadline.errors import ConfigError, NotFoundError, UnsafeOperationError
from threadline.keys import thread_id_of
from threadline.read import all_thread_ids_op, bind_graph, diff_values, head_op
from threadline.storage.ops import Op, Q
from threadline.web.render import isolated, url
from threadline.read.official import scope_of
from threadline.transfer.official import adopt_now
from threadline.web.respond import render, thread_saver
from threadline.web.security import csrf_form

ACTIONS = ("rollback", "fork", "delete", "prune", "edit")


class Stale(UnsafeOperationError):
    """The database changed between the preview and the confirmation."""


def fingerprint(plan: Any) -> str:
    """A digest of a lifecycle plan (``to_json`` without ``executed``) — the guard of delete and prune."""
    data = {k: v for k, v in plan.to_json().items() if k != "executed"}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:32]


def allowed(request: Request) -> None:
    """HTTP 403 in one line when the database is open read-only (every action and run checks it)."""
    if request.app.state.db.read_only:
        raise HTTPException(403, f"this database is open read-only ({request.app.state.db.reason}); actions are off")


def writer(request: Request, thread_ids: list[str]) -> Any:
    """The saver a confirmed action writes with (opened for writing now, if not yet), with the
    threads it acts on adopted first when the official saver's tables hold checkpoints of them
    (as any program's first use of a thread adopts it)."""
    allowed(request)
    saver = request.app.state.db.writer()
    adopt_now(saver, thread_ids)
    return saver


def _target(source: Any) -> tuple[str, str, str]:
    tid = thread_id_of(source.get("thread_id") or None)
    cid = source.get("checkpoint_id")
    if not cid:
        raise ConfigError("missing checkpoint_id")
    return tid, source.get("ns") or "", cid


@contextmanager
def _served(request: Request) -> Iterator[None]:
    """HTTP 501 saying in one line that the action is not available on this backend yet, when its
    operation needs a named statement the backend's dialect does not implement (NotImplementedError)."""
    try:
        yield
    except NotImplementedError:
        action = request.path_params["action"]
        raise HTTPException(501, f"{action} is not available on this backend ({request.app.state.db.backend}) yet") from None


# --- guarded operations: check what the preview saw, then write, in one transaction ---


def _rollback_op(d: Any, serde: Any, tid: str, ns: str, cid: str, expect_head: str) -> Op[Any]:
    head = yield from head_op(d, tid, ns)
    if head != expect_head:
        raise Stale(f"the thread's head moved from {expect_head!r} to {head!r} since the preview; review the rollback again")
    return (yield from lifecycle.rollback_op(d, serde, tid, cid, checkpoint_ns=ns))


def _delete_op(d: Any, tid: str, ns: str, cid: str, mode: str, expect: str) -> Op[Any]:
    plan = yield from lifecycle.delete_checkpoint_op(d, tid, cid, checkpoint_ns=ns, mode=mode, dry_run=True)
    if fingerprint(plan) != expect:
        raise Stale("what this delete removes changed since the preview; review it again")
    return (yield from lifecycle.delete_checkpoint_op(d, tid, cid, checkpoint_ns=ns, mode=mode))


def _prune_op(d: Any, tid: str, policy: lifecycle.RetentionPolicy, expect: str) -> Op[Any]:
    plan = yield from lifecycle.prune_thread_op(d, tid, policy, dry_run=True)
    if fingerprint(plan) != expect:
        raise Stale(f"what pruning thread {tid!r} removes changed since the preview")
    return (yield from lifecycle.prune_thread_op(d, tid, policy))


def _thread_exists_op(d: Any, tid: str) -> Op[bool]:
    return bool((yield Q(d.THREAD, (tid,))))


# --- previews -------------------------------------------------------------------------


def _policy(source: Any) -> lifecycle.RetentionPolicy:
    def number(name: str, parse: Any) -> Any:
        raw = (source.get(name) or "").strip()
        if not raw:
            return None
        try:
            return parse(raw)
        except ValueError as exc:
            raise ConfigError(f"{name}: {exc}") from None

    return lifecycle.RetentionPolicy(
        keep_last=number("keep_last", int),
        older_than=number("older_than", read.parse_duration),
        idle_longer_than=number("idle_longer_than", read.parse_duration),
        keep_last_per=(source.get("keep_last_per") or "branch").strip(),
    )


def _edit_values(source: Any) -> tuple[str, Any, str | None]:
    channel = (source.get("channel") or "").strip()
    if not channel:
        raise ConfigError("pick the channel to edit")
    try:
        value = json.loads(source.get("value") or "")
    except json.JSONDecodeError as exc:
        raise ConfigError(f"the new value of {channel!r} is not valid JSON: {exc}") from None
    return channel, value, (source.get("as_node") or None)


def edit_preview(saver: Any, graph: Any, tid: str, cid: str, channel: str, value: Any, as_node: str | None) -> dict[str, dict]:
    """What ``update_state`` at checkpoint ``cid`` would store, without storing it.

    The checkpoint and its pending writes are copied into an in-memory saver and
    LangGraph's own ``update_state(config, {channel: value}, as_node=…)`` runs there,
    so the graph's reducers decide the result (e.g. ``add_messages`` replaces a
    message with the same id and appends new ones). Returns ``read.diff_values`` of
    the state before and after.
    """
    config = {"configurable": {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": cid}}
    tup = saver.get_tuple(config)
    if tup is None:
        raise NotFoundError(f"no checkpoint {cid!r} in thread {tid!r}")
    mem = InMemorySaver()
    parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    put_conf = {"configurable": {"thread_id": tid, "checkpoint_ns": "", **({"checkpoint_id": parent} if parent else {})}}
    saved = mem.put(put_conf, tup.checkpoint, tup.metadata, tup.checkpoint["channel_versions"])
    by_task: dict[str, list] = defaultdict(list)
    for task_id, ch, v in tup.pending_writes or []:
        by_task[task_id].append((ch, v))
    for task_id, writes in by_task.items():
        mem.put_writes(saved, writes, task_id)
    before = bind_graph(graph, saver).get_state(config).values
    try:
        new_config = bind_graph(graph, mem).update_state(config, {channel: value}, as_node=as_node)
    except Exception as exc:  # LangGraph's InvalidUpdateError, a reducer's own error, ...
        raise ConfigError(f"LangGraph refused the update: {exc}") from None
    after = bind_graph(graph, mem).get_state(new_config).values
    return diff_values(before, after)


async def confirm(request: Request) -> Response:
    """The confirmation page of an action: exactly what it changes, and the form to do it.

    Parameters come in the query string, or — for an edit, whose value can be long — in a
    POSTed form (CSRF-checked like every POST; the preview itself writes nothing).
    """
    source = await csrf_form(request) if request.method == "POST" else request.query_params
    with _served(request):
        return await run_in_threadpool(_preview, request, source)


def _preview(request: Request, q: Any) -> Response:
    """The preview, read (writing nothing: a thread not adopted yet is previewed as adopted)."""
    allowed(request)
    action = request.path_params["action"]
    if action not in ACTIONS:
        raise HTTPException(404, f"no action {action!r}")
    with thread_saver(request, q.get("thread_id")) as saver:
        return _previewed(request, q, saver, action)


def _previewed(request: Request, q: Any, saver: Any, action: str) -> Response:
    d = saver.dialect
    ctx: dict[str, Any] = {"action": action, "q": dict(q), "thread_id": q.get("thread_id"), "ns": q.get("ns") or ""}
    if action == "prune":
        policy = _policy(q)
        if q.get("thread_id"):
            ids = [thread_id_of(q.get("thread_id"))]
        else:  # threadline's threads (a thread not adopted yet is pruned from its own page)
            ids = saver.run(all_thread_ids_op(d)) if scope_of(saver, True).threadline else []
        plans = [saver.run(lifecycle.prune_thread_op(d, tid, policy, dry_run=True)) for tid in ids]
        plans = [p for p in plans if p.checkpoints]
        ctx.update(policy=policy, plans=plans, guards=json.dumps({p.thread_id: fingerprint(p) for p in plans}),
                   totals={"checkpoints": sum(len(p.checkpoints) for p in plans), "writes": sum(p.writes for p in plans),
                           "blobs": sum(p.blobs for p in plans), "bytes": sum(p.bytes_freed for p in plans)})
        return render(request, "confirm.html", ctx)
    tid, ns, cid = _target(q)
    view = read.state_at(saver, tid, cid, checkpoint_ns=ns)
    ctx.update(view=view, checkpoint_id=cid)
    if action == "rollback":
        head = saver.run(head_op(d, tid, ns))
        ctx.update(head=head, guard=head, changes=read.diff(saver, tid, head, cid, checkpoint_ns=ns).channels if head != cid else {})
    elif action == "fork":
        to = thread_id_of((q.get("to_thread") or "").strip() or None)
        taken = read.list_threads(request.app.state.db.saver, thread_ids=[to], limit=1, official=True).total  # the whole database
        if to == tid or taken:
            raise UnsafeOperationError(f"thread {to!r} already exists: pick a new thread id for the fork")
        ctx.update(to_thread=to, sizes=read.task_stats(saver, tid, cid, checkpoint_ns=ns))
    elif action == "delete":
        mode = q.get("mode") or "refuse"
        try:
            plan = saver.run(lifecycle.delete_checkpoint_op(d, tid, cid, checkpoint_ns=ns, mode=mode, dry_run=True))
            ctx.update(mode=mode, plan=plan, guard=fingerprint(plan))
        except UnsafeOperationError as exc:  # it has children (mode "refuse"), or a kept checkpoint needs it
            ctx.update(mode=mode, refused=str(exc))
    else:
        graph = request.app.state.graph
        if graph is None:
            raise ConfigError("edit-and-branch needs the agent's graph: start `threadline ui` with --graph module:factory")
        if ns:
            raise ConfigError("edit-and-branch works on the root graph's checkpoints (checkpoint_ns ''); open the parent graph's checkpoint")
        channel, value, as_node = _edit_values(q)
        ctx.update(channel=channel, value_text=q.get("value"), as_node=as_node,
                   changes=edit_preview(saver, graph, tid, cid, channel, value, as_node))
    return render(request, "confirm.html", ctx)


async def do(request: Request) -> Response:
    """Run a confirmed action (POST, CSRF-checked) and redirect to what it made."""
    form = await csrf_form(request)
    allowed(request)
    action = request.path_params["action"]
    if action not in ACTIONS:
        raise HTTPException(404, f"no action {action!r}")
    with _served(request):
        location = await run_in_threadpool(_execute, request, action, form)
    return RedirectResponse(location, status_code=303)


def _execute(request: Request, action: str, form: FormData) -> str:
    targets = list(json.loads(form.get("guards") or "{}")) if action == "prune" else []
    if form.get("thread_id"):
        targets.append(thread_id_of(form.get("thread_id")))
    saver = writer(request, targets)  # the first write: the database is opened for writing here
    d, serde = saver.dialect, saver.serde
    if action == "prune":
        policy = _policy(form)
        guards = json.loads(form.get("guards") or "{}")
        done, skipped = 0, []
        for tid, expect in guards.items():
            try:
                done += len(saver.run(_prune_op(d, tid, policy, expect), write=True).checkpoints)
            except Stale:
                skipped.append(tid)
        note = f"Pruned {done} checkpoint(s) from {len(guards) - len(skipped)} thread(s)."
        if skipped:
            note += f" {len(skipped)} thread(s) changed since the preview and were left alone: {', '.join(map(isolated, skipped[:5]))}."
        tid = form.get("thread_id")
        exists = bool(tid) and saver.run(_thread_exists_op(d, tid))
        return url("/thread", thread_id=tid, done=note) if exists else url("/", done=note)
    tid, ns, cid = _target(form)
    if action == "rollback":
        r = saver.run(_rollback_op(d, serde, tid, ns, cid, form.get("guard") or ""), write=True)
        done = (f"Rolled back: new head {r.checkpoint_id} carries the state of {cid}." if r.written
                else f"Nothing written: {cid} is already the head, so a rollback would change nothing.")
        return url("/checkpoint", thread_id=tid, ns=ns, checkpoint_id=r.checkpoint_id, done=done)
    if action == "fork":
        r = lifecycle.fork(saver, tid, cid, (form.get("to_thread") or "").strip() or None, checkpoint_ns=ns)
        return url("/thread", thread_id=r.thread_id, done=f"Forked {isolated(tid)} at {cid} into the new thread {isolated(r.thread_id)}.")
    if action == "delete":
        mode = form.get("mode") or "refuse"
        plan = saver.run(_delete_op(d, tid, ns, cid, mode, form.get("guard") or ""), write=True)
        note = f"Deleted {len(plan.checkpoints)} checkpoint(s), freeing {plan.bytes_freed} bytes."
        return url("/", done=note) if plan.thread_deleted else url("/thread", thread_id=tid, ns=ns, done=note)
    graph = request.app.state.graph
    if graph is None or ns:
        raise ConfigError("edit-and-branch needs --graph and a root-graph checkpoint")
    channel, value, as_node = _edit_values(form)
    config = {"configurable": {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": cid}}
    try:
        new = bind_graph(graph, saver).update_state(config, {channel: value}, as_node=as_node)
    except Exception as exc:
        raise ConfigError(f"LangGraph refused the update: {exc}") from None
    new_id = new["configurable"]["checkpoint_id"]
    return url("/checkpoint", thread_id=tid, checkpoint_id=new_id, done=f"Saved the edit of {channel!r} as a new branch from {cid}.")


ROUTES = [
    Route("/confirm/{action}", confirm, methods=["GET", "POST"]),
    Route("/do/{action}", do, methods=["POST"]),
]
