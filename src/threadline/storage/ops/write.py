"""Writing operations: ``put`` stores a checkpoint's changed blobs (as deltas on the
parent's values when a saver's blob codec allows, guarded so a delta only lands on an
unchanged base), its row and the thread index in one transaction; ``put_writes`` stores
a task's pending writes. ``_delta_bases`` finds delta bases in the cache or reads them
through ``read.fetch_blob_rows`` / ``read.fetch_blobs``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import codec, limits
from threadline.codec.jsontext import compact_doc, dumps_plain
from threadline.storage import heads as H
from threadline.storage import inline
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.ops.base import Op, Q, flat
from threadline.storage.ops import lease
from threadline.storage.ops.read import fetch_blob_rows, fetch_blobs
from threadline.errors import ConfigError, CorruptRowError, ValueTooLargeError
from threadline.keys import Key, config_of, key_of

if TYPE_CHECKING:
    from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata

# ``Dialect.put_statement``'s parameters: the checkpoint's, then each blob row's
PUT_PARAMS, BLOB_PARAMS = 15, 10
# A put checks at most this many rows it will cache (4 parameters each, in one statement of
# ``_put_statements``: within SQLite's and Postgres's limits on parameters); more are not cached.
CHECKED_ROWS = 4000


def _parent_versions(d: Dialect, bc: codec.BlobCodec, key: Key) -> Op[codec.Versions | None]:
    """The versions of the parent checkpoint (``key``'s checkpoint_id): from the cache, else
    read in this transaction (and cached). None when it is not stored or not readable: a put
    need not be on a readable parent (the official savers do not look)."""
    parent = (key.thread_id, key.checkpoint_ns, key.checkpoint_id)
    cached = bc.cache.versions(parent) if bc.cache is not None else None
    if cached is not None:
        return cached
    found = yield Q(d.CHECKPOINT_DOC, parent, read=True)
    try:
        doc = d.load_object(found[0][0], f"checkpoint {parent!r}") if found else None
        absent = R.absent_channels(doc) if doc is not None else frozenset()
        versions = codec.Versions(dict(R.blob_pairs(doc)), absent, absent, R.inline_maps(doc)[1]) if doc is not None else None
    except CorruptRowError:
        return None
    if versions is not None and bc.cache is not None:
        bc.cache.put_versions(parent, versions)
    return versions


def _delta_bases(
    d: Dialect,
    bc: codec.BlobCodec,
    key: Key,
    candidates: Sequence[tuple[str, str]],
    worth_reading: Callable[[str], bool],
    parent: codec.Versions,
) -> Op[dict[str, tuple[str, codec.Entry]]]:
    """For the (channel, new version) that may be deltas: channel → (its version in the
    ``parent`` checkpoint, that value).

    From the cache; on a miss, read in this transaction (the base values through their
    chains) when ``worth_reading(channel)``: a value too small to be stored as a delta
    (whose base is never cached) costs no round trip."""
    assert bc.cache is not None
    bases: dict[str, tuple[str, codec.Entry]] = {}
    missing: dict[str, str] = {}
    head = bc.cache.head_row(key.thread_id, key.checkpoint_ns, key.checkpoint_id)
    for channel, version in candidates:
        base_version = parent.of.get(channel)
        if base_version is None or base_version == version or channel in parent.no_base:
            continue
        entry = bc.cache.get((key.thread_id, key.checkpoint_ns, channel, base_version))
        if entry is None and head is not None and (h := head.get(channel)) is not None and h[0] == base_version:
            # the parent's head, read or written here, holds that very value: a base, or none to read
            entry = bc.base_entry((h[1], h[2], None), h[3], h[4])
            if entry is None:
                continue
        if entry is not None:
            bases[channel] = (base_version, entry)
        else:
            missing[channel] = base_version
    missing = {ch: bv for ch, bv in missing.items() if worth_reading(ch)}
    if missing:
        wanted = [(key.thread_id, key.checkpoint_ns, ch, bv) for ch, bv in missing.items()]
        rows = yield from fetch_blob_rows(d, wanted)
        try:
            resolved = yield from fetch_blobs(d, wanted, rows=rows, bc=bc)
        except CorruptRowError:
            resolved = {}  # an unreadable base: the new value is stored as a snapshot
        for k, r in resolved.items():
            stored = rows[k[:3]][k[3]]
            entry = codec.entry_of(r, stored[0], len(stored[1]) if stored[1] is not None else 0)
            if entry is not None:
                bc.cache.put(k, entry)
                bases[k[2]] = (k[3], entry)
    return bases


_CHANNEL = itemgetter(0)  # a (channel, version key) pair's channel
WIDE = 32  # channels from which a put's per-channel passes give way to whole-map operations (``_follows``)


def _follows(pairs: Sequence[tuple[str, str]], new_versions: Mapping[str, Any], parent: codec.Versions | None) -> bool:
    """Whether a ``put``'s (channel, version key) ``pairs`` are its ``parent``'s versions with
    ``new_versions`` over them, as LangGraph's next checkpoint is: one comparison in C (a wide graph
    names hundreds of channels, a put changes a few). False for fewer than ``WIDE`` channels, whose passes
    cost less than the comparison."""
    if parent is None or len(pairs) < WIDE:
        return False
    named = dict(pairs)
    return named == {**parent.of, **{ch: named[ch] for ch in new_versions if ch in named}}


def _unexplained(
    pairs: Sequence[tuple[str, str]], new_versions: Mapping[str, Any], parent: codec.Versions | None, followed: bool = False
) -> list[str]:
    """The channels of a ``put`` (``pairs``: (channel, version key) it names) that it does not
    store (not in ``new_versions``) at a version its ``parent`` (None: no parent) does not name
    either, or names as possibly without a blob (its ``absent``): ``ABSENT`` of its doc, sorted.
    ``followed``: ``_follows(pairs, new_versions, parent)`` holds (then only the parent's absent ones)."""
    if followed and parent is not None:
        return sorted(parent.absent.intersection(map(_CHANNEL, pairs)).difference(new_versions)) if parent.absent else []
    return sorted(
        ch for ch, v in pairs if ch not in new_versions and (parent is None or parent.of.get(ch) != v or ch in parent.absent)
    )


def _versions_of(
    pairs: Sequence[tuple[str, str]], values: Sequence[R.Value], parent: codec.Versions | None, absent: Sequence[str], followed: bool,
    empty: Mapping[str, Any],
) -> codec.Versions:
    """A new checkpoint's versions as cached for a child's ``put`` (``_delta_bases``), with the
    channels that are no delta base: written by this put as no delta candidate (empty, under
    ``delta_min_bytes``, not a list or dict), unchanged since a ``parent`` where they were no
    base, or ``absent`` — so a child never reads back a value it could not build on (LangGraph
    empties ``__pregel_tasks`` after each turn's input: its next input would read ``[]``).
    ``followed`` (``_follows``): every channel not written is unchanged since the parent, so the
    parent's set is taken by set operations, not a pass per channel. ``empty``: the document's
    empty channels (``storage.inline``)."""
    written = {v.channel: v.container is not None for v in values}
    no_base: frozenset[str] | set[str]
    if followed and parent is not None:
        # whole-set operations, each one copy in C (a wide graph's channels are mostly no base)
        no_base = parent.no_base.difference(written)
        extra = [ch for ch, base in written.items() if not base]
        if extra:
            no_base = no_base.union(extra)
    else:
        no_base = {ch for ch, _ in pairs if written.get(ch) is False or (ch not in written and parent is not None and ch in parent.no_base)}
    if absent:
        no_base = no_base.union(absent)
    return codec.Versions(dict(pairs), frozenset(no_base), frozenset(absent), empty)


def _put_statements(
    d: Dialect, bc: codec.BlobCodec, key: Key, blob_rows: list[R.BlobRow], checked: list[R.BlobRow], row: tuple, size: int,
    required_parent: str | None, default_ttl: float | None,
) -> Op[int | None]:
    """``put``'s writes as several statements (a backend without ``Dialect.put_statement``):
    the blobs, the checkpoint row (inserted, or updated when put again) and the thread index.
    Returns how many ``checked`` rows are stored as written, or None when a new checkpoint row
    was not written because its ``required_parent`` is no longer stored."""
    added = 0
    deltas = [r for r in blob_rows if r.delta]
    parent_stored = True
    if d.checks_hold and (deltas or required_parent is not None):
        # the guards read once, in this write transaction, then plain inserts (``Dialect.checks_hold``)
        guards = flat((r.params[2], r.params[6], *r.guard) for r in deltas)
        found = (yield Q(d.put_guards(len(deltas)), [required_parent, key.thread_id, key.checkpoint_ns, *guards]))[0]
        parent_stored, refused = bool(found[0]), {id(r) for r, ok in zip(deltas, found[1:]) if not ok}
        kept = [r for r in blob_rows if id(r) not in refused]
        if kept:
            added = (yield Q(d.INSERT_BLOB, [r.params for r in kept], many=True, stores=(("blobs", size),), count=True))[0][0]
    elif deltas:
        added = (yield Q(d.insert_blob_guarded(), [r.params + r.guard for r in blob_rows], many=True, stores=(("blobs", size),), count=True))[0][0]
    elif blob_rows:
        added = (yield Q(d.INSERT_BLOB, [r.params for r in blob_rows], many=True, stores=(("blobs", size),), count=True))[0][0]
    # every row inserted: the checked ones are stored as written; else the checkpoint's statement counts them
    recount = checked if added != len(blob_rows) else []
    checked_params = [p for r in recount for p in (r.params[2], r.params[3], r.params[4], len(r.params[5] or b""))]
    count_params = [*checked_params, key.thread_id, key.checkpoint_ns] if recount else []
    parent_key = (required_parent, key.thread_id, key.checkpoint_ns, required_parent)
    # counted when no blob row needs recounting (SQLite buffers a RETURNING's rows in a temporary table)
    if not parent_stored:
        inserted = False
    else:
        guarded = not d.checks_hold
        found = yield Q(d.insert_checkpoint(len(recount), guarded), [*row, *(parent_key if guarded else ()), *count_params],
                        stores=(("checkpoints", len(row[4]) + len(row[5])),), count=not recount)
        inserted = bool(found) if recount else found[0][0] > 0
    if not inserted and required_parent is not None and not (yield Q(d.CHECKPOINT_PARENT, row[:3])):
        return None  # not stored, and neither is the parent it was built on
    if inserted:
        stored = found[0][1] if recount else len(checked)
    else:
        parent = (key.checkpoint_id,) if d.reput_sets_parent else ()
        checksum = row[10]
        if not d.reput_sets_parent:  # the row keeps its parent: the checksum covers that one
            kept = yield Q(d.CHECKPOINT_PARENT, row[:3])
            checksum = bc.checkpoint_checksum(row[:3], kept[0][0] if kept else None, row[4], row[5], text=d.keeps_json_text)
        yield Q(d.reput_checkpoint(), (*parent, *row[4:9], checksum, *row[:3]))
        # as for a new row: every blob row inserted, the checked ones are stored as written; else counted
        stored = (yield Q(f"SELECT {d.count_stored(len(recount))}", count_params))[0][0] if recount else len(checked)
    yield Q(d.UPSERT_THREAD, (key.thread_id, row[9], row[9], 1 if inserted else 0, size, default_ttl))
    return stored


def _reseal(d: Dialect, bc: codec.BlobCodec, ck_key: tuple, given: str | None, doc_json: str, meta_json: str) -> Op[None]:
    """A checkpoint put again keeps its parent (``put_statement``): seal the row with the parent
    it kept when that is not the one given (the statement left its checksum NULL then)."""
    kept = yield Q(d.CHECKPOINT_PARENT, ck_key)
    parent = kept[0][0] if kept else None
    if kept and parent != given:
        checksum = bc.checkpoint_checksum(ck_key, parent, doc_json, meta_json, text=d.keeps_json_text)
        yield Q(d.SET_CHECKSUM, (checksum, *ck_key), single=True)


def _head(
    d: Dialect, bc: codec.BlobCodec, key: Key, checkpoint_id: str, pairs: Sequence[tuple[str, str]], values: Sequence[R.Value],
    blob_rows: Sequence[R.BlobRow],
    followed: bool,
    checksum: str,
) -> tuple[tuple, H.Entries]:
    """The namespace's head row (``storage.heads``) for the checkpoint a put stores, as ``UPSERT_HEAD``'s
    parameters, and its entries: the values this put serialized, and those it took unchanged from the
    parent's head as this process knows it (``followed``: the put names the parent's versions and its
    new ones, ``_follows``); ``checksum``: the checkpoint row's, which the head is bound to."""
    written = {
        v.channel: (v.version, v.tag or codec.EMPTY, v.data or b"", r.params[4], len(r.params[5] or b""))
        for v, r in zip(values, blob_rows)
    }
    inherited = bc.cache.head_row(key.thread_id, key.checkpoint_ns, key.checkpoint_id) if bc.cache is not None else None
    entries = H.entries_of(pairs, written, inherited, bc.offload_min, followed)
    ck_key = (key.thread_id, key.checkpoint_ns, checkpoint_id)
    return H.row_params(bc, ck_key, entries, checksum), entries


def put(
    d: Dialect,
    serde: SerializerProtocol,
    config: Any,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: Mapping[str, Any],
    bc: codec.BlobCodec | None = None,
    absent: Sequence[str] | None = None,
    default_ttl: float | None = None,
    fence: lease.Fence | None = None,
    from_doc: bool = False,
) -> Op[dict]:
    """Store a checkpoint: its changed channels' blobs, its row, and the thread index, atomically
    (one statement where the dialect has ``put_statement``, else one transaction).

    With a saver's ``bc`` (``codec.BlobCodec``), a list/dict value that extends the
    channel's value in the parent checkpoint (``config``'s checkpoint_id) is stored
    as a delta on it (see ``codec``); every value at or above the size threshold is
    compressed. Without one (``codec.PLAIN``): compressed snapshots. Every value is
    sealed to its row and the checkpoint row gets its checksum (``codec.seal``).

    A channel the checkpoint names at a version neither in ``new_versions`` nor its parent's
    is recorded as possibly without a blob (``rows.ABSENT``); a caller that knows which
    channels those are (a lifecycle copy, an import) passes them as ``absent``.

    ``default_ttl``: the writing saver's default TTL in minutes, recorded on the thread, which
    makes it subject to TTL (``threadline.ttl``); None keeps what the thread has.

    ``fence``: the put is made under a thread guard lease (``threadline.guard``), checked in the
    put's own statement or transaction: ``LeaseLostError``, nothing written, when it was lost.

    The channels holding None, the empty ones and small scalars go in the checkpoint's document,
    with no blob row (``storage.inline``); ``from_doc``: the checkpoint is a stored document given back (a
    branch of a stored checkpoint, ``lifecycle.branch``), its values shared by reference and not
    given, its inline channels already in it.
    """
    bc = bc or codec.PLAIN
    key = key_of(config)
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("id"), str):
        raise ConfigError("checkpoint must be a Checkpoint dict with a string 'id'")
    R.put_keys(checkpoint, new_versions)
    now = time.time()
    doc, meta = R.put_docs(serde, config, checkpoint, metadata, key, bc)
    # channels kept in the doc itself (``storage.inline``): no blob row
    planned = None if from_doc else inline.plan(doc, checkpoint["channel_values"], new_versions, bc.keys is None)
    stored_inline = planned.stored_inline() if planned is not None else ()
    if stored_inline:
        new_versions = {ch: v for ch, v in new_versions.items() if ch not in stored_inline}
    # Blobs whose parameters do not fit in one statement with the checkpoint's (``PUT_PARAMS``):
    # on a dialect that puts in one statement, they are inserted before it, in chunks, as
    # snapshots the cache does not keep (a delta or a cached row must be checked by that statement).
    wide = PUT_PARAMS + BLOB_PARAMS * len(new_versions) > d.max_params and d.put_statement(0) is not None
    candidates = R.delta_channels(checkpoint, new_versions) if bc.deltas and not wide else []
    if planned is None:
        pairs = R.blob_pairs(doc)
        inherits = absent is None and any(ch not in new_versions for ch, _ in pairs)
    else:  # a channel left may be a blob taken from the parent (``inline.apply`` tells, below)
        inherits = absent is None and not (doc["channel_versions"].keys() - stored_inline) <= new_versions.keys()
    parent = (yield from _parent_versions(d, bc, key)) if key.checkpoint_id and (inherits or candidates or (planned and planned.left)) else None
    if planned is not None:
        inline.apply(doc, planned, parent.empty if parent is not None else None)
        pairs = R.blob_pairs(doc)
        inherits = absent is None and any(ch not in new_versions for ch, _ in pairs)
    followed = _follows(pairs, new_versions, parent)
    if absent is None:
        absent = _unexplained(pairs, new_versions, parent, followed)
    if absent:
        doc[R.ABSENT] = list(absent)
    where = f"checkpoint {checkpoint['id']!r}: metadata"
    try:
        doc_json, meta_json, plain = dumps_plain(doc, meta)
    except RecursionError:
        raise limits.too_deep(where, ValueTooLargeError) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where} or versions are not JSON-serializable ({exc})") from exc
    limits.check_bytes(meta_json, "max_metadata_bytes", where, ValueTooLargeError)
    limits.check_depth(meta, meta_json, where, ValueTooLargeError)
    ck_key = (key.thread_id, key.checkpoint_ns, checkpoint["id"])
    checksum = bc.checkpoint_checksum(ck_key, key.checkpoint_id, doc_json, meta_json, text=d.keeps_json_text, plain=(doc, meta) if plain else None)
    step, source, run_id = R.extracted_columns(meta)
    encoded: dict[str, tuple[str, bytes]] = {}

    def worth_reading(channel: str) -> bool:  # no cached base: serialized whole in any case
        encoded[channel] = codec.encode(serde, checkpoint["channel_values"][channel], channel)
        return len(encoded[channel][1]) >= bc.delta_min_bytes

    try:
        bases = (yield from _delta_bases(d, bc, key, candidates, worth_reading, parent)) if candidates and parent is not None else {}
        values = R.serialize_values(serde, checkpoint, new_versions, bc, bases, encoded)
    except ValueTooLargeError as exc:  # named with the thread and checkpoint (the codec knows only the channel)
        raise limits.value_too_large(exc, key.thread_id, key.checkpoint_ns, checkpoint["id"]) from None
    blob_rows = R.blob_rows(key, values, bases, bc)
    size = sum(len(r.params[5] or b"") for r in blob_rows)
    # The rows the cache will remember (deltas and list/dict snapshots) are checked in the
    # statement that writes the checkpoint row, so this costs no extra round trip.
    checked = [r for r in blob_rows if r.value is not None] if bc.cache is not None else []
    if wide or len(checked) > CHECKED_ROWS:  # too many to check in one statement: stored, not cached
        for r in checked:
            r.value = None
        checked = []
    stored_doc = compact_doc(doc_json) if d.compacts_docs else doc_json  # the checksum covers ``doc_json``
    row = (key.thread_id, key.checkpoint_ns, checkpoint["id"], key.checkpoint_id, stored_doc, meta_json, step, source, run_id, now, checksum)
    # channels taken unchanged from the parent are stored with it: a new row needs it still stored
    required = key.checkpoint_id if inherits and parent is not None else None
    # one statement when its parameters fit, else several in one transaction (the blobs in chunks)
    in_one = [] if wide else blob_rows
    head = _head(d, bc, key, checkpoint["id"], pairs, values, blob_rows, followed, checksum) if d.head_rows else None
    one = d.put_statement(len(in_one), fence is not None)
    fenced: tuple = ()  # the fence's parameters, last in a fenced put statement's
    if fence is not None:
        what = f"checkpoint {checkpoint['id']!r}"
        if one is None or wide:  # checked first, in the put's transaction
            yield from lease.check(d, fence, what)
        if one is not None:
            fenced = (fence.thread_id, fence.holder, fence.token)
    if one is not None:
        if wide:
            yield Q(d.INSERT_BLOB, [r.params for r in blob_rows], many=True, stores=(("blobs", size),))
        # blobs, checkpoint and thread index in one round trip; the checkpoint and thread rows
        # are written only when every checked row is stored as written (else below)
        is_checked = [r.value is not None and bc.cache is not None for r in in_one]
        blob_params = flat((*r.params, *r.guard, c) for r, c in zip(in_one, is_checked))
        stores = (("checkpoints", len(stored_doc) + len(meta_json)), ("blobs", 0 if wide else size))
        params = [*row, len(checked), size, required is not None, default_ttl, *blob_params, *fenced]
        stored, _, existed, parent_stored, *held = (yield Q(one, params, single=True, stores=stores))[0]
        if held and not held[0]:
            yield from lease.refuse(d, fence, what)  # type: ignore[arg-type]
        if required is not None and not existed and not parent_stored:
            stored = None
        elif existed and not d.reput_sets_parent:
            yield from _reseal(d, bc, ck_key, key.checkpoint_id, doc_json, meta_json)
    else:
        stored = yield from _put_statements(d, bc, key, blob_rows, checked, row, size, required, default_ttl)
    if stored is None:
        # Another process deleted the parent (with its thread) after this saver cached it: put
        # again as on a parent not stored, its channels recorded absent (as the official
        # PostgresSaver reads such a checkpoint: without the channels whose blobs are gone).
        if bc.cache is not None:
            bc.cache.forget_threads([key.thread_id])
        return (yield from put(d, serde, config, checkpoint, metadata, new_versions, bc, default_ttl=default_ttl, fence=fence, from_doc=from_doc))
    retried = checked and stored != len(checked)
    if head is not None and not retried:
        yield Q(d.UPSERT_HEAD, head[0])
        if bc.cache is not None:
            bc.cache.put_head_row(key.thread_id, key.checkpoint_ns, checkpoint["id"], head[1])
    if retried:
        # Rare: a delta's base row changed since it was cached, or a key was already stored
        # with other bytes. Find out which rows are not stored as written.
        found = yield Q(d.blob_sizes_by_keys(len(checked)), flat(r.params[:4] for r in checked))
        have = {(f[0], f[1]): (f[2], f[3]) for f in found}
        retry = []
        for r, v in zip(blob_rows, values):
            k = (r.params[2], r.params[3])
            if r.value is None or have.get(k) == (r.params[4], len(r.params[5] or b"")):
                continue
            bc.cache.discard(r.params[:4])  # type: ignore[union-attr]
            r.value = None
            if r.delta and k not in have:  # the delta was refused: store the value whole
                retry.append(R.snapshot_row(v, key, bc))
        if one is not None:  # the checkpoint and thread rows, with the refused deltas as snapshots
            params = [*row, 0, size, False, default_ttl, *flat((*r, None, None, False) for r in retry), *fenced]
            again = (yield Q(d.put_statement(len(retry), fence is not None), params))[0]
            if fence is not None and not again[4]:
                yield from lease.refuse(d, fence, what)
        elif retry:
            yield Q(d.INSERT_BLOB, retry, many=True, stores=(("blobs", sum(len(r[5] or b"") for r in retry)),))
    if bc.cache is not None:
        for r in blob_rows:
            if r.value is not None:
                bc.cache.put(r.params[:4], codec.Entry(r.value, r.params[4], len(r.params[5] or b"")))
                base = bases.get(r.params[2])
                if base is not None:
                    # superseded on this branch: a sibling of this checkpoint reads it back if it needs it
                    bc.cache.discard((key.thread_id, key.checkpoint_ns, r.params[2], base[0]))
    if bc.cache is not None:
        bc.cache.put_versions((key.thread_id, key.checkpoint_ns, checkpoint["id"]), _versions_of(pairs, values, parent, absent, followed, doc.get(R.EMPTIES, {})))
    # the official savers hand back the caller's thread_id and checkpoint_ns as given (an int stays an int)
    given = config["configurable"]
    return config_of(given["thread_id"], given.get("checkpoint_ns") or key.checkpoint_ns, checkpoint["id"])


def put_writes(
    d: Dialect,
    serde: SerializerProtocol,
    config: Any,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    bc: codec.BlobCodec | None = None,
    fence: lease.Fence | None = None,
) -> Op[tuple[tuple[str, str, str], list[tuple]] | None]:
    """Store a task's pending writes against a checkpoint (LangGraph ``WRITES_IDX_MAP`` rules).

    Values at or above ``bc``'s size threshold are zstd-compressed (``<tag>+zstd``). With a
    saver's ``bc`` (deltas on), returns the msgpack values inserted — a write ignored because
    its key was already stored is not — as ``codec.BlobCache.add_writes`` arguments, for
    the saver to remember once they are committed, so that the child checkpoint's delta can
    reference them instead of storing their items again (``codec.refs``); else None.

    ``fence``: as ``put``'s (``LeaseLostError``, nothing written, when the lease was lost)."""
    key = key_of(config)
    if not key.checkpoint_id:
        raise ConfigError("put_writes needs config['configurable']['checkpoint_id']")
    if not isinstance(task_id, str):
        raise ConfigError(f"task_id must be a string, got {type(task_id).__name__}")
    now = time.time()
    try:
        replace, rows, encoded = R.write_rows(serde, key, writes, task_id, task_path or "", now, bc or codec.PLAIN)
    except ValueTooLargeError as exc:
        raise limits.value_too_large(exc, key.thread_id, key.checkpoint_ns, key.checkpoint_id) from None
    if not rows:
        return
    if replace:  # the same special channel twice: the last write wins, as with one upsert after another
        rows = list({r[4]: r for r in rows}.values())
    stores = (("writes", sum(len(r[8] or b"") for r in rows)),)
    if fence is None:
        # counted, not RETURNING: which rows went in is known when all did (the usual case); when some
        # were there already (a task's writes saved again) none is remembered — references are an
        # optimization, and the next put stores those values whole
        added = (yield Q(d.insert_writes(replace, live=True, returning=False), rows, many=True, single=True, stores=stores, count=True))[0][0]
        inserted = {(r[3], r[4]) for r in rows} if added == len(rows) else set()
    else:
        found = yield from lease.fenced_writes(d, fence, replace, rows, f"the pending writes of task {task_id!r}", stores)
        inserted = {(r[0], r[1]) for r in found}
    if bc is None or not bc.deltas or replace or not inserted:
        return None
    return _item_writes(key, rows, encoded, inserted)


REF_MIN_BYTES = 128  # a write whose items take fewer bytes is not worth a reference (~80 bytes of JSON)


def _item_writes(
    key: Key, rows: Sequence[tuple], encoded: Sequence[tuple[str, bytes]], inserted: set[tuple[str, int]]
) -> tuple[tuple[str, str, str], list[tuple]] | None:
    """The regular msgpack writes among ``rows`` (``R.write_rows``, with their values as
    ``encoded``) that were ``inserted``: (checkpoint key, [(channel, task_path, task_id, idx,
    the digest of its items (``codec.write_items``, ``codec.item_digest``)), …]), or None."""
    found = []
    for r, (tag, data) in zip(rows, encoded):
        if (r[3], r[4]) in inserted and r[4] >= 0:
            body = codec.write_items(tag, data)
            if body is not None and len(body[1]) >= REF_MIN_BYTES:
                found.append((r[5], r[6], r[3], r[4], codec.item_digest(body[1])))
    return ((key.thread_id, key.checkpoint_ns, key.checkpoint_id), found) if found else None  # type: ignore[return-value]
