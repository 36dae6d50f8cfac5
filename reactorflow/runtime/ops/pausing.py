"""An operator's `pause` and `resume` of a run (api.md §15; see `engine.pausing`).

`pause(run_id, reason=, by=)`, for a `running` run only:

1. Read the head: not `running` -> `RunStateError` naming the status (nothing written).
2. Take the run's lock without waiting. Taken: no execution holds the run (parked at a sleep,
   an async unit or a fanned-out map, snoozed at a busy gate, waiting for a worker): it is
   saved `paused` under the lock without waking it (`engine.pausing.pause_unheld`); still
   `running` once read under the lock, else refused (nothing written).
3. Held: leave a `ControlKind.PAUSE` request (first wins: another request pending -> refused),
   then wait up to `lock_wait` for the lock. The holder, an execution, reads the request back
   at its next checkpoint and stops there, its steps in flight finishing (`Ending.STOPPED`);
   once the lock is ours, `take_up` settles the request (applied, or withdrawn and refused).
   The wait running out: the request stays, and the run as it is now is returned (`running`:
   it pauses at its next step boundary; `wait` returns then).

`resume(run_id)`, for a run an operator paused only (one paused at an interrupt is refused,
pointing to `continue_`): under the run's lock (waiting up to `lock_wait`), save it `running`
(`run.resumed`), re-arm a sleep's timer that is still to come, then take it on the way it was
executing: a run whose work was handed to workers (dispatched, `always_dispatch`, past its
`background` point, or the child run of an async reactor) is released and enqueued (returns
`running`); any other is driven here, as `continue_` drives it, until it settles (a run whose
sleep is still to come is left to its timer).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from reactorflow import audit, clock, config, records
from reactorflow.definition.graph import waiting_label
from reactorflow.errors import LockTimeout, ReactorflowError, RunStateError
from reactorflow.records import Control, PausedBy, RunState
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.execution import Execution, event
from reactorflow.runtime.engine.ownership import acquire, keep_alive, operator_owner
from reactorflow.runtime.engine.parking import arm_timer
from reactorflow.runtime.engine.pausing import pause_unheld, take_up
from reactorflow.runtime.ops import operations
from reactorflow.runtime.ops.creation import release
from reactorflow.runtime.ops.snapshots import read_head
from reactorflow.snapshot import Run
from reactorflow.status import ControlKind, EventKind, Status

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

log = logging.getLogger("reactorflow.run")


operator = audit.operator  # who this process acts as: `user@host`


# -- pause ---------------------------------------------------------------------------------------


async def pause(reactor: Reactor, run_id: str, *, reason: str = "",
                by: str | None = None) -> Run:
    operations.check_text(reason, f"pause(run {run_id!r}): reason")
    if by is not None:
        operations.check_text(by, f"pause(run {run_id!r}): by")
        if not by.strip():
            raise ReactorflowError(f"pause(run {run_id!r}): by must name who pauses the run "
                                   "(or be left out: this process's user@host); nothing was "
                                   "changed", run_id=run_id)
    storage = config.current_storage()
    settings = config.settings()
    status, _, state = read_head(await operations.head_of(reactor, storage, run_id))
    if status is not Status.RUNNING:
        raise pause_refused(run_id, status, state)
    paused_by = PausedBy(by or audit.who(), clock.now(), reason)
    owner = operator_owner()
    ttl = settings.lock_ttl
    if await acquire(storage, run_id, owner, ttl, 0.0):  # nobody drives it: pause it here
        async with keep_alive(storage, run_id, owner, ttl):
            ex = await operations.load_owned(reactor, storage, run_id, owner)
            if ex.state.status is not Status.RUNNING:
                raise pause_refused(run_id, Status(ex.state.status), ex.state)
            await pause_unheld(ex, paused_by, clear_control=False)
        _log_paused(run_id, reactor, paused_by)
        return await operations.get(reactor, run_id)
    request = Control(ControlKind.PAUSE, reason, paused_by=paused_by)
    if not await storage.request_control(run_id, records.encode(request)):
        raise RunStateError(run_id, status, "pause", hint=(
            "Another request (a cancel, a failure or a pause) is pending for it, which its "
            "execution honours at its next step boundary; read it with get(run_id) and try "
            "again if it is still running."))
    if not await acquire(storage, run_id, owner, ttl, settings.lock_wait):
        log.info("reactorflow.run.pause_requested run_id=%s reactor=%s by=%s", run_id,
                 reactor.name, paused_by.by)
        return await operations.get(reactor, run_id)  # paused at its next step boundary
    async with keep_alive(storage, run_id, owner, ttl):
        ex = await operations.load_owned(reactor, storage, run_id, owner)
        if not await take_up(ex, paused_by):
            raise pause_refused(run_id, Status(ex.state.status), ex.state)
    _log_paused(run_id, reactor, paused_by)
    return await operations.get(reactor, run_id)


def pause_refused(run_id: str, status: Status, state: RunState) -> RunStateError:
    """The refusal of `pause` for a run in `status` (nothing written)."""
    if status is Status.PAUSED and state.paused_by is not None:
        return RunStateError(run_id, status, "pause", hint=(
            f"{state.paused_by.by} paused it already ({_why(state.paused_by)}); resume(run_id) "
            "takes it on."))
    if status is Status.PAUSED:
        waiting = ", ".join(repr(waiting_label(k)) for k in state.waiting_on) or "nothing"
        return RunStateError(run_id, status, "pause", hint=(
            f"It waits at interrupt(s) {waiting} for a payload and runs nothing until one "
            "arrives; continue_(run_id, ...) delivers it, cancel(run_id) stops it."))
    return RunStateError(run_id, status, "pause")


def _why(paused_by: PausedBy) -> str:
    return f"reason: {paused_by.reason!r}" if paused_by.reason else "no reason given"


def _log_paused(run_id: str, reactor: Reactor, paused_by: PausedBy) -> None:
    log.info("reactorflow.run.paused run_id=%s reactor=%s by=%s reason=%s", run_id,
             reactor.name, paused_by.by, paused_by.reason or "-")


# -- resume --------------------------------------------------------------------------------------


async def resume(reactor: Reactor, run_id: str) -> Run:
    storage = config.current_storage()
    settings = config.settings()
    status, _, state = read_head(await operations.head_of(reactor, storage, run_id))
    refusal = resume_refusal(run_id, status, state)
    if refusal is not None:
        raise refusal  # waiting for its lock cannot help
    owner = operator_owner()
    if not await acquire(storage, run_id, owner, settings.lock_ttl, settings.lock_wait):
        raise LockTimeout(run_id, settings.lock_wait, "resume")
    try:
        ex = await operations.load_owned(reactor, storage, run_id, owner)
        refusal = resume_refusal(run_id, Status(ex.state.status), ex.state)
        if refusal is not None:
            raise refusal
        to_workers = in_workers(reactor, ex)
        await _mark_running(ex)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await release(storage, run_id, owner)
        raise
    log.info("reactorflow.run.resumed run_id=%s reactor=%s by=%s", run_id, reactor.name,
             audit.who())
    if to_workers:
        await release(storage, run_id, owner)  # save before release, release before enqueue
        queue.enqueue_run(run_id, reactor.name, version=ex.meta.version)
        return await operations.get(reactor, run_id)
    return await operations.snapshot(
        await operations.run_owned(reactor, storage, run_id, owner, ex, loaded=True))


def resume_refusal(run_id: str, status: Status, state: RunState) -> RunStateError | None:
    """Why `resume` refuses a run in `status` (None: it may be resumed)."""
    if status is Status.PAUSED and state.paused_by is not None:
        return None
    if status is Status.PAUSED:
        waiting = ", ".join(repr(waiting_label(k)) for k in state.waiting_on) or "nothing"
        return RunStateError(run_id, status, "resume", hint=(
            f"It is paused at interrupt(s) {waiting}, waiting for a payload, not by an "
            "operator: continue_(run_id, ...) delivers the payload and resumes it."))
    return RunStateError(run_id, status, "resume")


def in_workers(reactor: Reactor, ex: Execution) -> bool:
    """The run's work was handed to workers: it was dispatched (or its reactor always
    dispatches), it passed its `background` hand-off point, or it is an async reactor's child
    run."""
    return reactor.always_dispatch or ex.state.handed_off or ex.meta.parent_run is not None


async def _mark_running(ex: Execution) -> None:
    """Save the paused run `running` again (`run.resumed`), and re-arm its timer for a sleep
    (or a long retry wait) still to come: the one it parked with may have fired while the run
    was paused, finding nothing to do."""
    await ex.writer.save_state(Status.RUNNING, publish=True, paused_by=None,
                               events=[event(EventKind.RUN_RESUMED,
                                             detail=f"resumed by {audit.who()}",
                                             actor=audit.who())])
    wake_at = ex.state.wake_at
    if wake_at is not None and wake_at > clock.now():
        await arm_timer(ex, wake_at)
