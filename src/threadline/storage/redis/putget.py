"""The saver's ``put`` and ``get_tuple`` on Redis, each one statement (``Dialect.put_statement``,
``Dialect.get_statement``) and one round trip: ``put`` one script on the thread's keys, ``get_tuple``
another. The hot path: what runs per call is here and in the scripts (``scripts.PUT``, ``GET``)."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import orjson

from threadline.storage import rows as R
from threadline.storage.redis import layout as L
from threadline.storage.redis.base import Call, blob_row, checkpoint_row, frame, group, pairs, text, write_row


def get_checkpoint(d: Any, params: Sequence[Any], many: bool, latest: bool) -> Generator:
    """``Dialect.get_statement``'s parameters and rows in one round trip (``scripts.GET``): the
    checkpoint row, its writes and, for the root namespace's latest checkpoint, its blobs with their
    delta chains and the writes their references name, but those the saver's cache holds (the last
    two parameters). A blob the script did not look up (another namespace, an older checkpoint, a
    thread written before the script kept the list) is read in a second round trip."""
    tid, ns = params[0], params[1]
    k = d.keys(tid)
    held = {(ch, v) for ch, v in zip(params[-2], params[-1])}
    reply = (yield [Call("get", k, [ns, "" if latest else params[2], *(L.field(ns, ch, v) for ch, v in held)])])[0]
    if not reply:
        return []
    f, raw, listed, blobs, writes, referenced = reply
    cid = L.split(f, 2, f"checkpoint of thread {tid!r}")[1]
    row = checkpoint_row(tid, ns, cid, raw)
    doc = d.load_object(row[4], f"checkpoint ({tid!r}, {ns!r}, {cid!r})")  # parsed once: load_tuples takes it as is
    blobs = pairs(blobs)
    wanted = {L.field(ns, ch, v): (ch, v) for ch, v in R.blob_pairs(doc) if (ch, v) not in held}
    looked = set(text(listed).split("\1")) if listed else set()  # by the script: read, or not stored
    missing = [x for x in wanted if x not in looked]
    if missing:
        more, also = (yield [Call("blobs", k, missing)])[0]
        blobs += pairs(more)
        referenced += also
    out: list[tuple] = [(0, tid, ns, cid, row[3], row[7], row[9], None, row[6], row[8], doc, row[5], None)]
    stored = set()
    for b, v in blobs:
        _, bns, ch, version, type_, blob, base = blob_row(tid, b, v)
        out.append((1, tid, bns, ch, version, type_, base, None, None, None, None, None, blob))
        stored.add((bns, ch, version))
    # looked up and not stored (a channel without a value): rows without a type, not read again
    out += [(1, tid, ns, ch, v, None, None, None, None, None, None, None, None) for ch, v in wanted.values() if (ns, ch, v) not in stored]
    rows = sorted((write_row(tid, w, r) for w, r in pairs(writes)), key=lambda w: (w[6], w[3], w[4]))
    out += [(2, tid, ns, cid, w[3], w[5], w[6], w[7], w[4], None, None, None, w[8]) for w in rows]
    out += [(3, *w[:4], w[5], w[6], w[7], w[4], None, None, None, w[8]) for w in (write_row(tid, w, r) for w, r in pairs(referenced))]
    return out


# --- put ---------------------------------------------------------------------------------------


def put_checkpoint(d: Any, params: Sequence[Any], many: bool, blobs: int, fenced: bool = False) -> Generator:
    """``Dialect.put_statement``'s parameters and result, as one script."""
    fence = params[-3:] if fenced else None
    tid, ns, cid, parent, doc, meta, step, source, run_id, created, checksum, expected, size, needs_parent, default_ttl = params[:15]
    args: list[Any] = [
        L.field(ns, cid), L.pack_checkpoint((parent, doc, meta, step, source, run_id, created, checksum)),
        L.field(ns, parent) if parent else "", "1" if needs_parent else "0", expected, size, repr(float(created)), default_ttl or 0, blobs,
    ]
    for b in group(params[15 : len(params) - 3 if fenced else None], 10):
        _, bns, ch, v, type_, blob, base, guard_type, guard_size, checked = b
        guarded = base is not None and guard_type is not None
        args += [L.field(bns, ch, v), L.pack_blob(type_, blob, base), L.field(bns, ch, base) if guarded else "",
                 guard_type or "", guard_size if guard_size is not None else 0, "1" if checked else "0"]
    # the root namespace's checkpoint lists its blob fields, for a get in one round trip (``scripts.GET``)
    args += [tid, "\1".join(L.field(ns, ch, v) for ch, v in R.blob_pairs(orjson.loads(doc))) if ns == "" else ""]
    if fence is not None:  # the lease checked in the script; on a cluster the index once it held
        keys = (*d.keys(tid), L.lease_key(d.prefix, tid), *((d.index,) if d.single_node else ()))
        found = yield [Call("put", keys, [frame(args), fence[1], str(fence[2])])]
        if not d.single_node and int(found[-1][4]):
            yield [("ZADD", d.index, "GT", float(created), tid)]
    elif d.single_node:  # the thread index in the script: one command, not a pipeline of two
        found = yield [Call("put", (*d.keys(tid), d.index), [frame(args)])]
    else:
        found = yield [("ZADD", d.index, "GT", float(created), tid), Call("put", d.keys(tid), [frame(args)])]
    return [tuple(int(x) for x in found[-1])]
