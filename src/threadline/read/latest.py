"""The latest value of one channel across threads: ``LatestValue`` and ``latest_op`` /
``latest_values``, resolving each thread's head checkpoint (not ``MAX(version)`` over
blobs, so rollbacks are respected) and decoding only that channel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import codec
from threadline.storage import ops
from threadline.storage.dialect import Dialect
from threadline.storage import rows as R
from threadline.storage.ops import Op, Q
from threadline.errors import ConfigError
from threadline.read.common import iso, jsonable, load_channels_op
from threadline.keys import checkpoint_ns_of, thread_id_of
from threadline.lazy import LazyModule

serdes = LazyModule("threadline.codec.serde")  # LangGraph's serializer loads when a value is shown


@dataclass
class LatestValue:
    """A channel's value at a thread's head checkpoint (``present`` False: the head has no value for it)."""

    thread_id: str
    checkpoint_id: str
    version: Any
    present: bool
    value: Any
    updated_at: float

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "checkpoint_id": self.checkpoint_id,
            "version": self.version,
            "present": self.present,
            "value": jsonable(self.value),
            "updated_at": self.updated_at,
            "updated": iso(self.updated_at),
        }


def latest_op(
    d: Dialect,
    serde: SerializerProtocol,
    channel: str,
    thread_ids: Sequence[Any] | None = None,
    *,
    checkpoint_ns: str = "",
    limit: int | None = None,
    bc: codec.BlobCodec | None = None,
) -> Op[list[LatestValue]]:
    """The value of ``channel`` at the head checkpoint of each thread (seed 000 "取最新 checkpoint 的特定 channel").

    The heads of all requested threads are found by one statement (each thread's
    largest checkpoint_id in the namespace) and the channel's blobs by one more;
    only that channel is decoded. Resolving through the head — not ``MAX(version)``
    over blobs — is what keeps it right after a rollback, whose head references an
    older version. Threads without checkpoints are omitted; ``thread_ids=None``
    means every thread (``limit`` caps how many, most recently updated first).
    """
    if not isinstance(channel, str) or not channel:
        raise ConfigError(f"channel must be a non-empty string, got {channel!r}")
    ns = checkpoint_ns_of(checkpoint_ns)
    rows: list = []
    if thread_ids is None:
        rows = yield Q(*d.heads(ns, recent=None if limit is None else int(limit)))
    else:
        ids = sorted({thread_id_of(t) for t in thread_ids})
        for part in ops.chunks(ids, d.max_params - 2):
            rows += yield Q(*d.heads(ns, part))
    values = yield from load_channels_op(d, serde, rows, [channel], bc)
    out = []
    for r, vals in zip(rows, values):
        versions = R.all_versions(d.load_object(r[4], f"checkpoint ({r[0]!r}, {r[1]!r}, {r[2]!r})"))
        out.append(LatestValue(r[0], r[2], versions.get(channel), channel in vals, vals.get(channel), float(r[8])))
    return out


def latest_values(saver: Any, channel: str, thread_ids: Sequence[Any] | None = None, **kwargs: Any) -> list[LatestValue]:
    """Sync ``latest_op``."""
    return saver.run(latest_op(saver.dialect, serdes.showing(saver.serde), channel, thread_ids, bc=saver.blob_codec, **kwargs))
