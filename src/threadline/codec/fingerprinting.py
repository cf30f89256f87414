"""Item fingerprints: serializing only the new items of a list.

``fingerprints`` (a content fingerprint of a list's items: ``Fingerprint``, via
``marshal``) and the per-class pydantic model check it relies on (``_plain_model``).
"""

from __future__ import annotations

import marshal
from typing import Any, NamedTuple

_CORE = frozenset({dict, list, tuple, str, bytes, int, float, bool, type(None)})
# What was found per class (``_plain_model``): process-wide, one entry per class; past
# MAX_CLASSES classes (~200 KB; classes made at run time) it starts over.
MAX_CLASSES = 1024
_PLAIN_MODELS: dict[type, bool] = {}
_HEADER = 5  # marshal: a list's type byte and its 4-byte count


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
    """A list's items by content: each item's exact class, and ``marshal`` (format 2) of
    their states (a model's ``__dict__``, plain data itself) and of the models'
    ``__pydantic_extra__`` (None for plain data), each as one list. Bytes held: ``nbytes``."""

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
            and self.states.startswith(memoryview(old.states)[_HEADER:], _HEADER)
            and self.extras.startswith(memoryview(old.extras)[_HEADER:], _HEADER)
        )


def fingerprints(items: Any) -> Fingerprint | None:
    """A content fingerprint of a list's items, or None when an item has none.

    ``marshal`` is C-speed, exact about types (``True``, ``1`` and ``1.0`` differ; ``str``
    and dict subclasses and other objects are refused), and it keeps dict key order.
    ``marshal.loads`` rebuilds exactly what was dumped, so with the same item classes,
    equal fingerprints mean equal content, and equal content serializes to equal bytes.
    Format 2, because from format 3 on marshal marks an object that has other references at
    the time (a chat model's copy of the messages holds their contents for a while), so the
    same content would fingerprint differently from one put to the next; format 2 writes
    content only. Unequal fingerprints of equal content only cost a whole serialization.
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
        return Fingerprint(classes, marshal.dumps(states, 2), marshal.dumps(extras if extras is not None else [None] * len(classes), 2))
    except (ValueError, TypeError):  # something marshal cannot hold
        return None
