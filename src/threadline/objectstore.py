"""Object stores for offloaded values (docs/offload.md): a local directory or an S3-compatible
bucket, through ``obstore`` (``pip install 'threadline[offload]'``), and ``Offload``, a saver's
offload settings.

Store URLs:

* ``file:///abs/dir`` (or a plain absolute path): a local directory, created when missing;
* ``s3://bucket/prefix?endpoint=http://host:port&region=…&allow_http=true``: an S3-compatible
  bucket; credentials from the environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
  ``AWS_SESSION_TOKEN``), region from ``region=`` or ``AWS_REGION`` (default ``us-east-1``).

An ``Offload`` URL is a store URL whose query may also hold ``min_bytes``, ``warn_bytes`` and
``grace_seconds`` (``Offload.from_url``); ``THREADLINE_OFFLOAD`` in the environment gives one to
``open_saver`` and the CLI (``Offload.from_env``).
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from threadline.errors import BackendError, ConfigError
from threadline.extras import require

ENV = "THREADLINE_OFFLOAD"
MIN_BYTES = 256 << 10  # values whose stored bytes exceed this go to the object store
GRACE_SECONDS = 3600.0  # an unreferenced object younger than this is kept (a put may not have committed yet)


class ObjectStore:
    """A flat namespace of immutable objects named by ``/``-separated keys.

    ``put(name, data)``, ``get(name)`` (bytes, or None when missing), ``size(name)`` (its bytes,
    or None when missing), ``delete(name)`` (a missing object is no error) and ``list()``
    (``(name, modified seconds since the epoch, size in bytes)`` of every object). BackendError
    names the store when it cannot be reached or refuses."""

    def __init__(self, store: Any, url: str) -> None:
        self._store = store
        self.url = url

    def _fail(self, what: str, exc: Exception) -> BackendError:
        return BackendError(f"object store {self.url}: cannot {what} ({type(exc).__name__}: {exc})")

    def put(self, name: str, data: bytes) -> None:
        import obstore

        try:
            obstore.put(self._store, name, data)
        except Exception as exc:
            raise self._fail(f"write {name!r}", exc) from exc

    def get(self, name: str) -> bytes | None:
        import obstore

        try:
            return bytes(obstore.get(self._store, name).bytes())
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self._fail(f"read {name!r}", exc) from exc

    def size(self, name: str) -> int | None:
        """The bytes of object ``name``, or None when it is missing."""
        import obstore

        try:
            return int(obstore.head(self._store, name)["size"])
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self._fail(f"look up {name!r}", exc) from exc

    def delete(self, name: str) -> None:
        import obstore

        try:
            obstore.delete(self._store, name)
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise self._fail(f"delete {name!r}", exc) from exc

    def list(self) -> Iterator[tuple[str, float, int]]:
        import obstore

        try:
            for batch in obstore.list(self._store):
                for meta in batch:
                    modified = meta["last_modified"]
                    when = modified.timestamp() if isinstance(modified, _dt.datetime) else float(modified)
                    yield meta["path"], when, int(meta["size"])
        except Exception as exc:
            raise self._fail("list objects", exc) from exc

    def __repr__(self) -> str:
        return f"ObjectStore({self.url!r})"


def open_store(url: str) -> ObjectStore:
    """The object store at ``url`` (module docstring). ConfigError for an unknown scheme or a
    malformed URL; MissingExtraError when ``obstore`` is not installed (``threadline[offload]``)."""
    if not isinstance(url, str) or not url:
        raise ConfigError(f"an object store URL must be a non-empty string, got {url!r}")
    require("offload", "offload to an object store")
    import obstore.store as S
    parts = urlsplit(url)
    opts = dict(parse_qsl(parts.query))
    if parts.scheme in ("", "file"):
        path = parts.path if parts.scheme else url.split("?")[0]
        if not os.path.isabs(path) or parts.netloc not in ("", "localhost"):
            raise ConfigError(f"a local object store needs an absolute path (file:///abs/dir), got {url!r}")
        try:
            return ObjectStore(S.LocalStore(path, mkdir=True), f"file://{path}")
        except Exception as exc:
            raise BackendError(f"object store {url}: cannot open the directory ({exc})") from exc
    if parts.scheme == "s3":
        if not parts.netloc:
            raise ConfigError(f"an S3 object store URL names its bucket: s3://bucket/prefix, got {url!r}")
        unknown = set(opts) - {"endpoint", "region", "allow_http"}
        if unknown:
            raise ConfigError(f"unknown option(s) {sorted(unknown)} in object store URL {url!r} (endpoint, region, allow_http)")
        config: dict[str, str] = {}
        if opts.get("allow_http", "").lower() in ("1", "true", "yes") or opts.get("endpoint", "").startswith("http://"):
            config["allow_http"] = "true"
        kwargs: dict[str, Any] = {"region": opts.get("region") or os.environ.get("AWS_REGION") or "us-east-1"}
        if opts.get("endpoint"):
            kwargs["endpoint"] = opts["endpoint"]
        for env, key in (("AWS_ACCESS_KEY_ID", "access_key_id"), ("AWS_SECRET_ACCESS_KEY", "secret_access_key"), ("AWS_SESSION_TOKEN", "token")):
            if os.environ.get(env):
                kwargs[key] = os.environ[env]
        prefix = parts.path.strip("/") or None
        try:
            store = S.S3Store(parts.netloc, prefix=prefix, config=config, **kwargs)
        except Exception as exc:
            raise ConfigError(f"object store {url}: {exc}") from exc
        shown = f"s3://{parts.netloc}/{prefix or ''}" + (f" at {opts['endpoint']}" if opts.get("endpoint") else "")
        return ObjectStore(store, shown)
    raise ConfigError(f"unknown object store scheme {parts.scheme!r} in {url!r}: use file:///abs/dir or s3://bucket/prefix")


def _int(opts: dict[str, str], name: str, default: int | None, url: str) -> int | None:
    if name not in opts:
        return default
    try:
        value = int(opts.pop(name))
    except ValueError:
        raise ConfigError(f"{name} must be an integer number of bytes in {url!r}") from None
    if value < 0:
        raise ConfigError(f"{name} must not be negative in {url!r}")
    return value


@dataclass
class Offload:
    """A saver's offload settings (``BlobCodec(offload=…)``; default: no offload).

    * ``store`` — an ``ObjectStore``, a store URL (``open_store``), or None (only warn);
    * ``min_bytes`` — a value (snapshot, delta or pending write) whose stored bytes, after
      compression, exceed this many goes to the store; the row keeps a ~120-byte reference;
    * ``warn_bytes`` — a value whose stored bytes exceed this many is logged (logger
      ``threadline.offload``, naming thread and channel) and counted
      (``threadline.values.large``); None: never;
    * ``grace_seconds`` — an object no row names is deleted (``lifecycle.objects``) only once
      it is older than this: a put writes its objects before its rows commit;
    * ``cold_after`` — seconds: the sweeper moves threads neither written nor read for this
      long to the store whole (the cold tier, ``lifecycle.cold``); None: only ``threadline tier``.

    ConfigError for a negative size or an unusable store URL."""

    store: ObjectStore | str | None = None
    min_bytes: int = MIN_BYTES
    warn_bytes: int | None = None
    grace_seconds: float = GRACE_SECONDS
    cold_after: float | None = None
    objects: ObjectStore | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("min_bytes", "warn_bytes"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ConfigError(f"Offload.{name} must be a non-negative integer (bytes), got {v!r}")
        if isinstance(self.grace_seconds, bool) or not isinstance(self.grace_seconds, (int, float)) or self.grace_seconds < 0:
            raise ConfigError(f"Offload.grace_seconds must be a non-negative number, got {self.grace_seconds!r}")
        self.objects = open_store(self.store) if isinstance(self.store, str) else self.store

    @property
    def threshold(self) -> int:
        """The smallest stored size that needs a look (offload or warning), minus one."""
        sizes = [self.warn_bytes] if self.warn_bytes is not None else []
        if self.objects is not None:
            sizes.append(self.min_bytes)
        return min(sizes) if sizes else 1 << 62

    @classmethod
    def from_url(cls, url: str) -> Offload:
        """``file:///dir?min_bytes=262144&warn_bytes=…&grace_seconds=…&cold_after=…`` or ``s3://…``
        the same way (sizes in bytes, times in seconds)."""
        if not isinstance(url, str):
            raise ConfigError(f"an offload URL must be a string, got {type(url).__name__}")
        parts = urlsplit(url)
        opts = dict(parse_qsl(parts.query))
        min_bytes = _int(opts, "min_bytes", MIN_BYTES, url)
        warn = _int(opts, "warn_bytes", None, url)
        cold = _int(opts, "cold_after", None, url)
        try:
            grace = float(opts.pop("grace_seconds", GRACE_SECONDS))
        except ValueError:
            raise ConfigError(f"grace_seconds must be a number in {url!r}") from None
        rest = "&".join(f"{k}={v}" for k, v in opts.items())
        store = parts._replace(query=rest).geturl() if parts.scheme else url.split("?")[0]
        return cls(store, min_bytes=min_bytes, warn_bytes=warn, grace_seconds=grace, cold_after=cold)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls) -> Offload | None:
        """The ``THREADLINE_OFFLOAD`` URL's settings, or None when it is unset or empty."""
        url = os.environ.get(ENV, "").strip()
        return cls.from_url(url) if url else None

    @classmethod
    def of(cls, value: Offload | str | None) -> Offload | None:
        """An ``Offload`` from itself, a URL (``from_url``) or None."""
        if value is None or isinstance(value, Offload):
            return value
        if isinstance(value, str):
            return cls.from_url(value)
        raise ConfigError(f"offload must be an Offload, a URL or None, got {type(value).__name__}")
