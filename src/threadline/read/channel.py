"""One channel through time: ``ChannelVersion`` and ``channel_history_op`` / ``channel_history``.

The versions a channel took along a thread's head branch (the head and its ancestors,
oldest first) or, with ``all_branches``, along every branch: for each checkpoint where the
channel's version changed from its parent's, when, which task(s) wrote it (the pending writes
of that channel stored against the parent checkpoint; else the checkpoint's source, e.g.
``update``), the stored size of the version, its value and a compact summary of the change
(``set``, ``+2 items``, ``changed keys a,b``, ``3 → 4``, ``replaced``, ``cleared``). Only that
channel is decoded, once per version, under the load policy (``read.common.load_channels_op``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import codec
from threadline.errors import ConfigError, NotFoundError
from threadline.keys import checkpoint_ns_of, thread_id_of
from threadline.read.audit import audit_op
from threadline.read.common import iso, jsonable, load_channels_op
from threadline.storage.dialect import Dialect
from threadline.storage import rows as R
from threadline.storage.ops import Op, Q
from threadline.lazy import LazyModule

serdes = LazyModule("threadline.codec.serde")  # LangGraph's serializer loads when a value is shown

SHOWN_KEYS = 4  # keys a summary names before "…"


@dataclass
class ChannelVersion:
    """One version of a channel: first held by ``checkpoint_id`` (parent ``parent_checkpoint_id``),
    created at ``created_at`` (seconds since the epoch) at ``step``; ``writers``: the nodes whose
    writes made it (or the checkpoint's source); ``bytes``: the stored size of the version (delta
    rows count as stored); ``present`` False when the channel was emptied; ``summary``: what
    changed from the version before on the same branch."""

    checkpoint_id: str
    parent_checkpoint_id: str | None
    version: Any
    step: int | None
    source: str | None
    created_at: float
    writers: list[str]
    bytes: int
    present: bool
    value: Any
    summary: str
    on_head_branch: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint_id": self.checkpoint_id, "parent_checkpoint_id": self.parent_checkpoint_id, "version": self.version,
            "step": self.step, "source": self.source, "created_at": self.created_at, "created": iso(self.created_at),
            "writers": self.writers, "bytes": self.bytes, "present": self.present, "value": jsonable(self.value),
            "summary": self.summary, "on_head_branch": self.on_head_branch,
        }


@dataclass
class ChannelHistory:
    """The versions of ``channel`` in ``thread_id`` (``checkpoint_ns``), oldest first."""

    thread_id: str
    checkpoint_ns: str
    channel: str
    all_branches: bool
    versions: list[ChannelVersion] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "checkpoint_ns": self.checkpoint_ns, "channel": self.channel,
                "all_branches": self.all_branches, "versions": [v.to_json() for v in self.versions]}


def same_value(a: Any, b: Any) -> bool:
    """Whether two channel values are equal: ``==`` when it answers a bool, else their JSON forms."""
    try:
        equal = a == b
        if isinstance(equal, bool):
            return equal
    except Exception:  # values whose == raises or is not a bool (arrays) compare as JSON
        pass
    return repr(jsonable(a)) == repr(jsonable(b))


def item_key(item: Any) -> Any:
    """What identifies a list item across versions: a message's id, else the item itself."""
    ident = getattr(item, "id", None) or (item.get("id") if isinstance(item, Mapping) else None)
    return ("id", ident) if ident else ("value", repr(jsonable(item)))


def _names(keys: Sequence[Any]) -> str:
    shown = ",".join(map(str, keys[:SHOWN_KEYS]))
    return shown + ("…" if len(keys) > SHOWN_KEYS else "")


def summarize(before: Any, after: Any, *, existed: bool = True, present: bool = True) -> str:
    """A compact summary of a channel's change from ``before`` to ``after``: ``set`` (first value),
    ``cleared``, ``+N items`` / ``-N items`` / ``+N -M items`` (lists, messages by id), ``changed keys
    a,b`` / ``+keys x`` / ``-keys y`` (mappings), ``+N chars`` (text grown at its end), ``A → B``
    (numbers, booleans, short text), ``replaced`` otherwise, ``unchanged`` for an equal value."""
    if not present:
        return "cleared"
    if not existed:
        return "set"
    if isinstance(before, (list, tuple)) and isinstance(after, (list, tuple)):
        old, new = [item_key(x) for x in before], [item_key(x) for x in after]
        added, removed = Counter(new) - Counter(old), Counter(old) - Counter(new)  # an item appended twice counts twice
        changed = sum(1 for a, b in zip(before, after) if item_key(a) == item_key(b) and repr(jsonable(a)) != repr(jsonable(b)))
        parts = ([f"+{added.total()}"] if added else []) + ([f"-{removed.total()}"] if removed else [])
        text = " ".join(parts) + " items" if parts else ""
        if changed:
            text = (text + ", " if text else "") + f"{changed} changed"
        return text or ("reordered" if old != new else "unchanged")
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        plus = sorted(str(k) for k in after if k not in before)
        minus = sorted(str(k) for k in before if k not in after)
        changed = sorted(str(k) for k in after if k in before and repr(jsonable(after[k])) != repr(jsonable(before[k])))
        parts = ([f"changed keys {_names(changed)}"] if changed else []) + ([f"+keys {_names(plus)}"] if plus else []) + (
            [f"-keys {_names(minus)}"] if minus else [])
        return ", ".join(parts) or "unchanged"
    if isinstance(before, str) and isinstance(after, str) and after.startswith(before) and len(after) > len(before) and len(before) > 20:
        return f"+{len(after) - len(before)} chars"
    if same_value(before, after):
        return "unchanged"
    if all(isinstance(v, (int, float, bool, type(None))) or (isinstance(v, str) and len(v) <= 20) for v in (before, after)):
        return f"{jsonable(before)!r} → {jsonable(after)!r}" if isinstance(before, str) or isinstance(after, str) else f"{before} → {after}"
    return "replaced"


def channel_history_op(
    d: Dialect,
    serde: SerializerProtocol,
    thread_id: Any,
    channel: str,
    *,
    checkpoint_ns: str = "",
    all_branches: bool = False,
    bc: codec.BlobCodec | None = None,
) -> Op[ChannelHistory]:
    """The versions ``channel`` took in ``thread_id`` (see the module doc), oldest first.

    Raises ConfigError for an empty channel name, NotFoundError when the thread has no
    checkpoint in ``checkpoint_ns`` or the channel never held a value there."""
    if not isinstance(channel, str) or not channel:
        raise ConfigError(f"channel must be a non-empty string, got {channel!r}")
    tid, ns = thread_id_of(thread_id), checkpoint_ns_of(checkpoint_ns)
    rows = {r[2]: r[:10] for r in (yield Q(d.THREAD_CHECKPOINT_ROWS, (tid,))) if r[1] == ns}
    if not rows:
        raise NotFoundError(f"thread {tid!r} has no checkpoint" + (f" in checkpoint_ns {ns!r}" if ns else ""))
    docs = {cid: d.load_object(r[4], f"checkpoint ({tid!r}, {ns!r}, {cid!r})") for cid, r in rows.items()}
    version = {cid: R.all_versions(doc).get(channel) for cid, doc in docs.items()}
    head_path: list[str] = []
    cur: str | None = max(rows)
    while cur in rows and cur not in head_path:
        head_path.append(cur)
        cur = rows[cur][3]
    on_head = set(head_path)
    order = sorted(rows) if all_branches else head_path[::-1]
    changed = [cid for cid in order if version[cid] is not None and version[cid] != version.get(rows[cid][3] or "")]
    cleared = [cid for cid in order if version[cid] is None and version.get(rows[cid][3] or "") is not None]
    if not changed:
        raise NotFoundError(f"channel {channel!r} never held a value in thread {tid!r}"
                            + ("" if all_branches else " on its head branch (try all branches)"))
    picked = sorted(set(changed) | set(cleared), key=order.index)
    values = yield from load_channels_op(d, serde, [rows[c] for c in picked], [channel], bc)
    sizes = {(r[1], r[2]): int(r[5]) for r in (yield Q(d.thread_blob_sizes(), (tid,))) if r[0] == ns}
    writers: dict[str, list[str]] = {}
    for w in (yield from audit_op(d, tid, checkpoint_ns=ns)):
        if w.channel == channel and w.node and w.node not in writers.setdefault(w.checkpoint_id, []):
            writers[w.checkpoint_id].append(w.node)
    value_of = {cid: vals for cid, vals in zip(picked, values)}
    by_version = {version[cid]: vals for cid, vals in value_of.items() if version[cid] is not None}  # one value a version
    out = ChannelHistory(tid, ns, channel, all_branches)
    for cid in picked:
        r, parent = rows[cid], rows[cid][3]
        present = channel in value_of[cid]
        previous = by_version.get(version.get(parent or ""), {})
        existed = channel in previous
        summary = summarize(previous.get(channel), value_of[cid].get(channel), existed=existed, present=present)
        out.versions.append(ChannelVersion(
            cid, parent, version[cid], r[6], r[7], float(r[8]), writers.get(parent or "", []) or [r[7] or "?"],
            sizes.get((channel, str(version[cid])), 0) if present else 0, present, value_of[cid].get(channel), summary, cid in on_head,
        ))
    return out


def channel_history(saver: Any, thread_id: Any, channel: str, **kwargs: Any) -> ChannelHistory:
    """Sync ``channel_history_op``."""
    return saver.run(channel_history_op(saver.dialect, serdes.showing(saver.serde), thread_id, channel, bc=saver.blob_codec, **kwargs))
