"""Recovery: find stalled runs and take them on again (`rf.sweep_once`).

A run is *stalled* when it is `running` or `rolling_back`, nobody holds its liveness lock, and
nothing touched it for `stall_timeout` seconds: its execution died. Re-driving it resumes from
its last checkpoint: completed steps never run again; the step that was in flight runs again
(at least once per step, with the same `StepContext.idempotency_key`).

A `paused` run whose interrupt deadline passed is rolled back and failed. A paused run with a
claimed but unapplied payload and no lock holder (its resumer died) is resumed.

A run whose stored record cannot be decoded, or whose reactor's graph changed incompatibly, is
marked failed with the reason instead of being retried forever.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from reactorflow import config, records
from reactorflow.definition import registry
from reactorflow.definition.graph import display_path, plan_for
from reactorflow.definition.specs import StepKind
from reactorflow.errors import CorruptRecord, DefinitionChanged
from reactorflow.records import RunError
from reactorflow.runtime import jobs, operations, queue
from reactorflow.runtime.ownership import acquire, new_owner
from reactorflow.runtime.queue import Job, JobKind
from reactorflow.runtime.resume import fail_run
from reactorflow.runtime.units import child_report
from reactorflow.runtime.units import report as report_unit
from reactorflow.status import Status, StepStatus
from reactorflow.storage.base import Liveness, Storage

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

log = logging.getLogger("reactorflow.sweep")
DEFAULT_LIMIT = 1000


@dataclass(slots=True)
class SweepReport:
    """What one sweep did, by run id."""

    recovered: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # unreadable or incompatible: marked failed
    skipped: list[str] = field(default_factory=list)  # reactor not imported in this process
    enqueued: list[str] = field(default_factory=list)  # handed to workers


async def sweep_once(*, limit: int = DEFAULT_LIMIT) -> SweepReport:
    """Recover stalled runs and lost async units, and expire overdue interrupts, once.

    With a shared job queue (a broker: rf.configure(broker=...) or REACTORFLOW_REDIS_URL) the
    work is enqueued for workers; otherwise it is re-driven in this process (see `_hand_over`).
    """
    storage = config.current_storage()
    settings = config.settings()
    report = SweepReport()
    now = time.time()
    await _sweep_units(storage, report, limit)
    active = await storage.scan_status([Status.RUNNING, Status.ROLLING_BACK, Status.PAUSED],
                                       limit)
    for live in active:
        if live.lock_owner is not None:
            continue
        try:
            if live.status == Status.PAUSED:
                await _sweep_paused(storage, live, report)
            elif now - live.touched_at >= settings.stall_timeout:
                await _recover(storage, live, report)
        except CorruptRecord as exc:
            await operations.mark_unrecoverable(storage, live.run_id, "CorruptRecord",
                                                exc.message)
            report.failed.append(live.run_id)
        except Exception:  # one bad run never stops the sweep of the others
            log.exception("reactorflow.sweep.run_failed run_id=%s", live.run_id)
    if any((report.recovered, report.expired, report.failed, report.enqueued)):
        log.info("reactorflow.sweep.done recovered=%d expired=%d failed=%d enqueued=%d",
                 len(report.recovered), len(report.expired), len(report.failed),
                 len(report.enqueued))
    return report


async def _sweep_paused(storage: Storage, live: Liveness, report: SweepReport) -> None:
    reactor = registry.lookup(live.reactor)
    if reactor is None:
        report.skipped.append(live.run_id)
        return
    head = await storage.load_head(live.run_id)
    if head is None or head.status != Status.PAUSED:
        return
    try:
        state = records.decode_state(head.state)
    except msgspec.DecodeError as exc:
        raise CorruptRecord(live.run_id, f"its state cannot be decoded: {exc}") from exc
    now = time.time()
    overdue = sorted((d, k) for k, d in state.deadlines.items() if d <= now)
    if overdue:
        key = overdue[0][1]
        error = RunError(key, "InterruptExpired",
                         f"no payload for interrupt {display_path(key)} before its deadline")
        await fail_run(reactor, storage, live.run_id, error)
        report.expired.append(live.run_id)
        log.info("reactorflow.sweep.expired run_id=%s step=%s", live.run_id, key)
        return
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
    await _hand_over(Job.run(live.run_id, live.reactor), reactor, report)


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
        await jobs.execute_unit(job.run_id, job.reactor, job.step)
        report.recovered.append(label)
        return
    storage = config.current_storage()
    settings = config.settings()
    owner = new_owner()
    if not await acquire(storage, job.run_id, owner, settings.lock_ttl, 0.0):
        return  # someone took it meanwhile: it is alive
    log.info("reactorflow.sweep.recovering run_id=%s reactor=%s", job.run_id, job.reactor)
    try:
        await operations.run_owned(reactor, storage, job.run_id, owner)
    except (CorruptRecord, DefinitionChanged) as exc:
        await operations.mark_unrecoverable(storage, job.run_id, type(exc).__name__,
                                            exc.message)
        report.failed.append(job.run_id)
        return
    report.recovered.append(label)


async def _sweep_units(storage: Storage, report: SweepReport, limit: int) -> None:
    """Dispatched async units whose worker died (or whose job was lost) run again."""
    stall = config.settings().stall_timeout
    now = time.time()
    for unit in await storage.scan_units(limit):
        if unit.lock_owner is not None or now - unit.dispatched_at < stall:
            continue
        head = await storage.load_head(unit.run_id)
        reactor = registry.lookup(head.reactor) if head is not None else None
        raw = await storage.load_step(unit.run_id, unit.key)
        if reactor is None or raw is None:
            continue
        node = plan_for(reactor).nodes.get(unit.key)
        record = records.decode_step(raw)
        if node is None or record.status != StepStatus.RUNNING:
            continue
        if node.kind is StepKind.ASYNC_REACTOR:
            if record.child_run:  # the child is a run of its own: swept as such; relay its end
                report_record = await child_report(storage, record.child_run, node, record)
                if report_record is not None:
                    await report_unit(storage, unit.run_id, unit.key, report_record, [])
            continue
        await _hand_over(Job.unit(unit.run_id, reactor.name, unit.key), reactor, report)
        log.info("reactorflow.sweep.unit run_id=%s step=%s", unit.run_id, unit.key)
