"""The preflight's serializer: ``Probe`` decodes as inspection does (``serde.inspecting``:
LangGraph's safe types only, no class of the application is ever constructed) and records
the ``(module, name)`` of every stored constructor it met; ``loads(serde, key)`` says whether
a saver's own serializer would construct that type, or would hand back its raw fields
(a type that no longer imports, or that the load policy does not allow).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
    _create_msgpack_ext_hook,
)

from threadline.codec.serde import _INSPECT_SAFE, ThreadlineSerializer, _LoadPolicy

_NAMED = (EXT_CONSTRUCTOR_SINGLE_ARG, EXT_CONSTRUCTOR_POS_ARGS, EXT_CONSTRUCTOR_KW_ARGS, EXT_METHOD_SINGLE_ARG, EXT_PYDANTIC_V1, EXT_PYDANTIC_V2)


class Probe(ThreadlineSerializer):
    """Inspection's load policy, recording in ``seen`` each stored ``(module, name)`` outside
    LangGraph's safe types (clear it between values to attribute them)."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, str]] = set()
        super().__init__(data_classes=False)

    def _use_policy(self, data_classes: bool) -> None:
        inner = _create_msgpack_ext_hook(_LoadPolicy(self._allowed_msgpack_modules or (), False))

        def hook(code: int, data: bytes) -> Any:
            if code in _NAMED:
                try:
                    found = ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
                except Exception:
                    found = None
                if isinstance(found, (list, tuple)) and len(found) >= 2 and isinstance(found[0], str) and isinstance(found[1], str):
                    if (found[0], found[1]) not in _INSPECT_SAFE:
                        self.seen.add((found[0], found[1]))
            return inner(code, data)

        self._unpack_ext_hook = hook


def loads(serde: SerializerProtocol, key: tuple[str, str]) -> bool:
    """Whether ``serde`` (a saver's serializer) constructs stored instances of ``key`` =
    ``(module, name)``: LangGraph's safe types always; under threadline's policy what it allows
    (an explicit allowlist, or an already imported data class); under another serializer a type
    its module still provides. Never raises: a module that fails to import counts as False."""
    if key in _INSPECT_SAFE:
        return True
    policy = getattr(serde, "load_policy", None)
    if policy is not None:
        return key in policy
    module = sys.modules.get(key[0])
    if module is None:
        try:
            module = importlib.import_module(key[0])
        except Exception:
            return False
    return isinstance(getattr(module, key[1], None), type)
