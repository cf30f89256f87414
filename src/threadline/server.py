"""threadline under LangGraph's Agent Server (``langgraph dev``; docs/agent-server.md).

The server takes a custom checkpointer and store from ``langgraph.json``; these two factories
are what it names::

    "checkpointer": {"path": "threadline.server.checkpointer"},
    "store": {"path": "threadline.server.store"}

Both open the database named by ``$THREADLINE_DB`` (a path, ``sqlite:///path``,
``postgresql://…`` or ``redis://…``), set up its tables, and close it when the server stops.
The server enters each factory once per event loop it runs on. The checkpointer is
threadline's async saver for that backend, so the server's threads are threadline threads:
``threadline threads --db $THREADLINE_DB`` and ``threadline ui`` show them as the server
writes them.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from threadline.backends import aopen_saver
from threadline.errors import ConfigError
from threadline.saver import EngineSaver
from threadline.store import aopen_store
from threadline.store.base import AsyncStore

ENV = "THREADLINE_DB"


def database_url() -> str:
    """The URL of ``$THREADLINE_DB``; ConfigError naming the variable when it is unset or blank."""
    url = os.environ.get(ENV, "").strip()
    if not url:
        raise ConfigError(
            f"threadline.server: set ${ENV} to the database the Agent Server should keep its "
            "threads in (a path, sqlite:///path, postgresql://… or redis://…), e.g. in the "
            "\"env\" of langgraph.json"
        )
    return url


@asynccontextmanager
async def checkpointer() -> AsyncIterator[EngineSaver]:
    """threadline's async saver on ``$THREADLINE_DB``, tables set up, closed on exit: the
    Agent Server's ``"checkpointer": {"path": "threadline.server.checkpointer"}``.

    Encryption keys and offload come from the environment as for ``aopen_saver``."""
    async with aopen_saver(database_url()) as saver:
        yield saver


@asynccontextmanager
async def store() -> AsyncIterator[AsyncStore]:
    """threadline's async Store on ``$THREADLINE_DB``, tables set up, closed on exit: the Agent
    Server's ``"store": {"path": "threadline.server.store"}`` (the graphs' ``get_store()`` and
    the ``/store`` endpoints)."""
    async with aopen_store(database_url()) as opened:
        yield opened


__all__ = ["ENV", "checkpointer", "database_url", "store"]
