"""``threadline.cache.RedisCache`` on the plain test Redis and the local cluster: get/set/clear with
TTLs, a real graph whose cached node is skipped in a second process (with the Redis store beside
it), corrupt entries, Redis down, and that it is LangGraph's ``RedisCache``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from redis_support import RedisTarget, free_ports

from threadline.cache import RedisCache
from threadline.errors import BackendError, CorruptRowError


@pytest.fixture
def cache(any_redis_target: RedisTarget):
    with RedisCache.from_conn_string(any_redis_target.url, prefix=any_redis_target.prefix + ":") as c:
        yield c


async def test_get_set_clear_with_ttl(cache: RedisCache, any_redis_target: RedisTarget) -> None:
    a, b, c = (("node", "a"), "k1"), (("node", "b"), "k2"), (("other:x",), "k3")
    collide = (("other", "x"), "k3")  # LangGraph's key joins labels with ':'; these stay apart
    cache.set({a: ({"x": [1, 2]}, None), b: ("text", 1), c: (b"\x00bytes", 30), collide: ("apart", None)})
    assert cache.get([a, b, c, collide, (("node", "a"), "missing")]) == {a: {"x": [1, 2]}, b: "text", c: b"\x00bytes", collide: "apart"}
    time.sleep(1.2)
    assert await cache.aget([a, b, c]) == {a: {"x": [1, 2]}, c: b"\x00bytes"}
    await cache.aset({b: ("again", None)})
    cache.clear([("node", "a")])
    assert cache.get([a, b, c]) == {b: "again", c: b"\x00bytes"}
    await cache.aclear()
    assert cache.get([a, b, c, collide]) == {}
    assert any_redis_target.keys() == []  # clear leaves no index behind
    cache.set({a: ("gone", 0)})
    assert cache.get([a]) == {}


def test_large_values_are_compressed_and_round_trip(cache: RedisCache) -> None:
    value = {"rows": ["same text"] * 5000}
    cache.set({(("n",), "big"): (value, None)})
    assert cache.get([(("n",), "big")]) == {(("n",), "big"): value}
    raw = cache.redis.get(cache._make_key(("n",), "big"))
    assert b"+zstd" in raw.split(b":", 1)[0] and len(raw) < 2000


def test_corrupt_or_pickled_entries_raise(redis_target: RedisTarget) -> None:
    with RedisCache.from_conn_string(redis_target.url, prefix=redis_target.prefix) as cache:
        key = cache._make_key(("n",), "k")
        cache.redis.set(key, b"pickle:\x80\x04K\x01.")
        with pytest.raises(CorruptRowError, match="refusing"):
            cache.get([(("n",), "k")])
        cache.redis.set(key, b"no separator")
        with pytest.raises(CorruptRowError, match=r"Redis cache key .*: not an entry this cache wrote"):
            cache.get([(("n",), "k")])


def test_redis_down_raises_instead_of_missing() -> None:
    with pytest.raises(BackendError, match="^cannot connect to Redis"):
        with RedisCache.from_conn_string(f"redis://127.0.0.1:{free_ports(1)[0]}/0"):
            pass


def test_is_langgraphs_redis_cache_with_its_constructor(redis_target: RedisTarget) -> None:
    from langgraph.cache.redis import RedisCache as LangGraphRedisCache

    cache = RedisCache(redis_target.client(), prefix=redis_target.prefix)
    assert isinstance(cache, LangGraphRedisCache)
    cache.set({(("a",), "k"): ({"v": 1}, None)})
    assert cache.get([(("a",), "k")]) == {(("a",), "k"): {"v": 1}}
    with pytest.raises(ValueError, match="without braces"):
        RedisCache(redis_target.client(), prefix="{x}")


GRAPH = textwrap.dedent(
    """
    import json, sys
    from typing import TypedDict
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph
    from langgraph.types import CachePolicy
    from threadline.cache import RedisCache
    from threadline.store import RedisStore

    url, prefix, counter = sys.argv[1], sys.argv[2], sys.argv[3]

    class State(TypedDict):
        x: int
        y: int

    def expensive(state: State, *, store) -> dict:
        with open(counter, "a") as f:
            f.write("ran\\n")
        store.put(("results",), str(state["x"]), {"y": state["x"] * 10})
        return {"y": state["x"] * 10}

    builder = StateGraph(State)
    builder.add_node("expensive", expensive, cache_policy=CachePolicy(ttl=60))
    builder.add_edge(START, "expensive")
    with RedisStore.from_conn_string(url, store_prefix=prefix) as store, RedisCache.from_conn_string(url, prefix=prefix + ":cache:") as cache:
        graph = builder.compile(checkpointer=InMemorySaver(), store=store, cache=cache)
        chunks = list(graph.stream({"x": 4}, {"configurable": {"thread_id": "t"}}, stream_mode="updates"))
        print(json.dumps({"chunks": chunks, "stored": store.get(("results",), "4").value}))
    """
)


def test_cached_node_is_skipped_in_a_second_process(any_redis_target: RedisTarget, tmp_path: Path) -> None:
    counter = tmp_path / "runs.txt"
    outputs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", GRAPH, any_redis_target.url, any_redis_target.prefix, str(counter)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(json.loads(proc.stdout))
    assert counter.read_text() == "ran\n"  # the node ran once
    assert outputs[0]["chunks"] == [{"expensive": {"y": 40}}]
    assert outputs[1]["chunks"] == [{"expensive": {"y": 40}, "__metadata__": {"cached": True}}]
    assert outputs[0]["stored"] == outputs[1]["stored"] == {"y": 40}
