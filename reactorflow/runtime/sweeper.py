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

import msgspec

from reactorflow import config, records
from reactorflow.definition import registry
from reactorflow.definition.graph import display_path
from reactorflow.errors import CorruptRecord, DefinitionChanged, ReactorflowError
from reactorflow.records import RunError, RunState
from reactorflow.runtime import operations
from reactorflow.runtime.ownership import acquire, keep_alive, new_owner
from reactorflow.runtime.resume import fail_run
from reactorflow.status import Status
from reactorflow.storage.base import Liveness, Storage

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
    """Recover stalled runs and expire overdue interrupts once."""
    storage = config.current_storage()
    settings = config.settings()
    report = SweepReport()
    now = time.time()
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
        except ReactorflowError:
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
    state = records.decode_state(head.state)
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
    settings = config.settings()
    owner = new_owner()
    if not await acquire(storage, live.run_id, owner, settings.lock_ttl, 0.0):
        return  # someone took it meanwhile: it is alive
    log.info("reactorflow.sweep.recovering run_id=%s reactor=%s status=%s", live.run_id,
             live.reactor, live.status)
    try:
        await operations.run_owned(reactor, storage, live.run_id, owner)
    except (CorruptRecord, DefinitionChanged) as exc:
        await _mark_failed(storage, live, exc)
        report.failed.append(live.run_id)
        return
    report.recovered.append(live.run_id)


async def _mark_failed(storage: Storage, live: Liveness, exc: ReactorflowError) -> None:
    """A run that cannot be read or continued: failed with the reason, never retried again."""
    settings = config.settings()
    owner = new_owner()
    if not await acquire(storage, live.run_id, owner, settings.lock_ttl, settings.lock_wait):
        return
    async with keep_alive(storage, live.run_id, owner, settings.lock_ttl):
        error = RunError(None, type(exc).__name__, exc.message)
        state = RunState(status=Status.FAILED, updated_at=time.time(), error=error)
        await storage.save_state(live.run_id, owner, status=Status.FAILED,
                                 previous_status=live.status,
                                 state=msgspec.msgpack.encode(state), publish=True,
                                 clear_control=True)
    log.error("reactorflow.sweep.unrecoverable run_id=%s reason=%s", live.run_id, exc.message)
