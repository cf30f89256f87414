"""Redis clients from a URL: the one place that opens them, for the saver, the Store and the Cache.

URL forms:

* ``redis://[user:password@]host:port/db`` — one server (``db`` defaults to 0);
* ``rediss://…`` — the same over TLS (redis-py's ``ssl_*`` options as query arguments or
  ``connection_args``, e.g. ``?ssl_cert_reqs=none`` or ``ssl_ca_certs=…``);
* ``redis+cluster://[user:password@]host:port[,host:port…]`` — a Redis Cluster, through any
  of the nodes listed (they are the startup nodes; the client discovers the rest); no
  database number other than 0 (a cluster has one database);
* ``rediss+cluster://…`` — a cluster over TLS.

Query arguments are redis-py's (``?socket_timeout=5&protocol=3``); user and password are
percent-decoded. ``connect``/``aconnect`` return redis-py's ``Redis`` or ``RedisCluster``
(sync or ``redis.asyncio``), with ``connection_args`` passed to the client's constructor
(they win over the URL's), after a PING at the door. Every failure there is a
``BackendError`` with one line naming the problem and the fix (``door_error``); ``at_door``
and ``aat_door`` give the same treatment to the errors of any block (a store's or saver's
commands), where a ``WRONGTYPE`` or ``OOM`` reply also becomes one line.

``setup_warnings(client)`` / ``asetup_warnings(client)`` read the server's eviction policy
and persistence settings and return one-line warnings (empty when ``CONFIG`` is disabled,
as on managed services). Nothing here sends ``KEYS`` or ``MODULE LIST``.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis import exceptions as rex
from redis.connection import SSLConnection, parse_url

from threadline.backends.registry import masked
from threadline.errors import BackendError

SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster")
CONNECT_TIMEOUT = 5.0  # seconds to open a connection, unless connection_args say otherwise

SyncClient = redis.Redis | redis.cluster.RedisCluster
AsyncClient = redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster


def is_cluster_url(url: str) -> bool:
    return url.split("://", 1)[0].lower().endswith("+cluster")


def _is_tls(url: str) -> bool:
    return url.split("://", 1)[0].lower().startswith("rediss")


def _masked(url: str) -> str:
    return masked(url)  # never print a password


PREFIX_PARAM = "prefix"  # ``?prefix=NAME``: the key prefix of threadline's classes, not a redis-py argument


def prefix_of(url: str) -> str | None:
    """The key prefix ``url`` names with ``?prefix=``, or None."""
    return dict(parse_qsl(urlsplit(url).query)).get(PREFIX_PARAM)


def prefix_for(url: str, given: str, default: str, role: str) -> str:
    """The key prefix of a Store or Cache opened on ``url``: ``given`` when it is not ``default``,
    else ``<the URL's ?prefix=>:<role>`` (so a saver, a store and a cache on one URL never share a
    key), else ``default``."""
    named = prefix_of(url)
    return given if given != default or not named else f"{named}:{role}"


def _client_url(url: str) -> str:
    """``url`` without threadline's own query arguments."""
    parts = urlsplit(url)
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != PREFIX_PARAM])
    return urlunsplit((*parts[:3], query, parts.fragment))


def describe(url: str) -> str:
    """How messages name the server at ``url``, password masked: ``Redis at redis://u:***@h:6379/0``
    or ``Redis Cluster at redis+cluster://h:7000,h:7001``."""
    return f"{'Redis Cluster' if is_cluster_url(url) else 'Redis'} at {_masked(url)}"


def _check_scheme(url: str) -> str:
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in SCHEMES:
        raise BackendError(
            f"{_masked(url)!r} is not a Redis URL: use redis://host:port/db, rediss://… (TLS), "
            "redis+cluster://host:port[,host:port…] or rediss+cluster://…"
        )
    return scheme


def _cluster_args(url: str) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    """The startup nodes of a cluster URL and the client keywords its user, password, TLS and
    query give (redis-py's own URL parser, run on the first node's single-server URL)."""
    scheme = _check_scheme(url)
    parts = urlsplit(url)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    nodes: list[tuple[str, int]] = []
    for hostport in hosts.split(","):
        host, _, port = hostport.strip().rpartition(":")
        if not host or not port.isdigit():
            raise BackendError(f"{describe(url)}: {hostport!r} is not host:port; write redis+cluster://host:port[,host:port…]")
        nodes.append((host.strip("[]"), int(port)))
    single = urlunsplit((scheme.removesuffix("+cluster"), (userinfo + "@" if userinfo else "") + hosts.split(",")[0], parts.path, parts.query, ""))
    kwargs = parse_url(single)
    if kwargs.pop("db", 0) != 0:
        raise BackendError(f"{describe(url)}: a cluster has only database 0; drop the /<db> from the URL")
    kwargs.pop("host", None)
    kwargs.pop("port", None)
    if kwargs.pop("connection_class", None) is SSLConnection:
        kwargs["ssl"] = True
    return nodes, kwargs


def _with_timeout(connection_args: dict[str, Any]) -> dict[str, Any]:
    return {"socket_connect_timeout": CONNECT_TIMEOUT, **connection_args}


def _tls_failure(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError) or "_ssl.c" in str(seen) or "[SSL" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def door_error(exc: BaseException, url: str | None = None) -> BackendError:
    """The one-line ``BackendError`` for a redis-py error, naming the problem and the fix."""
    where = describe(url) if url else "Redis"
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, BackendError):
        return exc
    if isinstance(exc, rex.AuthenticationError) or isinstance(exc, rex.AuthenticationWrongNumberOfArgsError):
        return BackendError(f"{where} refused the login ({text}); check the user and password in the URL (redis://user:password@host:port/0)")
    if isinstance(exc, rex.NoPermissionError):
        return BackendError(f"{where}: the user lacks a permission ({text}); grant it with ACL SETUSER or use another user")
    if isinstance(exc, rex.BusyLoadingError):
        return BackendError(f"{where} is loading its data set ({text}); retry when it has finished")
    if isinstance(exc, (rex.ConnectionError, rex.TimeoutError)):
        if url and _is_tls(url) and (isinstance(exc, rex.TimeoutError) or _tls_failure(exc)):
            return BackendError(
                f"TLS with {where} failed ({text}); check that the port serves TLS (use redis:// for a plain port) "
                "and the certificates (ssl_ca_certs=, ssl_cert_reqs=)"
            )
        return BackendError(
            f"cannot connect to {where} ({text}); check that the server is running, the host and port, "
            "and rediss:// if it serves TLS"
        )
    if isinstance(exc, rex.RedisClusterException) and "Cluster mode is not enabled" in text:
        return BackendError(f"{where} is not a Redis Cluster node ({text}); use redis:// (or rediss://) for a single server")
    if isinstance(exc, rex.RedisClusterException) and isinstance(exc.__cause__, (rex.ConnectionError, rex.TimeoutError)):
        return door_error(exc.__cause__, url)
    if isinstance(exc, (rex.TryAgainError, rex.AskError, rex.MovedError)) or text == "TTL exhausted.":
        return BackendError(
            f"{where}: the cluster is moving this thread's slot to another node ({text}); nothing was written: "
            "retry when the reshard has finished"
        )
    if isinstance(exc, (rex.ClusterDownError, rex.SlotNotCoveredError)):
        return BackendError(f"{where}: the cluster is down or does not cover every slot ({text}); check CLUSTER INFO on its nodes")
    if isinstance(exc, rex.ReadOnlyError):
        return BackendError(f"{where} is a read-only replica ({text}); connect to the primary")
    if isinstance(exc, rex.OutOfMemoryError) or text.startswith("OOM"):
        return BackendError(f"{where} is out of memory ({text}); nothing was written: raise maxmemory or free memory")
    if text.startswith("WRONGTYPE"):
        return BackendError(
            f"{where}: a key under threadline's prefix holds another kind of value ({text}); something else writes "
            "there: give threadline a prefix of its own, or delete the stray key"
        )
    if text == "DB index is out of range":
        return BackendError(f"{where}: no such database number ({text}); use a database the server has (redis://host:port/0)")
    return BackendError(f"{where}: {text}")


ERRORS = (rex.RedisError, rex.RedisClusterException)


@contextmanager
def at_door(url: str | None = None) -> Iterator[None]:
    """redis-py errors in the block raised as ``door_error``'s one line."""
    try:
        yield
    except ERRORS as exc:
        raise door_error(exc, url) from exc


@asynccontextmanager
async def aat_door(url: str | None = None) -> AsyncIterator[None]:
    """``at_door`` for blocks that await."""
    try:
        yield
    except ERRORS as exc:
        raise door_error(exc, url) from exc


def _not_a_cluster_url(info: dict[str, Any], url: str | None) -> BackendError | None:
    if int(info.get("cluster_enabled") or 0):
        return BackendError(f"{describe(url) if url else 'this Redis server'} is a Redis Cluster node; use redis+cluster://host:port[,host:port…] (rediss+cluster:// for TLS)")
    return None


def connect(url: str, **connection_args: Any) -> SyncClient:
    """A sync redis-py client for ``url`` (see the module docstring for the forms), checked
    with PING. ``connection_args`` go to ``Redis`` / ``RedisCluster`` (``socket_connect_timeout``
    defaults to 5 s). Raises BackendError: unknown URL, server down or unreachable, login
    refused, TLS failure, a cluster URL naming a single server or a plain URL naming a
    cluster node.

    A plain server's client holds one connection (``single_connection_client``, under
    redis-py's lock) unless ``connection_args`` say otherwise: a pool's checkout and checks
    cost ~30 µs a command, more than a short put's script; pipelines still use the pool."""
    args = _with_timeout(connection_args)
    client: SyncClient | None = None
    shown, url = url, _client_url(url)
    try:
        if is_cluster_url(url):
            nodes, kwargs = _cluster_args(url)
            client = redis.cluster.RedisCluster(startup_nodes=[redis.cluster.ClusterNode(h, p) for h, p in nodes], **{**kwargs, **args})
            client.ping()
            return client
        _check_scheme(url)
        client = redis.Redis.from_url(url, **{"single_connection_client": True, **args})
        client.ping()
        mismatch = _not_a_cluster_url(_cluster_info(client), url)
        if mismatch is not None:
            raise mismatch
        return client
    except (*ERRORS, BackendError) as exc:
        if client is not None:
            client.close()
        raise door_error(exc, shown) from exc


def async_client(url: str, **connection_args: Any) -> AsyncClient:
    """A ``redis.asyncio`` client for ``url``, not yet connected (no I/O: for constructors that
    cannot await); ``acheck`` it before use. BackendError for a malformed URL."""
    args = _with_timeout(connection_args)
    url = _client_url(url)
    if is_cluster_url(url):
        nodes, kwargs = _cluster_args(url)
        Node = redis.asyncio.cluster.ClusterNode
        return redis.asyncio.cluster.RedisCluster(startup_nodes=[Node(h, p) for h, p in nodes], **{**kwargs, **args})
    _check_scheme(url)
    return redis.asyncio.Redis.from_url(url, **args)


async def acheck(client: AsyncClient, url: str | None = None) -> None:
    """PING ``client`` (discovering a cluster's nodes first) and check that ``url``'s form (plain
    or cluster) matches the server; raises ``connect``'s BackendErrors."""
    try:
        if isinstance(client, redis.asyncio.cluster.RedisCluster):
            await client.initialize()
            await client.ping()
            return
        await client.ping()
        mismatch = _not_a_cluster_url(await _acluster_info(client), url)
        if mismatch is not None:
            raise mismatch
    except ERRORS as exc:
        raise door_error(exc, url) from exc


async def aconnect(url: str, **connection_args: Any) -> AsyncClient:
    """``connect`` with ``redis.asyncio`` clients (``Redis`` or ``RedisCluster``)."""
    client = async_client(url, **connection_args)
    try:
        await acheck(client, url)
    except BackendError:
        await client.aclose()
        raise
    return client


def _cluster_info(client: redis.Redis) -> dict[str, Any]:
    try:
        return client.info("cluster")
    except rex.ResponseError:  # INFO renamed or refused (some managed services): nothing to check
        return {}


async def _acluster_info(client: redis.asyncio.Redis) -> dict[str, Any]:
    try:
        return await client.info("cluster")
    except rex.ResponseError:
        return {}


# --- safety checks -------------------------------------------------------------------

CONFIG_KEYS = ("maxmemory-policy", "appendonly", "save")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def warnings_for(settings: dict[str, str], where: str) -> list[str]:
    """One-line warnings for a server's ``CONFIG GET`` values (keys of ``CONFIG_KEYS``)."""
    out = []
    policy = settings.get("maxmemory-policy", "")
    if policy.startswith("allkeys-"):
        out.append(
            f"{where}: maxmemory-policy is {policy}, so under memory pressure Redis evicts keys that have no TTL "
            "(checkpoints, store items); set maxmemory-policy noeviction (or volatile-*)"
        )
    if settings.get("appendonly") == "no" and settings.get("save", "x").strip() == "":
        out.append(f"{where}: persistence is off (appendonly no, no save points), so a restart loses every key; set appendonly yes")
    return out


def _settings(reply: dict[Any, Any]) -> dict[str, str]:
    return {_text(k): _text(v) for k, v in reply.items()}


def _node_name(node: Any, url: str | None) -> str:
    return f"{describe(url) if url else 'Redis Cluster'} node {node.host}:{node.port}"


def setup_warnings(client: SyncClient, url: str | None = None) -> list[str]:
    """One-line warnings about ``client``'s server(s): a ``maxmemory-policy`` of ``allkeys-*``
    (evicts keys without a TTL) or persistence off (``appendonly no`` and no ``save``
    points); on a cluster, per master. Empty when all is well or when ``CONFIG`` is
    disabled or refused (managed services). ``url`` names the server in the messages."""
    out: list[str] = []
    try:
        if isinstance(client, redis.cluster.RedisCluster):
            for node in client.get_primaries():
                settings = {}
                for key in CONFIG_KEYS:
                    settings.update(_settings(client.config_get(key, target_nodes=node)))
                out += warnings_for(settings, _node_name(node, url))
        else:
            settings = {}
            for key in CONFIG_KEYS:
                settings.update(_settings(client.config_get(key)))
            out += warnings_for(settings, describe(url) if url else "Redis")
    except rex.ResponseError:  # CONFIG disabled, renamed or not permitted: nothing to say
        return []
    return out


async def asetup_warnings(client: AsyncClient, url: str | None = None) -> list[str]:
    """``setup_warnings`` for a ``redis.asyncio`` client."""
    out: list[str] = []
    try:
        if isinstance(client, redis.asyncio.cluster.RedisCluster):
            for node in client.get_primaries():
                settings = {}
                for key in CONFIG_KEYS:
                    settings.update(_settings(await client.config_get(key, target_nodes=node)))
                out += warnings_for(settings, _node_name(node, url))
        else:
            settings = {}
            for key in CONFIG_KEYS:
                settings.update(_settings(await client.config_get(key)))
            out += warnings_for(settings, describe(url) if url else "Redis")
    except rex.ResponseError:
        return []
    return out
