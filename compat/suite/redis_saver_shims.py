"""threadline's Redis savers as the langgraph suite's checkpointer factories, for the
``langgraph-redis`` suite (``threadline_suite_plugin``).

The langgraph tests build their SQLite checkpointers with three factories of
``tests/conftest_checkpointer.py`` (``_checkpointer_sqlite``, ``_checkpointer_sqlite_aes``,
``_checkpointer_sqlite_aio``), which the ``sync_checkpointer`` / ``async_checkpointer``
fixtures of ``tests/conftest.py`` call by name. In the threadline run the plugin rebinds
those names to the factories here, so the same tests run on ``threadline.RedisSaver`` /
``threadline.AsyncRedisSaver`` instead:

* every saver lives on ``THREADLINE_TEST_REDIS`` (default ``redis://127.0.0.1:6379/0``;
  opened as threadline opens URLs, so a ``redis+cluster://`` one works here too) under a
  key prefix of its own, ``tlsuite:saver:<pid>:<n>``, opened with the official keyword
  ``checkpoint_prefix=``; its keys are deleted when the test's fixture closes it (and, as
  a sweep, at the end of the run: ``drop_all``), so no test sees another's data;
* ``checkpointer_redis_aes`` sets an AES ``EncryptedSerializer`` on the open saver, as the
  SQLite ``_aes`` variant does (``saver.serde = …`` after construction);
* ``LANGGRAPH_STRICT_MSGPACK`` is honoured through the suite's own helper
  (``tests.conftest_checkpointer._apply_strict_msgpack``), as in the factories replaced.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from threadline import AsyncRedisSaver, RedisSaver
from threadline.backends import redisconn

REDIS_URL = os.environ.get("THREADLINE_TEST_REDIS") or "redis://127.0.0.1:6379/0"
PREFIX_ROOT = f"tlsuite:saver:{os.getpid()}"
AES_KEY = b"1234567890123456"  # the key the suite's SQLite _aes variant encrypts with
_counter = itertools.count()


def new_prefix() -> str:
    return f"{PREFIX_ROOT}:{next(_counter)}"


def _drop_matching(pattern: str) -> None:
    """Delete the keys matching ``pattern``; test code only, so SCAN (on every primary of a
    cluster), and one key a DEL (a cluster refuses a DEL across slots)."""
    client = redisconn.connect(REDIS_URL)
    try:
        for key in list(client.scan_iter(match=pattern, count=1000)):
            client.delete(key)
    finally:
        client.close()


def drop(prefix: str) -> None:
    """Every key of one saver's prefix: ``<prefix>:{thread}:…``, ``<prefix>:threads``, ``<prefix>:migrations``."""
    _drop_matching(prefix + ":*")


def drop_all() -> None:
    """The end-of-run sweep: whatever this process's savers left (a test interrupted mid-teardown)."""
    _drop_matching(PREFIX_ROOT + ":*")


def _strict_msgpack(saver: Any) -> None:
    helper = getattr(sys.modules.get("tests.conftest_checkpointer"), "_apply_strict_msgpack", None)
    if helper is not None:
        helper(saver)


@contextmanager
def checkpointer_redis() -> Iterator[RedisSaver]:
    prefix = new_prefix()
    try:
        with RedisSaver.from_conn_string(REDIS_URL, checkpoint_prefix=prefix) as saver:
            _strict_msgpack(saver)
            yield saver
    finally:
        drop(prefix)


@contextmanager
def checkpointer_redis_aes() -> Iterator[RedisSaver]:
    prefix = new_prefix()
    try:
        with RedisSaver.from_conn_string(REDIS_URL, checkpoint_prefix=prefix) as saver:
            if os.getenv("LANGGRAPH_STRICT_MSGPACK", "false").lower() in ("1", "true", "yes"):
                from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

                inner = JsonPlusSerializer(allowed_msgpack_modules=None)
                saver.serde = EncryptedSerializer.from_pycryptodome_aes(serde=inner, key=AES_KEY)
            else:
                saver.serde = EncryptedSerializer.from_pycryptodome_aes(key=AES_KEY)
            yield saver
    finally:
        drop(prefix)


@asynccontextmanager
async def checkpointer_redis_aio() -> AsyncIterator[AsyncRedisSaver]:
    prefix = new_prefix()
    try:
        async with AsyncRedisSaver.from_conn_string(REDIS_URL, checkpoint_prefix=prefix) as saver:
            _strict_msgpack(saver)
            yield saver
    finally:
        drop(prefix)


# the suite's factory names (tests/conftest_checkpointer.py) → the factory the threadline run gives them
FACTORIES = {
    "_checkpointer_sqlite": checkpointer_redis,
    "_checkpointer_sqlite_aes": checkpointer_redis_aes,
    "_checkpointer_sqlite_aio": checkpointer_redis_aio,
}
