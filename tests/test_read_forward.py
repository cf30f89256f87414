"""Reading a thread's checkpoints forward in time (a replay, a UI stepping through history):
a read after a read of an earlier checkpoint resolves each delta chain from the version the
saver's cache holds, not from the chain's snapshot, and opens none of the rows below it; what it
returns is what a saver with nothing cached reads."""

from __future__ import annotations

from langchain_core.messages import AIMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from threadline import codec
from tests.backends import Backend


def _thread(saver, steps: int) -> list[dict]:  # type: ignore[no-untyped-def]
    """A thread whose messages grow a reply a step: one delta chain (a delta every step)."""
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    messages: list = []
    version = None
    out = []
    for step in range(steps):
        messages = messages + [AIMessage(content=f"reply {step} " * 40, id=f"m{step}")]
        version = saver.get_next_version(version, None)
        checkpoint = {**empty_checkpoint(), "id": str(uuid6(clock_seq=step)), "channel_values": {"messages": messages},
                      "channel_versions": {"messages": version}}
        config = saver.put(config, checkpoint, {"source": "loop", "step": step}, {"messages": version})
        out.append(config)
    return out


class _Opens:
    """Counts the value rows a codec opens (their seals checked)."""

    def __init__(self, bc: codec.BlobCodec) -> None:
        self.n, self._open = 0, bc.open
        bc.open = self  # type: ignore[method-assign]

    def __call__(self, *args):  # type: ignore[no-untyped-def]
        self.n += 1
        return self._open(*args)


def test_a_read_forward_resolves_from_what_the_cache_holds(sync_backend: Backend) -> None:
    with sync_backend.open() as writer:
        writer.blob_codec.delta_piece_bytes = 0  # a delta every step, whatever the value's size
        configs = _thread(writer, 12)
    with sync_backend.open() as fresh:  # nothing cached: every read from the chain's snapshot
        expected = [fresh.get_tuple(c).checkpoint for c in configs]
        fresh.blob_codec.cache.clear()
        opens = _Opens(fresh.blob_codec)
        fresh.get_tuple(configs[8])
        whole = opens.n
    with sync_backend.open() as reader:
        reader.get_tuple(configs[5])  # caches the messages at step 5
        opens = _Opens(reader.blob_codec)
        found = reader.get_tuple(configs[8])
        assert found.checkpoint == expected[8]
        assert opens.n < whole, (opens.n, whole)  # the three deltas above step 5, not the chain below it
        for c, want in zip(configs, expected):  # forward and back again: the same values
            assert reader.get_tuple(c).checkpoint == want
        for c, want in zip(reversed(configs), reversed(expected)):
            assert reader.get_tuple(c).checkpoint == want
