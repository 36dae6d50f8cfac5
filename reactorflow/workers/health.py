"""The worker's connection to its broker: checked before `reactorflow worker` starts, watched
while it runs.

* `check_reachable(broker)`: a worker whose broker (a Redis or a RabbitMQ) cannot be reached
  fails at start, as every other command fails: one line naming the host and port, a non-zero
  exit status.
* `guard(broker)`: in each worker process, the consumers Dramatiq opens pass through a
  `GuardedConsumer`. While the broker cannot be reached, consuming backs off (`BACKOFF_BASE`
  seconds, doubling up to `BACKOFF_CAP`) and the process logs one line when the connection is
  lost (`reactorflow.worker.broker_lost`) and one when it is back
  (`reactorflow.worker.broker_restored`), instead of Dramatiq's CRITICAL line every 3 s.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.errors import BrokerConnectionError
from redis import ConnectionPool, Redis
from redis.exceptions import RedisError

from reactorflow.errors import StorageConnectionError

try:  # the `rabbitmq` extra (pika): without it, no broker is a RabbitmqBroker
    import pika
    from dramatiq.brokers.rabbitmq import RabbitmqBroker

    _RABBITMQ: tuple[type[dramatiq.Broker], ...] = (RabbitmqBroker,)
except ImportError:
    _RABBITMQ = ()

log = logging.getLogger("reactorflow.worker")

BACKOFF_BASE = 0.5
"""Seconds before the first new attempt once the broker is lost; doubles on each failure..."""
BACKOFF_CAP = 10.0
"""...up to this many seconds."""
CHECK_TIMEOUT = 5.0
"""Seconds the start-up check waits for the broker to connect and answer."""
SLICE = 0.25
"""Longest sleep of a consumer between two looks at its thread's state (a stopping worker is
not held up by a long backoff)."""


def where(broker: dramatiq.Broker) -> str:
    """The broker as a log line or an error names it: its kind and, for a Redis, host and
    port (or socket) and database; for a RabbitMQ, host, port and virtual host."""
    kwargs = _redis_kwargs(broker)
    if kwargs is not None:
        return f"{type(broker).__name__} at {_address(kwargs).removeprefix('redis://')}"
    amqp = _amqp_parameters(broker)
    if amqp is not None:
        return f"{type(broker).__name__} at {', '.join(_amqp_address(p) for p in amqp)}"
    return type(broker).__name__


def _address(kwargs: dict[str, Any]) -> str:
    """A Redis's address from its connection settings (no credentials)."""
    if "path" in kwargs:
        return f"unix://{kwargs['path']}?db={kwargs.get('db', 0)}"
    return (f"redis://{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
            f"/{kwargs.get('db', 0)}")


def _redis_kwargs(broker: dramatiq.Broker) -> dict[str, Any] | None:
    if not isinstance(broker, RedisBroker):
        return None
    return dict(broker.client.connection_pool.connection_kwargs)


def _amqp_parameters(broker: dramatiq.Broker) -> list[Any] | None:
    """A RabbitMQ broker's pika connection parameters, each a node it may connect to (None:
    not a RabbitMQ broker)."""
    if not isinstance(broker, _RABBITMQ):
        return None
    found = broker.parameters  # type: ignore[attr-defined]
    return list(found) if isinstance(found, list | tuple) else [found]


def _amqp_address(parameters: Any) -> str:
    """A RabbitMQ node's address from its pika parameters (no credentials), as in its URL."""
    return f"{parameters.host}:{parameters.port}/{quote(parameters.virtual_host, safe='')}"


def check_reachable(broker: dramatiq.Broker) -> None:
    """Fail now if `broker` (a Redis or a RabbitMQ) cannot be reached: one connection of its
    own (a Redis: and one PING), one attempt bounded by `CHECK_TIMEOUT`, closed after
    (nothing is left open for the worker processes to inherit). Other brokers are not checked
    here.

    Args:
        broker: The broker the worker is about to consume from.

    Raises:
        StorageConnectionError: The broker cannot be reached (naming host and port).
    """
    amqp = _amqp_parameters(broker)
    if amqp is not None:
        _check_amqp(broker, amqp)
        return
    kwargs = _redis_kwargs(broker)
    if kwargs is None:
        return
    assert isinstance(broker, RedisBroker)
    kwargs["socket_connect_timeout"] = kwargs.get("socket_connect_timeout") or CHECK_TIMEOUT
    kwargs["socket_timeout"] = kwargs.get("socket_timeout") or CHECK_TIMEOUT
    kwargs.pop("retry", None)  # one attempt: the check says now
    pool = ConnectionPool(connection_class=broker.client.connection_pool.connection_class,
                          **kwargs)
    try:
        with Redis(connection_pool=pool) as probe:
            probe.ping()
    except (RedisError, OSError) as exc:
        raise _unreachable(broker, _address(kwargs), exc) from None
    finally:
        pool.disconnect()


def _check_amqp(broker: dramatiq.Broker, nodes: list[Any]) -> None:
    """`check_reachable` for a RabbitMQ: one AMQP connection (to any of its nodes, one attempt
    each, bounded by `CHECK_TIMEOUT`), closed at once; pika's own log lines about the failed
    attempt are held back (the error says it, in one line)."""
    probes = []
    for node in nodes:
        probe = copy.copy(node)  # (the broker's own parameters keep their retry settings)
        probe.connection_attempts, probe.retry_delay = 1, 0
        probe.socket_timeout = probe.stack_timeout = CHECK_TIMEOUT
        probes.append(probe)
    pika_log = logging.getLogger("pika")
    level = pika_log.level
    pika_log.setLevel(logging.CRITICAL + 1)
    try:
        pika.BlockingConnection(probes).close()
    except (pika.exceptions.AMQPError, OSError) as exc:
        raise _unreachable(broker, ", ".join(f"amqp://{_amqp_address(p)}" for p in nodes),
                           _amqp_cause(exc)) from None
    finally:
        pika_log.setLevel(level)


def _amqp_cause(exc: BaseException) -> BaseException:
    """What a failed AMQP connection comes down to: pika wraps the socket's error (refused,
    timed out, name unknown) in two layers of its own."""
    inner = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else None
    found = getattr(inner, "exception", None)
    if isinstance(found, BaseException):
        return found
    return inner or exc


def _unreachable(broker: dramatiq.Broker, address: str,
                 exc: BaseException) -> StorageConnectionError:
    """The start-up check's error: the broker at `address` cannot be reached (one line)."""
    reason = " ".join((str(exc) or type(exc).__name__).split())
    return StorageConnectionError(f"{address} (the workers' {type(broker).__name__})", reason,
                                  cause=exc)


class Health:
    """One worker process's view of its broker: lost or not, with one log line per change."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.mutex = threading.Lock()
        self.lost_at: float | None = None
        self.failures = 0

    def failed(self, error: BaseException) -> float:
        """An attempt failed with `error`: the seconds to wait before the next one (logs the
        loss once, when it starts)."""
        with self.mutex:
            if self.lost_at is None:
                self.lost_at = time.monotonic()
                log.error("reactorflow.worker.broker_lost broker=%s error=%s (not consuming; "
                          "trying again with backoff up to %gs; a line follows when it is "
                          "back)", self.name, error, BACKOFF_CAP)
            self.failures += 1
            return float(min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (self.failures - 1)))

    def succeeded(self) -> None:
        """An attempt succeeded (logs the recovery once, if the broker was lost)."""
        if self.lost_at is None:  # (the usual case: no lock taken)
            return
        with self.mutex:
            if self.lost_at is not None:
                log.warning("reactorflow.worker.broker_restored broker=%s after=%.1fs",
                            self.name, time.monotonic() - self.lost_at)
                self.lost_at = None
                self.failures = 0


class GuardedConsumer(dramatiq.Consumer):
    """A Dramatiq consumer that never fails its consumer thread on a lost broker: `open` makes
    the real consumer (again, after a failure), a failure is reported to `health` and the
    next attempt waits out the backoff, yielding `None` (no message) meanwhile, so the thread
    keeps looking at its own state. Only a consumer that failed reports the broker back, once
    its new consumer got through (another one may yield `None` without asking the broker,
    e.g. while its prefetched messages are being worked on)."""

    def __init__(self, open_consumer: Callable[[], dramatiq.Consumer], health: Health) -> None:
        self.open_consumer = open_consumer
        self.health = health
        self.inner: dramatiq.Consumer | None = None
        self.retry_at = 0.0

    def __next__(self) -> dramatiq.MessageProxy | None:
        if self.retry_at:
            wait = self.retry_at - time.monotonic()
            if wait > 0:
                time.sleep(min(SLICE, wait))
                return None
        try:
            if self.inner is None:
                self.inner = self.open_consumer()
            message = next(self.inner)
        except BrokerConnectionError as error:
            self._drop()
            self.retry_at = time.monotonic() + self.health.failed(error)
            return None
        if self.retry_at:  # this consumer failed, and its new one got through: back
            self.retry_at = 0.0
            self.health.succeeded()
        return message

    def _drop(self) -> None:
        inner, self.inner = self.inner, None
        if inner is not None:
            try:
                inner.close()
            except Exception:  # a broken consumer may fail to close: it is dropped anyway
                log.debug("reactorflow.worker.consumer_close_failed", exc_info=True)

    def _current(self) -> dramatiq.Consumer:
        if self.inner is None:
            raise BrokerConnectionError(  # type: ignore[no-untyped-call]
                "the broker connection is lost")
        return self.inner

    def ack(self, message: dramatiq.MessageProxy) -> None:
        self._current().ack(message)

    def nack(self, message: dramatiq.MessageProxy) -> None:
        self._current().nack(message)

    def requeue(self, messages: Any) -> None:
        self._current().requeue(messages)

    def close(self) -> None:
        self._drop()


def guard(broker: dramatiq.Broker) -> Health:
    """Route the consumers `broker` opens in this process through `GuardedConsumer` (once).

    Args:
        broker: The broker this worker process consumes from.

    Returns:
        The process's `Health` of that broker.
    """
    found = getattr(broker, "_reactorflow_health", None)
    if isinstance(found, Health):
        return found
    health = Health(where(broker))
    consume = broker.consume

    def guarded(queue_name: str, prefetch: int = 1, timeout: int = 30000) -> dramatiq.Consumer:
        return GuardedConsumer(lambda: consume(queue_name, prefetch, timeout), health)

    broker.consume = guarded  # type: ignore[method-assign]
    broker._reactorflow_health = health  # type: ignore[attr-defined]
    return health
