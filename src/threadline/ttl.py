"""A saver's TTL settings and a thread's own TTL, validated.

``ttl={"default_ttl": minutes, "refresh_on_read": bool, "sweep_interval_minutes": minutes}``
takes the keys of LangGraph's ``TTLConfig`` (``langgraph.store.base``), read for
threads: a thread expires, as a whole, ``default_ttl`` minutes after its last checkpoint
(or, with ``refresh_on_read``, its last read). A thread's own TTL overrides the default:
``ttl_minutes`` in the run's ``configurable`` or ``metadata`` (LangGraph copies both into
the checkpoint metadata), a positive number of minutes or ``"never"``.

One rule on every backend: a thread is subject to TTL only once written under one — a put
by a saver with a ``default_ttl`` records it on the thread (a later put without one keeps
it), a run's own TTL likewise. A thread written without a TTL (by another program sharing
the database) never expires, and a read, a tag or a restore gives it none (as the official
Redis saver, which refreshes only keys that have a TTL); only a sweep asked to take the
whole database (``sweep(all_threads=True)``) expires it, by that saver's ``default_ttl``.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from threadline import limits
from threadline.errors import ConfigError
from threadline.lazy import on_first_call

# LangGraph's base (it loads LangChain) with the first thread TTL read, not with this module
get_checkpoint_metadata = on_first_call(globals(), "get_checkpoint_metadata", "langgraph.checkpoint.base:get_checkpoint_metadata")

TTL_KEY = "ttl_minutes"  # a thread's own TTL, in configurable or metadata
NEVER = -1.0  # stored ttl_minutes of a thread that never expires
_KEYS = ("default_ttl", "refresh_on_read", "sweep_interval_minutes")


@dataclass(frozen=True)
class TTL:
    """Validated TTL settings: minutes (``default_ttl`` None: only threads with their own
    TTL expire), whether reads restart a thread's clock, minutes between sweeps (None: no
    background sweeper unless started with an interval)."""

    default_ttl: float | None = None
    refresh_on_read: bool = True
    sweep_interval_minutes: float | None = None

    @property
    def refresh_every(self) -> float:
        """Seconds a process waits before restarting the same thread's clock again on a read:
        a tenth of the default TTL, at most a minute (a TTL is never cut short by more)."""
        return min(60.0, self.default_ttl * 6) if self.default_ttl else 6.0


def _positive_minutes(value: Any) -> bool:
    """A number of minutes a TTL can be: positive, at most ``threadline.limits`` ``max_ttl_seconds``
    (inf and 1e308 would overflow the expiry arithmetic of every backend)."""
    return (
        not isinstance(value, bool) and isinstance(value, (int, float))
        and 0 < value <= limits.current().max_ttl_seconds / 60
    )


def _minutes(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if not _positive_minutes(value):
        raise ConfigError(f"ttl[{name!r}] must be a positive number of minutes (at most max_ttl_seconds / 60) or None, got {value!r}")
    return float(value)


def ttl_of(ttl: Mapping[str, Any] | TTL | None) -> TTL | None:
    """``TTL`` from a saver's ``ttl=`` argument (a mapping of the keys above, or a ``TTL``);
    None for None. Raises ConfigError naming an unknown key or a bad value."""
    if ttl is None or isinstance(ttl, TTL):
        return ttl
    if not isinstance(ttl, Mapping):
        raise ConfigError(f"ttl must be a mapping with keys {', '.join(_KEYS)}; got {type(ttl).__name__}")
    unknown = sorted(set(ttl) - set(_KEYS))
    if unknown:
        raise ConfigError(f"unknown ttl key(s) {unknown}; a saver's ttl takes {', '.join(_KEYS)}")
    refresh = ttl.get("refresh_on_read", True)
    if not isinstance(refresh, bool):
        raise ConfigError(f"ttl['refresh_on_read'] must be True or False, got {refresh!r}")
    return TTL(_minutes("default_ttl", ttl.get("default_ttl")), refresh, _minutes("sweep_interval_minutes", ttl.get("sweep_interval_minutes")))


_PLAIN = frozenset({dict, ChainMap, type(None)})  # a config's ``metadata`` as LangGraph passes it


def thread_ttl_of(config: Any, metadata: Any) -> float | None:
    """The TTL a ``put`` gives its thread: minutes, ``NEVER``, or None when it names none.

    Read as LangGraph builds checkpoint metadata (``metadata``, then the config's
    ``metadata``, then ``configurable``). Raises ConfigError for a value that is not a
    positive number or ``"never"``."""
    # exact types first (every put; a run's config metadata is a ChainMap), the ABC checks otherwise
    plain = type(config) is dict and type(metadata) is dict and type(config.get("configurable")) is dict and type(config.get("metadata")) in _PLAIN
    if not plain and not (
        isinstance(config, dict) and isinstance(metadata, Mapping) and isinstance(config.get("configurable"), Mapping)
        and isinstance(config.get("metadata") or {}, Mapping)
    ):
        return None  # the put itself reports a malformed config
    if TTL_KEY not in metadata and TTL_KEY not in (config.get("metadata") or {}) and TTL_KEY not in config["configurable"]:
        return None  # named nowhere (most puts): LangGraph's merge below is not needed
    value = get_checkpoint_metadata(config, dict(metadata)).get(TTL_KEY)
    if value is None:
        return None
    if value == "never":
        return NEVER
    if not _positive_minutes(value):
        raise ConfigError(f"{TTL_KEY} must be a positive number of minutes (at most max_ttl_seconds / 60) or 'never', got {value!r}")
    return float(value)
