"""Threads of the official savers' tables that threadline has not adopted yet, for the listings.

A database switched from LangGraph's official ``SqliteSaver`` / ``PostgresSaver`` holds, until
every thread is touched by a threadline saver, threads threadline has adopted and threads only
the official tables hold (or whose newest official checkpoints are not adopted yet: a mixed
fleet). The listings (``threads_op``, the browser's search) show the whole database: a thread
of the official tables appears with its summary — checkpoints, first and last write, stored
size, head step and source — and ``ThreadInfo.unadopted`` / ``official_only`` say what is not
adopted. Nothing here writes: reading a thread not adopted yet without adopting it is a view
(``threadline.transfer.official.thread_view``).

``Scope`` says where a saver's database keeps threads (``scope_of``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threadline import codec
from threadline.errors import CorruptRowError
from threadline.lazy import LazyModule
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q

serdes = LazyModule("threadline.codec.serde")  # LangGraph's serializer loads when an official row is decoded


@dataclass(frozen=True)
class Scope:
    """Where a database keeps threads: threadline's tables (``threadline``: they exist) and the
    official saver's tables (``official``: they exist and their threads are shown)."""

    threadline: bool = True
    official: bool = False


def scope_of(saver: Any, official: bool | None = None) -> Scope:
    """The ``Scope`` of ``saver``'s database. ``official``: show the official saver's threads not
    adopted yet (None: when the saver adopts them, i.e. not opened with ``adopt=False``)."""
    state = getattr(saver, "schema_state", None)
    if state is None:
        return Scope()
    show = official if official is not None else getattr(saver, "adopt", None) is not False
    return Scope(threadline=state.is_threadline, official=bool(state.official and show))


@dataclass
class OfficialThread:
    """A thread with official checkpoints not adopted yet: how many, their first and last
    write (epoch seconds), their stored bytes, and whether threadline holds the thread too."""

    thread_id: str
    checkpoints: int
    created_at: float
    updated_at: float
    bytes: int
    in_threadline: bool


def _metadata(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if raw is None:
        return {}
    import json

    try:
        found = json.loads(bytes(raw) if not isinstance(raw, str) else raw)
    except ValueError as exc:
        raise CorruptRowError(f"{where}: metadata is not JSON ({exc})") from None
    return found if isinstance(found, dict) else {}


def _written_op(d: Dialect, thread_id: str, checkpoint_id: str) -> Op[float]:
    """When an official checkpoint was written: the time its uuid6 id holds, else its ``ts``."""
    found = R.id_time(checkpoint_id)
    if found is not None:
        return found
    import datetime as _dt

    rows = yield Q(d.OFFICIAL_CHECKPOINT_DOC, (thread_id, checkpoint_id))
    if rows:
        tag, doc = rows[0]
        where = f"official checkpoint ({thread_id!r}, {checkpoint_id!r})"
        ck = doc if isinstance(doc, dict) else codec.decode(serdes.transfer_serde(), tag, bytes(doc), where)
        try:
            return _dt.datetime.fromisoformat(str(ck.get("ts"))).timestamp()
        except (AttributeError, TypeError, ValueError):
            pass
    return 0.0


def unadopted_threads_op(d: Dialect, scope: Scope, thread_ids: Sequence[str] | None = None) -> Op[list[OfficialThread]]:
    """The threads (of ``thread_ids``; None: all) with official checkpoints threadline has not
    adopted, by thread_id; none when ``scope`` shows no official threads."""
    if not scope.official or (thread_ids is not None and not thread_ids):
        return []
    out = []
    for tid, n, first, last, size, own in (yield Q(*d.unadopted_threads(scope.threadline, thread_ids))):
        made = yield from _written_op(d, tid, first)
        changed = made if last == first else (yield from _written_op(d, tid, last))
        out.append(OfficialThread(tid, int(n), made, changed, int(size or 0), bool(own)))
    return out


def matching_op(d: Dialect, threads: Sequence[OfficialThread], metadata: Mapping[str, Any], adopted: Mapping[str, str | None]) -> Op[set[str]]:
    """The threads having an official checkpoint not adopted yet (newer than ``adopted[tid]``)
    whose metadata holds every key of ``metadata`` with that value."""
    found = set()
    for t in threads:
        for (raw,) in (yield Q(d.OFFICIAL_METADATA, (t.thread_id, adopted.get(t.thread_id) or ""))):
            meta = _metadata(raw, f"official checkpoint of thread {t.thread_id!r}")
            if all(k in meta and meta[k] == v for k, v in metadata.items()):
                found.add(t.thread_id)
                break
    return found


def heads_op(d: Dialect, thread_ids: Sequence[str]) -> Op[dict[str, tuple[str, int | None, str | None]]]:
    """Per thread: its newest official root checkpoint's id, step and source."""
    out = {}
    for tid in thread_ids:
        rows = yield Q(d.OFFICIAL_ROOT_HEAD, (tid,))
        if rows:
            cid, raw = rows[0]
            meta = _metadata(raw, f"official checkpoint ({tid!r}, '', {cid!r})")
            step = meta.get("step")
            out[tid] = (cid, step if isinstance(step, int) and not isinstance(step, bool) else None, meta.get("source"))
    return out


def merge(own: Sequence[Any], extra: Sequence[Any], key: Callable[[Any], Any], offset: int, limit: int) -> list[Any]:
    """Rows ``offset`` to ``offset + limit`` of two listings in one order: ``own`` is the first
    ``offset + limit`` rows of one (sorted by ``key``), ``extra`` every row of the other."""
    return sorted([*own, *extra], key=key)[offset : offset + limit]


__all__ = ["OfficialThread", "Scope", "heads_op", "matching_op", "merge", "scope_of", "unadopted_threads_op"]
