"""Which Dramatiq broker carries reactorflow's jobs, and the embedded worker.

* `rf.configure(broker=...)` wins; else `REACTORFLOW_REDIS_URL` selects a `RedisBroker`;
  else the **embedded default**: a `StubBroker` with an in-process Dramatiq worker, started on
  the first enqueue and stopped at interpreter exit.
* reactorflow's actors are declared on a broker the first time it is used (a broker may be
  replaced at any time; the actors follow the current one). Job payloads carry identities only
  (run id, reactor name, step key): storage is the truth.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dramatiq
from dramatiq.asyncio import EventLoopThread, set_event_loop_thread
from dramatiq.broker import MessageProxy
from dramatiq.brokers.redis import RedisBroker
from dramatiq.brokers.stub import StubBroker
from dramatiq.common import q_name
from dramatiq.middleware import AsyncIO, Retries

from reactorflow import config
from reactorflow.errors import BrokerError, ConfigurationError, ReactorflowError
from reactorflow.runtime.services.heartbeats import HEARTBEAT, JOB_QUEUE
from reactorflow.runtime.services.takeover import WATCH
from reactorflow.runtime.services.timers import FIRER
from reactorflow.storage.redis.connections import cluster_url
from reactorflow.storage.redis.keys import safe_url, scheme_problem
from reactorflow.workers import jobs

log = logging.getLogger("reactorflow.worker")

QUEUE = JOB_QUEUE
EMBEDDED_THREADS = 8
WORKER_TIMEOUT_MS = 50
"""Idle poll bound of reactorflow's workers: an idle worker picks a job up in tens of ms."""
JOB_RETRIES = 3
"""Dramatiq retries for infrastructure errors only (step code is retried by its own policy)."""
NO_TIME_LIMIT_MS = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Actors:
    execute_run: dramatiq.Actor[Any, Any]
    execute_unit: dramatiq.Actor[Any, Any]
    execute_element: dramatiq.Actor[Any, Any]
    execute_undo: dramatiq.Actor[Any, Any]
    retries_exhausted: dramatiq.Actor[Any, Any]


class _Runtime:
    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.actors: dict[int, tuple[dramatiq.Broker, Actors]] = {}
        self.embedded: StubBroker | None = None
        self.env_broker: dramatiq.Broker | None = None
        self.worker: dramatiq.Worker | None = None
        self.stopping: dramatiq.Broker | None = None  # whose embedded worker is stopping


_runtime = _Runtime()


class _EmbeddedAsyncIO(AsyncIO):
    """Dramatiq's AsyncIO middleware, with its event-loop thread a daemon: an embedded worker
    must never keep the interpreter from exiting (it is stopped cleanly before that)."""

    def before_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        thread = EventLoopThread(self.logger)
        thread.daemon = True
        thread.start(timeout=1.0)
        set_event_loop_thread(thread)


class TimerFiring(dramatiq.Middleware):
    """Runs this process's timer firing loop (`services.timers.FIRER`) while its worker runs:
    whoever runs workers runs the timers."""

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        FIRER.start()

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        FIRER.stop()


class TakeoverWatching(dramatiq.Middleware):
    """Runs this process's take-over watch (`services.takeover.WATCH`) while its worker runs:
    a run whose holder died goes on within about `lock_ttl`."""

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        WATCH.start()

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        WATCH.stop()


class Heartbeats(dramatiq.Middleware):
    """Publishes this process's heartbeat (`services.heartbeats.HEARTBEAT`) while its worker
    runs, and counts the jobs its actors are running (the heartbeat's jobs in flight)."""

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        HEARTBEAT.start(consumed_queues(broker, worker))

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        HEARTBEAT.stop()

    def before_process_message(self, broker: dramatiq.Broker,
                               message: MessageProxy) -> None:
        HEARTBEAT.job_started(message.message_id)

    def after_process_message(self, broker: dramatiq.Broker, message: MessageProxy, *,
                              result: Any = None, exception: BaseException | None = None) -> None:
        HEARTBEAT.job_finished(message.message_id)

    def after_skip_message(self, broker: dramatiq.Broker,
                           message: MessageProxy) -> None:
        HEARTBEAT.job_finished(message.message_id)


def consumed_queues(broker: dramatiq.Broker, worker: dramatiq.Worker) -> list[str]:
    """The names of the queues `worker` consumes (its `--queues`, else every queue declared on
    `broker`), without Dramatiq's delay and dead-letter suffixes."""
    declared = {q_name(queue) for queue in broker.get_declared_queues()}
    chosen = worker.consumer_whitelist
    return sorted(declared & {q_name(q) for q in chosen} if chosen else declared)


def _per_process_loops(*, shared: bool = True) -> list[dramatiq.Middleware]:
    """The middleware of the loops every worker process runs: timers and its heartbeat, and
    on a shared broker the take-over watch (the embedded worker dies with the only process
    that could hold its runs: nobody is left to take them over)."""
    loops: list[dramatiq.Middleware] = [TimerFiring(), Heartbeats()]
    return [*loops, TakeoverWatching()] if shared else loops


def _embedded_broker() -> StubBroker:
    if _runtime.embedded is None:
        broker = StubBroker(middleware=[_EmbeddedAsyncIO(), Retries(max_retries=JOB_RETRIES),
                                        *_per_process_loops(shared=False)])
        broker.emit_after("process_boot")
        _runtime.embedded = broker
    return _runtime.embedded


def current_broker() -> dramatiq.Broker:
    """The broker jobs go to now (configured, from the environment, or embedded)."""
    configured = config.settings().broker
    if configured is not None:
        return configured  # type: ignore[no-any-return]
    with _runtime.mutex:
        url = os.environ.get(config.REDIS_URL_ENV)
        if url:
            if _runtime.env_broker is None:
                problem = scheme_problem(url)
                if problem is not None:
                    raise ConfigurationError(
                        f"{config.REDIS_URL_ENV}: not a usable Redis URL "
                        f"({safe_url(url)!r}): {problem}", option=config.REDIS_URL_ENV)
                if cluster_url(url) is not None:
                    raise ConfigurationError(
                        f"{config.REDIS_URL_ENV} names a Redis Cluster, which Dramatiq's "
                        "RedisBroker cannot use: configure a broker in code, e.g. "
                        "rf.configure(broker=RabbitmqBroker(url=...)) or a RedisBroker on a "
                        "plain Redis (docs/scaling.md)", option="broker")
                _runtime.env_broker = RedisBroker(url=url)  # type: ignore[no-untyped-call]
            return _runtime.env_broker
        return _embedded_broker()


def broker_in_use() -> dramatiq.Broker | None:
    """The broker this process sends jobs to, if it has one already (configured, or made
    from the environment or embedded by an earlier enqueue); None makes none."""
    configured = config.settings().broker
    if configured is not None:
        return configured  # type: ignore[no-any-return]
    with _runtime.mutex:
        if os.environ.get(config.REDIS_URL_ENV):
            return _runtime.env_broker
        return _runtime.embedded


def is_embedded(broker: dramatiq.Broker) -> bool:
    return broker is _runtime.embedded


def actors_for(broker: dramatiq.Broker) -> Actors:
    """reactorflow's actors on `broker` (declared on first use)."""
    with _runtime.mutex:
        known = _runtime.actors.get(id(broker))
        if known is not None and known[0] is broker:
            return known[1]
        if not any(isinstance(m, AsyncIO) for m in broker.middleware):
            broker.add_middleware(AsyncIO())
        for loop in _per_process_loops(shared=broker is not _runtime.embedded):
            if not any(isinstance(m, type(loop)) for m in broker.middleware):
                broker.add_middleware(loop)
        options = dict(max_retries=JOB_RETRIES, min_backoff=500, max_backoff=10_000,
                       time_limit=NO_TIME_LIMIT_MS, throws=(jobs.PermanentFailure,),
                       on_retry_exhausted="reactorflow.retries_exhausted")
        declared = Actors(
            execute_run=_declare(broker, jobs.execute_run, "reactorflow.execute_run", options),
            execute_unit=_declare(broker, jobs.execute_unit, "reactorflow.execute_unit",
                                  options),
            execute_element=_declare(broker, jobs.execute_element,
                                     "reactorflow.execute_element", options),
            execute_undo=_declare(broker, jobs.execute_undo, "reactorflow.execute_undo",
                                  options),
            retries_exhausted=_declare(broker, jobs.retries_exhausted,
                                       "reactorflow.retries_exhausted",
                                       dict(max_retries=0, time_limit=NO_TIME_LIMIT_MS)),
        )
        _runtime.actors[id(broker)] = (broker, declared)
        return declared


def _declare(broker: dramatiq.Broker, fn: Any, name: str, options: dict[str, Any]
             ) -> dramatiq.Actor[Any, Any]:
    existing = broker.actors.get(name)
    if existing is not None:
        return existing
    return dramatiq.Actor(fn, broker=broker, actor_name=name, queue_name=QUEUE, priority=0,
                          options=options)


def ensure_embedded_worker(broker: dramatiq.Broker) -> None:
    """Start the in-process worker of the embedded broker (once)."""
    if not is_embedded(broker):
        return
    with _runtime.mutex:
        if _runtime.worker is not None or _runtime.stopping is broker:
            return  # (a job enqueuing as its worker stops must not start another one)
        worker = dramatiq.Worker(broker, worker_threads=EMBEDDED_THREADS,
                                 worker_timeout=WORKER_TIMEOUT_MS)
        worker.start()
        _runtime.worker = worker
        # stop it before the interpreter joins threads (plain atexit runs after that join)
        threading._register_atexit(shutdown)  # type: ignore[attr-defined]
        log.info("reactorflow.worker.embedded_started threads=%d", EMBEDDED_THREADS)


def send(message: dramatiq.Message[Any], broker: dramatiq.Broker, delay_ms: int | None) -> None:
    """Send `message` (its first argument is its run's id).

    Raises:
        BrokerError: The broker client failed (a connection error, a timeout, a refusal).
    """
    ensure_embedded_worker(broker)
    try:
        broker.enqueue(message, delay=delay_ms)
    except ReactorflowError:
        raise
    except Exception as exc:  # the client's own errors (redis-py, pika, OSError...)
        run_id = message.args[0] if message.args else None
        raise BrokerError(message.actor_name, f"{type(exc).__name__}: {exc}",
                          run_id=run_id if isinstance(run_id, str) else None, cause=exc) from exc


def enqueue_run(run_id: str, reactor: str, *, delay: float | None = None,
                snoozes: int = 0, headers: Mapping[str, str] | None = None, version: int = 1,
                refused: float = 0.0) -> None:
    """Ask a worker to take the run on (the worker resume protocol decides what that means)."""
    broker = current_broker()
    actor = actors_for(broker).execute_run
    delay_ms = None if delay is None else int(delay * 1000)
    send(actor.message(run_id, reactor, snoozes, **_extra(headers, version, refused)), broker,
         delay_ms)
    log.info("reactorflow.worker.enqueued run_id=%s reactor=%s delay=%s", run_id, reactor,
             delay)


def enqueue_unit(run_id: str, reactor: str, key: str, *, delay: float | None = None,
                 headers: Mapping[str, str] | None = None, snoozes: int = 0, version: int = 1,
                 refused: float = 0.0) -> None:
    """Ask a worker to run one async unit of a run (`snoozes`: how often it was put back for
    a busy gate; a keyword only when not 0, so a message reads as before)."""
    broker = current_broker()
    actor = actors_for(broker).execute_unit
    counted = {"snoozes": snoozes} if snoozes else {}
    send(actor.message(run_id, reactor, key, **_extra(headers, version, refused), **counted),
         broker,
         None if delay is None else int(delay * 1000))


def enqueue_element(run_id: str, reactor: str, key: str, index: int, *,
                    delay: float | None = None, headers: Mapping[str, str] | None = None,
                    version: int = 1, refused: float = 0.0, count: int = 1) -> None:
    """Ask a worker to run elements `index` .. `index + count - 1` of a fanned-out map (a
    chunk; `count` a keyword only when not 1, so a one-element message reads as before)."""
    broker = current_broker()
    actor = actors_for(broker).execute_element
    chunk = {"count": count} if count != 1 else {}
    send(actor.message(run_id, reactor, key, index, **_extra(headers, version, refused),
                       **chunk),
         broker,
         None if delay is None else int(delay * 1000))


def enqueue_undo(run_id: str, reactor: str, key: str, index: int, *,
                 delay: float | None = None, headers: Mapping[str, str] | None = None,
                 version: int = 1, refused: float = 0.0) -> None:
    """Ask a worker to undo one completed element of a fanned-out map."""
    broker = current_broker()
    actor = actors_for(broker).execute_undo
    send(actor.message(run_id, reactor, key, index, **_extra(headers, version, refused)),
         broker,
         None if delay is None else int(delay * 1000))


def _extra(headers: Mapping[str, str] | None, version: int = 1,
           refused: float = 0.0) -> dict[str, Any]:
    """The job's middleware headers, version and first refusal as the actor's keywords (each
    left out at its default: a message as before)."""
    extra: dict[str, Any] = {"headers": dict(headers)} if headers else {}
    if version != 1:
        extra["version"] = version
    if refused:
        extra["refused"] = refused
    return extra


def shutdown() -> None:
    """Stop the embedded worker (at exit; also used by tests)."""
    with _runtime.mutex:
        worker, _runtime.worker = _runtime.worker, None
        _runtime.stopping = _runtime.embedded
    try:
        if worker is not None:
            worker.stop(timeout=5000)
    finally:
        with _runtime.mutex:
            _runtime.stopping = None

