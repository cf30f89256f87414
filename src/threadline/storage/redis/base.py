"""The vocabulary of the Redis statements: ``Call`` (a script), ``Cmd`` (a named statement:
a handler and the arguments bound to it), and the row decoders and whole-thread reads that
handlers share (``dialect`` for the engine's statements; the rooms' statements beside it).

A handler is ``handler(dialect, params, many, *bound)``: a generator that yields batches of
commands (``("HGET", key, field)`` or ``Call``), is sent their replies, and returns rows in
the shapes ``storage/dialect/statements.py`` documents for the same name.
"""

from __future__ import annotations

import struct

from collections import defaultdict
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.storage.redis import layout as L

Handler = Callable[..., Generator[list, list, list]]


@dataclass(frozen=True)
class Call:
    """A script of ``scripts.SCRIPTS`` on one thread's keys."""

    script: str
    keys: Sequence[str]
    args: Sequence[Any]


_LENGTH = struct.Struct(">I")


def frame(args: Sequence[Any]) -> bytes:
    """A script's arguments as one string, each part its 4-byte big-endian length and its
    bytes (str as UTF-8, numbers as their text), split by the scripts' ``unframe``: redis-py
    encodes one argument instead of dozens."""
    out = []
    for a in args:
        b = a if isinstance(a, bytes) else a.encode() if isinstance(a, str) else repr(a).encode() if isinstance(a, float) else str(a).encode()
        out.append(_LENGTH.pack(len(b)))
        out.append(b)
    return b"".join(out)


@dataclass(frozen=True)
class Cmd:
    """A named statement on Redis: ``handler(dialect, params, many, *bound)``."""

    handler: Handler
    bound: tuple = ()
    name: str = ""

    def __str__(self) -> str:
        return self.name or self.handler.__name__


def expire_thread(d: Any, thread_id: str, own: Any = "") -> Call:
    """The script that gives all of ``thread_id``'s keys their expiry again (``scripts.EXPIRE``):
    its own TTL, else the default it was last written under; none for a thread never written
    under a TTL, or while it has a tag or a pin. ``own``: a TTL in minutes to record as the
    thread's own ('' keeps it)."""
    return Call("expire", d.keys(thread_id), [own])


def statement(fn: Handler) -> Cmd:
    return Cmd(fn, (), fn.__name__)


def rows_of(params: Sequence[Any], many: bool) -> list[Sequence[Any]]:
    return list(params) if many else [params]


def text(raw: bytes | str | None) -> str | None:
    return raw.decode() if isinstance(raw, bytes) else raw


def ck_row(tid: str, ns: str, cid: str, raw: bytes) -> list[Any]:
    """parent, checkpoint, metadata, step, source, run_id, created_at, checksum of a packed row."""
    return L.unpack_checkpoint(raw, f"checkpoint ({tid!r}, {ns!r}, {cid!r})")


def checkpoint_row(tid: str, ns: str, cid: str, raw: bytes) -> tuple:
    """``rows.CHECKPOINT_ROW``."""
    p, doc, meta, step, source, _run, created, checksum = ck_row(tid, ns, cid, raw)
    return (tid, ns, cid, p, doc, meta, step, source, created, checksum)


def blob_row(tid: str, f: bytes | str, raw: bytes) -> tuple:
    """``rows.BLOB_COLUMNS``."""
    ns, ch, v = L.split(f, 3, f"blob of thread {tid!r}")
    return (tid, ns, ch, v, *L.unpack_blob(raw, f"blob ({tid!r}, {ns!r}, {ch!r}, {v!r})"))


def write_row(tid: str, f: bytes | str, raw: bytes) -> tuple:
    """``rows.WRITE_COLUMNS`` plus created_at."""
    ns, cid, task, idx = L.split(f, 4, f"pending write of thread {tid!r}")
    channel, path, type_, blob, created = L.unpack(raw, L.WRITE_WIDTH, f"pending write ({tid!r}, {ns!r}, {cid!r}, {task!r}, {idx})")
    return (tid, ns, cid, task, int(idx), channel, path, type_, blob, created)


def pairs(flat: Sequence[Any]) -> list[tuple[Any, Any]]:
    return list(zip(flat[::2], flat[1::2]))


def by_thread(keys: Iterable[Sequence[Any]]) -> dict[str, list[Sequence[Any]]]:
    out: dict[str, list[Sequence[Any]]] = defaultdict(list)
    for k in keys:
        out[k[0]].append(k)
    return out


def group(flat: Sequence[Any], width: int) -> list[tuple]:
    return [tuple(flat[i : i + width]) for i in range(0, len(flat), width)]


# --- whole-thread reads --------------------------------------------------------------------


def thread_hash(d: Any, tid: str, part: str) -> Generator[list, list, list[tuple[bytes, bytes]]]:
    found = (yield [("HGETALL", getattr(d.keys(tid), part))])[0]
    return list(found.items())


def thread_checkpoint_rows(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid = params[0]
    out = []
    for f, raw in (yield from thread_hash(d, tid, "ck")):
        ns, cid = L.split(f, 2, f"checkpoint of thread {tid!r}")
        out.append((ns, cid, *ck_row(tid, ns, cid, raw)))
    return out  # ns, cid, parent, doc, meta, step, source, run_id, created_at, checksum


def thread_blobs_of(d: Any, tid: str) -> Generator:
    return [blob_row(tid, f, raw) for f, raw in (yield from thread_hash(d, tid, "bl"))]


def thread_writes_of(d: Any, tid: str) -> Generator:
    return [write_row(tid, f, raw) for f, raw in (yield from thread_hash(d, tid, "wr"))]


def latest_of(d: Any, tid: str, ns: str) -> Generator:
    found = (yield [Call("latest", d.keys(tid), [ns])])[0]
    if not found or found[1] is None:
        return None
    return L.split(found[0], 2, f"checkpoint of thread {tid!r}")[1], found[1]


def all_threads(d: Any) -> Generator:
    return [text(t) for t in (yield [("ZRANGE", d.index, 0, -1)])[0]]
