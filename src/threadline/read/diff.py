"""Diffs between two checkpoints: ``diff_values`` compares decoded states channel by
channel (message lists by message id, dicts key by key), and ``diff_op`` / ``diff``
wrap it into a ``StateDiff``, decoding only the channels whose versions differ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import codec
from threadline.storage.dialect import Dialect
from threadline.storage import rows as R
from threadline.storage.ops import Op
from threadline.read.common import checkpoint_row_op, is_internal_channel, jsonable, load_channels_op
from threadline.keys import checkpoint_id_of, checkpoint_ns_of, thread_id_of
from threadline.lazy import LazyModule

serdes = LazyModule("threadline.codec.serde")  # LangGraph's serializer loads when a value is shown


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
    bc: codec.BlobCodec | None = None,
) -> Op[StateDiff]:
    """Diff the stored states of two checkpoints (``b`` may be in ``thread_b``, default the same thread).

    Only channels whose versions differ are decoded: a channel both checkpoints
    reference at the same version holds the same blob (shared by reference).
    Bookkeeping channels are skipped unless ``include_internal``.
    Raises NotFoundError for an unknown checkpoint.
    """
    tid = thread_id_of(thread_id)
    tid_b = thread_id_of(thread_b) if thread_b is not None else tid
    ns = checkpoint_ns_of(checkpoint_ns)
    row_a = yield from checkpoint_row_op(d, tid, ns, checkpoint_id_of(a, "checkpoint a"))
    row_b = yield from checkpoint_row_op(d, tid_b, ns, checkpoint_id_of(b, "checkpoint b"))
    va = R.all_versions(d.load_object(row_a[4], f"checkpoint {a!r}"))
    vb = R.all_versions(d.load_object(row_b[4], f"checkpoint {b!r}"))
    keep = (lambda ch: True) if include_internal else (lambda ch: not is_internal_channel(ch))
    same_blob = tid == tid_b
    changed = sorted(ch for ch in set(va) | set(vb) if keep(ch) and not (same_blob and va.get(ch) == vb.get(ch)))
    unchanged = sorted(ch for ch in set(va) & set(vb) if keep(ch) and same_blob and va[ch] == vb[ch])
    values_a, values_b = yield from load_channels_op(d, serde, [row_a, row_b], changed, bc)
    return StateDiff(tid, ns, row_a[2], row_b[2], diff_values(values_a, values_b), unchanged)


def diff(saver: Any, thread_id: Any, a: str, b: str, **kwargs: Any) -> StateDiff:
    """Sync ``diff_op``."""
    return saver.run(diff_op(saver.dialect, serdes.showing(saver.serde), thread_id, a, b, bc=saver.blob_codec, **kwargs))
