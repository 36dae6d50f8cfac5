"""Taking an owned run to its next settled state, and saving that state.

`drive` is the one path every execution takes (a fresh run, a resume, a recovery, a worker).
The caller holds the run's liveness lock (lock, then load) and built its `Execution`.

The execution, step by step:

1. Call the `before_run` hooks; attach the run's gate places to the lock keeper, so they are
   renewed with the lock.
2. Admission (`_admitted`): take the reactor's gates (`gates.run_gates.admit`), then retake the
   gates of composed children that were open. Refused: save what that means (a used period
   halts, a bad gate key fails the run with a rollback, a busy gate snoozes the run or hands it
   to a worker) and stop here.
3. A run found `rolling_back` finishes its rollback (step 7) and ends there.
4. A `paused` run whose payloads were claimed is saved `running` at once (`run.resumed`).
5. Forward (`forward.Forward`, built with the step-kind table `kinds.forward_table()`):
   a. register the root level's steps; queue those whose dependencies settled;
   b. runners take ready steps (the first in the calling task, spares in the run's task group,
      at most `max_concurrency`); each step goes to its kind's handler (step, interrupt,
      compose, async unit, map ...), which checkpoints its outcome (fenced by the lock owner);
   c. a settled step releases its dependents (step a for a composed child's level); a failure,
      a halt, a control request read back from a checkpoint, or the hand-off point stops new
      starts, and the steps in flight finish;
   d. the drive ends with a `Verdict`: completed, paused, parked, snoozed, failed, halted,
      cancelled, handed off, or stopped (an operator's pause request, `engine.pausing`).
6. Paused, but payloads arrived meanwhile (`_claims_arrived`): apply them and go back to 5.
7. Conclude (`conclude`) by the verdict: completed -> the final save (the last completion
   folded in, the lock released in the same write); paused -> save waiting; parked -> `park`
   (save, release, re-enqueue on a signal or a timer); snoozed -> `snooze`; handed off ->
   save and enqueue for a worker; halted -> save without rollback; stopped -> save paused with
   `paused_by`, waiting on nothing (until `resume`); failed or cancelled ->
   roll back (`rollback.roll_back`: compensate the failed steps, undo the completed ones newest
   first, each kind's own rollback from the table), parking while a fanned-out map's undo
   jobs are out, then save `failed`/`cancelled` with every rollback failure collected.
8. A storage failure or a lost lock propagates as it is: nothing more can be written.
   Any other interruption (cancellation of the caller, KeyboardInterrupt, SystemExit) runs no
   rollback code: the run is saved `aborted` (`_abort`, shielded from the cancellation) with
   the steps in flight whose records do not settle them saved `failed`, their compensation
   outstanding (step checkpoints are shielded, so a completion being written when the abort
   came lands and stays); the interruption propagates.
9. Finally: give back the gates still held (shielded), and call the `after_run` hooks.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, assert_never

import anyio
import msgspec

from reactorflow import audit, clock, config, records
from reactorflow.definition.specs import FailurePolicy
from reactorflow.errors import GateBusy, KeyUnavailable, LockLost, RecordedError, StorageError
from reactorflow.middleware import GateEvent, Hook, RunEvent
from reactorflow.protection import fields
from reactorflow.records import (
    ErrorRecord,
    Event,
    GateBlock,
    RollbackFailure,
    RunError,
    RunState,
    StepRecord,
)
from reactorflow.runtime.engine import kinds
from reactorflow.runtime.engine.execution import event
from reactorflow.runtime.engine.forward import Forward
from reactorflow.runtime.engine.lockkeeper import keeper
from reactorflow.runtime.engine.mode import DriveMode
from reactorflow.runtime.engine.parking import arm_timer, park
from reactorflow.runtime.engine.pausing import paused_event, requester
from reactorflow.runtime.engine.rewinding import finish_rewind
from reactorflow.runtime.engine.rollback import collected_failures, roll_back
from reactorflow.runtime.engine.runners import Ending, Verdict, ending_for
from reactorflow.runtime.gates import levels
from reactorflow.runtime.gates import run_gates as gates
from reactorflow.runtime.gates.parked import keep_while_parked
from reactorflow.runtime.gates.step_gates import GateWait
from reactorflow.status import (
    EventKind,
    HaltReason,
    RollbackTrigger,
    Status,
    StepStatus,
)

if TYPE_CHECKING:
    from reactorflow.runtime.engine.execution import Execution

log = logging.getLogger("reactorflow.run")


async def drive(ex: Execution, mode: DriveMode) -> None:
    """Run forward (or finish a rollback) until the run settles; the lock must be held.
    `mode`: how this execution waits (`mode.DriveMode`: parks in a worker, waits for a
    fanned-out map's undo throws, ...), fixed for the whole drive."""
    ex.mode = mode
    hooks = ex.hooks
    if hooks:
        hooks.call(Hook.BEFORE_RUN, RunEvent(ex.run_id, ex.reactor, first=_first(ex)))
    forward: Forward | None = None
    if ex.writer.hold is not None:
        keeper.attach(ex.writer.hold, ex.gates)  # the gate places are renewed with the run's lock
    try:
        if not await _admitted(ex):
            return
        if ex.state.status == Status.ROLLING_BACK:
            ex.parked_since, ex.state.parked_on = ex.state.parked_on, {}
            await finish_rollback(ex)  # a rewind's then goes on forward, `running`
        elif ex.state.status == Status.HELD:  # its hold_timeout passed, or an `undo` of it
            why = (event(EventKind.RUN_HOLD_EXPIRED) if hold_due(ex.state, clock.now())
                   else event(EventKind.RUN_UNDO_REQUESTED, actor=audit.in_effect()))
            await roll_back_held(ex, [why])
        if ex.state.status in (Status.RUNNING, Status.PAUSED):
            if ex.state.status == Status.PAUSED:  # applying a claimed payload: visible at once
                # (by the engine: who gave each payload is on its claim's own event,
                # `interrupt.accepted`, written with the claim; see `resume.after_claim`)
                resumed = [k for k in ex.state.waiting_on if k in ex.claims]
                still = [k for k in ex.state.waiting_on if k not in ex.claims]
                await ex.writer.save_state(Status.RUNNING, waiting_on=still,
                                           events=[event(EventKind.RUN_RESUMED,
                                                         detail=", ".join(resumed))])
            ex.parked_since, ex.state.parked_on, ex.state.wake_at = ex.state.parked_on, {}, None
            while True:
                forward = Forward(ex, kinds=kinds.forward_table(),
                                  max_concurrency=ex.plan.reactor.max_concurrency)
                verdict = await forward.run()
                if verdict.status is not Ending.PAUSED or not await _claims_arrived(ex, verdict):
                    break
            await conclude(ex, verdict)
    except (LockLost, StorageError, KeyUnavailable):
        # nothing more can be written by this execution (or, lacking a value's key, it must
        # not end the run: a process holding the key goes on with it, as after a crash)
        raise
    except BaseException as exc:
        with anyio.CancelScope(shield=True):
            await _abort(ex, forward, exc)
        raise
    finally:
        if ex.run_entry is not None or ex.level_entries:  # gates held: give them back
            with anyio.CancelScope(shield=True):
                await _release_gates(ex)
        if hooks:
            hooks.call(Hook.AFTER_RUN, RunEvent(ex.run_id, ex.reactor, ex.state.status,
                                             ex.state.error))


def _first(ex: Execution) -> bool:
    """Whether this is the run's first execution: running, with no step record, never
    snoozed on a gate and not yet handed off (what `RunEvent.first` says)."""
    state = ex.state
    return (state.status == Status.RUNNING and not ex.records and not state.gate_snoozes
            and not state.handed_off)


async def _claims_arrived(ex: Execution, verdict: Verdict) -> bool:
    """Before pausing: payloads accepted for the waiting interrupts while this execution held
    the run (their callers found it busy) are applied now, instead of pausing first."""
    claims = await ex.storage.claims(ex.run_id)
    fresh = {k: claims[k] for k in verdict.waiting if k in claims and k not in ex.claims}
    ex.claims.update(fresh)
    return bool(fresh)


async def _admitted(ex: Execution) -> bool:
    """Take the reactor's gates for this execution (`gates.admit`); when it may not drive the
    run, save what that means (halted by a period, failed by a bad key, snoozed or handed to a
    worker while a gate is busy) and return False. A fresh run of a reactor without gates
    (none of its own, none from a parent, no child started yet) is admitted at once."""
    if not ex.records and not ex.plan.reactor.gates and not ex.meta.parent_gates:
        ex.state.gate_waits, ex.state.gate_blocks = {}, {}
        return True
    admission, error = await gates.admit(ex)
    if admission is gates.Admission.ADMITTED and ex.state.status != Status.ROLLING_BACK:
        refused = await levels.retake(ex)
        if refused is not None and refused.busy is not None:
            admission, error = gates.Admission.BUSY, refused.busy
    match admission:
        case gates.Admission.ADMITTED:
            ex.state.gate_waits, ex.state.gate_blocks = {}, {}
            return True
        case gates.Admission.PERIOD:
            await conclude(ex, Verdict(Ending.HALTED, halt_reason=HaltReason.PERIOD))
        case gates.Admission.BAD_KEY:
            assert error is not None
            record = ErrorRecord.from_exception(error)
            await fail_with_rollback(ex, RunError(None, record.type, record.message))
        case gates.Admission.BUSY:
            assert isinstance(error, GateBusy)
            await snooze(ex, error)
        case _:
            assert_never(admission)
    return False


async def _release_gates(ex: Execution) -> None:
    try:
        await levels.release_all(ex)
        await gates.release(ex)
    except Exception:  # the places lapse after their TTL
        log.warning("reactorflow.gate.release_failed run_id=%s", ex.run_id, exc_info=True)


async def snooze(ex: Execution, busy: GateBusy, step: str | None = None) -> None:
    """A gate is busy: save the run as it is (a paused run whose payload arrived becomes
    `running`), holding nothing, and have a worker take it again a little later (at most
    `gate_snooze` seconds). In a worker each snooze counts; past `gate_snooze_limit` the run
    fails with the busy gate's error. A snooze never consumes a step's retries."""
    settings = config.settings()
    count = ex.state.gate_snoozes + (1 if ex.mode.in_worker else 0)
    if count > settings.gate_snooze_limit:
        message = (f"{busy.message} (still busy after {count - 1} snoozes; raise "
                   "gate_snooze_limit to wait longer)")
        await fail_with_rollback(ex, RunError(step, "GateBusy", message))
        return
    status = Status(ex.state.status)
    if status is Status.PAUSED:
        status = Status.RUNNING
    waits = dict(ex.state.gate_waits)
    if step is not None:
        waits[step] = f"{busy.gate} {busy.key!r}"
    await ex.writer.save_state(status, final=True, gate_snoozes=count, gate_waits=waits,
                               gate_blocks=gate_blocks(ex.state.gate_blocks, busy, step),
                               events=[event(EventKind.RUN_SNOOZED, step or "",
                                             detail=busy.message)])
    ex.enqueue_after_release = True
    ex.enqueue_delay = settings.gate_snooze * (0.5 + random.random() / 2)
    if ex.hooks:
        ex.hooks.call(Hook.ON_GATE, GateEvent(ex.run_id, ex.reactor, step or "", busy.gate,
                                           busy.key, "snoozed"))
    log.info("reactorflow.gate.snoozed run_id=%s reactor=%s gate=%s key=%s step=%s snoozes=%d",
             ex.run_id, ex.reactor, busy.gate, busy.key, step or "-", count)


def gate_blocks(blocks: dict[str, GateBlock], busy: GateBusy,
                step: str | None) -> dict[str, GateBlock]:
    """`blocks` with the gate `busy` noted for `step` ("" for the run's own gates): since the
    first snooze for that same gate, and for a rate limit until its window frees."""
    now = clock.now()
    slot = step or ""
    before = blocks.get(slot)
    since = (before.since if before is not None and (before.gate, before.key) == (busy.gate,
                                                                                   busy.key)
             else now)
    until = now + busy.retry_after if busy.retry_after is not None else None
    return {**blocks, slot: GateBlock(busy.gate, busy.key, since, until)}


def run_error(key: str, error: BaseException) -> RunError:
    """The run's error for a failure of step `key` (one rebuilt from storage keeps the type
    and message it was recorded with)."""
    if isinstance(error, RecordedError):
        return RunError(key, error.type, error.message)
    record = ErrorRecord.from_exception(error)
    return RunError(key, record.type, record.message, record.traceback)


async def conclude(ex: Execution, verdict: Verdict) -> None:
    """Save where the forward drive left the run (its last write, which releases the lock),
    or roll it back first when it failed."""
    match verdict.status:
        case Ending.COMPLETED:
            if not await ex.writer.save_state(Status.COMPLETED, final=True, publish=True,
                                              events=[event(EventKind.RUN_COMPLETED)],
                                              waiting_on=[], deadlines={}, timeout_at=None,
                                       unless_control=bool(ex.writer.folded)):
                # a request came while the last step ran (its completion, which this save
                # carried, is checkpointed now): honoured as at any step boundary
                assert ex.writer.control is not None
                await conclude(ex, Verdict(ending_for(ex.writer.control)))
                return
        case Ending.PAUSED:
            deadlines = {k: d for k in verdict.waiting
                         if (d := ex.records[k].deadline) is not None}
            if deadlines:  # its timer settles the first deadline (`ops.deadlines`)
                await arm_timer(ex, min(deadlines.values()))
            paused = event(EventKind.RUN_PAUSED, detail=", ".join(verdict.waiting))
            await ex.writer.save_state(Status.PAUSED, final=True, publish=True, events=[paused],
                                       waiting_on=verdict.waiting, deadlines=deadlines,
                                       timeout_at=min(deadlines.values()) if deadlines else None,
                                       paused_by=None)  # (an operator's pause is no more)
        case Ending.STOPPED:  # an operator's pause, read back at a step boundary
            assert ex.writer.control is not None
            paused_by = requester(ex.writer.control)
            await ex.writer.save_state(Status.PAUSED, final=True, publish=True,
                                       clear_control=True, events=[paused_event(paused_by)],
                                       paused_by=paused_by, waiting_on=[], deadlines={},
                                       timeout_at=None, parked_on={}, wake_at=None)
        case Ending.PARKED:
            await park(ex, verdict.parked, verdict.wake_at)
            return
        case Ending.SNOOZED:
            await snooze(ex, verdict.snoozed[0][1], verdict.snoozed[0][0])
            return
        case Ending.HANDOFF:  # still running: its gates are kept for the worker (its TTLs)
            await keep_while_parked(ex, 0.0)
            await ex.writer.save_state(Status.RUNNING, final=True,
                                       events=[event(EventKind.RUN_HANDED_OFF)], handed_off=True)
            ex.enqueue_after_release = True
            log.info("reactorflow.run.handed_off run_id=%s reactor=%s", ex.run_id, ex.reactor)
            return
        case Ending.HALTED:
            retrying, failed = ex.close_retrying("the run halted")
            await ex.writer.save_state(Status.HALTED, final=True, publish=True, steps=retrying,
                                       events=[*failed, event(EventKind.RUN_HALTED,
                                                              detail=verdict.halt_reason or "")],
                                       halt_reason=verdict.halt_reason, waiting_on=[])
        case Ending.CANCELLED:
            reason = ex.writer.control.reason if ex.writer.control is not None else ""
            actor = ex.writer.control.actor if ex.writer.control is not None else ""
            retrying, failed = ex.close_retrying("the run was cancelled")
            await ex.writer.save_state(Status.CANCELLED, final=True, publish=True,
                                       clear_control=True, steps=retrying,
                                       events=[*failed,
                                               event(EventKind.RUN_CANCELLED, detail=reason,
                                                     actor=actor or audit.in_effect())],
                                       cancel_reason=reason, waiting_on=[])
        case Ending.FAILED:
            if verdict.failed:
                first = verdict.failed[0]
                error = run_error(first, verdict.errors[first])
                if holds(ex, first):
                    await hold(ex, error)
                    _log_end(ex)
                    return
            else:
                assert ex.writer.control is not None and ex.writer.control.error is not None
                error = ex.writer.control.error
            await fail_with_rollback(ex, error, verdict.errors)
            return
        case _:
            assert_never(verdict.status)
    _log_end(ex)


def holds(ex: Execution, key: str) -> bool:
    """Whether the failure of step `key` holds the run (`on_failure="hold"`: the step's own
    policy, else its run's reactor's) instead of rolling it back."""
    policy = ex.plan.nodes[key].spec.on_failure or ex.plan.reactor.on_failure
    return policy is FailurePolicy.HOLD


async def hold(ex: Execution, error: RunError) -> None:
    """Save the run `held` (its last write: the lock goes with it): its completed work stays
    in effect, nothing is undone, and the failed step's compensate stays pending (an `undo`
    runs it first). Steps parked between retry attempts fail with it. With a `hold_timeout`,
    the run's timer is armed for when it rolls back by itself (`hold_due`)."""
    retrying, failed = ex.close_retrying("the run is held")
    timeout = ex.plan.reactor.hold_timeout
    until = None if timeout is None else clock.now() + timeout
    if until is not None:
        await arm_timer(ex, until)
    await ex.writer.save_state(Status.HELD, final=True, publish=True, steps=retrying,
                               events=[*failed, event(EventKind.RUN_HELD, error.step or "", detail=(
                                   f"{error.type}: "
                                   f"{ex.keys.shown_text(fields.ERROR, error.message)}"))],
                               error=error, waiting_on=[], deadlines={}, timeout_at=None,
                               hold_until=until)
    log.warning("reactorflow.run.held run_id=%s reactor=%s step=%s error=%s: %s", ex.run_id,
                ex.reactor, error.step, error.type, error.message)


def hold_due(state: RunState, now: float) -> bool:
    """A held run whose `hold_timeout` has passed: it rolls back by itself."""
    return (state.status == Status.HELD and state.hold_until is not None
            and state.hold_until <= now)


async def roll_back_held(ex: Execution, events: list[Event]) -> None:
    """Roll a held run back (an operator's `undo`, or its `hold_timeout`), to `failed` with the
    step's failure as its error; the held step's compensate runs first, as in any rollback."""
    error = ex.state.error or RunError(None, "Held", "the run was held")
    await fail_with_rollback(ex, error, events=events)


async def fail_with_rollback(ex: Execution, error: RunError,
                             live_errors: dict[str, BaseException] | None = None, *,
                             events: list[Event] | None = None) -> None:
    """Save `rolling_back`, roll everything back, save `failed` with every rollback failure.
    Steps parked between retry attempts fail with the run (`close_retrying`): compensated.
    `events`: what to record first (why the rollback starts, when not a step's failure)."""
    retrying, failed = ex.close_retrying("the run failed")
    await ex.writer.save_state(Status.ROLLING_BACK, steps=retrying,
                               events=[*(events or ()), *failed,
                                       event(EventKind.RUN_ROLLING_BACK, detail=str(error))],
                               error=error, rollback_trigger=RollbackTrigger.FAILURE, waiting_on=[],
                               deadlines={}, hold_until=None)
    await _roll_back_or_park(ex, live_errors)


async def finish_rollback(ex: Execution) -> None:
    """Resume a rollback that an earlier execution started (e.g. it crashed mid-way, or parked
    while a fanned-out map's undo jobs were out)."""
    await _roll_back_or_park(ex)


async def _roll_back_or_park(ex: Execution,
                             live_errors: dict[str, BaseException] | None = None) -> None:
    """Roll back, then save the run settled; or park it `rolling_back` while a fanned-out map's
    undo jobs are out (`runtime.maps.undo_throws`)."""
    done = await roll_back(ex, live_errors)
    if done.parked:
        await park(ex, done.parked, None)
        return
    if done.gate_wait is not None:
        await park_for_place(ex, done.gate_wait)
        return
    await _settle_rollback(ex, done.failures)


async def park_for_place(ex: Execution, waiting: GateWait) -> None:
    """A worker's rollback handler found its lock or semaphore busy: save the run
    `rolling_back` (with since when the handler waits), keeping what it holds, and have a
    worker try again a little later (at most `gate_snooze` seconds; the handler is queued for
    the place, so the release hands it over and that try finds it held). The worker's thread is
    free meanwhile. Past the gate's `ttl` (counted from the first try) the handler fails with
    `GateBusy` and the rollback goes on (`gates.steps.rollback_places`)."""
    delay = config.settings().gate_snooze * (0.5 + random.random() / 2)
    await keep_while_parked(ex, delay)
    await ex.writer.save_state(Status.ROLLING_BACK, final=True,
                               rollback_waits={waiting.step: waiting.since},
                               events=[event(EventKind.RUN_PARKED, waiting.step,
                                             detail=f"its rollback waits: {waiting.busy.message}")])
    ex.enqueue_after_release = True
    ex.enqueue_delay = delay
    if ex.hooks:
        ex.hooks.call(Hook.ON_GATE, GateEvent(ex.run_id, ex.reactor, waiting.step,
                                           waiting.busy.gate, waiting.busy.key, "snoozed"))
    log.info("reactorflow.gate.rollback_parked run_id=%s reactor=%s gate=%s key=%s step=%s",
             ex.run_id, ex.reactor, waiting.busy.gate, waiting.busy.key, waiting.step)


async def _settle_rollback(ex: Execution, failures: list[RollbackFailure]) -> None:
    earlier = [f for f in collected_failures(ex) if f not in failures]
    all_failures = earlier + failures
    trigger = ex.state.rollback_trigger
    error = ex.state.error
    if error is not None:
        error = msgspec.structs.replace(error, rollback_failures=all_failures)
    elif all_failures:
        error = RunError(None, "RollbackIncomplete",
                         f"{len(all_failures)} undo/compensate handler(s) failed",
                         rollback_failures=all_failures)
    ex.state.rollback_waits = {}
    if trigger is RollbackTrigger.REWIND:
        await finish_rewind(ex, all_failures)
        return
    if trigger is RollbackTrigger.UNDO:
        await ex.writer.save_state(Status.CANCELLED, final=True, publish=True, clear_control=True,
                                   events=[event(EventKind.RUN_UNDONE)], error=error,
                                   rollback_trigger=None,
                                   cancel_reason=ex.state.cancel_reason or "undone")
    else:
        await ex.writer.save_state(Status.FAILED, final=True, publish=True, clear_control=True,
                                   events=[event(EventKind.RUN_FAILED, detail=str(error))],
                                   error=error, rollback_trigger=None)
    _log_end(ex)


async def _abort(ex: Execution, forward: Forward | None, cause: BaseException) -> None:
    """Store the run `aborted` with its outstanding work; never raises.

    A step cut off is one still in flight whose last record did not settle it: it is saved
    `failed` with its compensation outstanding (its body started and did not complete). A step
    whose settling checkpoint landed keeps that record (its history says so too): a completed
    one is undone by `undo`. A checkpoint cut off by something other than a cancellation (which
    it is shielded from) may or may not have landed: it is read back to decide."""
    cut: list[str] = []
    now = clock.now()
    for key in sorted(forward.in_flight) if forward is not None else []:
        base = ex.records.get(key)
        if key in ex.writer.unconfirmed and base is not None:
            stored = await _stored(ex, key)
            if stored == records.encode(base):
                continue  # it landed
            base = records.decode_step(stored) if stored is not None else None
        if base is not None and base.status not in _UNSETTLED:
            continue  # settled (a waiting interrupt stays waiting)
        cut.append(key)
        base = base if base is not None else StepRecord(StepStatus.PENDING)
        ex.records[key] = msgspec.structs.replace(  # keeps e.g. a composed child's flag
            base, status=StepStatus.FAILED, started_at=base.started_at or now, finished_at=now,
            error=ErrorRecord(type(cause).__name__, "aborted while running: the process "
                              "interrupted the run"),
            compensate_pending=ex.plan.nodes[key].spec.compensate is not None,
        )
    try:
        await ex.writer.save_state(Status.ABORTED, final=True, steps=cut,
                                   events=[event(EventKind.RUN_ABORTED,
                                                 detail=type(cause).__name__)],
                                   publish=True)
        log.warning("reactorflow.run.aborted run_id=%s reactor=%s cause=%s cut_off=%s",
                    ex.run_id, ex.reactor, type(cause).__name__, ",".join(cut) or "-")
    except Exception:
        log.exception("reactorflow.run.abort_save_failed run_id=%s", ex.run_id)


_UNSETTLED = frozenset({StepStatus.PENDING, StepStatus.RUNNING})


async def _stored(ex: Execution, key: str) -> bytes | None:
    """The stored record of `key`, read back after its checkpoint was cut off."""
    try:
        return await ex.storage.load_step(ex.run_id, key)
    except Exception:  # unreadable: the abort save that follows fails as well
        return None


def _log_end(ex: Execution) -> None:
    if log.isEnabledFor(logging.INFO):
        log.info("reactorflow.run.%s run_id=%s reactor=%s", ex.state.status, ex.run_id,
                 ex.reactor)
