"""``open_saver(url)``: one entry point for every backend.

Accepted forms (the backends in ``threadline.backends.registry``):

* a plain file path (``checkpoints.db``) or ``:memory:`` → SQLite
* ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` → SQLite
* ``postgresql://user@host:port/db`` (or ``postgres://``) → Postgres

Raises ``BackendError`` for an unknown scheme or an unreachable server.

Encryption at rest: with no ``codec`` given, the saver reads its keys from the
environment (``THREADLINE_ENCRYPTION_KEY`` or ``THREADLINE_ENCRYPTION_KEY_FILE``, older
keys in ``THREADLINE_ENCRYPTION_OLD_KEYS``; see ``threadline.codec.keyring``) — which is
how the ``threadline`` CLI reads an encrypted database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from threadline.backends.registry import REGISTRY, BackendEntry, backend_of, entry_of
from threadline.codec import BlobCodec, Keyring
from threadline.saver import EngineSaver


def env_codec(codec: BlobCodec | None = None) -> BlobCodec:
    """``codec``, or the default one with the environment's keys (``Keyring.from_env``)."""
    return codec if codec is not None else BlobCodec(keys=Keyring.from_env())



@contextmanager
def open_saver(url: str, *, codec: BlobCodec | None = None, **options: Any) -> Iterator[EngineSaver]:
    """Open a sync saver for ``url`` (tables set up), closing it on exit.

    ``codec``: its ``BlobCodec``; by default one with the environment's encryption keys, if
    any (see the module docstring). ``options`` go to its ``from_conn_string`` (e.g. ``ttl=``,
    ``retention=``). Raises ConfigError for a malformed key."""
    bc = env_codec(codec)
    with entry_of(url).get("saver").from_conn_string(url, **options) as saver:
        saver.blob_codec = bc
        yield saver


@asynccontextmanager
async def aopen_saver(url: str, *, codec: BlobCodec | None = None, **options: Any) -> AsyncIterator[EngineSaver]:
    """Open an async saver for ``url`` (tables set up), closing it on exit; ``codec`` and
    ``options`` as ``open_saver``."""
    bc = env_codec(codec)
    async with entry_of(url).get("async_saver").from_conn_string(url, **options) as saver:
        saver.blob_codec = bc
        yield saver


__all__ = ["REGISTRY", "BackendEntry", "aopen_saver", "backend_of", "entry_of", "open_saver"]
