"""RunnableConfig → validated (thread_id, checkpoint_ns, checkpoint_id).

LangGraph passes ``config["configurable"]`` with ``thread_id`` (required),
``checkpoint_ns`` (default ``""``, the root graph) and ``checkpoint_id``
(optional: absent means "the latest checkpoint"). Everything is checked here
so that no malformed value reaches SQL, the same on every backend (``text_key``):
a key is a string without NUL characters (Postgres TEXT cannot hold them) or
unpaired surrogates (not UTF-8), at most ``threadline.limits`` ``max_key_bytes``
long in UTF-8. Channels, versions, task_ids and task_paths are checked the same way.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from threadline import limits
from threadline.errors import ConfigError, KeyTooLongError


# Thread ids threadline uses for its own short-lived work (``threadline health``'s round trip):
# never listed by ``threads`` or the browser's search, deleted when the work ends.
RESERVED_THREAD_PREFIX = "__threadline__:"


def is_reserved(thread_id: str) -> bool:
    """Whether ``thread_id`` is one of threadline's own (``RESERVED_THREAD_PREFIX``)."""
    return thread_id.startswith(RESERVED_THREAD_PREFIX)


class Key(NamedTuple):
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None


def thread_id_of(value: Any) -> str:
    """Validate a thread_id given directly (``delete_thread(thread_id)`` and friends).

    LangGraph users commonly pass UUIDs and ints; both are stored as their ``str``.
    Raises ConfigError for None, bools, empty strings and other types.
    """
    if isinstance(value, bool) or value is None:
        raise ConfigError(f"thread_id must be a non-empty string, got {value!r}")
    if isinstance(value, (int,)) or type(value).__name__ == "UUID":
        value = str(value)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"thread_id must be a non-empty string, got {type(value).__name__} {value!r}")
    return text_key("thread_id", value)


def _shown(value: str) -> str:
    return repr(value) if len(value) <= 80 else f"{value[:60]!r}… ({len(value)} characters)"


def _plain(value: str, top: int) -> bool:
    """The common case of ``text_key``: ASCII (its UTF-8 length is its length), no NUL, at most ``top`` long."""
    return value.isascii() and "\x00" not in value and len(value) <= top


def is_text_key(value: Any, limit: str = "max_key_bytes") -> bool:
    """Whether ``text_key`` takes ``value`` at once (the common case: a plain ASCII string within ``limit``)."""
    return type(value) is str and _plain(value, getattr(limits.current(), limit))


def text_key(name: str, value: Any, limit: str = "max_key_bytes") -> str:
    """``value`` when it is a string a key column can hold on every backend; ``name`` names it
    in the error.

    Raises:
        ConfigError: not a string, a NUL character, or an unpaired surrogate (not UTF-8).
        KeyTooLongError: longer in UTF-8 than ``limit``, a field of ``threadline.limits``
            (``max_key_bytes``; ``max_namespace_bytes`` for a Store or Cache namespace).
    """
    if type(value) is str and _plain(value, getattr(limits.current(), limit)):  # ``is_text_key``, inlined: every key
        return value
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, got {type(value).__name__} {value!r}")
    if "\x00" in value:
        raise ConfigError(f"{name} must not contain NUL characters, got {_shown(value)}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ConfigError(f"{name} is not valid UTF-8 (an unpaired surrogate character), got {_shown(value)}") from None
    top = getattr(limits.current(), limit)
    if size > top:
        raise KeyTooLongError(f"{name} is {size} bytes long, more than {limit}={top} (threadline.limits): {_shown(value)}")
    return value


def checkpoint_ns_of(value: Any) -> str:
    """Validate a checkpoint_ns given directly: a string (None means the root namespace ``""``).
    Raises ConfigError for other types and NUL characters."""
    if value is None:
        return ""
    return text_key("checkpoint_ns", value)


def checkpoint_id_of(value: Any, what: str = "checkpoint_id") -> str:
    """Validate a checkpoint_id given directly (``what`` names it in the error): a non-empty
    string. Raises ConfigError otherwise (``text_key``)."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{what} must be a non-empty string, got {value!r}")
    return text_key(what, value)


def key_of(config: Any, *, require_thread: bool = True) -> Key:
    """Read the checkpoint key from a RunnableConfig.

    Raises:
        ConfigError: config is not a mapping, has no ``configurable`` mapping, no
            ``thread_id``, or a thread_id / checkpoint_ns / checkpoint_id of the wrong type.
    """
    conf = config.get("configurable") if type(config) is dict else None
    if type(conf) is dict:  # the common case, every saver call: three plain strings, checked at once
        tid, ns, cid = conf.get("thread_id"), conf.get("checkpoint_ns", ""), conf.get("checkpoint_id")
        top = limits.current().max_key_bytes
        if (
            type(tid) is str and tid and type(ns) is str and (cid is None or type(cid) is str)
            and _plain(tid, top) and _plain(ns, top) and (not cid or _plain(cid, top))
        ):
            return Key(tid, ns, cid or None)
    if not isinstance(config, dict):
        raise ConfigError(f"config must be a dict with a 'configurable' mapping, got {type(config).__name__}")
    conf = config.get("configurable")
    if not isinstance(conf, dict):
        raise ConfigError("config has no 'configurable' mapping; pass {'configurable': {'thread_id': ...}}")
    if "thread_id" not in conf or conf["thread_id"] is None:
        if require_thread:
            raise ConfigError("config['configurable'] has no 'thread_id'")
        thread_id = None
    else:
        thread_id = thread_id_of(conf["thread_id"])
    ns = checkpoint_ns_of(conf.get("checkpoint_ns", ""))
    cid = conf.get("checkpoint_id")
    if cid is not None and not isinstance(cid, str):
        raise ConfigError(f"checkpoint_id must be a string, got {type(cid).__name__} {cid!r}")
    if cid:
        text_key("checkpoint_id", cid)
    return Key(thread_id, ns, cid or None)  # type: ignore[arg-type]


def config_of(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> dict:
    """The RunnableConfig LangGraph expects back for a stored checkpoint."""
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint_id}}
