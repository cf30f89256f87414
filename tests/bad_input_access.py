"""Uniform sync/async access and a seeded database, for the bad-input tests
(``test_bad_input.py``, ``test_bad_rows.py``).

* ``Api(saver, is_async)``: calls a saver's sync methods, or their ``a``-twins on an
  async saver, by one name (``await api.call("put", ...)``, ``await api.list(config)``,
  ``await api.ids(config)``);
* ``cfg(thread_id, ns, cid)`` / ``ckpt(values, versions)``: a config and a fresh
  checkpoint, holding whatever (bad) values a test passes;
* ``seeded(backend)``: an open saver on a small known database, yielding ``(api, seed)``:
  three checkpoints on thread ``alpha`` (pending writes, an interrupt; metadata with keys
  that look like SQL and JSON paths, ``HOSTILE_META``), one in its namespace ``sub:1``,
  one on thread ``beta``;
* ``assert_still_works(api, seed)``: after an error, the seeded data reads back whole;
* ``cid_of(config)``: a config's checkpoint_id.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from backends import Backend
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6


@dataclass
class Api:
    """Calls a saver's sync methods (sync savers) or ``a``-methods (async savers) by one name."""

    saver: Any
    is_async: bool

    async def call(self, name: str, *args: Any, **kw: Any) -> Any:
        if self.is_async:
            return await getattr(self.saver, "a" + name)(*args, **kw)
        return getattr(self.saver, name)(*args, **kw)

    async def list(self, config: Any, **kw: Any) -> list:
        if self.is_async:
            return [t async for t in self.saver.alist(config, **kw)]
        return list(self.saver.list(config, **kw))

    async def ids(self, config: Any, **kw: Any) -> list[str]:
        return [t.config["configurable"]["checkpoint_id"] for t in await self.list(config, **kw)]


def cfg(thread_id: Any, ns: Any = "", cid: Any = None) -> dict:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if cid is not None:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


def ckpt(values: dict, versions: dict) -> dict:
    c = empty_checkpoint()
    c["id"] = str(uuid6(clock_seq=-1))
    c["channel_values"] = dict(values)
    c["channel_versions"] = dict(versions)
    return c


HOSTILE_META = {
    "a": 1,
    "$.a": "dollar",
    '"': "quote",
    "x') OR 1=1 --": "inj",
    "nested": {"a": 1, "b": 2},
    "tags": ["x", "y"],
    "none": None,
}


@dataclass
class Seed:
    """What ``seeded`` stored (configs returned by put)."""

    alpha: list[dict]  # three checkpoints on ("alpha", "")
    sub: dict  # one on ("alpha", "sub:1")
    beta: dict  # one on ("beta", "")


@asynccontextmanager
async def seeded(backend: Backend):
    """Open a saver and store a small known database; yield (api, seed)."""
    if backend.is_async:
        async with backend.open() as saver:
            api = Api(saver, True)
            yield api, await _seed(api)
    else:
        with backend.open() as saver:
            api = Api(saver, False)
            yield api, await _seed(api)


async def _seed(api: Api) -> Seed:
    alpha = []
    config = cfg("alpha")
    values = {"msgs": ["hello"], "count": 0}
    versions = {"msgs": "1", "count": "1"}
    config = await api.call("put", config, ckpt(values, versions), {"source": "input", "step": -1, **HOSTILE_META}, versions)
    alpha.append(config)
    await api.call("put_writes", config, [("msgs", "w0"), ("count", 1)], "task-0", "~0")
    values, versions = {"msgs": ["hello", "w0"], "count": 1}, {"msgs": "2", "count": "2"}
    config = await api.call("put", config, ckpt(values, versions), {"source": "loop", "step": 0, "a": 2}, versions)
    alpha.append(config)
    values, versions = {"msgs": ["hello", "w0", "x"], "count": 1}, {"msgs": "3", "count": "2"}
    config = await api.call("put", config, ckpt(values, versions), {"source": "loop", "step": 1, "a": 1, "run_id": "r1"}, {"msgs": "3"})
    alpha.append(config)
    await api.call("put_writes", config, [("msgs", "w2")], "task-2", "~2")
    await api.call("put_writes", config, [("__interrupt__", {"q": "?"})], "task-3")
    sub = await api.call("put", cfg("alpha", "sub:1"), ckpt({"inner": 1}, {"inner": "1"}), {"source": "loop", "step": 0}, {"inner": "1"})
    beta = await api.call("put", cfg("beta"), ckpt({"msgs": ["b"]}, {"msgs": "1"}), {"source": "input", "step": -1, "a": 1}, {"msgs": "1"})
    return Seed(alpha, sub, beta)


async def assert_still_works(api: Api, seed: Seed) -> None:
    """The saver is usable after an error: the seeded data reads back whole."""
    latest = await api.call("get_tuple", cfg("alpha"))
    assert latest.config == seed.alpha[-1]
    assert latest.checkpoint["channel_values"] == {"msgs": ["hello", "w0", "x"], "count": 1}
    seeded_ids = {cid_of(c) for c in (*seed.alpha, seed.sub, seed.beta)}
    assert seeded_ids <= set(await api.ids(None))
    assert await api.ids(cfg("alpha")) == [cid_of(c) for c in reversed(seed.alpha)]


def cid_of(config: dict) -> str:
    return config["configurable"]["checkpoint_id"]


CANARY: list[str] = []


@dataclass
class Canary:
    """Not in any allowlist. Instantiating it is observable (it appends to ``CANARY``)."""

    note: str

    def __post_init__(self) -> None:
        CANARY.append(self.note)
