"""``threadline.backends.redisconn``: clients from every URL form, the door's one-line errors, the
safety warnings — on the plain test server, the session's local cluster and private servers
started here (a password, an eviction policy, CONFIG disabled)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis_support import RedisTarget, Tls, free_ports, private_server, skip_or_fail, start_cluster

from threadline.backends import redisconn
from threadline.errors import BackendError


def _plain(port: int, password: str | None = None) -> str:
    return f"redis://{':' + password + '@' if password else ''}127.0.0.1:{port}/0"


@pytest.fixture(scope="module")
def locked_server(tmp_path_factory: pytest.TempPathFactory):
    """A private server with a password and an eviction policy that can drop keys without TTL."""
    with private_server(tmp_path_factory.mktemp("locked"), "--maxmemory-policy", "allkeys-lru", password="s3cret") as port:
        yield port


def test_connect_plain_pings_and_roundtrips(redis_target: RedisTarget) -> None:
    client = redisconn.connect(redis_target.url)
    try:
        assert isinstance(client, redis.Redis)
        client.set(f"{redis_target.prefix}:k", b"v")
        assert client.get(f"{redis_target.prefix}:k") == b"v"
    finally:
        client.close()


def test_connect_cluster_spreads_keys_over_masters(redis_cluster_target: RedisTarget) -> None:
    client = redisconn.connect(redis_cluster_target.url)
    try:
        assert isinstance(client, redis.cluster.RedisCluster)
        keys = [f"{redis_cluster_target.prefix}:{i}" for i in range(30)]
        for k in keys:
            client.set(k, k.encode())
        assert [client.get(k) for k in keys] == [k.encode() for k in keys]
        slots_by_node = {client.get_node_from_key(k).name for k in keys}
        assert len(slots_by_node) == 3  # the cluster really has three masters serving these keys
    finally:
        client.close()


async def test_aconnect_plain_and_cluster(any_redis_target: RedisTarget) -> None:
    client = await redisconn.aconnect(any_redis_target.url)
    try:
        expected = redis.asyncio.cluster.RedisCluster if any_redis_target.is_cluster else redis.asyncio.Redis
        assert isinstance(client, expected)
        await client.set(f"{any_redis_target.prefix}:k", b"v")
        assert await client.get(f"{any_redis_target.prefix}:k") == b"v"
    finally:
        await client.aclose()


def test_connection_args_reach_the_client(any_redis_target: RedisTarget) -> None:
    client = redisconn.connect(any_redis_target.url, decode_responses=True)
    try:
        client.set(f"{any_redis_target.prefix}:k", "v")
        assert client.get(f"{any_redis_target.prefix}:k") == "v"
    finally:
        client.close()


def test_describe_masks_the_password() -> None:
    # the user part as a whole, as every backend's URLs are masked (``registry.masked``)
    assert redisconn.describe("redis://bob:s3cret@db.example:6380/2") == "Redis at redis://***@db.example:6380/2"
    assert redisconn.describe("rediss://:s3cret@db.example:6380/0?password=x") == "Redis at rediss://***@db.example:6380/0?password=***"
    assert redisconn.describe("redis+cluster://u:pw@h1:7000,h2:7001") == "Redis Cluster at redis+cluster://***@h1:7000,h2:7001"
    assert redisconn.describe("redis://h:6379/0") == "Redis at redis://h:6379/0"


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379", "127.0.0.1:6379", "redis+sentinel://h:1"])
def test_not_a_redis_url(url: str) -> None:
    with pytest.raises(BackendError, match="is not a Redis URL: use redis://host:port/db"):
        redisconn.connect(url)


def test_cluster_url_with_a_database_number(redis_cluster_target: RedisTarget) -> None:
    with pytest.raises(BackendError, match=r"a cluster has only database 0; drop the /<db>"):
        redisconn.connect(redis_cluster_target.url + "/3")


def test_cluster_url_bad_node() -> None:
    with pytest.raises(BackendError, match=r"'h1' is not host:port"):
        redisconn.connect("redis+cluster://h1,h2:7000")


@pytest.mark.parametrize("scheme", ["redis", "redis+cluster"])
async def test_server_down(scheme: str) -> None:
    url = f"{scheme}://127.0.0.1:{free_ports(1)[0]}" + ("/0" if scheme == "redis" else "")
    with pytest.raises(BackendError, match=r"^cannot connect to Redis.* at .*Connection refused.*check that the server is running") as e:
        redisconn.connect(url)
    assert "\n" not in str(e.value)
    with pytest.raises(BackendError, match=r"^cannot connect to Redis"):
        await redisconn.aconnect(url)


async def test_wrong_password(locked_server: int) -> None:
    for url in (_plain(locked_server, "wrong"), _plain(locked_server)):
        with pytest.raises(BackendError, match=r"refused the login .*check the user and password in the URL") as e:
            redisconn.connect(url)
        assert "wrong" not in str(e.value)  # the password is masked
        with pytest.raises(BackendError, match=r"refused the login"):
            await redisconn.aconnect(url)
    client = redisconn.connect(_plain(locked_server, "s3cret"))
    assert client.ping()
    client.close()


async def test_tls_to_a_plain_port(redis_target: RedisTarget) -> None:
    url = redis_target.url.replace("redis://", "rediss://", 1)
    with pytest.raises(BackendError, match=r"^TLS with Redis at rediss://.* failed .*check that the port serves TLS"):
        redisconn.connect(url, socket_connect_timeout=0.5)
    with pytest.raises(BackendError, match=r"^TLS with Redis at rediss://"):
        await redisconn.aconnect(url, socket_connect_timeout=0.5)


async def test_cluster_url_on_a_single_server(redis_target: RedisTarget) -> None:
    url = "redis+cluster://" + redis_target.url.split("://", 1)[1].split("/", 1)[0]
    with pytest.raises(BackendError, match=r"is not a Redis Cluster node .*use redis:// \(or rediss://\) for a single server"):
        redisconn.connect(url)
    with pytest.raises(BackendError, match=r"is not a Redis Cluster node"):
        await redisconn.aconnect(url)


async def test_plain_url_on_a_cluster_node(redis_cluster_target: RedisTarget) -> None:
    first = redis_cluster_target.url.split("://", 1)[1].split(",")[0]
    with pytest.raises(BackendError, match=r"is a Redis Cluster node; use redis\+cluster://host:port"):
        redisconn.connect(f"redis://{first}/0")
    with pytest.raises(BackendError, match=r"is a Redis Cluster node"):
        await redisconn.aconnect(f"redis://{first}/0")


def test_no_such_database(redis_target: RedisTarget) -> None:
    with pytest.raises(BackendError, match="no such database number"):
        redisconn.connect(redis_target.url.rsplit("/", 1)[0] + "/999")


def test_wrongtype_reply(redis_target: RedisTarget) -> None:
    client = redisconn.connect(redis_target.url)
    key = f"{redis_target.prefix}:list"
    client.rpush(key, b"x")
    with pytest.raises(BackendError, match=r"a key under threadline's prefix holds another kind of value .*WRONGTYPE"):
        with redisconn.at_door(redis_target.url):
            client.get(key)
    client.close()


def test_oom_reply(tmp_path: Path) -> None:
    with private_server(tmp_path, "--maxmemory", "1mb", "--maxmemory-policy", "noeviction") as port:
        client = redisconn.connect(_plain(port))
        with pytest.raises(BackendError, match=r"is out of memory .*nothing was written: raise maxmemory"):
            with redisconn.at_door(_plain(port)):
                for i in range(100):
                    client.set(f"k{i}", b"x" * 100_000)
        client.close()


async def test_warnings_eviction_and_persistence(locked_server: int) -> None:
    url = _plain(locked_server, "s3cret")
    client = redisconn.connect(url)
    try:
        found = redisconn.setup_warnings(client, url)
        assert len(found) == 2
        assert "maxmemory-policy is allkeys-lru" in found[0] and "set maxmemory-policy noeviction" in found[0]
        assert "persistence is off" in found[1] and "s3cret" not in " ".join(found)
        aclient = await redisconn.aconnect(url)
        assert await redisconn.asetup_warnings(aclient, url) == found
        await aclient.aclose()
        client.config_set("maxmemory-policy", "volatile-lru")
        client.config_set("appendonly", "yes")
        assert redisconn.setup_warnings(client, url) == []
        client.config_set("appendonly", "no")
        client.config_set("save", "3600 1")  # snapshots alone count as persistence
        assert redisconn.setup_warnings(client, url) == []
    finally:
        client.config_set("maxmemory-policy", "allkeys-lru")
        client.config_set("save", "")
        client.close()


def test_warnings_when_config_is_disabled(tmp_path: Path) -> None:
    with private_server(tmp_path, "--rename-command", "CONFIG", "", "--maxmemory-policy", "allkeys-lru") as port:
        client = redisconn.connect(_plain(port))
        assert redisconn.setup_warnings(client) == []
        client.close()


async def test_warnings_per_cluster_master(redis_cluster_target: RedisTarget) -> None:
    url = redis_cluster_target.url
    client = redisconn.connect(url)
    found = redisconn.setup_warnings(client, url)
    client.close()
    assert len(found) == 3 and all("persistence is off" in w for w in found)  # the test cluster saves nothing
    ports = {p.rsplit(":", 1)[1] for p in url.split("://")[1].split(",")}
    assert {w.split(" node 127.0.0.1:")[1].split(":")[0] for w in found} == ports
    aclient = await redisconn.aconnect(url)
    assert sorted(await redisconn.asetup_warnings(aclient, url)) == sorted(found)
    await aclient.aclose()


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return Tls.make(tmp_path_factory.mktemp("tls"))


async def test_tls_server(tls: Tls, tmp_path: Path) -> None:
    with private_server(tmp_path, tls=tls) as port:
        url = f"rediss://127.0.0.1:{port}/0"
        client = redisconn.connect(f"{url}?ssl_ca_certs={tls.cert}")
        assert client.ping()
        client.close()
        aclient = await redisconn.aconnect(url, ssl_ca_certs=str(tls.cert))
        assert await aclient.ping()
        await aclient.aclose()
        with pytest.raises(BackendError, match=r"^TLS with Redis at rediss://.*certificate verify failed.*check .*the certificates"):
            redisconn.connect(url)
        with pytest.raises(BackendError, match=r"^cannot connect to Redis at redis://.*and rediss:// if it serves TLS"):
            redisconn.connect(f"redis://127.0.0.1:{port}/0", socket_timeout=2)


async def test_tls_cluster(tls: Tls, tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, tls)
    if isinstance(cluster, str):
        skip_or_fail(cluster)
    try:
        url = f"{cluster.url}?ssl_ca_certs={tls.cert}"
        assert url.startswith("rediss+cluster://")
        client = redisconn.connect(url)
        assert isinstance(client, redis.cluster.RedisCluster)
        for n in range(10):
            client.set(f"k{n}", b"v")
        assert len({client.get_node_from_key(f"k{n}").name for n in range(10)}) > 1
        client.close()
        aclient = await redisconn.aconnect(url)
        assert await aclient.get("k1") == b"v"
        await aclient.aclose()
        with pytest.raises(BackendError, match=r"^cannot connect to Redis Cluster at redis\+cluster://"):
            redisconn.connect(cluster.url.replace("rediss+", "redis+", 1), socket_timeout=2)
    finally:
        cluster.stop()
