"""`rf.sync`: reactorflow's top-level coroutines for sync code (a Flask or Django view, a
management command, a Celery task). Each blocks until its async twin of `rf` returns.

`rf.sync.get_run(run_id)` is `await rf.get_run(run_id)`, and so on for `explain`, `list_runs`,
`ordered_peek`, `ordered_skip`, `ordered_reset`, `schedule_once`, `sweep_once`,
`fire_timers` and `list_workers`; a reactor's
own run methods are `reactor.sync.run(...)` and its siblings. The coroutines run on one
private event-loop thread per process (anyio's blocking portal), started on first use, shut down
at interpreter exit and started afresh in a forked child; they are safe from any number of
threads at once. Inside a running event loop each raises `rf.SyncInEventLoop`: there, await the
async function instead. See [From sync code](sync.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from reactorflow.runtime.gates import operate
from reactorflow.runtime.ops import explain as explaining
from reactorflow.runtime.ops import lookup
from reactorflow.runtime.services import heartbeats, portal, scheduler, sweeper, timers
from reactorflow.runtime.subjects import forget

if TYPE_CHECKING:
    from reactorflow.blockers import Blocker
    from reactorflow.definition.reactor import Reactor
    from reactorflow.records import Erasure, WorkerInfo
    from reactorflow.runtime.services.sweeper import SweepReport
    from reactorflow.snapshot import Run, RunPage
    from reactorflow.status import Status
    from reactorflow.storage.contract.values import OrderedLine

T = TypeVar("T")

__all__ = ["explain", "fire_timers", "forget_subject", "get_run", "list_erasures", "list_runs",
           "list_workers", "ordered_peek",
           "ordered_reset", "ordered_skip", "schedule_once", "sweep_once"]


def _call(name: str, work: Callable[[], Awaitable[T]]) -> T:
    return portal.call(work, called=f"rf.sync.{name}", instead=f"rf.{name}")


def get_run(run_id: str) -> Run:
    """`await rf.get_run(run_id)` from sync code: the snapshot of any run, whatever its reactor.

    Args:
        run_id: the run's id (`run.id`).

    Raises:
        SyncInEventLoop: called inside a running event loop (await `rf.get_run`).
        RunNotFound: no such run (a wrong id, or it expired after its retention period).
        CorruptRecord: the run's stored state cannot be decoded.
    """
    return _call("get_run", partial(lookup.get_run, run_id))


def explain(run_id: str) -> list[Blocker]:
    """`await rf.explain(run_id)` from sync code: what the run waits on, and since when.

    Args:
        run_id: the run's id (`run.id`).

    Raises:
        SyncInEventLoop: called inside a running event loop (await `rf.explain`).
        RunNotFound: no such run (a wrong id, or it expired after its retention period).
        CorruptRecord: the run's stored state cannot be decoded.
    """
    return _call("explain", partial(explaining.explain, run_id))


def list_runs(*, reactor: str | None = None, status: str | Status | None = None,
              limit: int = 50, cursor: str | None = None, since: datetime | None = None,
              until: datetime | None = None, correlation_id: str | None = None,
              idempotency_key: str | None = None, version: int | None = None,
              error_type: str | None = None) -> RunPage:
    """`await rf.list_runs(...)` from sync code: runs newest first, a page at a time.

    Args:
        reactor: only the runs of the reactor with this name (None: every reactor).
        status: only runs in this status (an `rf.Status` or its value).
        limit: runs per page, 1 to 1000.
        cursor: the `next_cursor` of the previous page (None for the first page).
        since: only runs created at or after this aware datetime (inclusive).
        until: only runs created before this aware datetime (exclusive).
        correlation_id: only the run this interrupt correlation id leads to.
        idempotency_key: only the run started with this idempotency key.
        version: only runs on this version of their reactor.
        error_type: only failed runs whose error has this type (its class name).

    Raises:
        SyncInEventLoop: called inside a running event loop (await `rf.list_runs`).
        ReactorflowError: an unknown status, a limit out of range, or a cursor this library did
            not return.
    """
    return _call("list_runs", partial(
        lookup.list_runs, reactor=reactor, status=status, limit=limit, cursor=cursor,
        since=since, until=until, correlation_id=correlation_id,
        idempotency_key=idempotency_key, version=version, error_type=error_type))


def ordered_peek(key: str) -> OrderedLine:
    """`await rf.ordered_peek(key)` from sync code: an ordered lock's line as it stands.

    Args:
        key: The ordered lock's key, as its template rendered it (`'ledger:acct-9'`).

    Raises:
        SyncInEventLoop: Called inside a running event loop (await `rf.ordered_peek`).
        ReactorflowError: `key` is not a non-empty str.
        StorageError: The storage failed.
    """
    return _call("ordered_peek", partial(operate.ordered_peek, key))


def ordered_skip(key: str, ticket: str | None = None) -> str:
    """`await rf.ordered_skip(key, ticket)` from sync code: pass over a stuck ticket now.

    Args:
        key: The ordered lock's key, as its template rendered it.
        ticket: The ticket to take out (a run id, or `<run id>|<step>`); None: whoever holds
            the turn now.

    Raises:
        SyncInEventLoop: Called inside a running event loop (await `rf.ordered_skip`).
        NotInLine: `ticket` is not in the line (or, with None, the line is empty).
        ReactorflowError: `key` is not a non-empty str, or `ticket` not a str.
    """
    return _call("ordered_skip", partial(operate.ordered_skip, key, ticket))


def ordered_reset(key: str) -> int:
    """`await rf.ordered_reset(key)` from sync code: delete an ordered lock's line.

    Args:
        key: The ordered lock's key, as its template rendered it.

    Raises:
        SyncInEventLoop: Called inside a running event loop (await `rf.ordered_reset`).
        ReactorflowError: `key` is not a non-empty str.
    """
    return _call("ordered_reset", partial(operate.ordered_reset, key))


def schedule_once(*, reactors: Sequence[Reactor] | None = None) -> list[Run]:
    """`await rf.schedule_once()` from sync code: start a run for every schedule tick due now.

    Args:
        reactors: Only these reactors' schedules (default: every reactor declared in this
            process).

    Raises:
        SyncInEventLoop: Called inside a running event loop (await `rf.schedule_once`).
        StorageError: The storage failed (`StorageConnectionError`: it cannot be reached).
    """
    return _call("schedule_once", partial(scheduler.schedule_once, reactors=reactors))


def sweep_once(*, limit: int = sweeper.DEFAULT_LIMIT, records: int | None = None) -> SweepReport:
    """`await rf.sweep_once()` from sync code: recover stalled runs and lost async units, and
    expire overdue interrupts, once.

    Args:
        limit: at most this many running and rolling-back runs, as many paused runs, and as
            many async units are looked at (see `rf.sweep_once`).
        records: about how many run records the record pass reads in this sweep (see
            `rf.sweep_once`).

    Raises:
        SyncInEventLoop: called inside a running event loop (await `rf.sweep_once`).
        StorageConnectionError: the storage cannot be reached (nothing more is swept).
    """
    return _call("sweep_once", partial(sweeper.sweep_once, limit=limit, records=records))


def fire_timers() -> list[Run]:
    """`await rf.fire_timers()` from sync code: fire every timer due now (sleeps, long
    backoffs, interrupt deadlines), resuming each run in this process.

    Returns:
        The runs it resumed, as they are afterwards.

    Raises:
        SyncInEventLoop: called inside a running event loop (await `rf.fire_timers`).
        StorageError: the storage failed (the timers not yet fired fire later).
    """
    return _call("fire_timers", timers.fire_timers)


def list_workers() -> list[WorkerInfo]:
    """`await rf.list_workers()` from sync code: the live worker processes, by their heartbeats.

    Returns:
        One `rf.WorkerInfo` per live worker process, by host then process id.

    Raises:
        SyncInEventLoop: called inside a running event loop (await `rf.list_workers`).
        StorageError: the storage failed.
    """
    return _call("list_workers", heartbeats.list_workers)


def forget_subject(subject: str, *, actor: str | None = None) -> int:
    """`await rf.forget_subject(subject)` from sync code: erase a data subject.

    Args:
        subject: The subject as the reactor's `subject=` template renders it.
        actor: Who erases it (default: this process's `user@host`).

    Returns:
        The number of runs touched (0: unknown, or erased already).

    Raises:
        SyncInEventLoop: called inside a running event loop (await `rf.forget_subject`).
        ReactorflowError: a bad `subject` or `actor` (nothing changes).
        StorageError: the storage failed.
    """
    return _call("forget_subject", partial(forget.forget_subject, subject, actor=actor))


def list_erasures(limit: int = 100) -> list[Erasure]:
    """`await rf.list_erasures()` from sync code: the newest erasures' audit records.

    Args:
        limit: How many at most (a whole number >= 1).

    Raises:
        SyncInEventLoop: called inside a running event loop (await `rf.list_erasures`).
        ReactorflowError: a bad `limit`.
        StorageError: the storage failed.
    """
    return _call("list_erasures", partial(forget.list_erasures, limit))
