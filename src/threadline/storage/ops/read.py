"""Reading operations: blob rows with their delta chains (``fetch_blob_rows``) and the
values they resolve to (``fetch_blobs``), checkpoint rows turned into tuples with their
blobs and writes (``load_tuples``, which can fill a saver's blob cache via
``_remember``), ``get_tuple``, and the WHERE clause and keyset pages of ``list``
(``list_where``, ``list_page``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import TASKS

from threadline import codec
from threadline.codec.jsontext import expand_doc
from threadline.codec.seal import Row
from threadline.storage import heads as H
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.ops.base import Op, Q, chunks, flat
from threadline.errors import ConfigError, CorruptRowError
from threadline.keys import Key, key_of

if TYPE_CHECKING:
    from langgraph.checkpoint.base import CheckpointTuple


def fetch_blob_rows(d: Dialect, keys: Sequence[tuple[str, str, str, str]]) -> Op[dict[tuple[str, str, str], dict[str, tuple]]]:
    """The blob rows of ``keys`` (thread_id, checkpoint_ns, channel, version) and of every
    version their deltas are built on, in one query per chunk of keys
    (``Dialect.blob_chains``: a recursive CTE over ``blobs.base_version``).
    Returns (thread_id, checkpoint_ns, channel) → version → (type, blob, base_version),
    the input of ``codec.resolve``.
    """
    out: dict[tuple[str, str, str], dict[str, tuple]] = defaultdict(dict)
    if not keys:
        return out
    for part in chunks(list(keys), d.max_params // 4):
        found = yield Q(d.blob_chains(len(part)), flat(part), read=True)
        for b in found:
            out[(b[0], b[1], b[2])][b[3]] = (b[4], b[5], b[6])
    return out


def open_blob_rows(group: Mapping[str, tuple], key: tuple[str, str, str], bc: codec.BlobCodec) -> dict[str, tuple]:
    """One channel's ``fetch_blob_rows`` group with every row's seal checked and opened:
    version → (packed type, bytes, base_version), the input of ``codec.resolve``."""
    out = {}
    for version, (tag, data, base) in group.items():
        out[version] = (*bc.open(R.blob_row_ref(*key, version, base), tag, data), base)
    return out


def splice_refs(
    d: Dialect, opened: dict[tuple[str, str, str], dict[str, tuple]], bc: codec.BlobCodec, read: Mapping[tuple, Sequence] | None = None
) -> Op[list[tuple]]:
    """Replace, in ``open_blob_rows`` groups ((thread_id, checkpoint_ns, channel) → version →
    opened row), every delta that references pending writes (``codec.refs``) by the
    ``delta-list`` row it stands for: its header and the writes' items, read in one query
    per chunk (but those in ``read``: write rows (``WRITE_COLUMNS``) by their key, already
    read) and their seals checked. Returns the replaced (thread_id, checkpoint_ns,
    channel, version) keys; ``codec.resolve`` checks each like any delta.

    Raises CorruptRowError for a malformed reference, or a referenced write that is not
    stored on the row's channel or is not a list."""
    found = {}
    for (tid, ns, ch), group in opened.items():
        for v, (tag, data, base) in group.items():
            if tag.startswith(codec.DELTA_REF):
                where = f"blob ({tid!r}, {ns!r}, {ch!r}, {v!r})"
                found[(tid, ns, ch, v)] = (*codec.ref_in(tag, data, where), base, where)
    if not found:
        return []
    wanted = sorted({(k[0], k[1], cid, task, idx) for k, (_, cid, refs, _, _) in found.items() for task, idx in refs})
    writes = dict(read or ())
    for part in chunks([k for k in wanted if k not in writes], d.max_params // 5):
        for w in (yield Q(d.writes_by_write_keys(len(part)), flat(part), read=True)):
            writes[tuple(w[:5])] = w
    for k, (header, cid, refs, base, where) in found.items():
        items = []
        for task, idx in refs:
            w = writes.get((k[0], k[1], cid, task, idx))
            if w is None or w[5] != k[2]:
                raise CorruptRowError(f"{where}: its items are pending write ({cid!r}, {task!r}, {idx}) on {k[2]!r}, which is not stored")
            ref = R.write_row_ref(*w[:6])
            body = codec.write_items(*codec.decompress(*bc.open(ref, w[7], w[8]), ref))
            if body is None:
                raise CorruptRowError(f"{where}: pending write ({cid!r}, {task!r}, {idx}) it references is not a msgpack value")
            items.append(body)
        opened[k[:3]][k[3]] = (codec.DELTA_LIST + "msgpack", codec.splice(header, items), base)
    return list(found)


def _above_cached(group: Mapping[str, tuple], versions: Sequence[str], g: tuple, cache: codec.BlobCache, memo: dict) -> dict[str, tuple]:
    """The rows of ``group`` (``fetch_blob_rows``' rows of channel ``g``) on the chains of ``versions``,
    down to a snapshot or to a version ``cache`` holds, which goes into ``memo`` as resolved."""
    out: dict[str, tuple] = {}
    for cur in versions:
        while cur in group and cur not in out:
            out[cur] = row = group[cur]
            if row[2] is None or row[2] in memo:
                break
            entry = cache.get((*g, row[2]))
            if entry is not None:
                memo[row[2]] = ("msgpack", None, entry.value)
                break
            cur = row[2]
    return out


_EMPTY: codec.Resolved = (codec.EMPTY, None, None)  # an empty channel, resolved


def fetch_blobs(
    d: Dialect,
    keys: Sequence[tuple[str, str, str, str]],
    *,
    rows: Mapping | None = None,
    bc: codec.BlobCodec | None = None,
    writes: Mapping[tuple, Sequence] | None = None,
    cached: bool = False,
) -> Op[dict[tuple[str, str, str, str], codec.Resolved]]:
    """Stored values of blob ``keys`` (thread_id, checkpoint_ns, channel, version),
    their seals checked with ``bc``'s keys, reconstructed through their delta chains (and
    the pending writes a delta references, ``splice_refs``) and decompressed: key →
    ``codec.Resolved`` (decode it with ``codec.load``; its tag is ``codec.EMPTY`` for an
    empty channel). Keys with no row are absent. ``rows``: already fetched
    ``fetch_blob_rows`` output; ``writes``: pending writes already read (``splice_refs``).
    ``cached``: a chain ends at a version ``bc``'s cache holds (checked when it was cached, as
    ``load_tuples`` takes the versions it asks for): the rows below it are not opened (a read of a
    checkpoint after a read of an earlier one of the thread, as a replay or a UI stepping forward).

    This is how anything outside ``load_tuples`` must read ``blobs``: a row's bytes
    alone are not its value when its type is a delta (``codec.is_delta``).

    Raises:
        CorruptRowError: a seal that does not match, a delta whose base is missing or does
            not reproduce it (EncryptionError: a key problem).
    """
    bc = bc or codec.PLAIN
    if rows is None:
        rows = yield from fetch_blob_rows(d, keys)
    groups = sorted({k[:3] for k in keys if k[3] in rows.get(k[:3], ())})
    memos: dict[tuple, dict] = defaultdict(dict)
    if cached and bc.cache is not None:
        wanted = defaultdict(list)
        for k in keys:
            wanted[k[:3]].append(k[3])
        rows = {g: _above_cached(rows[g], wanted[g], g, bc.cache, memos[g]) if bc.cache.knows(g[0]) else rows[g] for g in groups}
    out: dict[tuple, codec.Resolved] = {}
    opened = {}
    for g in groups:
        group = rows[g]
        if len(group) == 1:
            version, (tag, data, base) = next(iter(group.items()))
            if tag == codec.EMPTY and base is None:
                # an empty channel's one row (most of a wide graph's): its seal checked, nothing to resolve
                bc.open(R.blob_row_ref(*g, version), tag, data)
                out[(*g, version)] = _EMPTY
                continue
        opened[g] = open_blob_rows(group, g, bc)
    yield from splice_refs(d, opened, bc, writes)
    for key in sorted(set(keys)):  # ascending versions reuse the memo along a chain
        if key[:3] in opened and key[3] in opened[key[:3]]:
            out[key] = codec.resolve(opened[key[:3]], key[3], f"blob ({key[0]!r}, {key[1]!r}, {key[2]!r})", memos[key[:3]])
    return out


def load_tuples(
    d: Dialect,
    serde: SerializerProtocol,
    ck_rows: Sequence[Sequence[Any]],
    bc: codec.BlobCodec | None = None,
    *,
    lazy: bool = False,
    fetched: tuple[Mapping, Mapping, Mapping] | None = None,
    head: tuple[Any, Any] | None = None,
) -> Op[list[Any]]:
    """Fetch the blobs and writes of checkpoint rows (``R.CHECKPOINT_COLUMNS`` or ``R.CHECKPOINT_ROW``)
    and build tuples, every row checked against its checksum or seal with ``bc``'s keys.
    ``fetched``: blob rows (as ``fetch_blob_rows`` returns them; a version mapped to None was
    looked up and is not stored), writes (checkpoint key → write rows) and writes its deltas may
    reference (``splice_refs``' ``read``) already read with the checkpoint rows; a blob or
    referenced write missing from them is read here.

    With a saver's ``bc``, values its cache holds are not read again (a blob version
    is immutable, and a cached one was checked against its row when written or read);
    and for a single row (``get_tuple``) the list/dict values read and the
    checkpoint's versions go into the cache, so the next ``put`` on this checkpoint
    can write deltas without reading them back.

    ``head``: the stored (type, data) of the single row's head (``storage.heads``; NULLs: none),
    opened only when a value is not cached: its values are not read from the blobs. When a head is stored
    for that checkpoint, the entries ``bc``'s cache holds for it are taken instead, as cached values are:
    a head describes one checkpoint, and its entries name their versions.

    ``lazy=True`` returns, instead of tuples, functions that build them: a caller
    that yields tuples one by one (``list``) deserializes each only when it is
    needed, outside the transaction, and a consumer that drops them lets Python
    free them at once (deserializing a whole page first keeps every value alive
    and makes the garbage collector work through them all).
    """
    if not ck_rows:
        return []
    bc_ = bc or codec.PLAIN
    docs = []
    for row in ck_rows:
        where = Row("checkpoint", (row[0], row[1], row[2]))  # its text, only for an error
        if type(row[4]) is str and (text := expand_doc(row[4])) is not row[4]:
            row = (*row[:4], text, *row[5:])  # a compacted document expanded once, for its parse and its checksum
        doc, meta = d.load_json(row[4], where), d.load_json(row[5], where)
        if not isinstance(doc, dict) or not isinstance(meta, dict):
            raise CorruptRowError(f"{where}: checkpoint or metadata is not a JSON object")
        docs.append((row, doc, meta))
    # sorted once what the cache and the head leave (most often nothing: a wide graph names hundreds)
    wanted = list({(r[0], r[1], ch, v) for r, doc, _ in docs for ch, v in R.blob_pairs(doc)})
    blobs: dict[tuple, codec.Resolved] = {}
    # Cache hits keep what they decode (``codec.copies``): a list this process wrote (a put's entry,
    # with item fingerprints) at its first read, as the graph writing it goes on and each put
    # extends the kept list by its new items (``BlobCodec.encode_list``), so the graph's next
    # read is a copy; any other value at its second read, so a value read once costs no copy.
    kept: dict[tuple, codec.Entry] = {}
    # a thread the cache holds nothing of (a new saver's read): no look-up per channel
    if bc is not None and bc.cache is not None and any(map(bc.cache.knows, {r[0] for r in ck_rows})):
        for k in wanted:
            entry = bc.cache.get(k)
            if entry is not None:
                value = entry.value
                if not lazy and (value.decoded is codec.SEEN or (value.decoded is None and value.fps is not None)):
                    # a copy that keeps it, cached in its place below
                    value = value.with_chain(value.depth, value.chain)
                    value.decoded = codec.KEEP
                    kept[k] = codec.Entry(value, entry.stored_type, entry.stored_len)
                elif not lazy and value.decoded is None:
                    value.decoded = codec.SEEN
                blobs[k] = ("msgpack", None, value)
        wanted = [k for k in wanted if k not in blobs]
    entries, opened = None, False
    if head is not None and wanted:
        row = ck_rows[0]
        # a head stored for this checkpoint: the entries this process wrote or opened for it, else the stored
        # one opened (a head deleted behind the saver's back, as derived data may be, is not served from memory)
        held = head[0] is not None and bc is not None and bc.cache is not None
        entries = bc.cache.head_row(row[0], row[1], row[2]) if held else None  # type: ignore[union-attr]
        if entries is None:
            entries, opened = H.unpack(bc_, (row[0], row[1], row[2]), *head, dict(R.blob_pairs(docs[0][1])), row[-1]), True
        if entries:
            left = []
            for k in wanted:
                entry = entries.get(k[2])
                if entry is not None and entry[0] == k[3]:
                    blobs[k] = (entry[1], None if entry[1] == codec.EMPTY else entry[2], None)
                else:
                    left.append(k)
            wanted = left
    wanted.sort()
    pre_rows, pre_writes, referenced = fetched if fetched is not None else ({}, None, None)
    rows = yield from fetch_blob_rows(d, [k for k in wanted if k[3] not in pre_rows.get(k[:3], ())])
    for group, versions in pre_rows.items():
        rows[group].update((v, r) for v, r in versions.items() if r is not None)
    blobs.update((yield from fetch_blobs(d, wanted, rows=rows, bc=bc_, writes=referenced, cached=True)))
    writes: Mapping[tuple, list] = pre_writes if pre_writes is not None else defaultdict(list)
    for part in chunks(sorted({(r[0], r[1], r[2]) for r in ck_rows}) if pre_writes is None else [], d.max_params // 3):
        found = yield Q(d.writes_by_keys(len(part)), flat(part), read=True)
        for w in found:
            writes[(w[0], w[1], w[2])].append(w)  # type: ignore[index]
    sends: dict[tuple, list] = defaultdict(list)
    migrate = d.migrates_parent_sends
    # the parent's TASKS writes in any namespace, as the official PostgresSaver looks them up
    parents = sorted({(r[0], r[3]) for r, doc, _ in docs if migrate and R.needs_parent_sends(r[3], doc)})
    for part in chunks(parents, d.max_params // 2 - 1):
        found = yield Q(d.sends_by_parent(len(part)), [*flat(part), TASKS], read=True)
        for w in found:
            sends[(w[0], w[2])].append(w)

    def parts(row: Sequence[Any], doc: dict, meta: dict) -> tuple:
        parent_sends = sends.get((row[0], row[3]), ())
        return (serde, row, doc, meta, blobs, writes.get((row[0], row[1], row[2]), ()), parent_sends, bc_)

    if lazy:
        return [partial(R.to_tuple, *parts(row, doc, meta)) for row, doc, meta in docs]
    try:
        tuples = [R.to_tuple(*parts(row, doc, meta)) for row, doc, meta in docs]
    finally:
        for k, entry in kept.items():
            if entry.value.kept:
                bc.cache.put(k, entry)  # type: ignore[union-attr]
    if bc is not None and bc.deltas and len(docs) == 1:
        _remember(bc, docs[0][0], docs[0][1], blobs, rows, entries, opened)
    return tuples


def _remember(
    bc: codec.BlobCodec, row: Sequence[Any], doc: dict, blobs: Mapping[tuple, codec.Resolved], rows: Mapping, entries: H.Entries | None,
    opened: bool,
) -> None:
    """Cache what a get_tuple read: the checkpoint's versions, its head's entries and its list/dict
    values. At the read that ``opened`` the stored head, a value the head holds gets no entry of its
    own: the next put finds it in the head (``write._delta_bases``), so a read that nothing follows
    (a UI, a new process reading a thread) builds none; a second read of the checkpoint does, so a
    third one keeps what it decodes (``codec.copies``)."""
    assert bc.cache is not None
    tid, ns = row[0], row[1]
    if entries:
        bc.cache.put_head_row(tid, ns, row[2], entries)
    known = bc.cache.versions((tid, ns, row[2]))
    if known is not None and all(ch in known.no_base or bc.cache.get((tid, ns, ch, v)) is not None for ch, v in known.of.items()):
        return  # this process wrote or read the checkpoint and still holds what a put on it builds on
    pairs = R.blob_pairs(doc)
    # a missing or small value, or one not a list or dict, is no delta base: the next put need
    # not read it back (write._versions_of); the empty list is (``BlobCodec.base_entry``)
    no_base = set()
    for ch, v in pairs:
        h = entries.get(ch) if entries else None
        if h is not None and h[0] != v:
            h = None
        if h is not None and opened:
            continue
        resolved = blobs.get((tid, ns, ch, v))
        stored = rows.get((tid, ns, ch), {}).get(v)
        if resolved is not None and resolved[0] != "msgpack":
            # empty (most of a wide graph's channels) or not msgpack: never a delta base, never cached
            if stored is not None or h is not None:
                no_base.add(ch)
            continue
        if bc.cache.get((tid, ns, ch, v)) is not None:
            continue  # what a put cached is as good, and may carry item fingerprints
        if resolved is None:
            no_base.add(ch)  # no blob
            continue
        if stored is not None:
            size = (stored[0], len(stored[1]) if stored[1] is not None else 0)
        elif h is not None:
            size = h[3:5]  # read from the head, which knows its blob row's type and size
        else:
            continue
        entry = bc.base_entry(resolved, *size)
        if entry is not None:
            if h is not None and entry.value.decoded is None:
                entry.value.decoded = codec.SEEN  # the head was opened by an earlier read: this is its second
            bc.cache.put((tid, ns, ch, v), entry)
        else:
            no_base.add(ch)
    bc.cache.put_versions((tid, ns, row[2]), codec.Versions(dict(pairs), frozenset(no_base), R.absent_channels(doc), R.inline_maps(doc)[1]))


def _cached_pairs(bc: codec.BlobCodec | None, key: Key) -> tuple[list[str], list[str]]:
    """(channels, versions) of the values ``bc``'s cache holds for the checkpoint ``key`` names
    (the newest it knows of the namespace when it names none): a one-statement read skips them."""
    cache = bc.cache if bc is not None else None
    cid = key.checkpoint_id or (cache.head(key.thread_id, key.checkpoint_ns) if cache is not None else None)
    versions = cache.versions((key.thread_id, key.checkpoint_ns, cid)) if cache is not None and cid else None
    pairs = [(ch, v) for ch, v in (versions.of if versions else {}).items() if cache.get((key.thread_id, key.checkpoint_ns, ch, v)) is not None]  # type: ignore[union-attr]
    return [ch for ch, _ in pairs], [v for _, v in pairs]


def _get_one(d: Dialect, serde: SerializerProtocol, key: Key, one: str, bc: codec.BlobCodec | None) -> Op[CheckpointTuple | None]:
    """``get_tuple`` with ``Dialect.get_statement``: one round trip (a blob or referenced write its
    rows miss is read after). A backend that keeps heads reads the checkpoint's with it, not its blobs,
    nor the head's bytes where this process holds its entries (``heads.get_with_head``)."""
    params = [key.thread_id, key.checkpoint_ns, *([key.checkpoint_id] if key.checkpoint_id else [])]
    if d.head_rows:
        held = bc.cache.head_row_id(key.thread_id, key.checkpoint_ns) if bc is not None and bc.cache is not None else None
        if held is not None:
            one, params = d.get_statement(not key.checkpoint_id, held=True), [key.thread_id, key.checkpoint_ns, key.checkpoint_id, held]
    else:
        params += _cached_pairs(bc, key)  # the blobs it reads, but those cached
    found = yield Q(one, params, read=True, single=True)
    ck_rows, blobs, writes, referenced = [], defaultdict(dict), defaultdict(list), {}
    head = None
    for r in found:
        if r[0] == 0:
            ck_rows.append((r[1], r[2], r[3], r[4], r[10], r[11], r[8], r[5], r[9], r[6]))
            head = (r[7], r[12]) if d.head_rows else None
        elif r[0] == 1:  # a blob row; without a type: looked up, not stored
            blobs[(r[1], r[2], r[3])][r[4]] = (r[5], r[12], r[6]) if r[5] is not None else None
        elif r[0] == 2:
            writes[(r[1], r[2], r[3])].append((r[1], r[2], r[3], r[4], r[8], r[5], r[6], r[7], r[12]))
        else:
            referenced[(r[1], r[2], r[3], r[4], r[8])] = (r[1], r[2], r[3], r[4], r[8], r[5], r[6], r[7], r[12])
    if not ck_rows:
        return None
    for found_writes in writes.values():  # in ``writes_sort_key`` order: task_path, task_id, idx
        if len(found_writes) > 1:
            found_writes.sort(key=_write_order)
    return (yield from load_tuples(d, serde, ck_rows, bc, fetched=(blobs, writes, referenced), head=head))[0]


def _write_order(w: tuple) -> tuple:
    return w[6], w[3], w[4]


def get_tuple(d: Dialect, serde: SerializerProtocol, key: Key, bc: codec.BlobCodec | None = None) -> Op[CheckpointTuple | None]:
    """The checkpoint named by ``key``, or the latest of its (thread_id, checkpoint_ns) when it names none
    (in one statement where the dialect has ``get_statement``)."""
    one = d.get_statement(not key.checkpoint_id)
    if one is not None:
        return (yield from _get_one(d, serde, key, one, bc))
    if key.checkpoint_id:
        sql, params = d.CHECKPOINT, (key.thread_id, key.checkpoint_ns, key.checkpoint_id)
    else:
        sql, params = d.LATEST_CHECKPOINT, (key.thread_id, key.checkpoint_ns)
    found = yield Q(sql, params, read=True)
    return (yield from load_tuples(d, serde, found, bc))[0] if found else None


@dataclass(frozen=True)
class Selection:
    """What ``list(config, filter=, before=)`` selects, in logical terms: a thread (None: every
    thread), a checkpoint_ns (None: every namespace; it filters only when the config carries
    it), one checkpoint_id, checkpoints older than ``before_id``, and the metadata ``filter``
    (matched as the backend's official saver matches it). A dialect turns it into its own
    query (``Dialect.list_where``)."""

    thread_id: str | None = None
    checkpoint_ns: str | None = None
    checkpoint_id: str | None = None
    before_id: str | None = None
    filter: Mapping[str, Any] | None = None


def list_where(d: Dialect, config: Any, filter: Mapping[str, Any] | None, before: Any) -> tuple[Any, list[Any]]:
    """The selection of ``list(config, filter=, before=)`` in the dialect's terms and its
    parameters (``Dialect.list_where``), for ``list_page``. ``config`` may be None (every thread)."""
    thread_id = ns = cid = before_id = None
    if config is not None:
        key = key_of(config, require_thread=False)
        thread_id, cid = key.thread_id, key.checkpoint_id or None
        if config["configurable"].get("checkpoint_ns") is not None:
            ns = key.checkpoint_ns
    if before is not None:
        before_id = key_of(before, require_thread=False).checkpoint_id
        if not before_id:
            raise ConfigError("'before' config has no checkpoint_id")
    return d.list_where(Selection(thread_id, ns, cid, before_id, filter or None))


def list_page(
    d: Dialect,
    serde: SerializerProtocol,
    where: tuple[str, list[Any]],
    after: tuple | None,
    size: int,
    bc: codec.BlobCodec | None = None,
    *,
    lazy: bool = False,
) -> Op[tuple[list[Any], tuple | None]]:
    """One page of ``list`` (newest checkpoint_id first) and the cursor for the next page."""
    sql, params = where
    found = yield Q(d.list_checkpoints(sql, after is not None), [*params, *(after or ()), size], read=True)
    tuples = yield from load_tuples(d, serde, found, bc, lazy=lazy)
    last = found[-1] if len(found) == size else None
    return tuples, (last[2], last[0], last[1]) if last else None
