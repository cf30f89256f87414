"""Checkpoint metadata as stored (SQLite, ``x3:`` checksums over the JSON texts): written with
orjson (``jsontext.dumps_meta``), read back equal, and verified wherever a reader re-encodes the
parsed metadata (fsck, annotate) — also for rows whose metadata an earlier release stored as
json's text, which writes small and large floats in another exponent form. Read back with
``jsontext.loads``: json's value exactly, whichever encoder wrote the text."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bad_input_access import cfg, ckpt, cid_of
from threadline import SqliteSaver, lifecycle
from threadline.codec.jsontext import dumps_json, dumps_meta, loads
from threadline.codec.seal import checkpoint_checksum
from threadline.errors import CorruptRowError
from threadline.lifecycle.annotate import annotate_op
from threadline.storage.ops import Q

META = {"source": "input", "step": -1, "score": 1e-07, "big": 1.5e16, "text": "été", "n": [1, 2.5]}


def _row(saver: SqliteSaver, cid: str) -> tuple:
    def op():  # noqa: ANN202
        return (yield Q("SELECT metadata, checksum, checkpoint FROM threadline_checkpoints WHERE checkpoint_id = ?", (cid,)))

    return saver.run(op())[0]


def _put(saver: SqliteSaver) -> str:
    return cid_of(saver.put(cfg("t"), ckpt({"a": 1}, {"a": 1}), META, {"a": 1}))


def test_metadata_reads_back_equal_and_verifies_through_every_reader(tmp_path: Path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "db.sqlite")) as saver:
        cid = _put(saver)
        text, checksum, _ = _row(saver, cid)
        assert checksum.startswith("x3:") and json.loads(text) == META
        assert {k: v for k, v in saver.get_tuple(cfg("t")).metadata.items() if k in META} == META
        assert lifecycle.fsck(saver, deep=True).findings == []
        saver.run(annotate_op(saver.dialect, "t", "", cid, {"note": "kept"}, saver.blob_codec), write=True)
        assert saver.get_tuple(cfg("t")).metadata["note"] == "kept"


def test_rows_an_earlier_release_wrote_with_json_text_still_verify(tmp_path: Path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "db.sqlite")) as saver:
        cid = _put(saver)
        _, _, doc = _row(saver, cid)
        old = dumps_json(META, sort_keys=False)
        assert old != dumps_meta(META)  # json writes 1e-07 and 1.5e+16: another text of the same metadata
        old_sum = checkpoint_checksum(None, ("t", "", cid), None, doc, old, text=True)

        def rewrite(meta_text: str):  # noqa: ANN202
            yield Q("UPDATE threadline_checkpoints SET metadata = ?, checksum = ? WHERE checkpoint_id = ?", (meta_text, old_sum, cid))
            # the head this saver wrote holds the row's checksum as it wrote it (``storage.heads``): a
            # head of the row as that release wrote it is not this one
            yield Q("DELETE FROM threadline_heads WHERE checkpoint_id = ?", (cid,))

        saver.run(rewrite(old), write=True)
        assert saver.get_tuple(cfg("t")).metadata["score"] == 1e-07
        assert lifecycle.fsck(saver, deep=True).findings == []
        saver.run(rewrite(old.replace("1e-07", "2e-07")), write=True)  # changed behind threadline's back
        with pytest.raises(CorruptRowError, match="checksum mismatch"):
            saver.get_tuple(cfg("t"))
        assert [f.kind for f in lifecycle.fsck(saver).findings] == ["unreadable_checkpoint"]


_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text()
)
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


def _texts(value: object) -> list[str]:
    """The texts an encoder threadline used (or an earlier release, or another program) writes of ``value``."""
    out = [json.dumps(value), json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)]
    try:
        out.append(orjson.dumps(value).decode())
    except (orjson.JSONEncodeError, UnicodeDecodeError):
        pass  # beyond 64 bits, or a lone surrogate: orjson writes no text of it
    return out


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_loads_gives_json_s_value_exactly_whatever_wrote_the_text(value: object) -> None:
    """orjson reads an integer beyond 64 bits as a float: ``loads`` takes orjson's value only where it
    writes it back as the very text, else json's — never a plausible wrong value (types compared too)."""
    for text in _texts(value):
        assert repr(loads(text)) == repr(json.loads(text)), text


def test_metadata_beyond_64_bits_reads_back_as_the_integer_stored(tmp_path: Path) -> None:
    big = {"source": "input", "step": -1, "count": 2**70, "neg": -(2**64)}
    with SqliteSaver.from_conn_string(str(tmp_path / "db.sqlite")) as saver:
        saver.put(cfg("t"), ckpt({"a": 1}, {"a": 1}), big, {"a": 1})
        meta = saver.get_tuple(cfg("t")).metadata
        assert type(meta["count"]) is int and meta["count"] == 2**70 and meta["neg"] == -(2**64)
        assert lifecycle.fsck(saver, deep=True).findings == []
