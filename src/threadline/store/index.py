"""The ``index`` config of a store (semantic search), checked once, and what to embed.

Same config as the official stores (LangGraph's ``IndexConfig``): ``dims``, ``embed``
(a LangChain ``Embeddings``, a sync or async function, or a provider string) and
``fields`` (paths into the value, ``["$"]`` — the whole value — by default). The
official SQLite store reads its paths from ``text_fields``; that key is accepted
too. Postgres also reads ``distance_type`` (``cosine``, ``l2``, ``inner_product``)
and ``ann_index_config["vector_type"]`` (``vector`` or ``halfvec``); SQLite
supports the same three distances.

Items are searched exactly: every vector of the items that pass the namespace and
filter conditions is scored, and an item scores as its best field. (An ANN
index's ``kind`` is accepted and not built: a filtered search would not use it.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.store.base import ensure_embeddings, get_text_at_path, tokenize_path

from threadline.storage.dialect.store import DISTANCES, VECTOR_TYPES


class Index:
    """A validated ``index`` config: ``dims``, ``embeddings``, ``fields``, ``distance``, ``vector_type``.

    Raises ValueError naming the key for a missing or malformed ``dims``, an unknown
    ``distance_type`` or ``vector_type``, or ``fields`` that are not a list of paths.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        dims = config.get("dims")
        if isinstance(dims, bool) or not isinstance(dims, int) or dims <= 0:
            raise ValueError(f"index['dims'] must be a positive integer (the embedding size), got {dims!r}")
        self.dims = dims
        self.distance = config.get("distance_type") or "cosine"
        if self.distance not in DISTANCES:
            raise ValueError(f"index['distance_type'] must be one of {DISTANCES}, got {self.distance!r}")
        self.vector_type = (config.get("ann_index_config") or {}).get("vector_type") or "vector"
        if self.vector_type not in VECTOR_TYPES:
            raise ValueError(f"index['ann_index_config']['vector_type'] must be one of {VECTOR_TYPES}, got {self.vector_type!r}")
        fields = config.get("fields") or config.get("text_fields") or ["$"]
        if isinstance(fields, str):
            fields = [fields]
        if not isinstance(fields, (list, tuple)) or not all(isinstance(f, str) for f in fields):
            raise ValueError(f"index['fields'] must be a list of paths such as ['text', 'meta.title'], got {fields!r}")
        self.fields = [(f, f if f == "$" else tokenize_path(f)) for f in fields]
        self.embeddings = ensure_embeddings(config.get("embed"))

    def texts(self, value: dict[str, Any], index: list[str] | None) -> list[tuple[str, str]]:
        """``(field_name, text)`` to embed for a value: the config's fields, or the put's ``index``
        paths. A path that matches several texts gives ``path.0``, ``path.1``, …"""
        paths = self.fields if index is None else [(p, p if p == "$" else tokenize_path(p)) for p in index]
        out: list[tuple[str, str]] = []
        for path, tokens in paths:
            texts = get_text_at_path(value, tokens)
            out += [(f"{path}.{i}" if len(texts) > 1 else path, text) for i, text in enumerate(texts)]
        return out

    def check(self, vectors: list[list[float]], count: int) -> list[list[float]]:
        """The embedder's output, or ValueError when it has the wrong count or size."""
        if len(vectors) != count or any(len(v) != self.dims for v in vectors):
            sizes = sorted({len(v) for v in vectors})
            raise ValueError(
                f"the embedder returned {len(vectors)} vectors of sizes {sizes} for {count} texts; "
                f"index['dims'] is {self.dims}: make them agree"
            )
        return [[float(x) for x in v] for v in vectors]
