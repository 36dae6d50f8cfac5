"""The sleep step kind: a durable wait until a deadline its body returns (api.md §12).

Its handler in the step-kind table (`kinds`), in the forward drive:

1. First time (no record, or one that is not `waiting`): resolve the arguments, apply `when=`,
   call the body once, and turn what it returned into a deadline (`deadline_of`: a timedelta
   or seconds from now, or an aware datetime; anything else fails the step with
   `InvalidSleep`). A deadline not in the future completes the step at once (step 3).
   Otherwise checkpoint the step `waiting` with `wake_at` (a re-run never calls the body
   again: the deadline is what was checkpointed).
2. While the deadline is ahead, the step stays `waiting` and the drive notes it in
   `Runners.sleeping`: once nothing else can run, the drive ends `PARKED` with the earliest
   deadline as its `wake_at`, in every mode (`parking.park`, which arms the run's timer). No
   coroutine, thread, lock or worker is held while it sleeps; steps that do not depend on it
   go on first.
3. At (or after) the deadline the step completes with the deadline as its value, an aware
   UTC `datetime`: a timer fired the run's resume (`services.timers`), or the run was driven
   for another reason after the deadline. Never before it.

A sleep has no undo and is never retried. A run stopped while a step sleeps (cancelled,
undone, failed elsewhere) closes it `skipped` (`Execution.close_waiting`).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from reactorflow import clock, records
from reactorflow.definition.specs import StepKind
from reactorflow.errors import InvalidSleep
from reactorflow.protection import fields
from reactorflow.records import StepRecord, summary
from reactorflow.runtime.engine.execution import event
from reactorflow.runtime.engine.kinds import KindHandler, register
from reactorflow.runtime.engine.stepcall import arguments, context_for
from reactorflow.status import EventKind, StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.runtime.engine.forward import Forward


def deadline_of(run_id: str, step: str, value: Any, now: float) -> float:
    """The deadline (Unix time) a sleep body's return value names.

    Raises:
        InvalidSleep: a naive datetime, a negative duration, or any other type.
    """
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidSleep(run_id, step, f"a naive datetime ({value.isoformat()})",
                               "a datetime without a time zone names no moment")
        return _exact(value.timestamp())
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise InvalidSleep(run_id, step, f"a {type(value).__name__} ({value!r:.60})",
                           "that is no duration and no moment")
    if not seconds >= 0:  # (NaN too)
        raise InvalidSleep(run_id, step, f"a negative duration ({value!r:.60})",
                           "a sleep cannot end before it began")
    return _exact(now + seconds)


def _exact(moment: float) -> float:
    """`moment` cut to the microsecond below it, as a datetime holds it: the deadline stored,
    the timer's time and `StepState.wake_at.timestamp()` are then one and the same number (a
    fake clock advanced to `wake_at`, or by the duration asked for, reaches it)."""
    micros = math.floor(moment * 1_000_000)
    exact = (_EPOCH + timedelta(microseconds=micros)).timestamp()
    if exact > moment:  # (the product's rounding)
        exact = (_EPOCH + timedelta(microseconds=micros - 1)).timestamp()
    return exact


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


async def _sleep(drive: Forward, node: Node) -> None:
    ex = drive.ex
    record = ex.records.get(node.key)
    if record is None or record.status != StepStatus.WAITING or record.wake_at is None:
        started = clock.now()
        try:
            kwargs = await arguments(ex, node)
            if await drive._skipped_by_when(node, kwargs):
                return
            if node.context_name is not None:
                kwargs[node.context_name] = context_for(ex, node, 1)
            wake_at = deadline_of(ex.run_id, node.key, await node.spec.fn(**kwargs),
                                  clock.now())
        except Exception as exc:
            await drive._fail_step(node, exc, detail=summary(exc), started_at=started,
                                   attempts=1)
            return
        record = StepRecord(StepStatus.WAITING, 1, started, wake_at=wake_at)
        if wake_at > clock.now():
            ex.records[node.key] = record
            await drive.writer.checkpoint(node.key, record, [event(
                EventKind.SLEEP_STARTED, node.key, detail=clock.utc(wake_at).isoformat())])
            if drive.writer.control is not None:
                drive._stop()
                return
    assert record.wake_at is not None
    if record.wake_at > clock.now():
        drive.sleeping[node.key] = record.wake_at
        return
    value = clock.utc(record.wake_at)
    ex.values[node.key] = value
    done = StepRecord(StepStatus.COMPLETED, 1, record.started_at, clock.now(),
                      ex.keys.seal_raw(fields.result(node.key), records.encode(value)),
                      seq=drive.writer.next_seq(), wake_at=record.wake_at)
    await drive._finish(node, done, [event(EventKind.SLEEP_WOKE, node.key,
                                           detail=value.isoformat())])


SLEEP = KindHandler(_sleep)
"""The sleep kind's handler: forward only (a sleep has no undo; the plain rollback finds none)."""

register(StepKind.SLEEP, SLEEP)
