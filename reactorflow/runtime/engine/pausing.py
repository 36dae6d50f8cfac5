"""An operator's pause (`reactor.pause`), as the engine writes it.

A run is paused by an operator in one of two places, and ends the same in both: `paused`,
waiting on nothing, with `RunState.paused_by` set and a `run.paused` event naming who and why.

1. A run an execution drives: `pause` leaves a `ControlKind.PAUSE` request; the drive reads it
   back at its next checkpoint, starts nothing more, lets the steps in flight finish, and
   `driver.conclude` saves it paused (`Ending.STOPPED`), releasing its lock and its gates in the
   same write, as a pause at an interrupt does.
2. A run no execution holds (parked at a sleep, an async unit or a fanned-out map, snoozed
   while a gate is busy, waiting for a worker): `pause_unheld` saves it paused under its lock
   without waking it. Its `parked_on` and `wake_at` are kept for `resume`, and a sleep's timer
   stays armed: fired while the run is paused, its job finds nothing to do
   (`operations.needs_execution`) and writes nothing.
3. A request read back by a final save that does not stop at a step boundary (a park, a
   hand-off, a snooze, a pause at an interrupt) would be stranded: the execution takes the
   lock again after its release and settles it (`take_up`), as `pause` does when it gets the
   lock after leaving its request. A pause is applied once: `applied` looks for its event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from reactorflow import clock, records
from reactorflow.records import Control, Event, PausedBy
from reactorflow.runtime.engine.execution import event
from reactorflow.runtime.gates.parked import release_stopped
from reactorflow.status import EventKind, Status

if TYPE_CHECKING:
    from reactorflow.runtime.engine.execution import Execution


def paused_event(paused_by: PausedBy) -> Event:
    """The `run.paused` event of an operator's pause."""
    reason = f": {paused_by.reason}" if paused_by.reason else ""
    return event(EventKind.RUN_PAUSED, detail=f"paused by {paused_by.by}{reason}",
                 actor=paused_by.by)


def requester(control: Control) -> PausedBy:
    """Who asked for the pause `control` requests (a request written without it: unknown)."""
    if control.paused_by is not None:
        return control.paused_by
    return PausedBy("unknown", clock.now(), control.reason)


async def pause_unheld(ex: Execution, paused_by: PausedBy, *, clear_control: bool) -> None:
    """Save `paused` a `running` run that no execution drives (or one paused at an interrupt
    since a pause was requested), read under the lock `ex` holds (see the module, 2), and give
    back the gates it kept while parked; it waits on nothing now (an interrupt's deadline and
    timer apply again once `resume` has driven it back to its wait). `clear_control`: the
    pending request is this pause's own (it asked a holder first), removed in the same write."""
    await ex.writer.save_state(Status.PAUSED, publish=True, clear_control=clear_control,
                               events=[paused_event(paused_by)], paused_by=paused_by,
                               waiting_on=[], deadlines={}, timeout_at=None)
    await release_stopped(ex)


def applied(ex: Execution, paused_by: PausedBy) -> bool:
    """Whether the run's history, as `ex` read it, shows the pause of `paused_by` applied (by
    the execution that read the request back, or by `take_up` earlier)."""
    detail = paused_event(paused_by).detail
    for raw in ex.writer.loaded_history or ():
        try:
            past = records.decode_event(raw)
        except (msgspec.DecodeError, TypeError, ValueError):
            continue
        if past.kind is EventKind.RUN_PAUSED and past.detail == detail and (
                past.at >= paused_by.at):
            return True
    return False


async def take_up(ex: Execution, paused_by: PausedBy) -> bool:
    """Under the lock `ex` holds, settle the pause request of `paused_by` left earlier (its
    holder may have stopped without reading it back). Applied already: True, nothing written.
    Still owed on a `running` run, or on a run that paused at an interrupt since (the request
    came first): applied now (the run waits on nothing until `resume`), True. Otherwise (it
    ended, or another pause holds it) the request is withdrawn and False returned."""
    if applied(ex, paused_by):
        return True
    state = ex.state
    if state.status is Status.RUNNING or (state.status is Status.PAUSED
                                         and state.paused_by is None):
        await pause_unheld(ex, paused_by, clear_control=True)
        return True
    await ex.writer.save_state(Status(state.status), clear_control=True)
    return False
