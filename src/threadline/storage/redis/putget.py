"""The saver's ``put`` and ``get_tuple`` on Redis, each one statement (``Dialect.put_statement``,
``Dialect.get_statement``): ``put`` one script on the thread's keys, ``get_tuple`` two round trips.
The hot path: what runs per call is here and in the scripts (``scripts.PUT``, ``CHAINS``, ``WRITES_OF``)."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from threadline.storage import rows as R
from threadline.storage.redis import layout as L
from threadline.storage.redis.base import Call, blob_row, checkpoint_row, frame, group, latest_of, pairs, write_row


def get_checkpoint(d: Any, params: Sequence[Any], many: bool, latest: bool) -> Generator:
    """``Dialect.get_statement``'s parameters and rows in two round trips: the checkpoint row, then
    its blobs with their delta chains and its writes in one pipeline (the values the saver's
    cache holds, the last two parameters, are not fetched)."""
    tid, ns = params[0], params[1]
    k = d.keys(tid)
    if latest:
        found = yield from latest_of(d, tid, ns)
        if found is None:
            return []
        cid, raw = found
    else:
        cid = params[2]
        raw = (yield [("HGET", k.ck, L.field(ns, cid))])[0]
        if raw is None:
            return []
    row = checkpoint_row(tid, ns, cid, raw)
    doc = d.load_object(row[4], f"checkpoint ({tid!r}, {ns!r}, {cid!r})")  # parsed once: load_tuples takes it as is
    cached = set(zip(params[-2], params[-1]))
    fields = [L.field(ns, ch, v) for ch, v in R.blob_pairs(doc) if (ch, v) not in cached]
    blobs, writes = yield [Call("chains", k, fields), Call("writes_of", k, [L.field(ns, cid)])]
    out: list[tuple] = [(0, tid, ns, cid, row[3], row[7], row[9], None, row[6], row[8], doc, row[5], None)]
    for f, b in pairs(blobs):
        _, bns, ch, v, type_, blob, base = blob_row(tid, f, b)
        out.append((1, tid, bns, ch, v, type_, base, None, None, None, None, None, blob))
    rows = sorted((write_row(tid, f, w) for f, w in pairs(writes)), key=lambda w: (w[6], w[3], w[4]))
    out += [(2, tid, ns, cid, w[3], w[5], w[6], w[7], w[4], None, None, None, w[8]) for w in rows]
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
    args.append(tid)
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
