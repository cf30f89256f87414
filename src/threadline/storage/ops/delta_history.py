"""DeltaChannel history: ``delta_channel_history`` answers
``BaseCheckpointSaver.get_delta_channel_history`` in four queries (the ancestor chain by
a recursive CTE, which ancestors store a value, the writes, the seeds) instead of one
``get_tuple`` per ancestor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import DeltaChannelHistory
from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import codec
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.liveness import Lineage
from threadline.storage.ops.base import Op, Q, chunks, flat
from threadline.storage.ops.read import fetch_blobs
from threadline.keys import key_of, text_key


def _ancestors(d: Dialect, bc: codec.BlobCodec, tid: str, ns: str, cid: str, found: Sequence[Sequence[Any]]) -> list[tuple]:
    """``ANCESTORS`` rows in parent order, nearest first, each checked against its checksum:
    (checkpoint_id, parent_checkpoint_id, channel_versions, the values its document holds:
    ``rows.inline_values``). A parent cycle (which re-puts can
    make on SQLite, where a re-put takes the new parent) ends the walk where it loops, as the
    official savers' walk does."""
    by_id = {r[0]: r for r in found}
    chain: list[tuple] = []
    seen = {cid}
    cur = by_id[cid][1] if cid in by_id else None
    while cur and cur in by_id:
        if cur in seen:
            break
        seen.add(cur)
        row = by_id[cur]
        where = f"checkpoint ({tid!r}, {ns!r}, {cur!r})"
        doc, meta = d.load_object(row[2], where), d.load_json(row[3], where)
        bc.check_checkpoint(row[4], (tid, ns, cur), row[1], doc, meta)
        chain.append((cur, row[1], R.all_versions(doc), R.inline_values(doc)))
        cur = row[1]
    return chain


def delta_channel_history(
    d: Dialect, serde: SerializerProtocol, config: Any, channels: Sequence[str], bc: codec.BlobCodec | None = None
) -> Op[dict[str, DeltaChannelHistory]]:
    """Per channel: the writes on the parent chain of a checkpoint since the nearest stored value, and that value.

    Same result as ``BaseCheckpointSaver.get_delta_channel_history`` (the contract),
    in four queries instead of one ``get_tuple`` per ancestor: the ancestor chain
    by a recursive CTE, which ancestors store a value, the writes, the seeds. Which
    ancestors' writes count is ``liveness.Lineage.walk``, the rule prune and the
    lifecycle keep them by. Every row read is checked against its checksum or seal (``bc``'s
    keys); a parent cycle ends the walk at once.
    """
    bc = bc or codec.PLAIN
    channels = [text_key("channel", ch) for ch in channels]
    result: dict[str, DeltaChannelHistory] = {ch: {"writes": []} for ch in channels}
    if not channels:
        return result
    key = key_of(config)
    ns = key.checkpoint_ns
    cid = key.checkpoint_id
    if not cid:
        latest = yield Q(d.LATEST_CHECKPOINT_ID, (key.thread_id, ns))
        if not latest:
            return result
        cid = latest[0][0]
    found = yield Q(d.ANCESTORS, (key.thread_id, ns, cid, key.thread_id, ns, key.thread_id, ns))
    chain = _ancestors(d, bc, key.thread_id, ns, cid, found)
    versions = {(ns, row[0]): row[2] for row in chain}
    pairs = sorted({(ch, R.version_key(v[ch])) for v in versions.values() for ch in channels if ch in v})
    # a value kept in a document (None, a scalar) is stored as much as one in a blob row
    inline = {(ns, ch, R.version_key(row[2][ch])): v for row in chain for ch, v in row[3].items() if ch in channels}
    stored: set[tuple[str, str, str]] = set(inline)
    for part in chunks(pairs, d.max_params // 4 - 1):
        found = yield Q(d.blobs_with_value(len(part)), [*flat((key.thread_id, ns, ch, v) for ch, v in part), codec.EMPTY])
        stored |= {(ns, r[0], r[1]) for r in found}
    # For each channel: the ancestors (nearest first) whose writes count, and its seed version.
    lineage = Lineage({(ns, row[0]): row[1] for row in chain}, versions.__getitem__, stored)
    walks = {ch: lineage.walk(ns, chain[0][0] if chain else None, ch) for ch in channels}
    span = {ch: len(ancestors) for ch, (ancestors, _) in walks.items()}
    seed = {ch: version for ch, (_, version) in walks.items() if version is not None}
    needed = max((ancestors for ancestors, _ in walks.values()), key=len, default=[])
    position = {c: i for i, c in enumerate(needed)}
    writes: list = []
    for part in chunks(needed, d.max_params - len(channels) - 2):
        writes += (yield Q(d.channel_writes(len(part), len(channels)), [key.thread_id, ns, *part, *channels]))
    # Oldest checkpoint first; within one checkpoint, LangGraph's writes_sort_key.
    writes.sort(key=lambda w: (-position[w[0]], w[5], w[1], w[6]))
    for w in writes:
        if position[w[0]] < span[w[2]]:
            value = bc.load(serde, R.write_row_ref(key.thread_id, ns, w[0], w[1], w[6], w[2]), w[3], w[4])
            result[w[2]]["writes"].append((w[1], w[2], value))
    for ch, v in list(seed.items()):
        if (ns, ch, v) in inline:
            result[ch]["seed"] = inline[(ns, ch, v)]
            del seed[ch]
    if seed:
        seeds = yield from fetch_blobs(d, [(key.thread_id, ns, ch, v) for ch, v in seed.items()], bc=bc)
        for (_, _, ch, v), resolved in seeds.items():
            result[ch]["seed"] = codec.load(serde, resolved, R.blob_row_ref(key.thread_id, ns, ch, v))
    return result
