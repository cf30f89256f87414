"""The sqlite-vec distance functions threadline's SQL uses, in Python, for SQLite connections
that cannot load extensions (Pythons built without loadable-extension support, such as
pyenv's and some system builds). Same names, arguments (little-endian float32 BLOBs) and
results as sqlite-vec, so the SQL is one; slower, as they run once per stored vector.
"""

from __future__ import annotations

import math
import operator
import struct


def floats(blob: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(blob) // 4}f", blob)


def pack(vector: list[float]) -> bytes:
    """A vector as sqlite-vec stores it: little-endian float32."""
    return struct.pack(f"<{len(vector)}f", *vector)


def _pair(a: bytes, b: bytes) -> tuple[tuple[float, ...], tuple[float, ...]]:
    x, y = floats(a), floats(b)
    if len(x) != len(y):
        raise ValueError(f"Vector dimension mismatch: {len(x)} and {len(y)}")
    return x, y


def distance_cosine(a: bytes, b: bytes) -> float | None:
    """1 − cos(a, b); NULL when either vector is all zeros (as sqlite-vec)."""
    x, y = _pair(a, b)
    norms = math.hypot(*x) * math.hypot(*y)
    return 1.0 - sum(map(operator.mul, x, y)) / norms if norms else None


def distance_l2(a: bytes, b: bytes) -> float:
    x, y = _pair(a, b)
    return math.dist(x, y)


FUNCTIONS = {"vec_distance_cosine": distance_cosine, "vec_distance_L2": distance_l2}
