"""Recovery: find stalled runs and take them on again (`rf.sweep_once`).

A run is *stalled* when it is `running` or `rolling_back`, nobody holds its liveness lock, and
either its lock *lapsed* (taken and never released: `Liveness.lapsed`, its holder died or
stalled past the TTL) or nothing touched it for `stall_timeout` seconds (a job lost before any
worker took the run on). Re-driving it resumes from
its last checkpoint: completed steps never run again; the step that was in flight runs again
(at least once per step, with the same `StepContext.idempotency_key`).

The sweeper finds runs through the status indexes (`Storage.scan_status`), and, at a low rate,
through the run records themselves (`Storage.scan_records`, the record pass): a write cut off
between a run and its index entries (on a Redis Cluster they live on other masters) leaves a
run the indexes miss; the record pass writes its entries again and the sweep treats it as it
treats the others (`SweepReport.reindexed`).

A `running` run with a timer armed for later is not stalled: it sleeps, and its timer takes
it on (`services.timers`); one whose timer is overdue (no firer ran) is recovered.

A `paused` run whose interrupt deadline passed is settled by `deadlines.deadline_due`: rolled
back and failed, or, with the interrupt's `on_timeout=`, resumed with that payload (exactly
once, whatever else fires it). A paused run with a claimed but unapplied payload and no lock
holder (its resumer died) is resumed.

A run whose stored record cannot be decoded, or whose reactor's graph changed incompatibly, is
marked failed with the reason instead of being retried forever.

Each run and each async unit is swept on its own: one whose record cannot be read at all (a
field of the wrong Redis type or value, an unknown status) is reported in
`SweepReport.unreadable`, logged with the reason, and left as it is; the sweep goes on with the
others. Only a storage that cannot be reached ends a sweep (`StorageConnectionError`).

`run_forever` is the sweeping daemon (`reactorflow sweep`): a sweep every `interval` seconds; a
sweep that fails (an outage) is logged and tried again after a backoff that doubles up to a cap,
and the daemon goes on once the storage is back.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Awaitable, Callable, Container
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NoReturn

import msgspec

from reactorflow import clock, config, records
from reactorflow.definition import registry
from reactorflow.definition.graph import plan_for
from reactorflow.definition.specs import StepKind
from reactorflow.errors import (
    CorruptRecord,
    DefinitionChanged,
    KeyUnavailable,
    LockLost,
    RunRecordGone,
    StorageConnectionError,
    StorageError,
)
from reactorflow.protection.resolve import run_keys
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.async_units import child_report
from reactorflow.runtime.engine.async_units import report as report_unit
from reactorflow.runtime.engine.job_queue import Job, JobKind
from reactorflow.runtime.engine.mode import WAITS_FOR_THROWS
from reactorflow.runtime.engine.ownership import acquire, new_owner
from reactorflow.runtime.ops import operations
from reactorflow.runtime.ops.deadlines import deadline_due
from reactorflow.runtime.services import job_handling as jobs
from reactorflow.status import Status, StepStatus
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import Liveness, UnitLiveness

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

log = logging.getLogger("reactorflow.sweep")
DEFAULT_LIMIT = 1000
DEFAULT_INTERVAL = 30.0
"""Seconds between two sweeps of `run_forever`."""
BACKOFF_FIRST = 1.0
"""Seconds `run_forever` waits after a failed sweep; doubled after each further failure..."""
BACKOFF_CAP = 60.0
"""...up to this many seconds."""
RECORD_PASS_INTERVAL = 60.0
"""Seconds between two record passes (`Storage.scan_records`) of the sweeps of one storage
object in one process: a sweep at least this long after the last one's reads `limit` run
records, the others none."""
_record_passes: weakref.WeakKeyDictionary[Storage, float] = weakref.WeakKeyDictionary()
_record_passes_mutex = threading.Lock()


@dataclass(slots=True)
class SweepReport:
    """What one sweep did, as lists of run ids (an async unit as `"<run id>:<step key>"`).

    Attributes:
        recovered: Re-driven in this process: stalled runs, paused runs with an unapplied
            claim, lost units.
        expired: An overdue interrupt failed the run (`InterruptExpired`).
        timed_out: An overdue interrupt with `on_timeout=` settled the run: resumed with that
            payload (or failed, when its value did not validate).
        failed: Unreadable or changed graph: marked failed.
        skipped: The reactor is not declared in this process.
        enqueued: Handed to the workers (when a shared broker is configured).
        unreadable: A record that cannot be read at all: left as it is and logged; the sweep
            went on with the others.
        no_key: Values this process holds no key for: left as they are, and logged.
        reindexed: A live run the indexes had lost, found by the record pass: its index
            entries written again, and swept with the others.
    """

    recovered: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # unreadable or incompatible: marked failed
    skipped: list[str] = field(default_factory=list)  # reactor not imported in this process
    enqueued: list[str] = field(default_factory=list)  # handed to workers
    unreadable: list[str] = field(default_factory=list)
    """Runs (and async units, as "<run id>:<step>") whose stored record could not be read:
    left as they are; each is logged with the reason."""
    no_key: list[str] = field(default_factory=list)
    """Runs whose values this process holds no key for (`rf.KeyUnavailable`): left as they
    are, for a process that holds the key; each is logged (`reactorflow.sweep.key_unavailable`)."""
    reindexed: list[str] = field(default_factory=list)
    """Live runs the indexes had lost (a write cut off between a run and its index entries),
    found by the record pass: their entries were written again, and they were swept with the
    others (so each also appears in the list of what was done with it, if anything)."""


async def sweep_once(*, limit: int = DEFAULT_LIMIT, records: int | None = None) -> SweepReport:
    """Recover stalled runs and lost async units, and expire overdue interrupts, once.

    With a shared job queue (a broker: rf.configure(broker=...) or REACTORFLOW_REDIS_URL) the
    work is enqueued for workers; otherwise it is re-driven in this process (see `_hand_over`).
    Each run and unit is swept on its own (see the module): one that cannot be read is
    reported in `unreadable` and the sweep goes on.

    Args:
        limit: at most this many running and rolling-back runs, as many paused runs, and as
            many async units are looked at. Where more exist, each sweep looks at a window
            from a random point of them, so successive sweeps see every one.
        records: about how many run records the record pass reads in this sweep (the next
            ones of its walk over every run, see `Storage.scan_records`); 0: none. By default
            `limit` of them when this process's last record pass over this storage was at
            least `RECORD_PASS_INTERVAL` seconds ago, else none.

    Raises:
        StorageConnectionError: the storage cannot be reached (nothing more is swept).
    """
    storage = config.current_storage()
    report = SweepReport()
    await _sweep_units(storage, report, limit)
    # running and rolling-back runs first, apart: paused runs never crowd out a stalled one
    active = await storage.scan_status([Status.RUNNING, Status.ROLLING_BACK], limit)
    active += await storage.scan_status([Status.PAUSED], limit)
    active += await _record_pass(storage, report, _record_budget(storage, limit, records),
                                 {live.run_id for live in active})
    now = clock.now()
    for live in active:
        if live.problem is not None:
            _unreadable(report, live.run_id, live.problem)
        elif live.lock_owner is None:
            await _isolated(report, live.run_id, _sweep_run(storage, live, report, now))
    if any((report.recovered, report.expired, report.failed, report.enqueued,
            report.unreadable, report.reindexed)):
        log.info("reactorflow.sweep.done recovered=%d expired=%d failed=%d enqueued=%d "
                 "unreadable=%d reindexed=%d", len(report.recovered), len(report.expired),
                 len(report.failed), len(report.enqueued), len(report.unreadable),
                 len(report.reindexed))
    return report


async def recover_lapsed(*, limit: int = DEFAULT_LIMIT,
                         skip: Container[str] = ()) -> SweepReport:
    """Take on again the running and rolling-back runs whose lock lapsed (`Liveness.lapsed`:
    taken, never released, expired — the holder died), at once, without waiting for
    `stall_timeout`: the part of `sweep_once` the take-over watch of every worker runs every
    `lock_ttl / 3` (`services.takeover`). Each is enqueued for the workers (a shared queue) or
    driven here, as `sweep_once` does.

    Args:
        limit: at most this many running and rolling-back runs are looked at (from a random
            point when more are live, as `sweep_once`).
        skip: run ids to leave alone (handed on already: their job is queued).

    Raises:
        StorageConnectionError: the storage cannot be reached.
    """
    storage = config.current_storage()
    report = SweepReport()
    now = clock.now()
    for live in await storage.scan_status([Status.RUNNING, Status.ROLLING_BACK], limit):
        if live.problem is None and live.lapsed and live.run_id not in skip:
            await _isolated(report, live.run_id, _sweep_run(storage, live, report, now))
    if report.recovered or report.enqueued:
        log.info("reactorflow.sweep.lapsed recovered=%d enqueued=%d", len(report.recovered),
                 len(report.enqueued))
    return report


def _record_budget(storage: Storage, limit: int, records: int | None) -> int:
    """The run records this sweep's record pass reads (see `sweep_once`)."""
    if records is not None:
        return records
    now = clock.monotonic()
    with _record_passes_mutex:
        last = _record_passes.get(storage)
        if last is not None and now - last < RECORD_PASS_INTERVAL:
            return 0
        _record_passes[storage] = now
    return limit


async def _record_pass(storage: Storage, report: SweepReport, budget: int,
                       seen: set[str]) -> list[Liveness]:
    """The live runs the record pass found missing from the indexes (their entries written
    again: `reindexed`, logged), and the unreadable records it met, but for those the index
    scans returned already (`seen`)."""
    if budget <= 0:
        return []
    found = [live for live in await storage.scan_records(budget) if live.run_id not in seen]
    for live in found:
        if live.problem is None:
            report.reindexed.append(live.run_id)
            log.warning("reactorflow.sweep.reindexed run_id=%s reactor=%s status=%s: its index "
                        "entries were lost (a write cut off before them) and are written again",
                        live.run_id, live.reactor, live.status)
    return found


async def run_forever(*, interval: float = DEFAULT_INTERVAL, limit: int = DEFAULT_LIMIT,
                      on_report: Callable[[SweepReport], object] | None = None,
                      backoff: float = BACKOFF_FIRST, backoff_cap: float = BACKOFF_CAP
                      ) -> NoReturn:
    """Sweep every `interval` seconds until cancelled, surviving storage outages.

    1. Sweep once; hand the report to `on_report`.
    2. Sleep `interval` seconds, then sweep again.
    3. A sweep that raises (the storage unreachable, or anything else) is logged
       (`reactorflow.sweep.failed`, with the attempt and the delay) and tried again after
       `backoff` seconds, doubling on each further failure up to `backoff_cap`.
    4. The first sweep that succeeds after failures logs `reactorflow.sweep.resumed` and
       goes back to the regular rhythm.

    Args:
        interval: seconds between two sweeps.
        limit: runs looked at per sweep (see `sweep_once`).
        on_report: called with each sweep's report (e.g. to print it).
        backoff: seconds to wait after the first failed sweep.
        backoff_cap: the longest wait between failed sweeps.
    """
    failures = 0
    down_since = 0.0
    while True:
        try:
            report = await sweep_once(limit=limit)
        except Exception as exc:
            failures += 1
            down_since = down_since or clock.monotonic()
            delay = min(backoff * 2 ** min(failures - 1, 30), backoff_cap)
            log.warning("reactorflow.sweep.failed attempt=%d retry_in=%.1fs error=%s: %s",
                        failures, delay, type(exc).__name__, exc,
                        exc_info=not isinstance(exc, StorageConnectionError))
            await clock.sleep(delay)
            continue
        if failures:
            log.warning("reactorflow.sweep.resumed after=%d failed sweeps (%.1fs)", failures,
                        clock.monotonic() - down_since)
            failures, down_since = 0, 0.0
        if on_report is not None:
            on_report(report)
        await clock.sleep(interval)


def _unreadable(report: SweepReport, label: str, reason: str) -> None:
    report.unreadable.append(label)
    log.warning("reactorflow.sweep.unreadable run_id=%s reason=%s", label, reason)


async def _isolated(report: SweepReport, label: str, work: Awaitable[None]) -> None:
    """Await one run's (or unit's) sweep: whatever goes wrong with it is reported and logged,
    never stops the sweep of the others — except an unreachable storage."""
    try:
        await work
    except StorageConnectionError:
        raise
    except RunRecordGone:  # it expired or was deleted meanwhile: nothing left to sweep
        log.info("reactorflow.sweep.gone run_id=%s", label)
    except LockLost:  # another execution took it over meanwhile: it is alive
        log.info("reactorflow.sweep.taken_over run_id=%s", label)
    except KeyUnavailable as exc:  # this sweeper lacks a key: the run is left as it is
        report.no_key.append(label)
        log.warning("reactorflow.sweep.key_unavailable run_id=%s field=%s key_id=%s: this "
                    "process holds no key for the run's values, so it leaves the run to one "
                    "that does (give its codec that key)", label, exc.field, exc.key_id)
    except (StorageError, ValueError) as exc:  # a record of the wrong type, shape or value
        _unreadable(report, label, str(exc))
    except Exception:
        log.exception("reactorflow.sweep.run_failed run_id=%s", label)


async def _sweep_run(storage: Storage, live: Liveness, report: SweepReport, now: float) -> None:
    """One unlocked run: expire or resume it when paused, recover it when stalled; a corrupt
    one is marked failed."""
    try:
        if live.status == Status.PAUSED:
            await _sweep_paused(storage, live, report)
        elif live.lapsed or now - live.touched_at >= config.settings().stall_timeout:
            if live.status == Status.RUNNING and await _asleep(storage, live.run_id, now):
                return  # parked until its timer: not stalled (a firer resumes it)
            await _recover(storage, live, report)
    except CorruptRecord as exc:
        await operations.mark_unrecoverable(storage, live.run_id, "CorruptRecord", exc.message)
        report.failed.append(live.run_id)


async def _asleep(storage: Storage, run_id: str, now: float) -> bool:
    """The run's timer is armed for later: it sleeps (or waits for a long retry), and its
    timer, not the sweeper, takes it on. A timer overdue (no firer ran) does not count: the
    sweep recovers the run, late, once."""
    timer = await storage.timer_of(run_id)
    return timer is not None and timer > now


async def _sweep_paused(storage: Storage, live: Liveness, report: SweepReport) -> None:
    reactor = registry.lookup(live.reactor)
    if reactor is None:
        report.skipped.append(live.run_id)
        return
    settled = await deadline_due(reactor, storage, live.run_id, hand_off=queue.current().shared)
    if settled is not None:
        timed_out = settled.error is None or settled.error.type != "InterruptExpired"
        (report.timed_out if timed_out else report.expired).append(live.run_id)
        log.info("reactorflow.sweep.%s run_id=%s", "timed_out" if timed_out else "expired",
                 live.run_id)
        return
    head = await storage.load_head(live.run_id)
    if head is None or head.status != Status.PAUSED:
        return
    try:
        state = records.decode_state(head.state)
    except msgspec.DecodeError as exc:
        raise CorruptRecord(live.run_id, f"its state cannot be decoded: {exc}") from exc
    claims = await storage.claims(live.run_id)
    if any(k in claims for k in state.waiting_on):
        await _recover(storage, live, report)


async def _recover(storage: Storage, live: Liveness, report: SweepReport) -> None:
    reactor = registry.lookup(live.reactor)
    if reactor is None:
        report.skipped.append(live.run_id)
        log.warning("reactorflow.sweep.unknown_reactor run_id=%s reactor=%s (import the module "
                    "that declares it in the sweeping process)", live.run_id, live.reactor)
        return
    head = await storage.load_head(live.run_id)  # the job carries the run's version
    version = records.meta_version(head.meta) if head is not None else 1
    await _hand_over(Job.run(live.run_id, live.reactor, version=version), reactor, report)


async def _hand_over(job: Job, reactor: Reactor, report: SweepReport) -> None:
    """The one path of stalled work: a shared queue's workers take it; else this process
    does the job's work now (a run only if nobody took it meanwhile)."""
    label = job.run_id if job.kind is JobKind.RUN else f"{job.run_id}:{job.step}"
    work = queue.current()
    if work.shared:
        work.enqueue(job)
        report.enqueued.append(label)
        return
    if job.kind is JobKind.UNIT:
        await jobs.execute_unit(job.run_id, job.reactor, job.step, version=job.version)
        report.recovered.append(label)
        return
    storage = config.current_storage()
    settings = config.settings()
    owner = new_owner()
    if not await acquire(storage, job.run_id, owner, settings.lock_ttl, 0.0):
        return  # someone took it meanwhile: it is alive
    log.info("reactorflow.sweep.recovering run_id=%s reactor=%s", job.run_id, job.reactor)
    try:
        await operations.run_owned(reactor, storage, job.run_id, owner,
                                   mode=WAITS_FOR_THROWS)
    except (CorruptRecord, DefinitionChanged) as exc:
        await operations.mark_unrecoverable(storage, job.run_id, type(exc).__name__,
                                            exc.message)
        report.failed.append(job.run_id)
        return
    report.recovered.append(label)


async def _sweep_units(storage: Storage, report: SweepReport, limit: int) -> None:
    """Dispatched async units whose worker died (or whose job was lost) run again."""
    stall = config.settings().stall_timeout
    now = clock.now()
    for unit in await storage.scan_units(limit):
        label = f"{unit.run_id}:{unit.key}"
        if unit.problem is not None:
            _unreadable(report, label, unit.problem)
        elif unit.lock_owner is None and now - unit.dispatched_at >= stall:
            await _isolated(report, label, _sweep_unit(storage, unit, report))


async def _sweep_unit(storage: Storage, unit: UnitLiveness, report: SweepReport) -> None:
    head = await storage.load_head(unit.run_id)
    version = records.meta_version(head.meta) if head is not None else 1
    reactor = registry.lookup(head.reactor, version) if head is not None else None
    raw = await storage.load_step(unit.run_id, unit.key)
    if reactor is None or raw is None:
        return
    node = plan_for(reactor).nodes.get(unit.key)
    record = records.decode_step(raw)
    if node is None or record.status != StepStatus.RUNNING:
        return
    if record.retry_at is not None and record.retry_at > clock.now():
        return  # parked between two attempts: its job is put back for the next one
    if node.kind is StepKind.ASYNC_REACTOR:
        if record.child_run:  # the child is a run of its own: swept as such; relay its end
            report_record = await child_report(storage, record.child_run, node, record,
                                               await run_keys(storage, None, unit.run_id))
            if report_record is not None:
                await report_unit(storage, unit.run_id, unit.key, report_record, [])
        return
    await _hand_over(Job.unit(unit.run_id, reactor.name, unit.key, version=version), reactor,
                     report)
    log.info("reactorflow.sweep.unit run_id=%s step=%s", unit.run_id, unit.key)
