"""Read models over a threadline database: threads, the checkpoint tree, the state at
a checkpoint, diffs, the audit trail, the latest value of a channel, and statistics.

Every read model is a sans-IO operation (a generator yielding ``engine.ops.Q``) plus a
sync convenience wrapper taking a saver::

    from threadline import open_saver
    from threadline import history

    with open_saver("threadline-demo.db") as saver:
        page = history.list_threads(saver, limit=20)          # sync wrapper
        tree = history.thread_history(saver, "thread-1")
    # async: await saver.arun(history.threads_op(saver.dialect, limit=20))

Conventions (all functions):

* times are seconds since the epoch (UTC, ``float``); sizes are bytes as stored
  (after threadline's codec: compressed/delta-encoded blobs count as stored);
* the *head* of a thread is its latest checkpoint (largest checkpoint_id) in the
  root namespace ``checkpoint_ns == ""``, exactly as LangGraph's ``get_tuple``
  without a checkpoint_id picks it — so after a rollback the head is the rollback
  checkpoint, not the newest blob version (seed 000's ``MAX(version)`` shortcut is
  wrong after a rollback);
* channel values are only decoded when a function returns them (``state_at``,
  ``diff``, ``latest_values``); everything else reads checkpoint JSON (without
  values), column sizes and write metadata;
* every result type has ``to_json()`` returning plain JSON-able data (values
  pass through ``jsonable``).

Errors: ``NotFoundError`` for an unknown thread or checkpoint, ``ConfigError`` for
a malformed id, ``CorruptRowError`` for a stored row that cannot be decoded.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline.engine import ops
from threadline.engine import rows as R
from threadline.engine.dialect import Dialect, dumps_json
from threadline.engine.ops import Op, Q
from threadline.errors import ConfigError, CorruptRowError, NotFoundError
from threadline.keys import thread_id_of

NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
INTERRUPT = "__interrupt__"
ERROR = "__error__"
RESUME = "__resume__"
TASKS = "__pregel_tasks"
SPECIAL_WRITE_CHANNELS = frozenset({INTERRUPT, ERROR, RESUME, "__scheduled__", "__no_writes__", "__return__", "__error_source_node__"})

# --- small helpers -----------------------------------------------------------


def iso(ts: float | None) -> str | None:
    """Epoch seconds → ISO 8601 UTC text (None stays None)."""
    if ts is None:
        return None
    return _dt.datetime.fromtimestamp(float(ts), _dt.timezone.utc).isoformat()


def is_internal_channel(channel: str) -> bool:
    """True for LangGraph's bookkeeping channels (``__start__``, ``branch:to:x``, ``join:…``, ``__pregel_*``).

    They are hidden from ``values`` and diffs unless asked for.
    """
    return channel.startswith(("__", "branch:", "join:", "start:", "split:"))


def node_of_task_path(task_path: str | None, task_id: str | None = None) -> str | None:
    """The node name a pending write came from, read from its ``task_path``.

    LangGraph stores ``task_path_str(task.path)``: ``"~__pregel_pull, NODE"`` for a
    node triggered by edges. Writes of the null task (``update_state``, resume
    commands, input) are ``"__input__"``. Paths that do not name a node (``Send``
    pushes, databases imported from savers that drop ``task_path``) give None.
    """
    if task_id == NULL_TASK_ID:
        return "__input__"
    if not task_path:
        return None
    parts = [p.strip() for p in task_path.split(",")]
    if parts and parts[0].lstrip("~") == "__pregel_pull" and len(parts) > 1:
        return parts[1] or None
    return None


def jsonable(value: Any, *, max_depth: int = 12) -> Any:
    """A JSON-able rendering of a decoded channel value (for ``--json`` and diffs).

    LangChain messages become ``{"type", "id", "content", …}`` dicts (their
    ``model_dump``), dataclasses and pydantic models their fields, sets sorted
    lists, bytes ``{"bytes": n}``; anything else falls back to ``repr``.
    """
    if max_depth <= 0:
        return repr(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, max_depth=max_depth - 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, max_depth=max_depth - 1) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [jsonable(v, max_depth=max_depth - 1) for v in value]
        try:
            return sorted(items)  # type: ignore[type-var]
        except TypeError:
            return items
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes": len(bytes(value))}
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            data = dump()
        except Exception:  # pragma: no cover - exotic models
            data = None
        if isinstance(data, Mapping):
            data = {k: v for k, v in data.items() if v not in (None, {}, [], "") or k in ("content", "id", "type")}
            return jsonable(data, max_depth=max_depth - 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"_type": type(value).__name__, **{f.name: jsonable(getattr(value, f.name), max_depth=max_depth - 1) for f in dataclasses.fields(value)}}
    if hasattr(value, "_asdict"):
        return jsonable(value._asdict(), max_depth=max_depth - 1)
    # langgraph.types.Interrupt, Send and friends
    if type(value).__name__ == "Interrupt" and hasattr(value, "value"):
        return {"_type": "Interrupt", "id": getattr(value, "id", None), "value": jsonable(value.value, max_depth=max_depth - 1)}
    if type(value).__name__ == "Send" and hasattr(value, "node"):
        return {"_type": "Send", "node": value.node, "arg": jsonable(getattr(value, "arg", None), max_depth=max_depth - 1)}
    return repr(value)


def _json(d: Dialect, value: Any, where: str) -> Any:
    try:
        return d.load_json(value)
    except ValueError as exc:
        raise CorruptRowError(f"{where}: stored JSON is unreadable ({exc})") from exc


def _doc(d: Dialect, value: Any, where: str) -> dict:
    doc = _json(d, value, where)
    if not isinstance(doc, dict):
        raise CorruptRowError(f"{where}: not a JSON object")
    return doc


def _ns(checkpoint_ns: Any) -> str:
    if checkpoint_ns is None:
        return ""
    if not isinstance(checkpoint_ns, str):
        raise ConfigError(f"checkpoint_ns must be a string, got {type(checkpoint_ns).__name__} {checkpoint_ns!r}")
    return checkpoint_ns


def _cid(checkpoint_id: Any, what: str = "checkpoint_id") -> str:
    if not isinstance(checkpoint_id, str) or not checkpoint_id:
        raise ConfigError(f"{what} must be a non-empty string, got {checkpoint_id!r}")
    return checkpoint_id


def head_op(d: Dialect, thread_id: Any, checkpoint_ns: str = "") -> Op[str | None]:
    """The head checkpoint_id of a thread's namespace, or None when it has no checkpoint."""
    tid = thread_id_of(thread_id)
    found = yield Q(
        "SELECT MAX(checkpoint_id) FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ?",
        (tid, _ns(checkpoint_ns)),
    )
    return found[0][0] if found and found[0][0] is not None else None


def checkpoint_row_op(d: Dialect, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None) -> Op[tuple]:
    """The checkpoint row (``rows.CHECKPOINT_COLUMNS`` + step, source, created_at) named, or the head.

    Raises NotFoundError naming the thread/checkpoint when it does not exist.
    """
    cols = f"{R.CHECKPOINT_COLUMNS}, step, source, created_at"
    if checkpoint_id:
        found = yield Q(
            f"SELECT {cols} FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            (thread_id, checkpoint_ns, checkpoint_id),
        )
        if not found:
            raise NotFoundError(f"no checkpoint {checkpoint_id!r} in thread {thread_id!r} (checkpoint_ns {checkpoint_ns!r})")
    else:
        found = yield Q(
            f"SELECT {cols} FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1",
            (thread_id, checkpoint_ns),
        )
        if not found:
            raise NotFoundError(f"thread {thread_id!r} has no checkpoint (checkpoint_ns {checkpoint_ns!r})")
    return tuple(found[0])


def load_channels_op(
    d: Dialect, serde: SerializerProtocol, rows: Sequence[Sequence[Any]], channels: Mapping[int, Iterable[str]] | Iterable[str] | None
) -> Op[list[dict[str, Any]]]:
    """Decode only some channel values of checkpoint rows (``rows.CHECKPOINT_COLUMNS`` order).

    ``channels`` is either one iterable of channel names for every row, or a
    mapping row index → channel names. Returns, per row, ``{channel: value}`` for
    the requested channels that hold a value (empty channels are absent).

    Decoding goes through ``ops.load_tuples`` (so codec changes — compression,
    delta-encoded blobs — apply) with each row's ``channel_versions`` narrowed to
    the requested channels and a checkpoint_id no write can carry, so neither the
    other channels nor the pending writes are fetched.
    """
    narrowed = []
    for i, row in enumerate(rows):
        where = f"checkpoint ({row[0]!r}, {row[1]!r}, {row[2]!r})"
        doc = _doc(d, row[4], where)
        if channels is None:
            wanted = None
        elif isinstance(channels, Mapping):
            wanted = set(channels.get(i, ()))
        else:
            wanted = set(channels)
        versions = doc.get("channel_versions") or {}
        doc = {"channel_versions": {ch: v for ch, v in versions.items() if wanted is None or ch in wanted}}
        # "" is never a stored checkpoint_id (keys.key_of rejects it), so no write matches.
        narrowed.append((row[0], row[1], "", None, dumps_json(doc), "{}"))
    if not narrowed:
        return []
    tuples = yield from ops.load_tuples(d, serde, narrowed)
    return [dict(t.checkpoint["channel_values"]) for t in tuples]


# --- threads -----------------------------------------------------------------


@dataclass
class ThreadInfo:
    """One row of ``threads``: times in epoch seconds, ``bytes`` stored for the thread."""

    thread_id: str
    created_at: float
    updated_at: float
    checkpoint_count: int
    bytes: int
    head_checkpoint_id: str | None
    head_step: int | None
    head_source: str | None

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["created"] = iso(self.created_at)
        d["updated"] = iso(self.updated_at)
        return d


@dataclass
class ThreadPage:
    """A page of threads (most recently updated first), the total matching, and the next offset (None at the end)."""

    threads: list[ThreadInfo]
    total: int
    offset: int
    next_offset: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "threads": [t.to_json() for t in self.threads],
            "total": self.total,
            "offset": self.offset,
            "next_offset": self.next_offset,
        }


def parse_duration(text: str | float | int) -> float:
    """``"90s"``, ``"15m"``, ``"12h"``, ``"30d"``, ``"2w"`` or a number of seconds → seconds.

    Raises ValueError naming the text when it is not a duration.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"duration must not be negative, got {text!r}")
        return float(text)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 15m, 12h, 30d, 2w)")
    s = text.strip().lower()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    try:
        if s[-1] in units:
            value = float(s[:-1]) * units[s[-1]]
        else:
            value = float(s)
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 15m, 12h, 30d, 2w)") from None
    if value < 0:
        raise ValueError(f"duration must not be negative, got {text!r}")
    return value


def threads_op(
    d: Dialect,
    *,
    metadata: Mapping[str, Any] | None = None,
    idle_for: float | None = None,
    active_within: float | None = None,
    thread_ids: Sequence[str] | None = None,
    limit: int = 50,
    offset: int = 0,
    order_by: str = "updated",
    now: float | None = None,
) -> Op[ThreadPage]:
    """Threads, most recently updated first, from the ``threads`` index (no checkpoint scan).

    Args:
        metadata: keep threads having at least one checkpoint whose metadata
            matches this filter as ``list(filter=…)`` matches it (bound parameters).
        idle_for: keep threads not updated for at least this many seconds.
        active_within: keep threads updated within this many seconds.
        thread_ids: restrict to these threads.
        limit, offset: paging (``limit`` ≥ 1, ``offset`` ≥ 0).
        order_by: ``"updated"`` (most recent first, default), ``"created"``
            (newest first), ``"bytes"`` (largest first) or ``"thread_id"``.
        now: the clock (epoch seconds), default ``time.time()``.

    Returns a ``ThreadPage``; each thread carries its head checkpoint's id, step and source.
    """
    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    if not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a non-negative integer, got {offset!r}")
    orders = {
        "updated": "t.updated_at DESC, t.thread_id",
        "created": "t.created_at DESC, t.thread_id",
        "bytes": "t.bytes DESC, t.thread_id",
        "thread_id": "t.thread_id",
    }
    if order_by not in orders:
        raise ValueError(f"order_by must be one of {sorted(orders)}, got {order_by!r}")
    now = time.time() if now is None else now
    clauses: list[str] = []
    params: list[Any] = []
    if idle_for is not None:
        clauses.append("t.updated_at <= ?")
        params.append(now - float(idle_for))
    if active_within is not None:
        clauses.append("t.updated_at >= ?")
        params.append(now - float(active_within))
    if thread_ids is not None:
        ids = [thread_id_of(t) for t in thread_ids]
        if not ids:
            return ThreadPage([], 0, offset, None)
        clauses.append(f"t.thread_id IN ({ops.placeholders(len(ids))})")
        params += ids
    if metadata:
        cond, p = d.metadata_filter(metadata)
        clauses.append(f"EXISTS (SELECT 1 FROM threadline_checkpoints c WHERE c.thread_id = t.thread_id AND {cond})")
        params += p
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    total = (yield Q(f"SELECT COUNT(*) FROM threadline_threads t {where}", params))[0][0]
    found = yield Q(
        "SELECT t.thread_id, t.created_at, t.updated_at, t.checkpoint_count, t.bytes, h.checkpoint_id, h.step, h.source "
        "FROM threadline_threads t LEFT JOIN threadline_checkpoints h ON h.thread_id = t.thread_id AND h.checkpoint_ns = '' "
        "AND h.checkpoint_id = (SELECT MAX(c2.checkpoint_id) FROM threadline_checkpoints c2 WHERE c2.thread_id = t.thread_id AND c2.checkpoint_ns = '') "
        f"{where} ORDER BY {orders[order_by]} LIMIT ? OFFSET ?",
        [*params, limit, offset],
    )
    threads = [ThreadInfo(r[0], float(r[1]), float(r[2]), int(r[3]), int(r[4]), r[5], r[6], r[7]) for r in found]
    nxt = offset + len(threads)
    return ThreadPage(threads, int(total), offset, nxt if nxt < total else None)


def list_threads(saver: Any, **kwargs: Any) -> ThreadPage:
    """Sync ``threads_op`` on a saver (same keyword arguments)."""
    return saver.run(threads_op(saver.dialect, **kwargs))


def all_thread_ids_op(d: Dialect) -> Op[list[str]]:
    """Every thread_id in the ``threads`` index, sorted."""
    return [r[0] for r in (yield Q("SELECT thread_id FROM threadline_threads ORDER BY thread_id"))]


# --- history (checkpoint tree) -------------------------------------------------


@dataclass
class CheckpointNode:
    """One checkpoint in a thread's tree.

    ``writers`` are the nodes whose results this checkpoint holds (the nodes whose
    ``versions_seen`` advanced since the parent; ``__input__`` for an input
    checkpoint). ``children`` are checkpoint_ids in the same namespace; more than one
    child makes this checkpoint a fork point. ``pending_writes`` counts the writes
    stored against it (``interrupted``: one of them is an ``__interrupt__``).
    ``subgraphs`` lists the namespaces whose runs started from this checkpoint.
    """

    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint_ns: str
    step: int | None
    source: str | None
    created_at: float
    writers: list[str]
    children: list[str] = field(default_factory=list)
    pending_writes: int = 0
    interrupted: bool = False
    on_head_path: bool = False
    is_head: bool = False
    subgraphs: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def is_fork_point(self) -> bool:
        return len(self.children) > 1

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["created"] = iso(self.created_at)
        d["fork_point"] = self.is_fork_point
        return d


@dataclass
class ThreadHistory:
    """A thread's checkpoints as a tree, per namespace.

    ``nodes`` maps checkpoint_ns → checkpoint_id → node (checkpoint_id order =
    creation order). ``roots`` are the parentless checkpoints (or whose parent is
    missing) per namespace. ``head`` is the head of the root namespace.
    ``branches`` lists, for each fork point of the root namespace, its children.
    """

    thread_id: str
    head: str | None
    nodes: dict[str, dict[str, CheckpointNode]]
    roots: dict[str, list[str]]

    @property
    def fork_points(self) -> list[str]:
        return [cid for cid, n in self.nodes.get("", {}).items() if n.is_fork_point]

    def ordered(self, checkpoint_ns: str = "") -> list[CheckpointNode]:
        return list(self.nodes.get(checkpoint_ns, {}).values())

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "head": self.head,
            "fork_points": self.fork_points,
            "roots": self.roots,
            "namespaces": {ns: [n.to_json() for n in nodes.values()] for ns, nodes in self.nodes.items()},
        }


def _writers(doc: dict, parent_doc: dict | None, source: str | None) -> list[str]:
    seen = doc.get("versions_seen") or {}
    before = (parent_doc or {}).get("versions_seen") or {}
    names = sorted(
        n for n, v in seen.items() if n not in ("__input__", INTERRUPT) and v != before.get(n)
    )
    if source == "input":
        names = ["__input__", *[n for n in names if n != "__input__"]]
    return names


def history_op(d: Dialect, thread_id: Any, *, checkpoint_ns: str | None = "", include_subgraphs: bool = False) -> Op[ThreadHistory]:
    """The checkpoint tree of a thread: reads checkpoint JSON and write metadata, never channel values.

    Args:
        checkpoint_ns: the namespace to show (root ``""`` by default).
        include_subgraphs: also every subgraph namespace (``checkpoint_ns != ""``);
            each subgraph run is listed under the root checkpoint it started from
            (``CheckpointNode.subgraphs``, from the subgraph metadata's ``parents``).

    Raises NotFoundError when the thread has no checkpoint.
    """
    tid = thread_id_of(thread_id)
    ns = _ns(checkpoint_ns)
    if include_subgraphs:
        found = yield Q(
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, created_at, metadata, checkpoint "
            "FROM threadline_checkpoints WHERE thread_id = ? ORDER BY checkpoint_ns, checkpoint_id",
            (tid,),
        )
        wcounts = yield Q(
            "SELECT checkpoint_ns, checkpoint_id, COUNT(*), SUM(CASE WHEN channel = ? THEN 1 ELSE 0 END) "
            "FROM threadline_writes WHERE thread_id = ? GROUP BY checkpoint_ns, checkpoint_id",
            (INTERRUPT, tid),
        )
    else:
        found = yield Q(
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, created_at, metadata, checkpoint "
            "FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id",
            (tid, ns),
        )
        wcounts = yield Q(
            "SELECT checkpoint_ns, checkpoint_id, COUNT(*), SUM(CASE WHEN channel = ? THEN 1 ELSE 0 END) "
            "FROM threadline_writes WHERE thread_id = ? AND checkpoint_ns = ? GROUP BY checkpoint_ns, checkpoint_id",
            (INTERRUPT, tid, ns),
        )
    if not found:
        raise NotFoundError(f"thread {tid!r} has no checkpoint" + (f" in checkpoint_ns {ns!r}" if ns else ""))
    counts = {(r[0], r[1]): (int(r[2]), bool(r[3])) for r in wcounts}
    docs: dict[tuple[str, str], dict] = {}
    nodes: dict[str, dict[str, CheckpointNode]] = defaultdict(dict)
    for r in found:
        where = f"checkpoint ({tid!r}, {r[0]!r}, {r[1]!r})"
        docs[(r[0], r[1])] = _doc(d, r[7], where)
        meta = _json(d, r[6], where)
        n_writes, interrupted = counts.get((r[0], r[1]), (0, False))
        nodes[r[0]][r[1]] = CheckpointNode(
            checkpoint_id=r[1],
            parent_checkpoint_id=r[2],
            checkpoint_ns=r[0],
            step=r[3],
            source=r[4],
            created_at=float(r[5]),
            writers=[],
            pending_writes=n_writes,
            interrupted=interrupted,
            metadata=meta if isinstance(meta, dict) else {},
        )
    roots: dict[str, list[str]] = {}
    for space, by_id in nodes.items():
        roots[space] = []
        for cid, node in by_id.items():
            parent = node.parent_checkpoint_id
            node.writers = _writers(docs[(space, cid)], docs.get((space, parent)) if parent else None, node.source)
            if parent and parent in by_id:
                by_id[parent].children.append(cid)
            else:
                roots[space].append(cid)
    root_ns = ns if not include_subgraphs else ""
    head = max(nodes[root_ns]) if nodes.get(root_ns) else None
    if head:
        nodes[root_ns][head].is_head = True
        cur: str | None = head
        guard = 0
        while cur and cur in nodes[root_ns] and guard < ops.MAX_CHAIN_DEPTH:
            nodes[root_ns][cur].on_head_path = True
            cur = nodes[root_ns][cur].parent_checkpoint_id
            guard += 1
    if include_subgraphs:
        for space, by_id in nodes.items():
            if not space:
                continue
            first = next(iter(by_id.values()))
            parents = first.metadata.get("parents") or {}
            # the innermost enclosing namespace: the longest prefix present in parents
            enclosing = space.rsplit("|", 1)[0] if "|" in space else ""
            anchor = parents.get(enclosing)
            if anchor and anchor in nodes.get(enclosing, {}):
                nodes[enclosing][anchor].subgraphs.append(space)
    return ThreadHistory(tid, head, dict(nodes), roots)


def thread_history(saver: Any, thread_id: Any, **kwargs: Any) -> ThreadHistory:
    """Sync ``history_op``."""
    return saver.run(history_op(saver.dialect, thread_id, **kwargs))


# --- state at a checkpoint -------------------------------------------------------


@dataclass
class PendingWriteView:
    """A pending write: the task that made it (task_id, node from its task_path), channel, value, idx."""

    task_id: str
    node: str | None
    channel: str
    idx: int
    task_path: str
    value: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "node": self.node,
            "channel": self.channel,
            "idx": self.idx,
            "task_path": self.task_path,
            "value": jsonable(self.value),
        }


@dataclass
class StateView:
    """The state of a thread at a checkpoint, like LangGraph's ``StateSnapshot``.

    ``values``: the state channels (bookkeeping channels are in ``internal``).
    ``next``: nodes that run next. ``pending_writes``: the writes stored against
    the checkpoint. ``interrupts``: ``{"id", "value", "node"}`` of interrupts
    still waiting (at the head) or raised in this step (elsewhere).
    ``pending_applied``: whether the finished tasks' pending writes are folded
    into ``values`` — LangGraph does so only when reading the latest state
    (no checkpoint_id given; seed 003), and threadline can only do it with the
    compiled graph's reducers (``graph=``). ``computed_by``: ``"graph"`` when
    LangGraph's ``get_state`` produced ``values``/``next``/``interrupts``,
    ``"stored"`` when they were derived from the stored checkpoint alone.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    is_head: bool
    created_at: float | None
    ts: str | None
    step: int | None
    source: str | None
    metadata: dict[str, Any]
    values: dict[str, Any]
    internal: dict[str, Any]
    next: list[str]
    pending_writes: list[PendingWriteView]
    interrupts: list[dict[str, Any]]
    pending_applied: bool
    computed_by: str
    channel_versions: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "checkpoint_ns": self.checkpoint_ns,
            "checkpoint_id": self.checkpoint_id,
            "parent_checkpoint_id": self.parent_checkpoint_id,
            "is_head": self.is_head,
            "created_at": self.created_at,
            "created": iso(self.created_at),
            "ts": self.ts,
            "step": self.step,
            "source": self.source,
            "metadata": jsonable(self.metadata),
            "values": jsonable(self.values),
            "internal": jsonable(self.internal),
            "next": list(self.next),
            "pending_writes": [w.to_json() for w in self.pending_writes],
            "interrupts": [jsonable(i) for i in self.interrupts],
            "pending_applied": self.pending_applied,
            "computed_by": self.computed_by,
            "channel_versions": self.channel_versions,
        }


def _version_gt(a: Any, b: Any) -> bool:
    if b is None:
        return a is not None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a > b
    return str(a) > str(b)


def next_nodes(checkpoint: Mapping[str, Any]) -> list[str]:
    """Nodes a checkpoint triggers, from its stored channels alone (no graph needed).

    LangGraph 1.x (``StateGraph``) triggers node ``N`` through channel
    ``branch:to:N`` (``join:…:N`` for waiting edges, ``__start__`` for the input)
    when that channel holds a value and its version is newer than
    ``versions_seen[N]``; ``Send`` pushes wait in ``__pregel_tasks``. This mirrors
    ``prepare_next_tasks`` for graphs built with ``StateGraph``; for other Pregel
    graphs pass the graph to ``state_at`` instead.
    """
    values = checkpoint.get("channel_values") or {}
    versions = checkpoint.get("channel_versions") or {}
    seen = checkpoint.get("versions_seen") or {}
    out: list[str] = []
    for ch, version in versions.items():
        if ch not in values:
            continue
        if ch == "__start__":
            node = "__start__"
        elif ch.startswith("branch:to:"):
            node = ch[len("branch:to:"):]
        elif ch.startswith("join:"):
            node = ch.rsplit(":", 1)[-1]
        else:
            continue
        if _version_gt(version, (seen.get(node) or {}).get(ch)) and node not in out:
            out.append(node)
    for send in values.get(TASKS) or []:
        node = getattr(send, "node", None)
        if node:
            out.append(node)
    return sorted(out, key=lambda n: (n != "__start__", n)) if len(out) > 1 else out


def _writes_meta_op(d: Dialect, tid: str, ns: str, cid: str) -> Op[dict[tuple[str, int], tuple[str, float]]]:
    found = yield Q(
        "SELECT task_id, idx, task_path, created_at FROM threadline_writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
        (tid, ns, cid),
    )
    return {(r[0], int(r[1])): (r[2] or "", float(r[3])) for r in found}


def stored_state_op(
    d: Dialect, serde: SerializerProtocol, thread_id: Any, checkpoint_id: str | None = None, *, checkpoint_ns: str = ""
) -> Op[tuple[StateView, CheckpointTuple]]:
    """The state at a checkpoint (head when ``checkpoint_id`` is None) derived from storage alone.

    Pending writes are listed, not folded into ``values`` (that needs the graph's
    reducers: use ``state_at(..., graph=)``). ``next`` comes from ``next_nodes``;
    at the head (no checkpoint_id given) tasks that already finished are dropped
    from ``next`` and only unanswered interrupts are listed, as LangGraph's
    ``get_state`` does for the latest state (seed 003).
    """
    tid = thread_id_of(thread_id)
    ns = _ns(checkpoint_ns)
    row = yield from checkpoint_row_op(d, tid, ns, checkpoint_id)
    head = yield from head_op(d, tid, ns)
    tup = (yield from ops.load_tuples(d, serde, [row[:6]]))[0]
    meta_by_key = yield from _writes_meta_op(d, tid, ns, row[2])
    live = checkpoint_id is None
    # Pair each decoded pending write with its row: within one task_id both are in idx order.
    idx_by_task: dict[str, list[int]] = defaultdict(list)
    for task_id, idx in sorted(meta_by_key):
        idx_by_task[task_id].append(idx)
    used: dict[str, int] = defaultdict(int)
    pending: list[PendingWriteView] = []
    for task_id, channel, value in tup.pending_writes:
        idxs = idx_by_task.get(task_id, [])
        idx = idxs[used[task_id]] if used[task_id] < len(idxs) else -99
        used[task_id] += 1
        path = meta_by_key.get((task_id, idx), ("", 0.0))[0]
        pending.append(PendingWriteView(task_id, node_of_task_path(path, task_id), channel, idx, path, value))
    cp = tup.checkpoint
    all_values = cp["channel_values"]
    values = {k: v for k, v in all_values.items() if not is_internal_channel(k)}
    internal = {k: v for k, v in all_values.items() if is_internal_channel(k)}
    nxt = next_nodes(cp)
    finished = {w.node for w in pending if w.channel not in (INTERRUPT, ERROR, RESUME) and w.task_id != NULL_TASK_ID}
    interrupted_nodes = {w.node for w in pending if w.channel in (INTERRUPT, ERROR)}
    if live:
        nxt = [n for n in nxt if n not in finished or n in interrupted_nodes]
    resumed = {w.task_id for w in pending if w.channel == RESUME}
    interrupts: list[dict[str, Any]] = []
    for w in pending:
        if w.channel != INTERRUPT or (live and w.task_id in resumed):
            continue
        for item in w.value if isinstance(w.value, (list, tuple)) else [w.value]:
            interrupts.append({"id": getattr(item, "id", None), "value": getattr(item, "value", item), "node": w.node, "task_id": w.task_id})
    view = StateView(
        thread_id=tid,
        checkpoint_ns=ns,
        checkpoint_id=row[2],
        parent_checkpoint_id=row[3],
        is_head=row[2] == head,
        created_at=float(row[8]) if row[8] is not None else None,
        ts=cp.get("ts"),
        step=row[6],
        source=row[7],
        metadata=dict(tup.metadata or {}),
        values=values,
        internal=internal,
        next=nxt,
        pending_writes=pending,
        interrupts=interrupts,
        pending_applied=False,
        computed_by="stored",
        channel_versions=dict(cp.get("channel_versions") or {}),
    )
    return view, tup


def state_at(
    saver: Any, thread_id: Any, checkpoint_id: str | None = None, *, checkpoint_ns: str = "", graph: Any = None
) -> StateView:
    """The state of a thread at a checkpoint (its head when ``checkpoint_id`` is None).

    With ``graph`` (a compiled LangGraph graph, any checkpointer), ``values``,
    ``next`` and ``interrupts`` come from LangGraph's own ``get_state`` run on this
    saver — at the head the finished tasks' pending writes are applied through the
    graph's reducers, at a named checkpoint they are not (seed 003: history is
    shown as recorded); writes of the null task (``update_state`` / resume input)
    are applied at every checkpoint, as LangGraph 1.x does. ``pending_applied``
    says whether any write was folded in. Without a graph the view is derived from
    storage (``stored_state_op``) and nothing is folded in.

    Raises NotFoundError for an unknown thread or checkpoint.
    """
    view, tup = saver.run(stored_state_op(saver.dialect, saver.serde, thread_id, checkpoint_id, checkpoint_ns=checkpoint_ns))
    if graph is None:
        return view
    g = bind_graph(graph, saver)
    conf: dict[str, Any] = {"thread_id": view.thread_id, "checkpoint_ns": view.checkpoint_ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = view.checkpoint_id
    snap = g.get_state({"configurable": conf})
    view.values = dict(snap.values) if isinstance(snap.values, Mapping) else {"__root__": snap.values}
    view.next = list(snap.next)
    view.interrupts = [{"id": getattr(i, "id", None), "value": getattr(i, "value", i)} for i in snap.interrupts]
    null_writes = any(w.task_id == NULL_TASK_ID for w in view.pending_writes)
    finished = any(w.task_id != NULL_TASK_ID and w.channel not in SPECIAL_WRITE_CHANNELS for w in view.pending_writes)
    view.pending_applied = null_writes or (checkpoint_id is None and finished)
    view.computed_by = "graph"
    return view


def bind_graph(graph: Any, saver: Any) -> Any:
    """A copy of a compiled graph (``Pregel``) that uses ``saver`` as its checkpointer."""
    copy = getattr(graph, "copy", None)
    if not callable(copy) or not hasattr(graph, "get_state"):
        raise ConfigError(f"expected a compiled LangGraph graph (Pregel), got {type(graph).__name__}")
    return copy({"checkpointer": saver})


def load_graph(spec: str) -> Any:
    """Import ``module:attr`` (``attr`` may be dotted). A callable attr that is not a graph is called with no arguments.

    Raises ConfigError naming the spec when the module or attribute cannot be found.
    """
    import importlib

    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(f"graph must be given as module:attr, got {spec!r}")
    module_name, attr = spec.split(":", 1)
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import module {module_name!r} for graph {spec!r}: {exc}") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"module {module_name!r} has no attribute {attr!r} (graph {spec!r})")
        obj = getattr(obj, part)
    if not hasattr(obj, "get_state") and callable(obj):
        obj = obj()
    if hasattr(obj, "compile") and not hasattr(obj, "get_state"):
        obj = obj.compile()
    if not hasattr(obj, "get_state"):
        raise ConfigError(f"{spec!r} is not a compiled LangGraph graph (got {type(obj).__name__})")
    return obj


# --- diff ------------------------------------------------------------------------


def _message_id(item: Any) -> str | None:
    mid = getattr(item, "id", None)
    if mid is None and isinstance(item, Mapping):
        mid = item.get("id")
    return mid if isinstance(mid, str) and mid else None


def _is_message_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(_message_id(m) is not None and (hasattr(m, "content") or (isinstance(m, Mapping) and "content" in m)) for m in value)
    )


def _same(a: Any, b: Any) -> bool:
    try:
        if a == b:
            return True
    except Exception:
        pass
    return jsonable(a) == jsonable(b)


def diff_values(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Compare two states channel by channel (pure; values already decoded).

    Returns ``{channel: change}`` for channels that differ, where change is
    ``{"kind": "added"|"removed"|"changed", ...}``:

    * a message list (every item has an ``id`` and ``content``) is compared by
      message id: ``"messages": {"added": [...], "edited": [{"id", "before", "after"}], "removed": [...]}``;
    * a dict is compared key by key: ``"keys": {"added": {k: v}, "removed": {k: v}, "changed": {k: {"before", "after"}}}``;
    * anything else: ``"before"`` and ``"after"``.

    Values in the result are ``jsonable`` renderings.
    """
    out: dict[str, dict[str, Any]] = {}
    for ch in sorted(set(before) | set(after)):
        if ch not in before:
            out[ch] = {"kind": "added", "after": jsonable(after[ch])}
            continue
        if ch not in after:
            out[ch] = {"kind": "removed", "before": jsonable(before[ch])}
            continue
        a, b = before[ch], after[ch]
        if _same(a, b):
            continue
        change: dict[str, Any] = {"kind": "changed"}
        if (_is_message_list(a) or a == []) and (_is_message_list(b) or b == []) and (a or b):
            ids_a = {_message_id(m): m for m in a}
            ids_b = {_message_id(m): m for m in b}
            change["messages"] = {
                "added": [jsonable(m) for m in b if _message_id(m) not in ids_a],
                "edited": [
                    {"id": mid, "before": jsonable(ids_a[mid]), "after": jsonable(m)}
                    for mid, m in ids_b.items()
                    if mid in ids_a and not _same(ids_a[mid], m)
                ],
                "removed": [jsonable(m) for m in a if _message_id(m) not in ids_b],
            }
        elif isinstance(a, Mapping) and isinstance(b, Mapping):
            change["keys"] = {
                "added": {str(k): jsonable(b[k]) for k in b if k not in a},
                "removed": {str(k): jsonable(a[k]) for k in a if k not in b},
                "changed": {
                    str(k): {"before": jsonable(a[k]), "after": jsonable(b[k])} for k in a if k in b and not _same(a[k], b[k])
                },
            }
        else:
            change["before"] = jsonable(a)
            change["after"] = jsonable(b)
        out[ch] = change
    return out


@dataclass
class StateDiff:
    """Differences from checkpoint ``a`` to ``b`` of one thread (see ``diff_values`` for ``channels``).

    ``unchanged`` lists channels both reference at the same version (not decoded).
    """

    thread_id: str
    checkpoint_ns: str
    a: str
    b: str
    channels: dict[str, dict[str, Any]]
    unchanged: list[str]

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def diff_op(
    d: Dialect,
    serde: SerializerProtocol,
    thread_id: Any,
    a: str,
    b: str,
    *,
    checkpoint_ns: str = "",
    include_internal: bool = False,
    thread_b: Any = None,
) -> Op[StateDiff]:
    """Diff the stored states of two checkpoints (``b`` may be in ``thread_b``, default the same thread).

    Only channels whose versions differ are decoded: a channel both checkpoints
    reference at the same version holds the same blob (shared by reference).
    Bookkeeping channels are skipped unless ``include_internal``.
    Raises NotFoundError for an unknown checkpoint.
    """
    tid = thread_id_of(thread_id)
    tid_b = thread_id_of(thread_b) if thread_b is not None else tid
    ns = _ns(checkpoint_ns)
    row_a = yield from checkpoint_row_op(d, tid, ns, _cid(a, "checkpoint a"))
    row_b = yield from checkpoint_row_op(d, tid_b, ns, _cid(b, "checkpoint b"))
    va = _doc(d, row_a[4], f"checkpoint {a!r}").get("channel_versions") or {}
    vb = _doc(d, row_b[4], f"checkpoint {b!r}").get("channel_versions") or {}
    keep = (lambda ch: True) if include_internal else (lambda ch: not is_internal_channel(ch))
    same_blob = tid == tid_b
    changed = sorted(ch for ch in set(va) | set(vb) if keep(ch) and not (same_blob and va.get(ch) == vb.get(ch)))
    unchanged = sorted(ch for ch in set(va) & set(vb) if keep(ch) and same_blob and va[ch] == vb[ch])
    values_a, values_b = yield from load_channels_op(d, serde, [row_a[:6], row_b[:6]], changed)
    return StateDiff(tid, ns, row_a[2], row_b[2], diff_values(values_a, values_b), unchanged)


def diff(saver: Any, thread_id: Any, a: str, b: str, **kwargs: Any) -> StateDiff:
    """Sync ``diff_op``."""
    return saver.run(diff_op(saver.dialect, saver.serde, thread_id, a, b, **kwargs))


# --- audit -----------------------------------------------------------------------


@dataclass
class WriteInfo:
    """One stored pending write, without its value: ``bytes`` is the stored size of the value."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    idx: int
    channel: str
    task_path: str
    node: str | None
    type: str
    bytes: int
    created_at: float

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["created"] = iso(self.created_at)
        return d


def audit_op(
    d: Dialect, thread_id: Any, checkpoint_id: str | None = None, *, checkpoint_ns: str | None = "", limit: int | None = None
) -> Op[list[WriteInfo]]:
    """The writes of a checkpoint (or of the whole thread) in execution order (seed 000 "调试/审计读取").

    Order: checkpoint_id, then ``created_at``, then LangGraph's ``writes_sort_key``
    (task_path, task_id, idx). ``checkpoint_ns=None`` means every namespace.
    No value is decoded: ``bytes`` is the stored size.
    Raises NotFoundError when a named checkpoint does not exist.
    """
    tid = thread_id_of(thread_id)
    clauses, params = ["thread_id = ?"], [tid]
    if checkpoint_ns is not None:
        clauses.append("checkpoint_ns = ?")
        params.append(_ns(checkpoint_ns))
    if checkpoint_id is not None:
        if checkpoint_ns is None:
            raise ConfigError("audit of one checkpoint needs its checkpoint_ns")
        yield from checkpoint_row_op(d, tid, _ns(checkpoint_ns), _cid(checkpoint_id))
        clauses.append("checkpoint_id = ?")
        params.append(checkpoint_id)
    tail = ""
    if limit is not None:
        tail = " LIMIT ?"
        params.append(int(limit))
    found = yield Q(
        f"SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, {d.bytes_of('blob', 'blob')}, created_at "
        f"FROM threadline_writes WHERE {' AND '.join(clauses)} ORDER BY checkpoint_ns, checkpoint_id, created_at, task_path, task_id, idx{tail}",
        params,
    )
    return [
        WriteInfo(r[0], r[1], r[2], r[3], int(r[4]), r[5], r[6] or "", node_of_task_path(r[6], r[3]), r[7], int(r[8]), float(r[9]))
        for r in found
    ]


def audit(saver: Any, thread_id: Any, checkpoint_id: str | None = None, **kwargs: Any) -> list[WriteInfo]:
    """Sync ``audit_op``."""
    return saver.run(audit_op(saver.dialect, thread_id, checkpoint_id, **kwargs))


@dataclass
class TaskStat:
    """Per node: number of writes, total and average stored bytes, tasks (distinct task_ids), checkpoints touched."""

    node: str
    writes: int
    total_bytes: int
    avg_bytes: float
    tasks: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class TaskStats:
    """Agent behaviour analysis (seed 000 "Agent 行为分析" and "对比 writes vs blobs 数据量").

    ``tasks``: per node, most writes first. ``writes_bytes``: stored bytes of the
    pending writes in scope; ``blobs_bytes``: stored bytes of the blobs in scope
    (for one checkpoint: the blobs its ``channel_versions`` reference, i.e. its
    full state; ``new_blobs_bytes``: those first written for it). When
    ``writes_bytes > blobs_bytes`` several tasks wrote the same channel, or the
    state shares blobs with earlier checkpoints.
    """

    scope: dict[str, Any]
    tasks: list[TaskStat]
    writes: int
    writes_bytes: int
    blobs: int
    blobs_bytes: int
    new_blobs_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "tasks": [t.to_json() for t in self.tasks],
            "writes": self.writes,
            "writes_bytes": self.writes_bytes,
            "blobs": self.blobs,
            "blobs_bytes": self.blobs_bytes,
            "new_blobs_bytes": self.new_blobs_bytes,
        }


def task_stats_op(
    d: Dialect,
    thread_id: Any = None,
    checkpoint_id: str | None = None,
    *,
    checkpoint_ns: str | None = "",
    since: float | None = None,
) -> Op[TaskStats]:
    """Per-task write statistics for one checkpoint, one thread, or the whole database (``thread_id=None``).

    ``since`` keeps writes created at or after that epoch time. ``checkpoint_ns=None``
    covers every namespace. Reads sizes only, never values.
    """
    clauses: list[str] = []
    params: list[Any] = []
    scope: dict[str, Any] = {"thread_id": None, "checkpoint_id": None, "checkpoint_ns": checkpoint_ns, "since": since}
    tid = None
    if thread_id is not None:
        tid = thread_id_of(thread_id)
        clauses.append("thread_id = ?")
        params.append(tid)
        scope["thread_id"] = tid
    if checkpoint_ns is not None:
        clauses.append("checkpoint_ns = ?")
        params.append(_ns(checkpoint_ns))
    row = None
    if checkpoint_id is not None:
        if tid is None or checkpoint_ns is None:
            raise ConfigError("task statistics of one checkpoint need its thread_id and checkpoint_ns")
        row = yield from checkpoint_row_op(d, tid, _ns(checkpoint_ns), _cid(checkpoint_id))
        clauses.append("checkpoint_id = ?")
        params.append(checkpoint_id)
        scope["checkpoint_id"] = checkpoint_id
    wclauses, wparams = list(clauses), list(params)
    if since is not None:
        wclauses.append("created_at >= ?")
        wparams.append(float(since))
    where = ("WHERE " + " AND ".join(wclauses)) if wclauses else ""
    size = d.bytes_of("blob", "blob")
    is_null = f"CASE WHEN task_id = '{NULL_TASK_ID}' THEN 1 ELSE 0 END"  # a constant of ours, not user input
    grouped = yield Q(
        f"SELECT task_path, {is_null}, COUNT(*), SUM({size}), COUNT(DISTINCT task_id) FROM threadline_writes {where} GROUP BY task_path, {is_null}",
        wparams,
    )
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for path, is_null, count, total, tasks in grouped:
        node = node_of_task_path(path, NULL_TASK_ID if is_null else None) or (path or "?")
        acc = per[node]
        acc[0] += int(count)
        acc[1] += int(total or 0)
        acc[2] += int(tasks)
    stats = sorted(
        (TaskStat(node, c, b, round(b / c, 1) if c else 0.0, t) for node, (c, b, t) in per.items()),
        key=lambda s: (-s.writes, -s.total_bytes, s.node),
    )
    writes = sum(s.writes for s in stats)
    writes_bytes = sum(s.total_bytes for s in stats)
    new_blobs_bytes = None
    if row is not None:
        doc = _doc(d, row[4], f"checkpoint {checkpoint_id!r}")
        pairs = R.blob_pairs(doc)
        parent_versions: dict[str, Any] = {}
        if row[3]:
            prow = yield Q(
                "SELECT checkpoint FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                (tid, row[1], row[3]),
            )
            if prow:
                parent_versions = {ch: v for ch, v in R.blob_pairs(_doc(d, prow[0][0], f"checkpoint {row[3]!r}"))}
        sizes: dict[tuple[str, str], int] = {}
        for part in ops.chunks(pairs, d.max_params // 2 - 2):
            found = yield Q(
                f"SELECT channel, version, {size} FROM threadline_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
                f"AND (channel, version) IN ({ops.values_list(2, len(part))})",
                [tid, row[1], *ops.flat(part)],
            )
            sizes.update({(r[0], r[1]): int(r[2]) for r in found})
        blobs, blobs_bytes = len(sizes), sum(sizes.values())
        new_blobs_bytes = sum(s for (ch, v), s in sizes.items() if parent_versions.get(ch) != v)
    else:
        bclauses = [c for c in clauses]
        bwhere = ("WHERE " + " AND ".join(bclauses)) if bclauses else ""
        found = yield Q(f"SELECT COUNT(*), COALESCE(SUM({size}), 0) FROM threadline_blobs {bwhere}", params)
        blobs, blobs_bytes = int(found[0][0]), int(found[0][1])
    return TaskStats(scope, stats, writes, writes_bytes, blobs, blobs_bytes, new_blobs_bytes)


def task_stats(saver: Any, thread_id: Any = None, checkpoint_id: str | None = None, **kwargs: Any) -> TaskStats:
    """Sync ``task_stats_op``."""
    return saver.run(task_stats_op(saver.dialect, thread_id, checkpoint_id, **kwargs))


# --- latest value of a channel across threads ---------------------------------------


@dataclass
class LatestValue:
    """A channel's value at a thread's head checkpoint (``present`` False: the head has no value for it)."""

    thread_id: str
    checkpoint_id: str
    version: Any
    present: bool
    value: Any
    updated_at: float

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "checkpoint_id": self.checkpoint_id,
            "version": self.version,
            "present": self.present,
            "value": jsonable(self.value),
            "updated_at": self.updated_at,
            "updated": iso(self.updated_at),
        }


def latest_op(
    d: Dialect,
    serde: SerializerProtocol,
    channel: str,
    thread_ids: Sequence[Any] | None = None,
    *,
    checkpoint_ns: str = "",
    limit: int | None = None,
) -> Op[list[LatestValue]]:
    """The value of ``channel`` at the head checkpoint of each thread (seed 000 "取最新 checkpoint 的特定 channel").

    The heads of all requested threads are found by one statement (each thread's
    largest checkpoint_id in the namespace) and the channel's blobs by one more;
    only that channel is decoded. Resolving through the head — not ``MAX(version)``
    over blobs — is what keeps it right after a rollback, whose head references an
    older version. Threads without checkpoints are omitted; ``thread_ids=None``
    means every thread (``limit`` caps how many, most recently updated first).
    """
    if not isinstance(channel, str) or not channel:
        raise ConfigError(f"channel must be a non-empty string, got {channel!r}")
    ns = _ns(checkpoint_ns)
    head_sql = (
        f"SELECT c.{R.CHECKPOINT_COLUMNS.replace(', ', ', c.')}, c.created_at FROM threadline_checkpoints c "
        "WHERE c.checkpoint_ns = ? AND c.checkpoint_id = (SELECT MAX(c2.checkpoint_id) FROM threadline_checkpoints c2 "
        "WHERE c2.thread_id = c.thread_id AND c2.checkpoint_ns = c.checkpoint_ns)"
    )
    rows: list = []
    if thread_ids is None:
        tail, params = "", [ns]
        if limit is not None:
            tail = " AND c.thread_id IN (SELECT thread_id FROM threadline_threads ORDER BY updated_at DESC LIMIT ?)"
            params.append(int(limit))
        rows = yield Q(head_sql + tail + " ORDER BY c.thread_id", params)
    else:
        ids = sorted({thread_id_of(t) for t in thread_ids})
        for part in ops.chunks(ids, d.max_params - 2):
            rows += (yield Q(head_sql + f" AND c.thread_id IN ({ops.placeholders(len(part))}) ORDER BY c.thread_id", [ns, *part]))
    values = yield from load_channels_op(d, serde, [r[:6] for r in rows], [channel])
    out = []
    for r, vals in zip(rows, values):
        versions = _doc(d, r[4], f"checkpoint ({r[0]!r}, {r[1]!r}, {r[2]!r})").get("channel_versions") or {}
        out.append(LatestValue(r[0], r[2], versions.get(channel), channel in vals, vals.get(channel), float(r[6])))
    return out


def latest_values(saver: Any, channel: str, thread_ids: Sequence[Any] | None = None, **kwargs: Any) -> list[LatestValue]:
    """Sync ``latest_op``."""
    return saver.run(latest_op(saver.dialect, saver.serde, channel, thread_ids, **kwargs))


# --- statistics ------------------------------------------------------------------


@dataclass
class Stats:
    """Database statistics (seed 002 §9.1, plus storage dedup).

    ``tables``: per table ``{"rows", "bytes"}`` (checkpoints: checkpoint + metadata
    JSON; blobs and writes: stored value bytes). ``references``: channel references
    made by all checkpoints (what full-copy storage would store as rows);
    ``dedup_ratio``: references ÷ blob rows; ``logical_blob_bytes``: the bytes a
    full copy per checkpoint would store; ``bytes_dedup_ratio``: that ÷ stored blob
    bytes. ``top_threads``: the largest threads from the ``threads`` index.
    """

    tables: dict[str, dict[str, int]]
    threads: int
    references: int
    dedup_ratio: float | None
    logical_blob_bytes: int
    bytes_dedup_ratio: float | None
    top_threads: list[ThreadInfo]
    namespaces: int
    sources: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "tables": self.tables,
            "threads": self.threads,
            "namespaces": self.namespaces,
            "references": self.references,
            "dedup_ratio": self.dedup_ratio,
            "logical_blob_bytes": self.logical_blob_bytes,
            "bytes_dedup_ratio": self.bytes_dedup_ratio,
            "sources": self.sources,
            "top_threads": [t.to_json() for t in self.top_threads],
        }


def _references_sql(d: Dialect, where: str) -> str:
    size = d.bytes_of("b.blob", "blob")
    if d.name == "postgres":
        return (
            f"SELECT COUNT(*), COALESCE(SUM({size}), 0) FROM threadline_checkpoints c "
            "CROSS JOIN LATERAL jsonb_each_text(c.checkpoint->'channel_versions') j "
            "LEFT JOIN threadline_blobs b ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns "
            f"AND b.channel = j.key AND b.version = j.value {where}"
        )
    return (
        f"SELECT COUNT(*), COALESCE(SUM({size}), 0) FROM threadline_checkpoints c, json_each(c.checkpoint, '$.channel_versions') j "
        "LEFT JOIN threadline_blobs b ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns "
        f"AND b.channel = j.key AND b.version = CAST(j.value AS TEXT) {where}"
    )


def stats_op(d: Dialect, *, top: int = 10, thread_ids: Sequence[Any] | None = None) -> Op[Stats]:
    """Counts and bytes per table, dedup ratios and the ``top`` largest threads; reads sizes only."""
    tables: dict[str, dict[str, int]] = {}
    ck_size = f"{d.bytes_of('checkpoint', 'json')} + {d.bytes_of('metadata', 'json')}"
    ids = [thread_id_of(t) for t in thread_ids] if thread_ids is not None else None
    where, params = "", []
    if ids is not None:
        where, params = f"WHERE thread_id IN ({ops.placeholders(len(ids))})", ids
        if not ids:
            where = "WHERE 1 = 0"
    for table, size in (("checkpoints", ck_size), ("blobs", d.bytes_of("blob", "blob")), ("writes", d.bytes_of("blob", "blob"))):
        found = yield Q(f"SELECT COUNT(*), COALESCE(SUM({size}), 0) FROM threadline_{table} {where}", params)
        tables[table] = {"rows": int(found[0][0]), "bytes": int(found[0][1])}
    threads = int((yield Q(f"SELECT COUNT(*) FROM threadline_threads {where}", params))[0][0])
    namespaces = int((yield Q(f"SELECT COUNT(*) FROM (SELECT DISTINCT thread_id, checkpoint_ns FROM threadline_checkpoints {where}) n", params))[0][0])
    sources = {
        (r[0] if r[0] is not None else "?"): int(r[1])
        for r in (yield Q(f"SELECT source, COUNT(*) FROM threadline_checkpoints {where} GROUP BY source ORDER BY source", params))
    }
    cwhere = where.replace("thread_id", "c.thread_id")
    refs = yield Q(_references_sql(d, cwhere), params)
    references, logical = int(refs[0][0]), int(refs[0][1])
    blob_rows, blob_bytes = tables["blobs"]["rows"], tables["blobs"]["bytes"]
    top_threads: list[ThreadInfo] = []
    if top > 0:
        page = yield from threads_op(d, thread_ids=ids, limit=top, order_by="bytes")
        top_threads = page.threads
    return Stats(
        tables=tables,
        threads=threads,
        references=references,
        dedup_ratio=round(references / blob_rows, 3) if blob_rows else None,
        logical_blob_bytes=logical,
        bytes_dedup_ratio=round(logical / blob_bytes, 3) if blob_bytes else None,
        top_threads=top_threads,
        namespaces=namespaces,
        sources=sources,
    )


def stats(saver: Any, **kwargs: Any) -> Stats:
    """Sync ``stats_op``."""
    return saver.run(stats_op(saver.dialect, **kwargs))


__all__ = [
    "CheckpointNode",
    "LatestValue",
    "PendingWriteView",
    "StateDiff",
    "StateView",
    "Stats",
    "TaskStat",
    "TaskStats",
    "ThreadHistory",
    "ThreadInfo",
    "ThreadPage",
    "WriteInfo",
    "audit",
    "audit_op",
    "diff",
    "diff_op",
    "diff_values",
    "history_op",
    "jsonable",
    "latest_op",
    "latest_values",
    "list_threads",
    "load_channels_op",
    "load_graph",
    "next_nodes",
    "node_of_task_path",
    "parse_duration",
    "state_at",
    "stats",
    "stats_op",
    "stored_state_op",
    "task_stats",
    "task_stats_op",
    "thread_history",
    "threads_op",
]
