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
from threadline.storage.ops.base import MAX_CHAIN_DEPTH, Op, Q, chunks, flat
from threadline.storage.ops.read import fetch_blobs
from threadline.keys import key_of


def delta_channel_history(
    d: Dialect, serde: SerializerProtocol, config: Any, channels: Sequence[str]
) -> Op[dict[str, DeltaChannelHistory]]:
    """Per channel: the writes on the parent chain of a checkpoint since the nearest stored value, and that value.

    Same result as ``BaseCheckpointSaver.get_delta_channel_history`` (the contract),
    in four queries instead of one ``get_tuple`` per ancestor: the ancestor chain
    by a recursive CTE, which ancestors store a value, the writes, the seeds. Which
    ancestors' writes count is ``liveness.Lineage.walk``, the rule prune and the
    lifecycle keep them by.
    """
    channels = list(channels)
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
    chain = yield Q(d.ANCESTORS, (key.thread_id, ns, cid, key.thread_id, ns, MAX_CHAIN_DEPTH))
    versions = {
        (ns, row[0]): d.load_json(row[2], f"checkpoint ({key.thread_id!r}, {ns!r}, {row[0]!r})").get("channel_versions") or {}
        for row in chain
    }
    pairs = sorted({(ch, R.version_key(v[ch])) for v in versions.values() for ch in channels if ch in v})
    stored: set[tuple[str, str, str]] = set()
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
            value = codec.decode(serde, w[3], w[4], f"write ({key.thread_id!r}, {ns!r}, {w[0]!r}, {w[1]!r}, {w[6]})")
            result[w[2]]["writes"].append((w[1], w[2], value))
    if seed:
        found = yield from fetch_blobs(d, [(key.thread_id, ns, ch, v) for ch, v in seed.items()])
        for (_, _, ch, v), resolved in found.items():
            result[ch]["seed"] = codec.load(serde, resolved, f"blob ({key.thread_id!r}, {ns!r}, {ch!r}, {v!r})")
    return result
