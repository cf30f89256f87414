"""A thread's status, the one rule (the CLI, the JSON, the search and the browser all use it):
``ThreadStatus`` and ``thread_status_op`` / ``thread_status``.

Named as the LangGraph Agent Server's threads API names it where it has the state
(``status``: ``idle`` / ``busy`` / ``interrupted`` / ``error``), with threadline's finer
``kind`` beside it:

==============  ============  ===============================================================
kind            status        the head (latest root checkpoint) of the thread …
==============  ============  ===============================================================
``busy``        ``busy``      … is held by a run: its thread guard lease is running
                              (``threadline.guard``), or a caller's ``busy`` check says so
``errored``     ``error``     … has a stored error write (LangGraph's ``__error__`` channel:
                              a task of the head's step raised)
``interrupted`` ``interrupted`` … has an ``interrupt()`` still waiting for its answer
``pending``     ``idle``      … has tasks left to run and none of the above: a run without a
                              guard still going, or one that stopped mid-way (invoking the
                              graph with ``None`` resumes it)
``done``        ``idle``      … has nothing left to run: the last run finished
``new``         ``idle``      no checkpoint yet
==============  ============  ===============================================================

``busy`` comes first, then ``errored``, then ``interrupted`` (a step whose task raised while
another waits on an interrupt is ``errored``), as the Agent Server orders them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from threadline.read.audit import audit_op
from threadline.read.common import ERROR, checkpoint_row_op, head_op, jsonable, load_channels_op
from threadline.read.state import next_nodes, stored_state_op
from threadline.storage import rows as R
from threadline.storage.ops import Op
from threadline.storage.ops import lease

# kind → the Agent Server's status
KIND_STATUS = {"busy": "busy", "errored": "error", "interrupted": "interrupted", "pending": "idle", "done": "idle", "new": "idle"}
KINDS = tuple(KIND_STATUS)
STATUSES = ("idle", "busy", "interrupted", "error")
# the names a status filter takes: each status and each kind
STATUS_NAMES = {**{s: s for s in STATUSES}, **{k: k for k in KINDS}}

BusyCheck = Callable[[str], bool]  # thread_id → a run holds the thread now


@dataclass
class ThreadStatus:
    """What a thread's head waits for (see the module docstring for ``kind`` and ``status``).

    ``next``: the nodes the head would run; ``interrupts``: ``{"id", "value", "node"}`` of each
    interrupt still waiting; ``errors``: the stored error values of the head's step;
    ``checkpoint_id``: the head (None for a new thread)."""

    kind: str
    next: list[str] = field(default_factory=list)
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    errors: list[Any] = field(default_factory=list)
    checkpoint_id: str | None = None

    @property
    def status(self) -> str:
        """The Agent Server's name: ``idle``, ``busy``, ``interrupted`` or ``error``."""
        return KIND_STATUS[self.kind]

    def matches(self, wanted: str) -> bool:
        """Whether this is the status or kind ``wanted`` (a ``STATUS_NAMES`` key)."""
        name = STATUS_NAMES[wanted]
        return name == self.kind or name == self.status

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status
        d["interrupts"] = [jsonable(i) for i in self.interrupts]
        d["errors"] = [jsonable(e) for e in self.errors]
        return d


def status_name(wanted: str) -> str:
    """``wanted`` checked as a status filter (``STATUS_NAMES``); ValueError naming the choices."""
    if wanted not in STATUS_NAMES:
        raise ValueError(f"status must be one of {', '.join(sorted(STATUS_NAMES))}, got {wanted!r}")
    return wanted


def thread_status_op(d: Any, serde: Any, thread_id: str, head: str | None, bc: Any = None, *, busy: bool | None = None) -> Op[ThreadStatus]:
    """The status of ``thread_id`` at its head checkpoint ``head`` (root namespace; None: a new thread).

    ``busy``: a run holds the thread (the caller's check; None: read the thread guard's lease,
    ``threadline.guard``). A head without pending writes needs
    only its trigger channels decoded (``next_nodes``); a head with pending writes is read as
    ``stored_state_op`` reads the latest state (finished tasks dropped from ``next``, answered
    interrupts dropped), so the rule is LangGraph's ``get_state`` one. Raises CorruptRowError
    for a stored row that cannot be decoded."""
    if busy is None:
        busy = thread_id in (yield from lease.held(d, [thread_id]))
    if busy:
        return ThreadStatus("busy", checkpoint_id=head)
    if head is None:
        return ThreadStatus("new")
    writes = yield from audit_op(d, thread_id, head)
    if not writes:
        row = yield from checkpoint_row_op(d, thread_id, "", head)
        doc = d.load_object(row[4], f"checkpoint ({thread_id!r}, '', {head!r})")
        triggers = [ch for ch in R.all_versions(doc) if ch == "__start__" or ch.startswith(("branch:to:", "join:", "__pregel_tasks"))]
        values = (yield from load_channels_op(d, serde, [row], triggers, bc))[0]
        nxt = next_nodes({**doc, "channel_versions": R.all_versions(doc), "channel_values": values})
        return ThreadStatus("pending" if nxt else "done", nxt, checkpoint_id=head)
    view, _ = yield from stored_state_op(d, serde, thread_id, bc=bc)
    errors = [w.value for w in view.pending_writes if w.channel == ERROR]
    if errors:
        return ThreadStatus("errored", view.next, [], errors, head)
    if view.interrupts:
        return ThreadStatus("interrupted", view.next, [{k: i.get(k) for k in ("id", "value", "node")} for i in view.interrupts], [], head)
    return ThreadStatus("pending" if view.next else "done", view.next, checkpoint_id=head)


def current_status_op(d: Any, serde: Any, thread_id: str, bc: Any = None, *, busy: bool | None = None) -> Op[ThreadStatus]:
    """``thread_status_op`` at the thread's current head."""
    head = yield from head_op(d, thread_id)
    return (yield from thread_status_op(d, serde, thread_id, head, bc, busy=busy))


def thread_status(saver: Any, thread_id: str, *, busy: BusyCheck | None = None) -> ThreadStatus:
    """Sync: the status of ``thread_id`` on a saver; ``busy(thread_id)`` says whether a run holds it
    (None: whether a run holds its lease, ``threadline.guard``). An unknown thread is ``new``."""
    held = None if busy is None else bool(busy(thread_id))
    return saver.run(current_status_op(saver.dialect, saver.serde, thread_id, saver.blob_codec, busy=held))
