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
from threadline.storage.ops.base import BLOB_KEY, MAX_CHAIN_DEPTH, Op, Q, _json, chunks, flat, join_keys, placeholders
from threadline.storage.ops.read import fetch_blobs
from threadline.keys import key_of


def delta_channel_history(
    d: Dialect, serde: SerializerProtocol, config: Any, channels: Sequence[str]
) -> Op[dict[str, DeltaChannelHistory]]:
    """Per channel: the writes on the parent chain of a checkpoint since the nearest stored value, and that value.

    Same result as ``BaseCheckpointSaver.get_delta_channel_history`` (the contract),
    in four queries instead of one ``get_tuple`` per ancestor: the ancestor chain
    by a recursive CTE, which ancestors store a value, the writes, the seeds.
    """
    channels = list(channels)
    result: dict[str, DeltaChannelHistory] = {ch: {"writes": []} for ch in channels}
    if not channels:
        return result
    key = key_of(config)
    cid = key.checkpoint_id
    if not cid:
        latest = yield Q(
            "SELECT checkpoint_id FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1",
            (key.thread_id, key.checkpoint_ns),
        )
        if not latest:
            return result
        cid = latest[0][0]
    chain = yield Q(
        "WITH RECURSIVE chain(checkpoint_id, parent_checkpoint_id, checkpoint, depth) AS ("
        " SELECT checkpoint_id, parent_checkpoint_id, checkpoint, 0 FROM threadline_checkpoints"
        " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        " UNION ALL"
        " SELECT c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint, chain.depth + 1 FROM threadline_checkpoints c"
        " JOIN chain ON c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = chain.parent_checkpoint_id"
        " WHERE chain.depth < ?"
        ") SELECT checkpoint_id, checkpoint FROM chain WHERE depth > 0 ORDER BY depth",
        (key.thread_id, key.checkpoint_ns, cid, key.thread_id, key.checkpoint_ns, MAX_CHAIN_DEPTH),
    )
    versions = [
        (row[0], _json(d, row[1], f"checkpoint ({key.thread_id!r}, {key.checkpoint_ns!r}, {row[0]!r})").get("channel_versions", {}))
        for row in chain
    ]
    pairs = sorted({(ch, R.version_key(v[ch])) for _, v in versions for ch in channels if ch in v})
    stored: set[tuple[str, str]] = set()
    for part in chunks(pairs, d.max_params // 4 - 1):
        found = yield Q(
            join_keys("threadline_blobs", BLOB_KEY, len(part), "t.channel, t.version") + " WHERE t.type <> ?",
            [*flat((key.thread_id, key.checkpoint_ns, ch, v) for ch, v in part), codec.EMPTY],
        )
        stored |= {(r[0], r[1]) for r in found}
    # For each channel: the ancestors (newest first) whose writes count, and its seed version.
    span: dict[str, int] = {}
    seed: dict[str, str] = {}
    for ch in channels:
        span[ch] = len(versions)
        for depth, (_, v) in enumerate(versions):
            if ch in v and (ch, R.version_key(v[ch])) in stored:
                span[ch], seed[ch] = depth + 1, R.version_key(v[ch])
                break
    needed = [versions[i][0] for i in range(max(span.values(), default=0))]
    position = {c: i for i, c in enumerate(needed)}
    writes: list = []
    for part in chunks(needed, d.max_params - len(channels) - 2):
        writes += (yield Q(
            "SELECT checkpoint_id, task_id, channel, type, blob, task_path, idx FROM threadline_writes "
            f"WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id IN ({placeholders(len(part))}) "
            f"AND channel IN ({placeholders(len(channels))})",
            [key.thread_id, key.checkpoint_ns, *part, *channels],
        ))
    # Oldest checkpoint first; within one checkpoint, LangGraph's writes_sort_key.
    writes.sort(key=lambda w: (-position[w[0]], w[5], w[1], w[6]))
    for w in writes:
        if position[w[0]] < span[w[2]]:
            value = codec.decode(serde, w[3], w[4], f"write ({key.thread_id!r}, {key.checkpoint_ns!r}, {w[0]!r}, {w[1]!r}, {w[6]})")
            result[w[2]]["writes"].append((w[1], w[2], value))
    if seed:
        found = yield from fetch_blobs(d, [(key.thread_id, key.checkpoint_ns, ch, v) for ch, v in seed.items()])
        for (_, _, ch, v), resolved in found.items():
            result[ch]["seed"] = codec.load(serde, resolved, f"blob ({key.thread_id!r}, {key.checkpoint_ns!r}, {ch!r}, {v!r})")
    return result
