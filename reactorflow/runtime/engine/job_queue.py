"""The job queue: how the runtime asks for work to be done later or elsewhere.

The runtime owns this seam and never imports what implements it. A job names what to do by
identity only (a run, one async unit of a run, one element of a map or its undo); storage is the
truth. Implementations:

* the Dramatiq layer (`reactorflow.workers.queue`), registered by the `reactorflow` package at
  import: Dramatiq actors carry the jobs to workers (a configured broker, the one at
  `REACTORFLOW_REDIS_URL`, else the embedded in-process StubBroker worker);
* `InProcessQueue` (`reactorflow.runtime.services.local_queue`): jobs run on an event loop of
  its own in this process, no broker involved (for the test kit, or `register(InProcessQueue)`).

Every implementation passes the contract suite in `tests/runtime/test_queue_contract.py`. A job
may be delivered more than once (at least once): each job body is idempotent (lock, then load,
then act on what is stored).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from enum import StrEnum
from typing import Protocol

import msgspec

from reactorflow import config
from reactorflow.errors import ConfigurationError
from reactorflow.middleware import Hooks


class JobKind(StrEnum):
    RUN = "run"  # take the run on (the worker resume protocol, `jobs.execute_run`)
    UNIT = "unit"  # run one async unit of the run (`jobs.execute_unit`)
    ELEMENT = "element"  # run one element of a fanned-out map (`jobs.execute_element`)
    UNDO = "undo"  # undo one completed element of a fanned-out map (`jobs.execute_undo`)


class Job(msgspec.Struct, frozen=True, omit_defaults=True):
    """One piece of work, by identity."""

    kind: JobKind
    run_id: str
    reactor: str
    step: str = ""  # UNIT: the unit's step key; ELEMENT, UNDO: the map's step key
    snoozes: int = 0  # RUN: re-enqueued because the run was busy; UNIT: because a gate was
    index: int = 0  # ELEMENT, UNDO: the element's index
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    """Context for the worker from middleware (`Middleware.inject`), e.g. a trace parent."""
    version: int = 1  # the version of its reactor the run was on when the job was sent
    refused: float = 0.0  # when a worker first handed it back for want of that version
    count: int = 1  # ELEMENT: how many consecutive elements from `index` (a chunk); else 1

    @classmethod
    def run(cls, run_id: str, reactor: str, *, version: int, snoozes: int = 0,
            headers: dict[str, str] | None = None) -> Job:
        return cls(JobKind.RUN, run_id, reactor, snoozes=snoozes, headers=headers or {},
                   version=version)

    @classmethod
    def unit(cls, run_id: str, reactor: str, step: str,
             headers: dict[str, str] | None = None, *, version: int, snoozes: int = 0) -> Job:
        return cls(JobKind.UNIT, run_id, reactor, step, snoozes=snoozes, headers=headers or {},
                   version=version)

    @classmethod
    def element(cls, run_id: str, reactor: str, step: str, index: int,
                headers: dict[str, str] | None = None, *, version: int, count: int = 1) -> Job:
        return cls(JobKind.ELEMENT, run_id, reactor, step, index=index, headers=headers or {},
                   version=version, count=count)

    @classmethod
    def undo(cls, run_id: str, reactor: str, step: str, index: int,
             headers: dict[str, str] | None = None, *, version: int) -> Job:
        return cls(JobKind.UNDO, run_id, reactor, step, index=index, headers=headers or {},
                   version=version)


class JobQueue(Protocol):
    """Where jobs go. `enqueue` never blocks on the job itself and is safe from any thread."""

    @property
    def shared(self) -> bool:
        """Whether jobs reach workers of other processes (a shared broker). The sweeper hands
        stalled work to a shared queue, and re-drives it itself otherwise."""
        ...

    def enqueue(self, job: Job, *, delay: float | None = None) -> None:
        """Deliver `job` to a worker, at least once, `delay` seconds from now at the earliest.

        Raises:
            StorageConnectionError: the queue's broker cannot be reached.
        """
        ...

    def timer_armed(self, due: float) -> None:
        """A run armed its timer (`Storage.arm_timer`) in this process, due at `due`: a queue
        whose workers run here makes sure a firing loop of this process fires it
        (`services.timers`); a shared queue's workers fire it wherever they run."""
        ...


_mutex = threading.Lock()
_factory: Callable[[], JobQueue] | None = None


def register(factory: Callable[[], JobQueue] | None) -> Callable[[], JobQueue] | None:
    """Install the queue implementation (called from above the runtime, e.g. by the
    `reactorflow` package); `factory()` is asked for the queue on every enqueue, so it may
    follow configuration changes. `None` unregisters it.

    Args:
        factory: returns the queue to use now.

    Returns:
        The factory it replaces (so a caller such as the test kit can put it back).
    """
    global _factory
    with _mutex:
        previous, _factory = _factory, factory
    return previous


def current() -> JobQueue:
    """The registered queue.

    Raises:
        ConfigurationError: no queue is registered (`import reactorflow` registers one).
    """
    factory = _factory
    if factory is None:
        raise ConfigurationError(
            "no job queue is registered: import reactorflow (it registers the Dramatiq queue), "
            "or call reactorflow.runtime.engine.job_queue.register(...)", option="broker")
    return factory()


Deferred = list[tuple[Job, float | None]]
_deferred: ContextVar[Deferred | None] = ContextVar("reactorflow_deferred_jobs", default=None)


async def deferring(work: Awaitable[None]) -> tuple[Deferred, Exception | None]:
    """Await `work`, collecting the jobs it enqueues through this module's `enqueue_*`
    instead of sending them: the caller sends them, e.g. from a worker thread, so that a
    broker's blocking send never holds up the event loop. Returns the jobs (in order), and
    the exception `work` raised, if any (its jobs must be sent all the same: they follow
    writes already stored; a cancellation propagates, and its jobs are dropped: the sweeper
    recovers what they were for)."""
    pending: Deferred = []
    token = _deferred.set(pending)
    try:
        await work
    except Exception as exc:  # handed to the caller, who raises it after the sends
        return pending, exc
    finally:
        _deferred.reset(token)
    return pending, None


@contextmanager
def immediate() -> Iterator[None]:
    """Inside `deferring`: the jobs enqueued in this block are sent at once (work that waits
    for what it enqueues, such as a map element whose step starts a run and waits for it)."""
    token = _deferred.set(None)
    try:
        yield
    finally:
        _deferred.reset(token)


def send(pending: Deferred) -> None:
    """Send jobs collected by `deferring`, in order."""
    for job, delay in pending:
        current().enqueue(job, delay=delay)


def _enqueue(job: Job, delay: float | None = None) -> None:
    pending = _deferred.get()
    if pending is not None:
        pending.append((job, delay))
    else:
        current().enqueue(job, delay=delay)


def timer_armed(due: float) -> None:
    """Tell the queue a timer due at `due` was armed here (see `JobQueue.timer_armed`)."""
    current().timer_armed(due)


def enqueue(job: Job, *, delay: float | None = None) -> None:
    """Send `job` as built (a job handed back, re-enqueued as it came)."""
    _enqueue(job, delay)


def enqueue_run(run_id: str, reactor: str, *, version: int, delay: float | None = None,
                snoozes: int = 0) -> None:
    """Ask a worker to take the run on (see `jobs.execute_run`); `version`: the version of
    its reactor the run is on (a worker without it hands the job back)."""
    _enqueue(Job.run(run_id, reactor, version=version, snoozes=snoozes,
                     headers=_headers(run_id)), delay)


def enqueue_unit(run_id: str, reactor: str, step: str, *, version: int) -> None:
    """Ask a worker to run one async unit of a run (see `jobs.execute_unit`)."""
    _enqueue(Job.unit(run_id, reactor, step, _headers(run_id), version=version))


def enqueue_element(run_id: str, reactor: str, step: str, index: int, *, version: int,
                    count: int = 1) -> None:
    """Ask a worker to run elements `index` .. `index + count - 1` of a fanned-out map, one
    after the other (a chunk; see `jobs.execute_element`)."""
    _enqueue(Job.element(run_id, reactor, step, index, _headers(run_id), version=version,
                         count=count))


def enqueue_undo(run_id: str, reactor: str, step: str, index: int, *, version: int) -> None:
    """Ask a worker to undo one completed element of a fanned-out map (see
    `jobs.execute_undo`)."""
    _enqueue(Job.undo(run_id, reactor, step, index, _headers(run_id), version=version))


def _headers(run_id: str) -> dict[str, str] | None:
    """What the configured middleware adds to a job for `run_id` (None without middleware)."""
    chain = config.settings().middleware
    return Hooks(chain).headers(run_id) if chain else None
