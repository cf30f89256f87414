"""``LangGraphRecord``: what the read models show in place of one of LangGraph's own records.

Its own module, free of LangGraph's serializer, so code that only recognises a shown record
(``read.common.jsonable``) loads none of it; ``codec.serde`` makes them when it decodes."""

from __future__ import annotations

from typing import Any


class LangGraphRecord:
    """A stored value of one of LangGraph's own record types (``langgraph.types``:
    ``Interrupt``, ``Send``, ``Command``, ``Overwrite``, ``TimeoutPolicy``) as the read models
    show it, without importing ``langgraph.types``: ``type_name`` and the stored ``fields``,
    each also read as an attribute (``record.value``, ``record.id`` of an interrupt;
    ``record.node``, ``record.arg`` of a Send)."""

    __slots__ = ("type_name", "fields")

    def __init__(self, type_name: str, fields: dict[str, Any]) -> None:
        self.type_name, self.fields = type_name, fields

    def __getattr__(self, name: str) -> Any:
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(f"{self.type_name} record has no field {name!r}") from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LangGraphRecord) and (self.type_name, self.fields) == (other.type_name, other.fields)

    def __hash__(self) -> int:
        return hash(self.type_name)

    def __repr__(self) -> str:
        return f"{self.type_name}({', '.join(f'{k}={v!r}' for k, v in self.fields.items())})"
