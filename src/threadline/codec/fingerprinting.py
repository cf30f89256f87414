"""Item fingerprints: serializing only the new items of a list.

``fingerprints`` (a content fingerprint of a list's items: ``Fingerprint``, via
``ormsgpack``) and the per-class pydantic model check it relies on (``_plain_model``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import ormsgpack

_CORE = frozenset({dict, list, tuple, str, bytes, int, float, bool, type(None)})
# What was found per class (``_plain_model``): process-wide, one entry per class; past
# MAX_CLASSES classes (~200 KB; classes made at run time) it starts over.
MAX_CLASSES = 1024
_PLAIN_MODELS: dict[type, bool] = {}
# Every type but the exact core ones goes to ``_refuse``: subclasses, dataclasses, datetimes,
# enums, UUIDs, big ints (others, and non-str keys and surrogates, raise anyway). A tuple is
# written as an array, as LangGraph's serializer writes it.
_EXACT = (
    ormsgpack.OPT_PASSTHROUGH_SUBCLASS | ormsgpack.OPT_PASSTHROUGH_DATACLASS | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM | ormsgpack.OPT_PASSTHROUGH_UUID | ormsgpack.OPT_PASSTHROUGH_BIG_INT
)


def _refuse(obj: Any) -> Any:
    raise TypeError(f"no fingerprint for {type(obj).__name__}")


def _header(packed: bytes) -> int:
    """The length of a msgpack array's header (fixarray, array 16 or array 32)."""
    return 1 if packed[0] < 0xDC else 3 if packed[0] == 0xDC else 5


def _plain_model(cls: type) -> bool:
    """A pydantic v2 model whose ``model_dump()`` is a function of its ``__dict__`` and
    ``__pydantic_extra__`` alone: no computed fields, no custom serializers."""
    found = _PLAIN_MODELS.get(cls)
    if found is None:
        try:
            decorators = cls.__pydantic_decorators__  # type: ignore[attr-defined]
            found = (
                hasattr(cls, "model_dump")
                and not cls.model_computed_fields  # type: ignore[attr-defined]
                and not decorators.field_serializers
                and not decorators.model_serializers
            )
        except AttributeError:
            found = False
        if len(_PLAIN_MODELS) >= MAX_CLASSES:
            _PLAIN_MODELS.clear()
        _PLAIN_MODELS[cls] = found
    return found


class Fingerprint(NamedTuple):
    """A list's items by content: each item's exact class, and msgpack of their states (a
    model's ``__dict__``, plain data itself) and of the models' ``__pydantic_extra__`` (None
    for plain data), each as one array. Bytes held: ``nbytes``."""

    classes: tuple
    states: bytes
    extras: bytes

    @property
    def nbytes(self) -> int:
        return len(self.states) + len(self.extras) + 8 * len(self.classes)

    def extends(self, old: Fingerprint) -> bool:
        """Whether the first ``len(old.classes)`` items are, by content, the items ``old`` was taken of.

        An item's encoding depends only on the items before it, so this is a prefix comparison."""
        n = len(old.classes)
        return (
            self.classes[:n] == old.classes
            and self.states.startswith(memoryview(old.states)[_header(old.states) :], _header(self.states))
            and self.extras.startswith(memoryview(old.extras)[_header(old.extras) :], _header(self.extras))
        )


def fingerprints(items: Any) -> Fingerprint | None:
    """A content fingerprint of a list's items, or None when an item has none.

    msgpack (``ormsgpack``, the library LangGraph's serializer writes with) is C-speed, a
    function of content alone, exact about types (``True``, ``1`` and ``1.0`` differ, and so
    do ``0.0`` and ``-0.0``) and it keeps dict key order. Only the exact core types are
    taken: str, int, float, bool, None, bytes, list, tuple and dict with str keys; anything
    else (a subclass, a datetime, another object, a non-str key, a lone surrogate) means no
    fingerprint. On those types LangGraph's serializer writes the same msgpack (a tuple, like
    a list, as an array), so with the same item classes, equal fingerprints mean equal
    serialized content, and equal content serializes to equal bytes. (``marshal`` was 2.6× slower in format 2; from format 3 on it marks an
    object that has other references at the time, so the same content fingerprinted
    differently from one put to the next.) Unequal fingerprints only cost a whole serialization.
    A pydantic model's state (no computed fields, no custom serializers) is its ``__dict__``
    and ``__pydantic_extra__`` — what LangGraph's serializer dumps. Never object identity:
    an item mutated in place has a different encoding.
    """
    classes = tuple(map(type, items))
    kinds = set(classes)
    models = {cls for cls in kinds if cls not in _CORE}
    if not all(map(_plain_model, models)):
        return None
    if not models:
        states, extras = list(items), None
    elif len(models) == len(kinds):
        states, extras = [i.__dict__ for i in items], [i.__pydantic_extra__ for i in items]
    else:
        states = [i if c in _CORE else i.__dict__ for i, c in zip(items, classes)]
        extras = [None if c in _CORE else i.__pydantic_extra__ for i, c in zip(items, classes)]
    try:
        return Fingerprint(
            classes,
            ormsgpack.packb(states, default=_refuse, option=_EXACT),
            ormsgpack.packb(extras if extras is not None else [None] * len(classes), default=_refuse, option=_EXACT),
        )
    except TypeError:  # not exact core types only
        return None
