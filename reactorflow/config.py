"""`rf.configure`: process-wide settings, replaceable at any time.

Every TTL and timeout is a named setting with a documented default. With nothing configured,
storage is an in-process `MemoryStorage` (the embedded default), unless `REACTORFLOW_REDIS_URL`
is set, which selects Redis.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from reactorflow.errors import ConfigurationError
from reactorflow.protection.codec import EncryptionCodec
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.memory.storage import MemoryStorage
from reactorflow.storage.redis.storage import RedisStorage

if TYPE_CHECKING:
    from reactorflow.middleware import Middleware

REDIS_URL_ENV = "REACTORFLOW_REDIS_URL"
WORKER_MODULES_ENV = "REACTORFLOW_WORKER_MODULES"  # set by `reactorflow worker` for its processes


@dataclass(frozen=True, slots=True)
class Settings:
    """The current settings (frozen): what `rf.configure` returns.

    Attributes:
        storage: Where runs are stored (`None`: the embedded default, an in-memory store).
        broker: The Dramatiq broker that carries work to the workers (`None`:
            `REACTORFLOW_REDIS_URL`'s Redis when set, else the embedded `StubBroker` and an
            in-process worker).
        lock_ttl: Seconds the run liveness lock lives unless extended (extended every
            `lock_ttl / 3`).
        stall_timeout: A `running` run with no lock holder, untouched this long, is recovered by
            the sweeper.
        async_wait_timeout: Seconds a step reading an async unit's result waits for it.
        lock_wait: Seconds undo/cancel/continue wait for a run's lock before giving up.
        middleware: `rf.Middleware` applied to every reactor's runs.
        gate_snooze: A worker that finds a gate busy puts the run back at most this many
            seconds later.
        gate_snooze_limit: Snoozes after which a run (or an async step) still waiting for a
            gate fails (`rf.GateBusy`).
        park_after: A retry backoff longer than this many seconds parks the run on a timer
            instead of sleeping in a process or a worker thread.
        version_patience: Seconds a job for a version of its reactor that no worker declares
            is handed back before its run fails with `rf.DefinitionChanged`.
        heartbeat_interval: Seconds between two heartbeats of a worker process
            (`rf.list_workers()`); a heartbeat older than 3 intervals is gone.
        codec: The `rf.EncryptionCodec` that encrypts every user value stored (`None`: values
            are stored clear).
    """

    storage: Storage | None = None
    broker: Any = None
    lock_ttl: float = 30.0
    stall_timeout: float = 60.0
    async_wait_timeout: float = 30.0
    lock_wait: float = 5.0
    middleware: tuple[Middleware, ...] = ()
    gate_snooze: float = 1.0
    gate_snooze_limit: int = 600
    park_after: float = 5.0
    version_patience: float = 600.0
    heartbeat_interval: float = 5.0
    codec: EncryptionCodec | None = None


_NUMBERS = ("lock_ttl", "stall_timeout", "async_wait_timeout", "lock_wait", "gate_snooze",
            "park_after", "version_patience", "heartbeat_interval")
_OPTIONS = tuple(f.name for f in fields(Settings))
_mutex = threading.Lock()
_current = Settings()
_default_storage: Storage | None = None


class _Unset:
    pass


_UNSET: Any = _Unset()


def configure(
    *,
    storage: Storage | None = _UNSET,
    broker: Any = _UNSET,
    lock_ttl: float = _UNSET,
    stall_timeout: float = _UNSET,
    async_wait_timeout: float = _UNSET,
    lock_wait: float = _UNSET,
    middleware: Sequence[Middleware] = _UNSET,
    gate_snooze: float = _UNSET,
    gate_snooze_limit: int = _UNSET,
    park_after: float = _UNSET,
    version_patience: float = _UNSET,
    heartbeat_interval: float = _UNSET,
    codec: EncryptionCodec | None = _UNSET,
    **unknown: Any,
) -> Settings:
    """Replace the named settings (others keep their values); returns the new `rf.Settings`.

    Keyword-only. See [Concepts](concepts.md#configuration) for every option and its default, and
    [Workers](workers.md) for the broker.

    Args:
        storage: Where runs are stored (`None`: the embedded default, an in-memory store).
        broker: The Dramatiq broker that carries work to the workers (`None`:
            `REACTORFLOW_REDIS_URL`'s Redis when set, else the embedded `StubBroker` and an
            in-process worker).
        lock_ttl: Seconds the run liveness lock lives unless extended (extended every
            `lock_ttl / 3`).
        stall_timeout: A `running` run with no lock holder, untouched this long, is recovered by
            the sweeper.
        async_wait_timeout: Seconds a step reading an async unit's result waits for it.
        lock_wait: Seconds undo/cancel/continue wait for a run's lock before giving up.
        middleware: `rf.Middleware` applied to every reactor's runs.
        gate_snooze: A worker that finds a gate busy puts the run back at most this many
            seconds later.
        gate_snooze_limit: Snoozes after which a run (or an async step) still waiting for a
            gate fails (`rf.GateBusy`).
        park_after: A retry backoff (of a step or an async unit) longer than this many seconds
            parks the run on a timer instead of sleeping in a process or a worker thread
            (default 5; see [Timers](timers.md)).
        version_patience: Seconds a job for a version of its reactor that this worker does not
            declare (nor migrate from) is handed back to the queue for another worker, before
            its run fails with `rf.DefinitionChanged` (default 600; see
            [Deploying changes](deploying.md)).
        heartbeat_interval: Seconds between two heartbeats of each worker process (default 5;
            `rf.list_workers()` lists the workers heard from within 3 intervals; see
            [Workers](workers.md#heartbeats)).
        codec: An `rf.EncryptionCodec`: every user value stored from now on is encrypted
            (values stored clear before stay readable); `None` removes it (see
            [Protecting data](protecting-data.md)).

    Raises:
        ConfigurationError: An unknown option or a bad value (naming the option).
    """
    global _current
    if unknown:
        raise ConfigurationError(
            f"rf.configure() got unknown option(s) {', '.join(sorted(unknown))}; the options are "
            f"{', '.join(_OPTIONS)}",
            option=sorted(unknown)[0],
        )
    changes: dict[str, Any] = {}
    for name, value in (("lock_ttl", lock_ttl), ("stall_timeout", stall_timeout),
                        ("async_wait_timeout", async_wait_timeout), ("lock_wait", lock_wait),
                        ("gate_snooze", gate_snooze), ("park_after", park_after),
                        ("version_patience", version_patience),
                        ("heartbeat_interval", heartbeat_interval)):
        if value is _UNSET:
            continue
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not math.isfinite(value) or value <= 0):
            raise ConfigurationError(f"rf.configure({name}={value!r}): must be a finite "
                                     "number of seconds > 0", option=name)
        changes[name] = float(value)
    if gate_snooze_limit is not _UNSET:
        if (isinstance(gate_snooze_limit, bool) or not isinstance(gate_snooze_limit, int)
                or gate_snooze_limit < 1):
            raise ConfigurationError(f"rf.configure(gate_snooze_limit={gate_snooze_limit!r}): "
                                     "must be a whole number >= 1", option="gate_snooze_limit")
        changes["gate_snooze_limit"] = gate_snooze_limit
    if storage is not _UNSET:
        if storage is not None and not isinstance(storage, Storage):
            raise ConfigurationError(
                f"rf.configure(storage={storage!r}): expected a reactorflow storage such as "
                "rf.MemoryStorage() or rf.RedisStorage.from_url(...)",
                option="storage",
            )
        changes["storage"] = storage
    if broker is not _UNSET:
        changes["broker"] = broker
    if middleware is not _UNSET:
        changes["middleware"] = tuple(middleware)
    if codec is not _UNSET:
        if codec is not None and not isinstance(codec, EncryptionCodec):
            raise ConfigurationError(
                f"rf.configure(codec=...): expected an rf.EncryptionCodec(keys=..., current=...) "
                f"or None, got a {type(codec).__name__}", option="codec")
        changes["codec"] = codec
    with _mutex:
        _current = replace(_current, **changes)
        return _current


def settings() -> Settings:
    return _current


def reset() -> None:
    """Back to defaults (for tests); the embedded storage is kept unless replaced."""
    global _current
    with _mutex:
        _current = Settings()


def restore(saved: Settings) -> None:
    """Put back settings read earlier with `settings()` (the test kit restores them after a
    test)."""
    global _current
    with _mutex:
        _current = saved


def current_storage() -> Storage:
    """The configured storage, else Redis from the environment, else the embedded default."""
    global _default_storage
    configured = _current.storage
    if configured is not None:
        return configured
    with _mutex:
        if _default_storage is None:
            url = os.environ.get(REDIS_URL_ENV)
            try:
                _default_storage = RedisStorage.from_url(url) if url else MemoryStorage()
            except ConfigurationError as exc:  # say where the URL came from
                raise ConfigurationError(f"{REDIS_URL_ENV}: {exc.message}",
                                         option=REDIS_URL_ENV) from None
        return _default_storage
