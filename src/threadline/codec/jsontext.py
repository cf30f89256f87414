"""JSON as threadline stores it (checkpoint documents, metadata, records): one encoder, so that the
text a put stores and the text a checksum covers (``codec.seal``) are the same bytes."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")  # \u0000 after an even number of backslashes
_NUL_BYTES = re.compile(_NUL.pattern.encode())


def dumps_json(obj: Any, *, sort_keys: bool = True) -> str:
    """JSON as stored: compact, UTF-8 kept, sorted keys unless ``sort_keys=False`` (metadata
    keeps its own key order, which the official SQLite saver's object filters compare).

    Raises ValueError for what a JSON column cannot hold on every backend: NaN or
    Infinity, NUL characters (Postgres JSONB refuses them) and unpaired surrogates (not UTF-8).
    """
    text = json.dumps(obj, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    if "\\u0000" in text and _NUL.search(text):  # an escaped NUL, not the text "\\u0000" (an escaped backslash)
        raise ValueError("NUL character in a JSON value")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("unpaired surrogate character in a JSON value (not UTF-8)") from None
    return text


# orjson refuses (hands to a ``default`` it has not got) what json would encode otherwise: datetimes,
# dataclasses, subclasses of str, int, dict and list
_META = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
_DOC = _META | orjson.OPT_SORT_KEYS


def _fast(obj: Any, option: int, sort_keys: bool) -> tuple[str, bool]:
    """orjson's text of ``obj``, else ``dumps_json``'s wherever orjson would write what json refuses
    (NaN or infinity, which orjson writes as null: any null goes to json, which raises for those) or
    cannot encode (an integer beyond 64 bits, a key that is not a string, a subclass, an unpaired
    surrogate). It is ``dumps_json``'s text but for the exponent of small floats (``1e-7`` for
    ``1e-07``; both read back equal). Raises as ``dumps_json``. Second: whether orjson wrote ``obj``
    (then it is plain JSON data, equal to what parsing the text gives back: ``dumps_plain``)."""
    try:
        raw = orjson.dumps(obj, option=option)
    except orjson.JSONEncodeError:
        return dumps_json(obj, sort_keys=sort_keys), False
    if _has_null(raw) or (b"\\" in raw and _NUL_BYTES.search(raw)):
        return dumps_json(obj, sort_keys=sort_keys), True  # a NaN or infinity, or a NUL character: json's refusal, or its text
    return raw.decode(), True


def _has_null(raw: bytes) -> bool:
    """Whether the JSON text ``raw`` holds ``null``. Searching for the word costs ~1 ns a byte (16 µs
    for a 100-node graph's document, whose versions are long runs of zeros); its ``u`` is rare in
    LangGraph's documents and found by ``memchr``, so in a long text the few there are are looked at instead."""
    if len(raw) < 4096:
        return b"null" in raw
    i = raw.find(b"u")
    for _ in range(16):
        if i < 0:
            return False
        if raw[i - 1 : i + 3] == b"null":
            return True
        i = raw.find(b"u", i + 1)
    return b"null" in raw


def dumps_doc(doc: dict[str, Any]) -> str:
    """A stored checkpoint document (LangGraph's ``Checkpoint`` without its values: ids, versions and
    maps of them), whose text is what its ``x3:`` checksum covers: orjson's encoding with sorted keys
    (``_fast``), about ten times json's speed (a 100-node graph's 8 KB documents: 47 → 5 µs a put)."""
    return _fast(doc, _DOC, True)[0]


def dumps_plain(doc: dict[str, Any], meta: dict[str, Any]) -> tuple[str, str, bool]:
    """``dumps_doc(doc)``, ``dumps_meta(meta)``, and whether both are plain JSON data (strings, numbers
    of 64 bits, booleans, None, and dicts with string keys and lists of those: what orjson writes
    without help), which then equal what parsing their texts gives back, so a checksum of parsed JSON
    may take them as they are instead of parsing the texts again (``seal.checkpoint_checksum``)."""
    doc_json, doc_plain = _fast(doc, _DOC, True)
    meta_json, meta_plain = _fast(meta, _META, False)
    return doc_json, meta_json, doc_plain and meta_plain


def dumps_meta(meta: dict[str, Any]) -> str:
    """Stored checkpoint metadata: ``dumps_doc``'s encoding in the metadata's own key order (which
    the official SQLite saver's object filters compare), the text its checkpoint's checksum covers."""
    return _fast(meta, _META, False)[0]


def loads(text: str) -> Any:
    """``json.loads(text)``, the same value, read by orjson (about twice json's speed: a 100-node graph's
    16 KB document 30 → 17 µs) where that is certain: where orjson writes the value it read back as
    exactly ``text``. Elsewhere — an integer beyond 64 bits, which orjson reads as a float; a text
    another encoder wrote (escapes, exponents, spacing) — json's value. Raises as ``json.loads``."""
    try:
        value = orjson.loads(text)
    except ValueError:  # not JSON to orjson (NaN, a lone surrogate, nesting past its limit): json decides
        return json.loads(text)
    return value if orjson.dumps(value) == text.encode() else json.loads(text)


# A stored document's versions in fewer bytes, on a backend that keeps its JSON text uncompressed (SQLite): every
# string starting with 24 zeros — LangGraph's versions are a 32-digit zero-padded counter, a dot and
# a random fraction, ``"00000000000000000000000000000013.0.0412…"`` — is stored with ``~`` for those
# zeros, which takes a 100-node graph's documents from 2.6 MB to 1.8 MB. Only a text without a ``~`` of
# its own is compacted, so that every ``~`` of a compacted one stands for the zeros (one search for a
# character each way: ~0.7 µs a chat's put, ~0.4 µs a read). The text stays JSON (for SQLite's JSON
# functions, which expand it first: ``expanded_sql``) and is marked by a space after its opening
# brace, which no encoder threadline ever used writes. The checksum covers the expanded text
# (``seal._text_digest``).
COMPACT_MARK = "{ "
_ZEROS = "0" * 24
_QUOTED = '"' + _ZEROS


def compact_doc(text: str) -> str:
    """The stored form of a document's JSON ``text`` (``dumps_doc``'s): compacted when it has versions
    to compact and no ``~`` of its own (then ``expand_doc`` gives ``text`` back exactly), else ``text``."""
    if "~" in text:
        return text
    out = text.replace(_QUOTED, '"~')
    return text if out is text or out[:1] != "{" else COMPACT_MARK + out[1:]


def expand_doc(text: str) -> str:
    """A stored document's JSON text as ``dumps_doc`` wrote it (``compact_doc`` undone; any other text as it is)."""
    return "{" + text[2:].replace("~", _ZEROS) if text[:2] == COMPACT_MARK else text


def expanded_sql(column: str) -> str:
    """SQLite: ``expand_doc`` of a document ``column`` in SQL (for its JSON functions)."""
    return f"CASE WHEN substr({column}, 1, 2) = '{COMPACT_MARK}' THEN '{{' || replace(substr({column}, 3), '~', '{_ZEROS}') ELSE {column} END"
