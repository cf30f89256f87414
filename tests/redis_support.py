"""Redis for the tests: the plain server, a per-test key prefix, and a local Redis Cluster.

* **Plain Redis**: the URL comes from ``THREADLINE_TEST_REDIS`` (default
  ``redis://127.0.0.1:6379/0``). Tests that need it are skipped when the server does not
  answer PING, unless ``CI=true``, where that is a failure (as for Postgres in
  ``tests/backends.py``).
* **A key prefix per test**: ``tltest:<pid>:<random>``. Every key a test writes goes under
  it (the savers', stores' and caches' ``prefix`` keywords); ``RedisTarget.cleanup()``
  deletes the prefix's keys with ``SCAN MATCH`` after the test (test code only: threadline
  itself never scans for its own keys).
* **A Redis Cluster of 3 masters** on free loopback ports, started once per session by
  ``LocalCluster.start`` (``redis-server --cluster-enabled yes`` ×3, then ``redis-cli
  --cluster create … --cluster-replicas 0``), waited on until every node reports
  ``cluster_state:ok``, shut down at session end. Its URL is
  ``redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3``. Skipped (failed under CI=true)
  when ``redis-server``/``redis-cli`` are missing or the cluster does not form.

The fixtures in ``conftest`` are built on these: ``redis_url``, ``redis_target`` (plain),
``redis_cluster_target`` (cluster), ``any_redis_target`` (both, parametrized).
"""

from __future__ import annotations

import os
import random
import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest

from backends import in_ci

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
CLUSTER_SCHEME = "redis+cluster://"


def redis_url() -> str:
    """The plain Redis server of the tests (``THREADLINE_TEST_REDIS``)."""
    return os.environ.get("THREADLINE_TEST_REDIS") or DEFAULT_REDIS_URL


def skip_or_fail(reason: str) -> NoReturn:
    if in_ci():
        pytest.fail(f"CI=true and Redis tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


# --- plain Redis availability (checked once per session) ------------------------

_lock = threading.Lock()
_state: dict[str, Any] = {}


def redis_unavailable() -> str | None:
    """None when the plain Redis server answers PING; otherwise why not."""
    with _lock:
        if "reason" not in _state:
            _state["reason"] = _probe(redis_url())
        return _state["reason"]


def _probe(url: str) -> str | None:
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        return f"Redis at {url} unreachable ({type(exc).__name__}: {exc})"
    return None


def require_redis() -> None:
    """Skip (or, with CI=true, fail) the running test when the plain Redis cannot be used."""
    reason = redis_unavailable()
    if reason is not None:
        skip_or_fail(reason)


def fresh_prefix() -> str:
    """A key prefix no other test (or test session) uses: ``tltest:<pid>:<random>``."""
    return f"tltest:{os.getpid()}:{secrets.token_hex(4)}"


# --- a test's keys --------------------------------------------------------------


@dataclass
class RedisTarget:
    """A Redis server (plain or cluster) and the key prefix one test owns on it.

    ``url`` is what threadline's classes take (``redis://…`` or ``redis+cluster://…``);
    ``prefix`` goes to their ``prefix`` keywords. ``client()`` is a raw redis-py client
    for looking behind threadline's back; ``keys()`` lists the prefix's keys (SCAN);
    ``cleanup()`` deletes them.
    """

    kind: str  # "redis" | "cluster"
    url: str
    prefix: str
    _clients: list[Any] = field(default_factory=list, repr=False)

    @property
    def is_cluster(self) -> bool:
        return self.kind == "cluster"

    def client(self) -> Any:
        """A raw sync client (``decode_responses=False``), closed at cleanup."""
        import redis
        from redis.cluster import RedisCluster

        if self.is_cluster:
            first = self.url[len(CLUSTER_SCHEME) :].split(",")[0]
            host, port = first.rsplit(":", 1)
            c: Any = RedisCluster(host=host, port=int(port))
        else:
            c = redis.Redis.from_url(self.url)
        self._clients.append(c)
        return c

    def keys(self) -> list[bytes]:
        """Every key holding the prefix, sorted: ``<prefix>…`` or in a hash tag, ``{<prefix>…}…``
        (SCAN MATCH, on every master of a cluster)."""
        c = self.client()
        pattern = "*" + self.prefix.replace("*", r"\*").replace("?", r"\?").replace("[", r"\[") + "*"
        if self.is_cluster:
            found = c.scan_iter(match=pattern, count=1000, target_nodes=c.PRIMARIES)
        else:
            found = c.scan_iter(match=pattern, count=1000)
        return sorted(set(found))

    def cleanup(self) -> None:
        try:
            keys = self.keys()
            c = self.client()
            for key in keys:  # one key per command: no CROSSSLOT on a cluster
                c.delete(key)
        finally:
            for c in self._clients:
                c.close()
            self._clients.clear()


def plain_target(request: pytest.FixtureRequest) -> RedisTarget:
    """A fresh prefix on the plain Redis, its keys deleted when the test ends; skips (fails
    under CI=true) without a server."""
    require_redis()
    target = RedisTarget("redis", redis_url(), fresh_prefix())
    request.addfinalizer(target.cleanup)
    return target


# --- the local cluster ------------------------------------------------------------


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def free_ports(n: int) -> list[int]:
    """``n`` loopback ports that are free, each with its cluster bus port (port + 10000) free too."""
    rng = random.Random()
    ports: list[int] = []
    while len(ports) < n:
        p = rng.randrange(21000, 29000)
        if p not in ports and _port_free(p) and _port_free(p + 10000):
            ports.append(p)
    return ports


@dataclass(frozen=True)
class Tls:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key, as PEM files."""

    cert: Path
    key: Path

    @classmethod
    def make(cls, directory: Path) -> Tls:
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        tls = cls(directory / "tls-cert.pem", directory / "tls-key.pem")
        tls.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        tls.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        return tls

    def server_args(self, port: int) -> tuple[str, ...]:
        """``redis-server`` arguments serving TLS (only) on ``port``; clients need no certificate."""
        return ("--port", "0", "--tls-port", str(port), "--tls-cert-file", str(self.cert), "--tls-key-file", str(self.key),
                "--tls-ca-cert-file", str(self.cert), "--tls-auth-clients", "no")

    @property
    def cli_args(self) -> tuple[str, ...]:
        return ("--tls", "--cacert", str(self.cert))


def start_server(directory: Path, port: int, *extra: str) -> None:
    """Start ``redis-server`` on loopback ``port`` (daemonized, no persistence, files in
    ``directory``) with ``extra`` arguments, and wait until it listens (RuntimeError naming
    its log if it does not). ``stop_server(port)`` shuts it down."""
    subprocess.run(
        [
            "redis-server",
            "--port", str(port),
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "yes",
            "--dir", str(directory),
            "--bind", "127.0.0.1",
            "--pidfile", str(directory / f"redis-{port}.pid"),
            "--logfile", str(directory / f"redis-{port}.log"),
            *extra,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    deadline = time.monotonic() + 10
    while not _listening(port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"redis-server on port {port} did not start; see {directory}/redis-{port}.log")
        time.sleep(0.05)


def stop_server(port: int, password: str | None = None, tls: Tls | None = None) -> None:
    """Shut down the server on ``port`` without saving; a server already gone is fine."""
    auth = ["-a", password, "--no-auth-warning"] if password else []
    subprocess.run(["redis-cli", "-p", str(port), *(tls.cli_args if tls else ()), *auth, "shutdown", "nosave"], capture_output=True, timeout=10)


@contextmanager
def private_server(directory: Path, *extra: str, password: str | None = None, tls: Tls | None = None) -> Iterator[int]:
    """A ``redis-server`` of the test's own (``extra`` arguments; ``--requirepass`` when
    ``password``; TLS only, with ``tls``'s certificate) on a free loopback port, yielded,
    shut down on exit. Skips (fails under CI=true) without ``redis-server``."""
    reason = cluster_tools_missing()
    if reason is not None:
        skip_or_fail(reason)
    port = free_ports(1)[0]
    start_server(directory, port, *extra, *(("--requirepass", password) if password else ()), *(tls.server_args(port) if tls else ()))
    try:
        yield port
    finally:
        stop_server(port, password, tls)


class LocalCluster:
    """Three ``redis-server --cluster-enabled yes`` masters on loopback, joined into a cluster."""

    def __init__(self, directory: Path, tls: Tls | None = None) -> None:
        self.dir = directory
        self.tls = tls  # TLS only, on the nodes' ports and the cluster bus
        self.ports: list[int] = []
        self._cli = tls.cli_args if tls else ()

    @property
    def url(self) -> str:
        return ("rediss+cluster://" if self.tls else CLUSTER_SCHEME) + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def start(self, attempts: int = 3) -> None:
        """Start the nodes and create the cluster; raises RuntimeError naming the failure."""
        last = ""
        for _ in range(attempts):  # a port taken between the probe and the bind: try others
            self.ports = free_ports(3)
            try:
                for p in self.ports:
                    self._server(p)
                self._create()
                self._wait_ok()
                return
            except (RuntimeError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
                last = getattr(exc, "stderr", None) or getattr(exc, "stdout", None) or str(exc)
                self.stop()
        raise RuntimeError(f"could not start a local Redis Cluster: {last!r}")

    def _server(self, port: int) -> None:
        tls = (*self.tls.server_args(port), "--tls-cluster", "yes") if self.tls else ()
        start_server(
            self.dir, port, "--cluster-enabled", "yes", "--cluster-config-file", str(self.dir / f"nodes-{port}.conf"), *tls
        )

    def _create(self) -> None:
        subprocess.run(
            ["redis-cli", *self._cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports), "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def _wait_ok(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        for p in self.ports:
            while "cluster_state:ok" not in subprocess.run(["redis-cli", "-p", str(p), *self._cli, "cluster", "info"], capture_output=True, text=True).stdout:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"node {p} did not reach cluster_state:ok within {timeout}s")
                time.sleep(0.1)

    def stop(self) -> None:
        """Shut every node down (no save); a node already gone is fine."""
        for p in self.ports:
            stop_server(p, tls=self.tls)


def cluster_tools_missing() -> str | None:
    missing = [tool for tool in ("redis-server", "redis-cli") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not on PATH (apt-get install redis-server)" if missing else None


def start_cluster(directory: Path, tls: Tls | None = None) -> LocalCluster | str:
    """A running ``LocalCluster`` in ``directory`` (over TLS with ``tls``), or the reason there is none."""
    reason = cluster_tools_missing()
    if reason is not None:
        return reason
    cluster = LocalCluster(directory, tls)
    try:
        cluster.start()
    except (OSError, RuntimeError) as exc:
        return str(exc)
    return cluster


def cluster_target(cluster: LocalCluster | str, request: pytest.FixtureRequest) -> RedisTarget:
    """A fresh prefix on the session's cluster, cleaned up after the test; skips (fails under
    CI=true) when there is no cluster."""
    if isinstance(cluster, str):
        skip_or_fail(cluster)
    target = RedisTarget("cluster", cluster.url, fresh_prefix())
    request.addfinalizer(target.cleanup)
    return target
