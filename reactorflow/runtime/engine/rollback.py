"""The saga's way back: compensate what failed, undo what completed, newest first.

Order, at each level of the tree (the root, then composed children inside it):

1. compensate the level's failed steps whose bodies started (latest failure first);
2. roll back composed children that were still in progress (a failing or paused child rolls
   back its own steps before its parent's);
3. undo the completed steps in reverse completion order; a completed composed child is undone
   as a unit at its place in that order, its own steps newest first.

A gated step's handler runs under its locks and semaphores, taken again: it waits for each as
long as the gate's `ttl` allows (at least its `wait`), in a caller's process there, in a worker
parked (`gates.steps.GateWait`: the run is saved `rolling_back`, queued for the place, and
tried again shortly); a gate still busy after that long fails the handler with `rf.GateBusy`,
without running it.
Every handler outcome is checkpointed, so a rollback cut off by a crash resumes after the last
handler that returned (the cut-off one runs again: handlers must be idempotent). A failing
handler is recorded and the rollback goes on.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, assert_never

import msgspec

from reactorflow import clock
from reactorflow.definition.specs import StepKind
from reactorflow.errors import RecordedError
from reactorflow.middleware import Hook, StepEvent
from reactorflow.protection.fields import ERROR
from reactorflow.records import ErrorRecord, RollbackFailure, StepRecord, describe, summary
from reactorflow.runtime.engine.execution import event
from reactorflow.runtime.engine.kinds import handler_of
from reactorflow.runtime.engine.lockkeeper import ensure_live
from reactorflow.runtime.engine.stepcall import arguments, context_for
from reactorflow.runtime.gates.step_gates import GateWait, leave_rollback, rollback_places
from reactorflow.status import EventKind, HandlerKind, StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.params import HandlerSignature
    from reactorflow.runtime.engine.execution import Execution

log = logging.getLogger("reactorflow.rollback")


class Act(StrEnum):
    """What one rollback action does to its step."""

    COMPENSATE = "compensate"  # run the compensate handler of a step whose body failed
    UNDO = "undo"  # run the undo handler of a completed step
    CLOSE = "close"  # mark a composed child rolled back (its own steps were done first)
    KIND = "kind"  # the kind's own rollback (`kinds.KindHandler.roll_back`: a map's elements)


Action = tuple[Act, str]  # (what, step key)


@dataclass(frozen=True, slots=True)
class HandlerNames:
    """The hooks called around one kind of rollback handler, and the events it writes."""

    before: Hook
    after: Hook
    started: EventKind
    completed: EventKind
    failed: EventKind


UNDO_NAMES = HandlerNames(Hook.BEFORE_UNDO, Hook.AFTER_UNDO, EventKind.UNDO_STARTED,
                          EventKind.UNDO_COMPLETED, EventKind.UNDO_FAILED)
COMPENSATE_NAMES = HandlerNames(Hook.BEFORE_COMPENSATE, Hook.AFTER_COMPENSATE,
                                EventKind.COMPENSATE_STARTED, EventKind.COMPENSATE_COMPLETED,
                                EventKind.COMPENSATE_FAILED)


def plan_rollback(ex: Execution, level: str = "") -> list[Action]:
    """Every rollback action still to do, in order (see the module docstring)."""
    plan = ex.plan
    keys = plan.levels[level].node_keys
    rewind = ex.state.rewind
    if rewind is not None and not level:  # a rewind undoes its own steps only
        keys = tuple(k for k in keys if k in rewind.steps)
    records = ex.records
    actions: list[Action] = []
    failed = [k for k in keys if k in records and records[k].status == StepStatus.FAILED
              and records[k].compensate_pending]
    failed.sort(key=lambda k: records[k].finished_at or 0.0, reverse=True)
    actions.extend((Act.COMPENSATE, k) for k in failed)
    for key in keys:
        record = records.get(key)
        if (record is not None and plan.nodes[key].kind is StepKind.COMPOSE
                and record.status in (StepStatus.RUNNING, StepStatus.FAILED)
                and record.child_started):
            actions.extend(plan_rollback(ex, key))
            actions.append((Act.CLOSE, key))
        elif (record is not None and _own_rollback(plan.nodes[key].kind)
              and record.status in (StepStatus.RUNNING, StepStatus.FAILED)):
            actions.append((Act.KIND, key))
    done = [k for k in keys if k in records and records[k].status == StepStatus.COMPLETED
            and records[k].seq > 0 and records[k].rollback_error is None]
    done.sort(key=lambda k: records[k].seq, reverse=True)
    for key in done:
        if plan.nodes[key].kind is StepKind.COMPOSE:
            actions.extend(plan_rollback(ex, key))
            actions.append((Act.CLOSE, key))
        elif _own_rollback(plan.nodes[key].kind):
            actions.append((Act.KIND, key))
        elif plan.nodes[key].spec.undo is not None:
            actions.append((Act.UNDO, key))
    return actions


def _own_rollback(kind: StepKind) -> bool:
    return handler_of(kind).roll_back is not None


@dataclass(slots=True)
class Rollback:
    """Where a rollback got to: its failures (the rollback goes on past them), or the fanned-out
    map whose undo jobs are out (`parked`: map key -> since when; the run parks there and the
    rollback goes on when they settled)."""

    failures: list[RollbackFailure] = field(default_factory=list)
    parked: dict[str, float] = field(default_factory=dict)
    gate_wait: GateWait | None = None  # a worker's handler waits for its place: the run parks


async def roll_back(ex: Execution, live_errors: Mapping[str, BaseException] | None = None
                    ) -> Rollback:
    """Run every outstanding rollback action, or up to a fanned-out map whose undo jobs are out
    (see `Rollback`)."""
    failures: list[RollbackFailure] = []
    for act, key in plan_rollback(ex):
        await ensure_live(ex.lease)  # a lost lock starts no handler (LockLost)
        match act:
            case Act.CLOSE:
                closed = _rolled_back(ex.records[key], StepStatus.UNDONE)
                await ex.writer.checkpoint(key, closed, [event(EventKind.UNDO_COMPLETED, key)])
            case Act.KIND:
                own = handler_of(ex.plan.nodes[key].kind).roll_back
                assert own is not None  # (planned only for a kind that has one)
                mapped = await own(ex, key)
                if mapped.parked_since is not None:
                    return Rollback(failures, {key: mapped.parked_since})
                failures += mapped.failures
            case Act.UNDO | Act.COMPENSATE:
                ran = await _run_handler(
                    ex, HandlerKind.UNDO if act is Act.UNDO else HandlerKind.COMPENSATE, key,
                    (live_errors or {}).get(key))
                if isinstance(ran, GateWait):
                    return Rollback(failures, gate_wait=ran)
                failures += ran
            case _:
                assert_never(act)
    return Rollback(failures)


async def _run_handler(ex: Execution, kind: Literal[HandlerKind.UNDO, HandlerKind.COMPENSATE],
                       key: str, live_error: BaseException | None
                       ) -> list[RollbackFailure] | GateWait:
    """Run one handler under its step's places (re-taken), and checkpoint its outcome; or,
    in a worker whose place is busy, say so (`GateWait`: nothing ran, nothing is written)."""
    entry, error = await rollback_places(ex, ex.plan.nodes[key])  # its locks and semaphores
    if isinstance(error, GateWait):
        return error
    node = ex.plan.nodes[key]
    record = ex.records[key]
    first: Any
    match kind:
        case HandlerKind.UNDO:
            handler, first = node.spec.undo, ex.value_of(key)
            done, names = StepStatus.UNDONE, UNDO_NAMES
        case HandlerKind.COMPENSATE:
            handler, done, names = node.spec.compensate, StepStatus.COMPENSATED, COMPENSATE_NAMES
            if live_error is not None:
                first = live_error
            else:
                stored = record.error or ErrorRecord("Exception", "")
                first = RecordedError(stored.type, ex.keys.shown_text(ERROR, stored.message),
                                      step=key)
        case _:
            assert_never(kind)
    assert handler is not None
    hooks = ex.hooks
    if hooks:
        hooks.call(names.before, StepEvent(ex.run_id, ex.reactor, key))
    started = event(names.started, key)
    if error is None:
        try:
            await call_handler(ex, handler, key, first)
        except Exception as exc:
            error = exc
        finally:
            await leave_rollback(ex, entry)
    if hooks:
        ended = StepStatus.FAILED if error else StepStatus.COMPLETED
        hooks.call(names.after, StepEvent(ex.run_id, ex.reactor, key, status=ended,
                                           error=error))
    if error is None:
        await ex.writer.checkpoint(key, _rolled_back(record, done),
                                   [started, event(names.completed, key)])
        return []
    log.warning("reactorflow.%s.failed run_id=%s step=%s error=%s", kind, ex.run_id, key,
                summary(error))
    updated = msgspec.structs.replace(record, compensate_pending=False,
                                      rollback_error=ErrorRecord.from_exception(error))
    await ex.writer.checkpoint(key, updated, [started, event(names.failed, key,
                                                             detail=summary(error))])
    return [RollbackFailure(key, kind, describe(error), type(error).__name__)]


def _rolled_back(record: StepRecord, status: StepStatus) -> StepRecord:
    """The record of a step whose rollback action returned: every other field is kept (a
    composed step keeps its child's inputs and flag)."""
    return msgspec.structs.replace(record, status=status, compensate_pending=False,
                                   rollback_error=None)


async def call_handler(ex: Execution, handler: HandlerSignature, key: str, first: Any) -> None:
    node = ex.plan.nodes[key]
    kwargs: dict[str, Any] = {}
    if handler.names:
        resolved = await arguments(ex, node)
        kwargs = {name: resolved[name] for name in handler.names}
    if handler.context_name is not None:
        kwargs[handler.context_name] = context_for(ex, node, ex.records[key].attempts or 1)
    result = handler.fn(first, **kwargs)
    if inspect.isawaitable(result):
        await result


def collected_failures(ex: Execution) -> list[RollbackFailure]:
    """Rollback failures recorded on the step records (e.g. by an execution that crashed)."""
    found: list[tuple[float, RollbackFailure]] = []
    for key, record in ex.records.items():
        if record.rollback_error is not None:
            kind = (HandlerKind.UNDO_ALL if ex.plan.nodes[key].kind is StepKind.MAP
                    else HandlerKind.COMPENSATE if record.status == StepStatus.FAILED
                    else HandlerKind.UNDO)
            error = record.rollback_error
            found.append((record.finished_at or clock.now(),
                          RollbackFailure(key, kind, ex.keys.shown_text(ERROR, error.message),
                                          error.type)))
    return [f for _, f in sorted(found, key=lambda item: item[0])]
