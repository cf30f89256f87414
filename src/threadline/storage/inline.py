"""Storage format 2, inline channels: a checkpoint's channels that hold None, are empty, or hold a
small scalar need no blob row. They are kept in the checkpoint's stored document, as the official
PostgresSaver keeps primitive values inline: ``NULLS`` ({channel: version} of the channels holding
None), ``EMPTIES`` (of the empty ones: given a version without a value, or unchanged since a parent
that holds them so) and ``SCALARS`` ({channel: [version, value]} of those holding a str of at most
``STR_MAX`` characters, an int of 64 bits or a bool, of exactly those types: a subclass, such as a
``StrEnum`` member, keeps its blob so that it loads as itself), taken out of the stored
``channel_versions``, which then names only the channels with a blob row: what every blob statement
and ``rows.blob_pairs`` read. ``all_versions`` gives LangGraph's ``channel_versions`` back;
``rows.to_tuple`` puts the values back. A saver that encrypts (a keyring) keeps scalars in their
sealed blob rows: a document is not encrypted.

Each document is complete on its own: no channel's null, empty or scalar status is looked up in
another row when it is read. The document is covered by the checkpoint row's checksum (``codec.seal``),
so these maps are as protected as the versions were.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import compress, filterfalse, repeat
from operator import eq, is_
from typing import Any, NamedTuple

from threadline.errors import CorruptRowError

NULLS = "__none__"  # (not "null": a document holding the word goes to json, ``jsontext._has_null``)
EMPTIES = "__empty__"
SCALARS = "__scalars__"
_INLINE = (NULLS, EMPTIES)
STR_MAX = 256  # characters of a str kept in a document at most (a longer one keeps its blob row)
_SCALAR_TYPES = frozenset((str, int, bool))
_VERSION_TYPES = frozenset((str, int, float))  # what LangGraph's channel versions are
_INT_RANGE = range(-(1 << 63), 1 << 63)  # what every backend's JSON keeps exactly (orjson writes 64 bits)


class Plan(NamedTuple):
    """A put's channels that need no blob row (``plan``): those holding None, those given a new
    version without a value, those ``left`` without a value or a new version (empty where the
    parent holds them so at that version, else their version names a blob), and the ``scalars``
    (channel → value)."""

    nulls: set[str]
    emptied: set[str]
    left: set[str]
    scalars: dict[str, Any]

    def stored_inline(self) -> set[str]:
        """The channels kept in the document whatever the parent holds."""
        return self.nulls | self.emptied | self.scalars.keys() if self.scalars else self.nulls | self.emptied


def plan(doc: Mapping[str, Any], values: Any, new_versions: Mapping[str, Any], scalars: bool = True) -> Plan | None:
    """Which of a put's ``doc``'s channels go to its ``NULLS`` / ``EMPTIES`` / ``SCALARS`` (``apply``),
    or None when none may: those holding None or a scalar (``scalars``: False for a saver that
    encrypts) in the checkpoint's ``values`` (as the official PostgresSaver keeps primitive values,
    whatever ``new_versions`` says), those ``new_versions`` gives a version without a value, and those
    without either that the parent holds empty (``Plan.left``; the official PostgresSaver reads such a
    channel from its blob, and so does a put whose parent does not hold it empty). Set operations in
    C: no pass per channel in Python (a wide graph names hundreds), but over the scalars found."""
    versions = doc.get("channel_versions")
    if type(versions) is not dict or not isinstance(values, dict) or not versions:
        return None
    empty = versions.keys() - values.keys()
    none = list(map(is_, values.values(), repeat(None)))  # by identity: ``==`` would call a value's ``__eq__``
    nulls = versions.keys() & set(compress(values, none)) if True in none else set()
    kept = {}
    if scalars and not _SCALAR_TYPES.isdisjoint(map(type, values.values())):
        typed = map(_SCALAR_TYPES.__contains__, map(type, values.values()))
        kept = {ch: v for ch in compress(values, typed) if ch in versions and _exact((v := values[ch]))}
    if not empty and not nulls and not kept:
        return None
    emptied = empty & new_versions.keys()
    return Plan(nulls, emptied, empty - emptied if emptied else empty, kept)


def _exact(value: str | int | bool) -> bool:
    """Whether a str, int or bool reads back from every backend's JSON as itself, and keeps a
    document on the fast encoder (``jsontext``): a str of at most ``STR_MAX`` characters, UTF-8 (no
    unpaired surrogate), without NUL (Postgres JSONB refuses it) or the word ``null``; an int of 64 bits."""
    if type(value) is str:
        return len(value) <= STR_MAX and "\x00" not in value and "null" not in value and (value.isascii() or _utf8(value))
    return type(value) is bool or value in _INT_RANGE


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def apply(doc: dict[str, Any], planned: Plan, parent: Mapping[str, Any] | None) -> None:
    """Move ``planned``'s channels out of ``doc``'s ``channel_versions`` (its order kept) into its
    ``NULLS``, ``EMPTIES`` and ``SCALARS``: the left ones only where ``parent`` (the parent
    checkpoint's ``EMPTIES``; None: not known) holds them empty at the same version."""
    versions = doc["channel_versions"]
    inherited = _inherited(planned.left, versions, parent) if planned.left and parent else {}
    inline = planned.stored_inline()
    if not (inline or inherited):
        return
    kept = filterfalse(inline.__contains__, versions)
    kept = list(filterfalse(inherited.__contains__, kept) if inherited else kept)
    doc["channel_versions"] = dict(zip(kept, map(versions.__getitem__, kept)))
    if planned.nulls:
        doc[NULLS] = dict(zip(planned.nulls, map(versions.__getitem__, planned.nulls)))
    if planned.scalars:
        doc[SCALARS] = {ch: [versions[ch], v] for ch, v in planned.scalars.items()}
    if planned.emptied or inherited:
        doc[EMPTIES] = {**inherited, **dict(zip(planned.emptied, map(versions.__getitem__, planned.emptied)))}


def _inherited(left: set[str], versions: Mapping[str, Any], parent: Mapping[str, Any]) -> dict[str, Any]:
    """Channel → version of the ``left`` channels that ``parent`` holds empty at the same version.
    Most often that is the parent's whole map (a chain of nodes empties one more trigger each step):
    checked in C and copied whole; else compared one by one (compared, not hashed: a version is a
    long string, new to this put)."""
    if len(left) == len(parent) and parent.items() <= versions.items() and left <= parent.keys():
        return dict(parent)
    named = list(left)
    same = list(compress(named, map(eq, map(parent.get, named), map(versions.__getitem__, named))))
    return dict(zip(same, map(versions.__getitem__, same)))


def inline_maps(doc: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """A stored doc's (``NULLS``, ``EMPTIES``) maps of channel → version (empty for a doc without them).

    Raises CorruptRowError when one is not a mapping of channel names to versions."""
    found = []
    for name in _INLINE:
        m = doc.get(name)
        if m is None:
            found.append({})
        elif type(m) is dict and _VERSION_TYPES.issuperset(map(type, m.values())):  # in C: a wide graph's hundred
            found.append(m)
        else:
            raise CorruptRowError(f"checkpoint {doc.get('id')!r}: {name} is not a mapping of channel to version")
    return found[0], found[1]


def scalar_map(doc: Mapping[str, Any]) -> dict[str, list]:
    """A stored doc's ``SCALARS``: channel → [version, value] (empty for a doc without them).

    Raises CorruptRowError when it is not a mapping of channel names to a version and a str, int or bool."""
    m = doc.get(SCALARS)
    if m is None:
        return {}
    if type(m) is dict and all(type(e) is list and len(e) == 2 and type(e[0]) in (str, int, float) and type(e[1]) in _SCALAR_TYPES
                               for e in m.values()):
        return m
    raise CorruptRowError(f"checkpoint {doc.get('id')!r}: {SCALARS} is not a mapping of channel to [version, value]")


def all_versions(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Every channel version a stored doc names, its inline channels' too: LangGraph's ``channel_versions``."""
    versions = doc.get("channel_versions") or {}
    if NULLS not in doc and EMPTIES not in doc and SCALARS not in doc:
        return versions
    nulls, empties = inline_maps(doc)
    return {**versions, **nulls, **empties, **{ch: e[0] for ch, e in scalar_map(doc).items()}}



def inline_values(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The values a stored doc holds itself: None for its ``NULLS``, its ``SCALARS``' values."""
    values = dict.fromkeys(inline_maps(doc)[0]) if NULLS in doc else {}
    if SCALARS in doc:
        values.update((ch, e[1]) for ch, e in scalar_map(doc).items())
    return values


def read_back(doc: Mapping[str, Any], versions: Mapping[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """LangGraph's ``channel_versions`` of a stored doc whose stored ones are ``versions``, the values
    it holds itself added to ``values`` (``rows.to_tuple``): ``all_versions`` and ``inline_values`` in one
    pass over the maps."""
    nulls, empties = inline_maps(doc)
    if nulls:
        values.update(dict.fromkeys(nulls))
    if SCALARS not in doc:
        return {**versions, **nulls, **empties}
    scalars = scalar_map(doc)
    values.update((ch, e[1]) for ch, e in scalars.items())
    return {**versions, **nulls, **empties, **{ch: e[0] for ch, e in scalars.items()}}
