"""Async units: `async_step` and `async_reactor` work that runs in a worker while its run goes on.

* **Dispatch** (the run's owner): write the unit's marker (status `running`) with a fenced
  checkpoint, *then* enqueue. A marker already present means re-attach, never re-dispatch.
  An `async_reactor` starts its child as a run of its own, with an id derived from the parent's
  (`<run id>-<step>`), so a repeated dispatch finds the same child.
* **Execution** (a worker): the unit runs with its own retry policy, compensates itself once if
  its last attempt failed, writes its record into the parent run (unfenced: the parent never
  writes a unit's record after dispatch), then publishes on the unit's topic. A child run of an
  `async_reactor` reports to its parent the same way when it ends.
* **Reading** (a step that depends on a unit): subscribe, check the record, wait; re-check every
  `clamp(timeout/10, 1 s, 5 s)`; give up after `async_wait_timeout`.
The parent's rollback never touches a unit.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow import clock, config, records
from reactorflow.definition import registry
from reactorflow.definition.gates import Period
from reactorflow.definition.graph import plan_for
from reactorflow.definition.specs import StepKind
from reactorflow.errors import AsyncWaitTimeout
from reactorflow.markers import Outcome
from reactorflow.protection import fields, sealing
from reactorflow.protection.errors import open_error, open_run_error
from reactorflow.protection.keys import RunKeys
from reactorflow.protection.resolve import run_keys, stored_keys
from reactorflow.records import ErrorRecord, RunError, StepRecord
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.execution import Execution, event
from reactorflow.runtime.gates.gate_keys import period_marker
from reactorflow.runtime.ops.creation import create_child_run
from reactorflow.runtime.ops.snapshots import run_status
from reactorflow.status import EventKind, HaltReason, Status, StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.storage.contract.storage import Storage

log = logging.getLogger("reactorflow.async")
FINISHED = frozenset({StepStatus.COMPLETED, StepStatus.FAILED, StepStatus.HALTED,
                      StepStatus.COMPENSATED, StepStatus.SKIPPED})


def unit_lock(run_id: str, key: str) -> str:
    return f"{run_id}:{key}"


def child_run_id(run_id: str, key: str, rewound: int = 0) -> str:
    """The id of the child run an async_reactor step starts (one per step of a run; a rewound
    step starts a new one: its earlier child was undone)."""
    base = f"{run_id}-{key.replace('.', '-')}"
    return f"{base}-r{rewound}" if rewound else base


def recheck_interval(timeout: float) -> float:
    return min(5.0, max(1.0, timeout / 10))


# -- reading -------------------------------------------------------------------------------------


def outcome_of(ex: Execution, key: str) -> Outcome[Any]:
    """A finished unit's outcome (its record must be FINISHED)."""
    record = ex.records[key]
    if record.status == StepStatus.COMPLETED:
        return Outcome(True, ex.value_of(key))
    error = record.error or ErrorRecord("Unknown", "the unit failed")
    error = open_error(ex.keys, error)  # (a worker sealed it: the reader gets it clear)
    return Outcome(False, None, RunError(key, error.type, error.message, error.traceback))


async def unit_finished(ex: Execution, key: str) -> bool:
    """Whether unit `key` has finished (its record is then in `ex.records`); never waits."""
    if ex.status_of(key) in FINISHED:
        return True
    record = await _finished_record(ex, key)
    if record is None:
        return False
    ex.records[key] = record
    ex.values.pop(key, None)
    return True


async def await_unit(ex: Execution, reader: Node, key: str) -> None:
    """Wait until unit `key` has finished; its record is then in `ex.records`."""
    if ex.status_of(key) in FINISHED:
        return
    storage = ex.storage
    timeout = config.settings().async_wait_timeout
    deadline = clock.monotonic() + timeout
    interval = recheck_interval(timeout)
    async with storage.subscribe(ex.run_id, key) as subscription:
        record = await _finished_record(ex, key)
        while record is None:
            remaining = deadline - clock.monotonic()
            if remaining <= 0:
                raise AsyncWaitTimeout(ex.run_id, reader.key, key, timeout)
            notified = await clock.wait_signal(subscription.wait, min(remaining, interval),
                                               why=f"async unit {key!r} of run {ex.run_id}")
            # a unit's notification carries the record it announces (written first): use it
            record = _announced(subscription.message) if notified else None
            if record is None:
                record = await _finished_record(ex, key)
        ex.records[key] = record
        ex.values.pop(key, None)


def _announced(message: bytes | None) -> StepRecord | None:
    if not message or message == b"1":
        return None
    try:
        record = records.decode_step(message)
    except msgspec.DecodeError:
        return None
    return record if record.status in FINISHED else None


async def _finished_record(ex: Execution, key: str) -> StepRecord | None:
    raw = await ex.storage.load_step(ex.run_id, key)
    record = records.decode_step(raw) if raw is not None else None
    if record is not None and record.status in FINISHED:
        return record
    node = ex.plan.nodes[key]
    if node.kind is StepKind.ASYNC_REACTOR and record is not None and record.child_run:
        # the child may have ended without reaching its parent (it died in between)
        return await child_report(ex.storage, record.child_run, node, record, ex.keys)
    return None


async def child_report(storage: Storage, child_id: str, node: Node,
                       marker: StepRecord, parent: RunKeys) -> StepRecord | None:
    """The record an ended child run reports to its parent's async_reactor step: the child's
    value (opened with the child's keys, sealed again with the parent's, `parent`: a value is
    bound to its run) or its error (its text opened: the parent's record seals it again)."""
    stored = await storage.load_run(child_id)
    if stored is None:
        return StepRecord(StepStatus.FAILED, 1, marker.started_at, clock.now(),
                          error=ErrorRecord("RunNotFound", f"child run {child_id!r} is gone"),
                          child_run=child_id)
    status = run_status(stored.head)
    if not status.is_terminal:
        return None
    state = records.decode_state(stored.head.state)
    child = await stored_keys(storage, child_id, stored.head.meta)
    if status is Status.COMPLETED:
        assert node.spec.child is not None
        value_key = plan_for(node.spec.child).levels[""].value_key
        raw = stored.steps.get(value_key or "")
        result = records.decode_step(raw).result if raw is not None else records.NIL
        if raw is not None:
            result = parent.seal_raw(fields.result(node.key),
                                     child.open(fields.result(value_key or ""), result))
        return StepRecord(StepStatus.COMPLETED, 1, marker.started_at, clock.now(), result,
                          child_run=child_id)
    if status is Status.HALTED and state.halt_reason == HaltReason.PERIOD and \
            await _step_period_used(storage, node, stored.head.meta, state.updated_at):
        return StepRecord(StepStatus.SKIPPED, 1, marker.started_at, clock.now(),
                          child_run=child_id)
    error = open_run_error(child, state.error, shown=True) if state.error else None
    reason = ErrorRecord(error.type, error.message, "", error.traceback) if error else \
        ErrorRecord(status.value.title(), f"child run {child_id!r} ended {status.value}")
    return StepRecord(StepStatus.FAILED, 1, marker.started_at, clock.now(), error=reason,
                      child_run=child_id)


async def _step_period_used(storage: Storage, node: Node, raw_meta: bytes,
                            when: float) -> bool:
    """A child run halted by a period: whether the async_reactor step's own period (its key is
    among the child's `parent_gates`) was used when it halted. The step is then skipped, as a
    step gate's used period skips a step; a period of the child reactor's own fails it."""
    keys = records.decode_meta(raw_meta).parent_gates
    if len(keys) != len(node.spec.gates):
        return False
    for bound, key in zip(node.spec.gates, keys, strict=True):
        gate = bound.gate
        if isinstance(gate, Period) and await storage.period_marked(
                period_marker(gate, key, when)[0]):
            return True
    return False


# -- dispatching (the run's owner) ---------------------------------------------------------------


async def dispatch(ex: Execution, node: Node, child_inputs: Any = None,
                   gate_keys: list[str] | None = None) -> None:
    """Write the unit's marker (checkpoint before enqueue), then enqueue it. `gate_keys`: the
    keys of an async_reactor step's own gates (its child run takes them)."""
    key = node.key
    now = clock.now()
    if node.kind is StepKind.ASYNC_REACTOR:
        assert node.spec.child is not None
        child = registry.newest(node.spec.child)  # a new run: on the newest version
        child_id = child_run_id(ex.run_id, key, ex.state.rewinds.get(key, 0))
        await create_child_run(child, child_inputs, child_id, parent=(ex.run_id, key),
                               parent_gates=(ex.reactor, gate_keys) if gate_keys else None)
        marker = StepRecord(StepStatus.RUNNING, 1, now, child_run=child_id)
        await ex.writer.checkpoint(key, marker,
                                   [event(EventKind.ASYNC_DISPATCHED, key, detail=child_id)],
                                   unit=True)
        queue.enqueue_run(child_id, child.name, version=child.version)
    else:
        marker = StepRecord(StepStatus.RUNNING, 1, now)
        await ex.writer.checkpoint(key, marker, [event(EventKind.ASYNC_DISPATCHED, key)], unit=True)
        queue.enqueue_unit(ex.run_id, ex.reactor, key, version=ex.meta.version)
    log.info("reactorflow.async.dispatched run_id=%s reactor=%s step=%s", ex.run_id,
             ex.reactor, key)


# -- reporting (a worker) ------------------------------------------------------------------------


async def report(storage: Storage, run_id: str, key: str, record: StepRecord,
                 events: list[Any], *, keys: RunKeys | None = None) -> None:
    """Write a finished unit's record into its run (its error text sealed with the run's
    `keys`, resolved here when not given) and publish it."""
    keys = keys if keys is not None else await run_keys(storage, None, run_id)
    written = await storage.save_unit(run_id, key, records.encode(sealing.step(keys, record)),
                                      [records.encode(sealing.event(keys, e)) for e in events])
    if not written:
        log.error("reactorflow.async.orphaned run_id=%s step=%s status=%s: the run it belongs "
                  "to is gone (expired or deleted); its outcome is only in this log", run_id, key,
                  record.status)
        return
    level = logging.INFO if record.status == StepStatus.COMPLETED else logging.WARNING
    log.log(level, "reactorflow.async.finished run_id=%s step=%s status=%s%s", run_id, key,
            record.status, f" error={record.error.type}: {record.error.message}"
            if record.error else "")
    await wake_parked(storage, run_id, key)


async def wake_parked(storage: Storage, run_id: str, key: str) -> None:
    """The signal of a finished unit: re-enqueue its run if the run parked waiting for it.

    The unit's record is written first; the run parks (saves `parked_on`) before it checks its
    units once more after release (`operations.after_release`): one of the two sees the other.
    A duplicate signal is harmless (the job finds nothing due and writes nothing)."""
    head = await storage.load_head(run_id)
    if head is None or head.status != Status.RUNNING:
        return
    try:
        parked = records.decode_state(head.state).parked_on
    except msgspec.DecodeError:
        return  # the run's own execution reports it
    if key in parked:
        queue.enqueue_run(run_id, head.reactor, version=records.meta_version(head.meta))


async def report_child_end(storage: Storage, ex: Execution) -> None:
    """A child run of an async_reactor step ended: tell its parent."""
    meta = ex.meta
    if meta.parent_run is None or meta.parent_step is None:
        return
    if not Status(ex.state.status).is_terminal:
        return
    parent = registry.lookup(await _reactor_of(storage, meta.parent_run) or "")
    if parent is None:
        log.warning("reactorflow.async.parent_unknown run_id=%s parent=%s", ex.run_id,
                    meta.parent_run)
        return
    node = plan_for(parent).nodes.get(meta.parent_step)
    if node is None:
        return
    marker = StepRecord(StepStatus.RUNNING, 1, meta.created_at, child_run=ex.run_id)
    record = await child_report(storage, ex.run_id, node, marker,
                                await run_keys(storage, None, meta.parent_run))
    if record is not None:
        await report(storage, meta.parent_run, meta.parent_step, record,
                     [event(EventKind.ASYNC_FINISHED, meta.parent_step, detail=record.status)])


async def _reactor_of(storage: Storage, run_id: str) -> str | None:
    head = await storage.load_head(run_id)
    return None if head is None else head.reactor
