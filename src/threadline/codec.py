"""Blob codec: LangGraph's serializer plus threadline's type tags.

Every stored value (a channel blob, a pending write) is a ``(type, bytes)`` pair.
``type`` is the serializer's own tag (``msgpack``, ``json``, ``bytes``, ``null``, …)
or one of threadline's:

* ``empty`` — the channel has a version but no value (LangGraph's "empty channel",
  and ``DeltaChannel``'s between snapshots); ``bytes`` is NULL.

Deserialization is strict by default: the serializer is LangGraph's
``JsonPlusSerializer`` with ``pickle_fallback=False`` and an msgpack allowlist
(LangGraph's safe types plus whatever the compiled graph's state schema adds
through ``with_allowlist``). A ``pickle`` tag is refused, never loaded.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from threadline.errors import CorruptRowError

EMPTY = "empty"
_REFUSED = frozenset({"pickle"})


def default_serde() -> SerializerProtocol:
    """LangGraph's serializer, locked down: no pickle, only allowlisted msgpack types."""
    return JsonPlusSerializer(pickle_fallback=False, allowed_msgpack_modules=None)


def encode(serde: SerializerProtocol, value: Any) -> tuple[str, bytes]:
    """Serialize one value to ``(type, bytes)``; refuses to produce a pickle."""
    tag, data = serde.dumps_typed(value)
    if tag in _REFUSED:
        raise TypeError(f"threadline does not store {tag!r} payloads; value of type {type(value).__name__} is not serializable")
    return tag, data


def decode(serde: SerializerProtocol, tag: str, data: bytes | None, where: str) -> Any:
    """Deserialize a stored ``(type, bytes)`` pair.

    ``where`` names the row (table and key) for the error message.

    Raises:
        CorruptRowError: unknown or refused tag, or bytes the serializer cannot read.
    """
    if tag in _REFUSED:
        raise CorruptRowError(f"{where}: refusing to load a {tag!r} payload")
    try:
        return serde.loads_typed((tag, b"" if data is None else bytes(data)))
    except Exception as exc:  # the serializer raises many types; all mean "unreadable row"
        raise CorruptRowError(f"{where}: cannot decode {tag!r} payload ({type(exc).__name__}: {exc})") from exc
