"""Errors raised by threadline. Every error names the offending key, row or value."""

from __future__ import annotations


class ThreadlineError(Exception):
    """Base class of every error threadline raises on purpose.

    A message that names a way out in library terms (``pass overwrite=True``) gives, in
    ``flags``, the command-line option for each such argument (``{"overwrite=True":
    "--overwrite"}``): the ``threadline`` command words the message with its options."""

    def __init__(self, *args: object, flags: dict[str, str] | None = None) -> None:
        super().__init__(*args)
        self.flags = dict(flags or {})

    def cli_message(self) -> str:
        """The message with each library argument of ``flags`` replaced by its option."""
        text = str(self)
        for argument, option in self.flags.items():
            text = text.replace(argument, option)
        return text


class ConfigError(ThreadlineError, ValueError):
    """A RunnableConfig or argument is malformed: a missing or mistyped thread_id, checkpoint_ns, checkpoint_id,
    a key with NUL or unpaired surrogate characters, a non-integer ``limit``; a Store or Cache TTL that is
    not a finite number within ``max_ttl_seconds``, a Store ``limit``/``offset`` outside 0 … 2**63 - 1."""


class FilterError(ThreadlineError, ValueError):
    """A metadata filter for ``list`` has a key or value that cannot be matched."""


class CorruptRowError(ThreadlineError):
    """A stored row cannot be decoded. The message names its table and key; nothing is modified."""


class NotFoundError(ThreadlineError, LookupError):
    """A thread or checkpoint named by the caller does not exist."""


class UnsafeOperationError(ThreadlineError):
    """An operation was refused because it would break a kept checkpoint (e.g. delete with children)."""


class BackendError(ThreadlineError):
    """A database URL has an unknown scheme, or its server cannot be reached."""


class NotADatabaseError(BackendError):
    """The path or URL names no database threadline can read: missing, not SQLite, no threadline
    tables (an empty database, an official saver's), or an older schema not yet migrated."""


class SchemaError(BackendError):
    """The database's threadline schema is from a newer release, or is not threadline's."""


class MissingExtraError(ThreadlineError, ImportError):
    """A feature needs an optional part of threadline that is not installed. The message is one
    line naming the feature and the command that installs it (``pip install 'threadline[postgres]'``);
    ``extra`` is that extra's name. An ``ImportError`` too, as a missing package is."""

    def __init__(self, message: str, *, extra: str) -> None:
        super().__init__(message)
        self.extra = extra


class AdoptionError(ThreadlineError):
    """A thread of the official saver's tables did not read back identically once imported; nothing was stored."""


class EncryptionError(CorruptRowError):
    """A stored row is encrypted with a key this saver does not hold, or is plaintext (or has no
    keyed checksum) where the saver's keyring requires encryption. Nothing is modified."""


class KeyTooLongError(ConfigError):
    """A thread_id, checkpoint_ns, checkpoint_id, channel, version, task_id, task_path, Store key or
    Cache key is longer than ``threadline.limits`` ``max_key_bytes`` (UTF-8); a Store or Cache
    namespace longer than ``max_namespace_bytes``."""


class ValueTooLargeError(ThreadlineError, ValueError):
    """A channel value or pending write serializes to more than ``threadline.limits`` ``max_value_bytes``,
    checkpoint metadata to more than ``max_metadata_bytes``, or metadata or a Store value nests deeper
    than ``max_json_depth``; nothing was written.

    For a value of a ``put`` or ``put_writes``, the message names the thread_id, checkpoint_ns and
    checkpoint, the channel (and the task, for a pending write); the same are attributes:
    ``thread_id``, ``checkpoint_ns``, ``checkpoint_id``, ``channel``, ``task_id`` (None when not
    known or not a pending write), ``size`` and ``limit`` (bytes; None for the other limits)."""

    def __init__(
        self, *args: object, channel: str | None = None, task_id: str | None = None, size: int | None = None, limit: int | None = None,
        thread_id: str | None = None, checkpoint_ns: str | None = None, checkpoint_id: str | None = None,
    ) -> None:
        super().__init__(*args)
        self.channel, self.task_id, self.size, self.limit = channel, task_id, size, limit
        self.thread_id, self.checkpoint_ns, self.checkpoint_id = thread_id, checkpoint_ns, checkpoint_id


class SerializationError(ThreadlineError, TypeError):
    """A channel value or pending write the serializer cannot store. The message names the channel
    (and the task, for a pending write), the path to the refused part inside the value
    (``messages[3].additional_kwargs.lock``) and its type; the same are attributes: ``channel``,
    ``task_id`` (None for a channel value), ``path``, ``type_name``. Nothing was written. A
    ``TypeError``, as the serializer's own error is."""

    def __init__(
        self, *args: object, channel: str | None = None, task_id: str | None = None, path: str = "", type_name: str = ""
    ) -> None:
        super().__init__(*args)
        self.channel, self.task_id, self.path, self.type_name = channel, task_id, path, type_name


class FilterTooLargeError(FilterError):
    """A ``list`` metadata filter or Store ``search`` filter has more keys (Store: conditions) than
    ``max_filter_keys``, more JSON than ``max_filter_bytes``, nests deeper than ``max_json_depth``,
    or (Store) a key path longer than ``max_filter_path_depth`` (``threadline.limits``)."""


class MigrationError(ThreadlineError):
    """A state migration step (``threadline.evolve``) failed on a stored checkpoint: names the
    thread, checkpoint, step and the error it raised (``thread_id``, ``checkpoint_id``, ``step``,
    ``__cause__``). Nothing of that thread is written when it is raised."""

    def __init__(self, thread_id: str, checkpoint_id: str, step: str, cause: BaseException) -> None:
        super().__init__(
            f"migration step {step!r} failed on thread {thread_id!r}, checkpoint {checkpoint_id!r}: "
            f"{type(cause).__name__}: {cause}"
        )
        self.thread_id, self.checkpoint_id, self.step = thread_id, checkpoint_id, step


class ThreadBusyError(ThreadlineError):
    """A run asked for a thread another run holds (``threadline.guard``): rejected at once
    (``multitask_strategy="reject"``) or still busy when ``timeout`` ran out (``"enqueue"``).

    ``thread_id``, ``holder`` (the other run's holder string: host, pid, run id), ``expires_at``
    (seconds since the epoch, the database's clock; None when unknown) and ``remaining`` (seconds
    until that lease expires unless its run renews it)."""

    def __init__(self, message: str, *, thread_id: str, holder: str | None, expires_at: float | None, remaining: float | None) -> None:
        super().__init__(message)
        self.thread_id, self.holder, self.expires_at, self.remaining = thread_id, holder, expires_at, remaining


class LeaseLostError(ThreadBusyError):
    """A put or put_writes made under a thread's lease (``threadline.guard``) after that lease
    was lost: it expired, or another run took the thread (a holder paused past its lease by a
    long tool call or a GC pause, or cut off from the database). Nothing of the call was written.

    ``token`` is the lost lease's fencing token; ``holder``, ``holder_token``, ``expires_at``
    and ``remaining`` describe the thread's lease now (None when no run holds it)."""

    def __init__(self, message: str, *, thread_id: str, token: int, holder: str | None, holder_token: int | None,
                 expires_at: float | None, remaining: float | None) -> None:
        super().__init__(message, thread_id=thread_id, holder=holder, expires_at=expires_at, remaining=remaining)
        self.token, self.holder_token = token, holder_token
