"""A wide graph's put (hundreds of channels, a few written a step) takes whole-map operations where it
can (``ops.write._follows``): the versions it caches for the next put and the channels it records as
possibly without a blob must be exactly what the pass over every channel gives. Checked on generated
checkpoints, and end to end on LangGraph's ``sequential`` shape read back by a new saver."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends import Backend
from langgraph_scenarios import chain_builder
from threadline import SqliteSaver, codec
from threadline.errors import CorruptRowError
from threadline.storage import rows as R
from threadline.storage.ops.write import WIDE, _follows, _unexplained, _versions_of

CONTAINER = codec.Container(0, 0, b"", 0)  # any container: a value that may be a delta base


@st.composite
def wide_puts(draw: st.DrawFn) -> tuple:
    """(pairs, new_versions, written values, parent versions, absent) of a put that follows its parent."""
    n = draw(st.integers(WIDE, WIDE + 40))
    channels = [f"ch{i}" for i in range(n)]
    parent_of = {ch: f"{draw(st.integers(1, 3)):032}.0" for ch in channels}
    no_base = frozenset(draw(st.sets(st.sampled_from(channels))))
    absent = frozenset(draw(st.sets(st.sampled_from(sorted(no_base))))) if no_base else frozenset()
    parent = codec.Versions(parent_of, no_base | absent, absent)
    changed = draw(st.lists(st.sampled_from(channels), unique=True, max_size=6))
    new = [f"new{i}" for i in range(draw(st.integers(0, 3)))]
    new_versions = {ch: f"{9:032}.{i}" for i, ch in enumerate(changed + new)}
    pairs = list({**parent_of, **new_versions}.items())
    values = [R.Value(ch, v, "msgpack", b"\x90", CONTAINER if draw(st.booleans()) else None) for ch, v in new_versions.items()]
    return pairs, new_versions, values, parent


@settings(max_examples=200, deadline=None)
@given(wide_puts())
def test_the_whole_map_path_gives_what_the_pass_per_channel_gives(put: tuple) -> None:
    pairs, new_versions, values, parent = put
    assert _follows(pairs, new_versions, parent)
    absent = _unexplained(pairs, new_versions, parent, followed=True)
    assert absent == _unexplained(pairs, new_versions, parent, followed=False)
    assert _versions_of(pairs, values, parent, absent, True, {}) == _versions_of(pairs, values, parent, absent, False, {})


def test_a_wide_chain_reads_back_exactly_on_a_new_saver(tmp_path: Path) -> None:
    """Every checkpoint of a wide chain a new saver reads (the latest from its head, the others from
    their blobs) equals what the saver that wrote them reads."""
    names = range(WIDE + 8)
    builder = chain_builder(len(names))
    db = str(tmp_path / "wide.db")
    config = {"configurable": {"thread_id": "wide"}, "recursion_limit": 200}
    with SqliteSaver.from_conn_string(db) as saver:
        graph = builder.compile(checkpointer=saver)
        for turn in range(2):
            graph.invoke({"messages": [{"role": "user", "content": f"turn {turn}"}]}, config)
        written = list(saver.list({"configurable": {"thread_id": "wide"}}))
    assert len(written) > 2 * len(names)
    with SqliteSaver.from_conn_string(db) as fresh:
        latest = fresh.get_tuple({"configurable": {"thread_id": "wide"}})
        assert latest == written[0]
        for t in written[1:]:
            assert fresh.get_tuple(t.config) == t


def test_an_empty_channels_row_is_checked_like_any_other(sync_backend: Backend, format1_puts: None) -> None:
    """The read of an empty channel's row (written before inline channels) takes a short path (most
    of a wide graph's channels are empty), which must refuse what the general one refuses: a damaged
    seal, and the seal of another channel's empty row moved onto it. Shown on an older checkpoint,
    whose values come from its blobs."""
    b = sync_backend
    with b.open() as saver:
        graph = chain_builder(WIDE + 2).compile(checkpointer=saver)
        graph.invoke({"messages": [{"role": "user", "content": "hi"}]}, {"configurable": {"thread_id": "e"}, "recursion_limit": 200})
        older = list(saver.list({"configurable": {"thread_id": "e"}}))[5]
    empties = b.sql("SELECT channel, version, blob FROM threadline_blobs WHERE thread_id = 'e' AND type = 'empty' ORDER BY channel, version")
    named = older.checkpoint["channel_versions"]
    (ch, version, sealed), other = [e for e in empties if named.get(e[0]) == e[1]][:1][0], [e for e in empties if named.get(e[0]) != e[1]][0]
    with b.open() as saver:
        assert saver.get_tuple(older.config) == older
    for damaged in (bytes(sealed[:-1]) + bytes([sealed[-1] ^ 1]), bytes(other[2])):
        b.sql("UPDATE threadline_blobs SET blob = ? WHERE thread_id = 'e' AND channel = ? AND version = ?", (damaged, ch, version))
        with b.open() as saver, pytest.raises(CorruptRowError, match="checksum mismatch"):
            saver.get_tuple(older.config)
