"""Parking: an execution in a worker that must wait (for an async unit, or for a step's retry
backoff) saves the run, releases it and holds nothing; a signal or a timer re-enqueues it.

1. The forward drive ends `PARKED` when nothing else can run but steps wait: for units or a
   fanned-out map (`Verdict.parked`: key -> since when) or for their next attempt
   (`Verdict.wake_at`).
2. `park` saves the run `running` with `parked_on` and `wake_at` and a `run.parked` event,
   releasing its lock in the same write. The run is still running: it keeps its gates
   (`gates.parked`), each place extended to the park's bound (`hold_bound`: until the run is
   looked at again) plus its TTL.
3. After the release, `after_park` checks the units and maps once more (one may have finished
   before the run parked: its signal saw nothing parked) and enqueues the run now if something
   is due, else for when the first thing falls due (a unit's wait running out, a retry's time,
   a map's periodic re-check).
4. A finished unit writes its record, then wakes its run if it parked on it
   (`async_units.wake_parked`): the unit writes before it reads, the run parks before it re-checks,
   so one of the two always sees the other.
5. A job for a parked run acts only if something is `due` (a run parked at a map is always
   looked at: see `maps.fanout`); an early or duplicate signal writes nothing. Should every
   signal be lost, the run is `running` with no lock holder: the sweeper recovers it.
6. A rollback parks the same way (saved `rolling_back`) while a fanned-out map's elements
   are still in flight (`maps.inflight`) or its undo jobs are out (`maps.undo_throws`); each late
   element's settle, the throw's last undo, or the re-check every `async_wait_timeout`, takes
   it on again.
7. A run that parks until a moment far enough ahead (a sleep's deadline, always; a retry's next
   attempt more than `park_after` seconds away) arms its timer in storage before its park save
   (`Storage.arm_timer`; `services.timers` fires it) instead of a delayed job: the wait costs
   storage only, however long, and survives every process. A shorter retry wait is a delayed
   job, as before.
8. A run that ends while steps wait for their next attempt (cancelled while parked, or halted
   or failed by another step) fails those steps (`Execution.close_retrying`): their bodies
   started and no attempt follows, so a rollback or `undo` compensates them. A job for the
   ended run finds nothing to do (`operations.needs_execution`) and writes nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from reactorflow import clock, config
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.async_units import FINISHED, unit_finished
from reactorflow.runtime.engine.execution import event
from reactorflow.runtime.engine.kinds import handler_of
from reactorflow.runtime.gates.parked import keep_while_parked
from reactorflow.status import EventKind, Status, StepStatus

if TYPE_CHECKING:
    from reactorflow.runtime.engine.execution import Execution

log = logging.getLogger("reactorflow.run")


def is_parked(ex: Execution) -> bool:
    state = ex.state
    return (state.status in (Status.RUNNING, Status.ROLLING_BACK)
            and bool(state.parked_on or state.wake_at))


def _units(ex: Execution, parked: dict[str, float] | None = None) -> dict[str, float]:
    """The async units the run parked (or parks) on (unit key -> since when); maps apart."""
    nodes = ex.plan.nodes
    return {key: since for key, since in (ex.state.parked_on if parked is None else parked).items()
            if key not in nodes or nodes[key].spec.map is None}


def sleeping(ex: Execution) -> list[str]:
    """The sleep steps of the run that wait for their deadline (`sleeps`)."""
    return [key for key, record in ex.records.items()
            if record.wake_at is not None and record.status == StepStatus.WAITING]


def _timer_due(ex: Execution, wake_at: float | None) -> float | None:
    """When a run parking with `wake_at` arms its timer (see 7), or None (a delayed job)."""
    if wake_at is None:
        return None
    if wake_at - clock.now() > config.settings().park_after or sleeping(ex):
        return wake_at
    return None


async def arm_timer(ex: Execution, due_at: float) -> None:
    """Arm the run's timer for `due_at` (before the save that parks or pauses the run: a timer
    fired before it finds nothing due and writes nothing), and tell the job queue, whose
    workers fire it (`services.timers`)."""
    ex.timer_at = due_at
    await ex.storage.arm_timer(ex.run_id, ex.reactor, due_at, ex.meta.version)
    queue.timer_armed(due_at)


def _due_times(ex: Execution, parked: dict[str, float], wake_at: float | None) -> list[float]:
    timeout = config.settings().async_wait_timeout
    units = _units(ex, parked)
    times = [since + timeout for since in units.values()]
    if len(units) < len(parked):  # a map: re-checked every timeout
        times.append(clock.now() + timeout)
    if wake_at is not None:
        times.append(wake_at)
    return times


def due(ex: Execution) -> bool:
    """A parked run has something to do: a unit it waits for finished (its record is loaded),
    a unit's wait ran out (its reader fails), or a step's next attempt is due."""
    units = _units(ex)
    if any(ex.status_of(key) in FINISHED for key in units):
        return True
    now = clock.now()
    timeout = config.settings().async_wait_timeout
    if any(since + timeout <= now for since in units.values()):
        return True
    return ex.state.wake_at is not None and ex.state.wake_at <= now


def hold_bound(ex: Execution, parked: dict[str, float], wake_at: float | None) -> float:
    """Seconds from now until a run parking on `parked` (units, maps) or until `wake_at` is
    looked at again (`after_park` enqueues it for then); a rollback's re-check."""
    timeout = config.settings().async_wait_timeout
    if ex.state.status is Status.ROLLING_BACK:
        return timeout
    now = clock.now()
    return max(0.0, min(_due_times(ex, parked, wake_at), default=now + timeout) - now)


async def park(ex: Execution, units: dict[str, float], wake_at: float | None) -> None:
    """Save the run parked (`running`, keeping its gates for `hold_bound` plus their TTLs, see
    `gates.parked`): the last write of this execution."""
    asleep = sleeping(ex)
    waits = [*units, *asleep, *(["retry"] if wake_at is not None and not asleep else [])]
    status = Status.ROLLING_BACK if ex.state.status is Status.ROLLING_BACK else Status.RUNNING
    await keep_while_parked(ex, hold_bound(ex, units, wake_at))
    due_at = _timer_due(ex, wake_at)
    if due_at is not None:  # before the save: a timer without its park finds nothing due
        await arm_timer(ex, due_at)
    await ex.writer.save_state(status, final=True, parked_on=units, wake_at=wake_at,
                               waiting_on=[],
                               events=[event(EventKind.RUN_PARKED, detail=", ".join(waits))])
    log.info("reactorflow.run.parked run_id=%s reactor=%s waits=%s", ex.run_id, ex.reactor,
             ",".join(waits))


async def after_park(ex: Execution) -> None:
    """Once released: enqueue the run now if something fell due meanwhile, else for when the
    first thing falls due."""
    if ex.state.status is Status.ROLLING_BACK:  # a fanned-out map's elements or undos are out
        settled = [await _parked_check(ex, key, rolling_back=True) for key in ex.state.parked_on]
        delay = None if any(settled) else config.settings().async_wait_timeout
        queue.enqueue_run(ex.run_id, ex.reactor, delay=delay, version=ex.meta.version)
        return
    for key in _units(ex):
        await unit_finished(ex, key)
    if due(ex) or await _settled_at_kind(ex):
        queue.enqueue_run(ex.run_id, ex.reactor, version=ex.meta.version)
        return
    if ex.timer_at is not None:  # its timer wakes it (a unit's wait may still come first)
        times = _due_times(ex, ex.state.parked_on, None) if ex.state.parked_on else []
    else:
        times = _due_times(ex, ex.state.parked_on, ex.state.wake_at)
    if times:
        queue.enqueue_run(ex.run_id, ex.reactor, version=ex.meta.version,
                          delay=max(0.0, min(times) - clock.now()))


async def _parked_check(ex: Execution, key: str, *, rolling_back: bool) -> bool:
    """Whether what the run parked at step `key` waits for settled, as its kind says
    (`kinds.KindHandler`: a fanned-out map's elements, or its undo jobs); False for a key that
    is no step, or whose kind has no such check."""
    node = ex.plan.nodes.get(key)
    if node is None:
        return False
    handler = handler_of(node.kind)
    check = handler.undone_while_parked if rolling_back else handler.settled_while_parked
    return check is not None and await check(ex, key)


async def _settled_at_kind(ex: Execution) -> bool:
    """Whether a step the run parked at has settled what it waits for (its last signal may have
    come before the run parked: then nobody else re-enqueues it)."""
    for key in ex.state.parked_on:
        if await _parked_check(ex, key, rolling_back=False):
            return True
    return False
