"""Repairing a held run (api.md §15): `retry_step` runs its failed step again with the code now
deployed, `skip_step` records the step's result by hand; either way the run then goes on.

The protocol, in order:

1. Read the run's head: a run that is not `held` is refused (`rf.RunStateError` naming its
   status and what it allows), nothing written.
2. Take the run's lock (waiting up to `lock_wait`; a second operator action on the same run
   waits its turn there, and finds the run no longer held: refused), and read the run under
   it; a run of a version this process does not declare is migrated first
   (`operations.load_owned`), so a held v1 run retried on v2 code goes through its migration.
3. Check the step: it must be the run's failed step (`rf.StepNotFailed`); for `skip_step`,
   the result must fit the step's return type (`rf.ResultValidationError`). Nothing is written
   before these checks pass.
4. One fenced write: the step's record (retry: pending again, its failed attempt's compensate
   given up, since the step runs again; skip: completed with the result, undone on a later
   rollback like any completed step), composed steps around it open again, status `running`,
   error cleared, a `run.repaired` event. A hold_timeout's timer is disarmed.
5. Drive the run on, here (as `continue_` does), or in a worker for an `always_dispatch`
   reactor. The retried step keeps its `ctx.idempotency_key` (it is the same step of the same
   run).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow import audit, clock, config, records
from reactorflow.definition import registry
from reactorflow.definition.conformance import Rejected, conform
from reactorflow.definition.graph import SEP
from reactorflow.errors import LockTimeout, ResultValidationError, RunStateError, StepNotFailed
from reactorflow.protection import fields
from reactorflow.records import StepRecord
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.execution import Execution, event
from reactorflow.runtime.engine.ownership import acquire, keep_alive, new_owner
from reactorflow.runtime.ops import operations
from reactorflow.runtime.ops.payloads import step_key
from reactorflow.runtime.ops.snapshots import run_status
from reactorflow.snapshot import Run
from reactorflow.status import EventKind, Status, StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

log = logging.getLogger("reactorflow.run")

_NO_RESULT: Any = object()


async def retry_step(reactor: Reactor, run_id: str, step: str | Sequence[str]) -> Run:
    """Run the failed step of held run `run_id` again, then go on (see the module)."""
    return await _repair(reactor, run_id, step_key(step), "retry_step", _NO_RESULT)


async def skip_step(reactor: Reactor, run_id: str, step: str | Sequence[str], *,
                    result: Any) -> Run:
    """Record `result` as what the failed step of held run `run_id` returned, then go on."""
    return await _repair(reactor, run_id, step_key(step), "skip_step", result)


async def _repair(reactor: Reactor, run_id: str, key: str, operation: str, result: Any) -> Run:
    storage = config.current_storage()
    settings = config.settings()
    head = await operations.head_of(reactor, storage, run_id)
    status = run_status(head)
    if status is not Status.HELD:
        raise RunStateError(run_id, status, operation)
    owner = new_owner()
    if not await acquire(storage, run_id, owner, settings.lock_ttl, settings.lock_wait):
        raise LockTimeout(run_id, settings.lock_wait, operation)
    try:
        async with keep_alive(storage, run_id, owner, settings.lock_ttl, release=False):
            ex = await operations.load_owned(reactor, storage, run_id, owner)
            _repaired(ex, key, operation, result)
            await ex.writer.save_state(
                Status.RUNNING, steps=_reopened(ex, key),
                events=[event(EventKind.RUN_REPAIRED, key, detail=f"{operation} {key}",
                             actor=audit.who())],
                error=None, hold_until=None)
            await storage.disarm_timer(run_id)  # a hold_timeout's: void
    except BaseException:
        await storage.release_lock(run_id, owner)
        raise
    own = registry.lookup(reactor.name, ex.meta.version) or reactor
    log.info("reactorflow.run.repaired run_id=%s reactor=%s step=%s by=%s", run_id,
             reactor.name, key, operation)
    if own.always_dispatch:  # its steps run in workers: one goes on with it
        await storage.release_lock(run_id, owner)
        queue.enqueue_run(run_id, own.name, version=own.version)
    else:
        await operations.run_owned(own, storage, run_id, owner, ex, loaded=True)
    return await operations.get(own, run_id)


def _repaired(ex: Execution, key: str, operation: str, result: Any) -> None:
    """Step 3 of the module, then the step's new record put in `ex.records` (not written).

    Raises:
        RunStateError: the run is no longer held (another operator acted first).
        StepNotFailed: `key` is not the run's failed step.
        ResultValidationError: `result` does not fit the step's return type.
    """
    if ex.state.status is not Status.HELD:
        raise RunStateError(ex.run_id, ex.state.status, operation)
    record = ex.records.get(key)
    failed = ex.state.error.step if ex.state.error is not None else None
    node = ex.plan.nodes.get(key)
    if node is None or record is None or record.status is not StepStatus.FAILED:
        shown = "not a step of the run" if node is None else (
            StepStatus.PENDING if record is None else record.status)
        raise StepNotFailed(ex.run_id, key, str(shown), operation, failed)
    if result is _NO_RESULT:
        ex.records[key] = StepRecord(StepStatus.PENDING, 0)
        return
    try:
        value = conform(result, node.result_type)
    except Rejected as exc:
        raise ResultValidationError(ex.run_id, key, exc.field, exc.reason) from None
    now = clock.now()
    ex.records[key] = StepRecord(StepStatus.COMPLETED, record.attempts, record.started_at, now,
                                 ex.keys.seal_raw(fields.result(key), records.encode(value)),
                                 seq=ex.writer.next_seq())
    ex.values[key] = value


def _reopened(ex: Execution, key: str) -> list[str]:
    """The records step 4 writes: the step's, and those of the composed steps around it that
    failed with it (open again, their child going on)."""
    written = [key]
    parts = key.split(SEP)
    for depth in range(len(parts) - 1, 0, -1):
        outer = SEP.join(parts[:depth])
        record = ex.records.get(outer)
        if record is not None and record.status is StepStatus.FAILED:
            ex.records[outer] = msgspec.structs.replace(
                record, status=StepStatus.RUNNING, error=None, finished_at=None,
                compensate_pending=False)
            written.append(outer)
    return written
