"""Shared helpers of the read models: the write-channel constants, value rendering
(``iso``, ``jsonable``), ``node_of_task_path``, the head/checkpoint-row/channel-loading
operations every read model builds on (``head_op``, ``checkpoint_row_op``,
``load_channels_op``), the fault isolation of the listings (``Damage``, ``isolated``),
``parse_duration`` and the graph helpers ``bind_graph`` / ``load_graph``. It imports no other
read model; they all import it.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import codec
from threadline.codec.record import LangGraphRecord
from threadline.storage import ops
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q
from threadline.errors import ConfigError, CorruptRowError, NotFoundError
from threadline.keys import checkpoint_ns_of, thread_id_of

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
    if isinstance(value, LangGraphRecord):  # as the langgraph.types object it stands for renders below
        fields = {k: value.fields.get(k) for k in ("node", "arg")} if value.type_name == "Send" else value.fields
        return {"_type": value.type_name, **{k: jsonable(v, max_depth=max_depth - 1) for k, v in fields.items()}}
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


def head_op(d: Dialect, thread_id: Any, checkpoint_ns: str = "") -> Op[str | None]:
    """The head checkpoint_id of a thread's namespace, or None when it has no checkpoint."""
    found = yield Q(d.LATEST_CHECKPOINT_ID, (thread_id_of(thread_id), checkpoint_ns_of(checkpoint_ns)))
    return found[0][0] if found else None


def checkpoint_row_op(d: Dialect, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None) -> Op[tuple]:
    """The checkpoint row (``rows.CHECKPOINT_ROW``) named, or the head.

    Raises NotFoundError naming the thread/checkpoint when it does not exist.
    """
    if checkpoint_id:
        found = yield Q(d.CHECKPOINT, (thread_id, checkpoint_ns, checkpoint_id))
        if not found:
            raise NotFoundError(f"no checkpoint {checkpoint_id!r} in thread {thread_id!r} (checkpoint_ns {checkpoint_ns!r})")
    else:
        found = yield Q(d.LATEST_CHECKPOINT, (thread_id, checkpoint_ns))
        if not found:
            raise NotFoundError(f"thread {thread_id!r} has no checkpoint (checkpoint_ns {checkpoint_ns!r})")
    return tuple(found[0])


def load_channels_op(
    d: Dialect,
    serde: SerializerProtocol,
    rows: Sequence[Sequence[Any]],
    channels: Mapping[int, Iterable[str]] | Iterable[str] | None,
    bc: codec.BlobCodec | None = None,
) -> Op[list[dict[str, Any]]]:
    """Decode only some channel values of checkpoint rows (``rows.CHECKPOINT_COLUMNS`` or
    ``CHECKPOINT_ROW``), each row checked against its checksum and every value against its
    seal with ``bc``'s keys (CorruptRowError / EncryptionError).

    ``channels`` is either one iterable of channel names for every row, or a
    mapping row index → channel names (None: every channel). Returns, per row,
    ``{channel: value}`` for the requested channels that hold a value (empty
    channels are absent, and so is a channel the checkpoint names as possibly without a
    blob, ``rows.absent_channels``, when it has none). The blobs are read as ``get_tuple``
    reads them (``ops.fetch_blobs``: delta chains, compression) and decoded by
    ``rows.channel_values``, the one rule, in one round trip per chunk of blobs.
    """
    bc = bc or codec.PLAIN
    wanted: list[tuple[list[tuple[str, str]], frozenset[str]]] = []
    for i, row in enumerate(rows):
        where = f"checkpoint ({row[0]!r}, {row[1]!r}, {row[2]!r})"
        doc = d.load_object(row[4], where)
        R.check_row(row, doc, d.load_json(row[5], where), bc)
        versions = doc.get("channel_versions") or {}  # the channels with a blob row
        inline = R.inline_values(doc)  # None and scalars kept in the document
        if channels is not None:
            names = set(channels.get(i, ())) if isinstance(channels, Mapping) else set(channels)
            versions = {ch: v for ch, v in versions.items() if ch in names}
            inline = {ch: v for ch, v in inline.items() if ch in names}
        wanted.append((R.blob_pairs({"channel_versions": versions}), R.absent_channels(doc), inline))
    keys = sorted({(row[0], row[1], ch, v) for row, (pairs, _, _) in zip(rows, wanted) for ch, v in pairs})
    blobs = (yield from ops.fetch_blobs(d, keys, bc=bc)) if keys else {}
    return [
        {**R.channel_values(serde, blobs, row[0], row[1], pairs, row[2], absent), **inline}
        for row, (pairs, absent, inline) in zip(rows, wanted)
    ]


# --- fault isolation of the listings ------------------------------------------------------


@dataclasses.dataclass
class Damage:
    """Why one thread of a listing could not be read: ``error`` (the error's type, e.g.
    ``CorruptRowError``), its ``message``, and ``command``, the command that names every damaged
    row of the thread and how each is repaired (``threadline fsck --deep --thread THREAD``)."""

    error: str
    message: str
    command: str

    @classmethod
    def of(cls, thread_id: str, exc: BaseException) -> "Damage":
        return cls(type(exc).__name__, " ".join(str(exc).split()), f"threadline fsck --deep --thread {shlex.quote(thread_id)}")

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def isolated(thread_id: str, op: Op[Any]) -> Op[tuple[Any, Damage | None]]:
    """``op`` (a read of one thread of a listing) run as a step of the listing: its result and
    None, or None and the ``Damage`` when a stored row of the thread cannot be read
    (CorruptRowError, EncryptionError included), so that one damaged thread never fails the
    listing. Nothing is read in advance: a sound thread costs what ``op`` costs."""
    try:
        return (yield from op), None
    except CorruptRowError as exc:
        return None, Damage.of(thread_id, exc)


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


def bind_graph(graph: Any, saver: Any) -> Any:
    """A copy of a compiled graph (``Pregel``) that uses ``saver`` as its checkpointer."""
    copy = getattr(graph, "copy", None)
    if not callable(copy) or not hasattr(graph, "get_state"):
        raise ConfigError(f"expected a compiled LangGraph graph (Pregel), got {type(graph).__name__}")
    return copy({"checkpointer": saver})


def import_spec(spec: Any, what: str, done: Any = lambda obj: False) -> Any:
    """The object ``module:attr`` names (``attr`` may be dotted); a callable that is not yet
    ``done(obj)`` is called with no arguments and its result returned.

    Raises ConfigError naming the spec and ``what`` it should be when the module or attribute
    cannot be found or calling it fails.
    """
    import importlib

    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(f"{what} must be given as module:attr, got {spec!r}")
    module_name, attr = spec.split(":", 1)
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import module {module_name!r} for {what} {spec!r}: {exc}") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"module {module_name!r} has no attribute {attr!r} ({what} {spec!r})")
        obj = getattr(obj, part)
    if not done(obj) and callable(obj):
        try:
            obj = obj()
        except Exception as exc:
            raise ConfigError(f"{spec!r}: calling it with no arguments failed: {type(exc).__name__}: {exc}") from exc
    return obj


def load_graph(spec: str) -> Any:
    """Import ``module:attr`` (``attr`` may be dotted). A callable attr that is not a graph is called with no arguments.

    Raises ConfigError naming the spec when the module or attribute cannot be found, calling it
    fails, or it is not a graph.
    """
    obj = import_spec(spec, "graph", lambda o: hasattr(o, "get_state"))
    if hasattr(obj, "compile") and not hasattr(obj, "get_state"):
        obj = obj.compile()
    if not hasattr(obj, "get_state"):
        raise ConfigError(f"{spec!r} is not a compiled LangGraph graph (got {type(obj).__name__})")
    return obj
