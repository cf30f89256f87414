"""threadline's zstd dictionary for small values: chat messages and what graphs store beside them.

A frame compressed with it names it in its header (``DICT_ID``), so a reader knows which
dictionary a row needs, and rows compressed without one (``dict_id`` 0) read as before. The
shipped bytes (``messages.zdict``, 4 KiB) never change; a better dictionary would get a new
ID and this one would stay for reading. How it was made: ``benchmarks/dictionary.py``.
"""

from __future__ import annotations

import functools
from pathlib import Path

import zstandard

DICT_ID = 0x746C6401  # "tld" 1: in zstd's range for private dictionaries (32768 … 2**31 - 1)
PATH = Path(__file__).with_name("messages.zdict")


@functools.cache
def data() -> bytes:
    """The dictionary's bytes (read once)."""
    return PATH.read_bytes()


@functools.cache
def load(level: int | None = None) -> zstandard.ZstdCompressionDict:
    """The dictionary as a ``ZstdCompressionDict``, prepared for compressing at ``level`` when
    given (a prepared dictionary serves one level). One per level per process: zstd only reads
    a prepared dictionary, so every thread's compressor shares it."""
    d = zstandard.ZstdCompressionDict(data(), dict_type=zstandard.DICT_TYPE_FULLDICT)
    if level is not None:
        d.precompute_compress(level=level)
    return d
