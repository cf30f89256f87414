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
from typing import TYPE_CHECKING, Any

from threadline.errors import ConfigError
from threadline.lazy import lazy_names

if TYPE_CHECKING:
    from threadline.backends.registry import BackendEntry
    from threadline.codec import BlobCodec
    from threadline.objectstore import Offload
    from threadline.saver import EngineSaver

# The URL registry loads when a saver is opened by URL, not with ``from threadline import SqliteSaver``.
__getattr__ = lazy_names(globals(), dict.fromkeys(("REGISTRY", "BackendEntry", "backend_of", "entry_of"), "threadline.backends.registry"))


def env_codec(codec: BlobCodec | None = None) -> BlobCodec:
    """``codec``, or the default one with the environment's keys (``Keyring.from_env``) and
    offload settings (``Offload.from_env``: ``THREADLINE_OFFLOAD``)."""
    from threadline.codec import BlobCodec, Keyring  # once per open
    from threadline.objectstore import Offload

    return codec if codec is not None else BlobCodec(keys=Keyring.from_env(), offload=Offload.from_env())


def _with_offload(url: str, codec: BlobCodec | None, offload: Offload | str | None) -> tuple[BackendEntry, BlobCodec]:
    """``url``'s backend entry, and ``codec`` (or ``env_codec``'s) with ``offload`` when given.
    ConfigError when an object store is asked for (``offload``, or the given codec's) on a
    backend that cannot offload (Redis); the environment's setting (``THREADLINE_OFFLOAD``) is
    left out there."""
    from threadline.backends.registry import backend_of, entry_of  # once per open
    from threadline.objectstore import Offload

    bc = env_codec(codec)
    entry = entry_of(url)
    offloads = getattr(getattr(entry.get("saver"), "dialect", None), "offloads", False)
    if offload is not None:
        bc.offload = Offload.of(offload)
    stored = bc.offload is not None and bc.offload.objects is not None
    if stored and not offloads:
        if offload is None and codec is None:  # from the environment: meant for the SQL backends
            bc.offload = None
        else:
            raise ConfigError(f"offload to an object store is not supported on {backend_of(url)} (SQLite and Postgres only; docs/offload.md)")
    return entry, bc


@contextmanager
def open_saver(url: str, *, codec: BlobCodec | None = None, offload: Offload | str | None = None, **options: Any) -> Iterator[EngineSaver]:
    """Open a sync saver for ``url`` (tables set up), closing it on exit.

    ``codec``: its ``BlobCodec``; by default one with the environment's encryption keys, if
    any (see the module docstring). ``offload``: an ``Offload`` or its URL (docs/offload.md; by
    default ``THREADLINE_OFFLOAD``'s). ``options`` go to its ``from_conn_string`` (e.g. ``ttl=``,
    ``retention=``). Raises ConfigError for a malformed key or offload setting."""
    entry, bc = _with_offload(url, codec, offload)
    with entry.get("saver").from_conn_string(url, **options) as saver:
        saver.blob_codec = bc
        yield saver


@asynccontextmanager
async def aopen_saver(url: str, *, codec: BlobCodec | None = None, offload: Offload | str | None = None, **options: Any) -> AsyncIterator[EngineSaver]:
    """Open an async saver for ``url`` (tables set up), closing it on exit; ``codec``,
    ``offload`` and ``options`` as ``open_saver``."""
    entry, bc = _with_offload(url, codec, offload)
    async with entry.get("async_saver").from_conn_string(url, **options) as saver:
        saver.blob_codec = bc
        yield saver


__all__ = ["REGISTRY", "BackendEntry", "aopen_saver", "backend_of", "entry_of", "open_saver"]
