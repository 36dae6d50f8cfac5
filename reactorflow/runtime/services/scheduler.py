"""Scheduled runs: `rf.schedule_once` and the scheduler daemon (`reactorflow scheduler`).

A schedule's stored record holds a cursor: the last tick handled. `schedule_once`, for each
`rf.Schedule` of each reactor declared in this process:

1. Loads the record, creating it with cursor = now when the schedule is seen for the first
   time (a new or newly deployed schedule fires only for ticks after that moment). A paused
   schedule is left alone.
2. Computes the ticks in (cursor, now] from the cron expression and timezone (no storage).
2. Finishes the pending ticks whose lease expired (claimed by a scheduler that died, or whose
   storage failed, before it started and recorded the run): takes each over with a
   compare-and-set on its lease (`Storage.schedule_relet`: one taker wins), then step 5.
3. Computes the ticks in (cursor, now] from the cron expression and timezone (no storage).
4. Claims them per `catch_up` by moving the cursor with an atomic compare-and-set
   (`Storage.schedule_advance`): `"all"` claims each tick in turn (the most recent
   `MAX_CATCH_UP`), `"latest"` and `"none"` claim up to the last tick at once. A tick that
   should fire (`"latest"` the last; `"none"` the last only if it is at most `MISSED_AFTER`
   seconds old, i.e. not missed during an outage) is recorded as pending, with a lease of
   `lock_ttl` seconds, in the same atomic write. Of concurrent schedulers, exactly one wins
   each claim; a loser stops for this schedule (the winner goes on).
5. For each pending tick it holds, resolves the inputs (the callable is called with the tick)
   and dispatches the run to a worker with the idempotency key
   `schedule:<reactor>:<name or index>:<tick ISO time>`, so a second start of one tick (a
   takeover racing a slow claimer) returns the first run. Then records the run's id
   (`last_run`), or the refused inputs (or a callable that raised: logged as
   `reactorflow.schedule.invalid_inputs`, recorded as `error`), clearing the pending tick in
   the same write.

So each tick that should fire starts exactly one run: a scheduler that dies between its claim
and its record leaves the tick pending, and the next pass of any scheduler after the lease
expires starts it (or finds the run its claimer started). Storage operations per tick are
constant: a load, a claim, the run's start and a record, whatever the number of runs stored.

`run_forever` calls `schedule_once`, then sleeps until the next tick of any schedule (at most
`MAX_SLEEP` seconds, to notice resumed schedules), surviving storage outages with the sweeper's
backoff.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NoReturn

from reactorflow import clock, config
from reactorflow.definition import registry
from reactorflow.definition.schedules import (
    MAX_CATCH_UP,
    CatchUp,
    Schedule,
    schedule_label,
    tick_inputs,
)
from reactorflow.errors import GateBusy, ReactorflowError, StorageConnectionError, StorageError
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import ScheduleState

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor
    from reactorflow.snapshot import Run

log = logging.getLogger("reactorflow.schedule")
MAX_SLEEP = 60.0
"""The longest `run_forever` sleeps between two passes (a resumed schedule is seen by then)."""
MISSED_AFTER = 60.0
"""Seconds after which a tick counts as missed for `catch_up="none"` (a scheduler that wakes
for a tick is milliseconds late; one that was down is later than this)."""
BACKOFF_FIRST = 1.0
BACKOFF_CAP = 60.0


def now() -> float:
    """The time schedules are evaluated at (seconds since the epoch): the one time read, on
    the engine's clock (`reactorflow.clock`: a test kit's fake clock drives schedules)."""
    return clock.now()


async def sleep(seconds: float) -> None:
    """The one wait of the scheduler daemon, on the engine's clock."""
    await clock.sleep(seconds)


@dataclass(frozen=True, slots=True)
class Entry:
    """One declared schedule: its reactor, declaration and storage key."""

    reactor: Reactor
    schedule: Schedule
    label: str

    @property
    def key(self) -> str:
        return f"{self.reactor.name}:{self.label}"

    def idempotency_key(self, tick: datetime) -> str:
        return f"schedule:{self.key}:{tick.astimezone(self.schedule.zone).isoformat()}"


def entries(reactors: Sequence[Reactor] | None = None) -> Iterator[Entry]:
    """The schedules of `reactors` (default: every reactor declared in this process)."""
    if reactors is None:
        found = (registry.lookup(name) for name in registry.names())
        reactors = [reactor for reactor in found if reactor is not None]
    for reactor in reactors:
        for index, schedule in enumerate(reactor.schedules):
            yield Entry(reactor, schedule, schedule_label(schedule, index))


def find(target: str) -> Entry:
    """The schedule `REACTOR` (its only or first one) or `REACTOR:NAME_OR_INDEX`.

    Args:
        target: The reactor's name, or its name, `:` and the schedule's name or index.

    Raises:
        ReactorflowError: No declared schedule matches.
    """
    for entry in entries():
        if target in (entry.key, entry.reactor.name):
            return entry
    known = ", ".join(e.key for e in entries()) or "none (import the modules that declare them)"
    raise ReactorflowError(f"no schedule {target!r}; the declared schedules: {known}")


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


async def schedule_once(*, reactors: Sequence[Reactor] | None = None) -> list[Run]:
    """Start a run for every schedule tick that is due now (see the module for the algorithm).

    Safe to call from any number of processes at once: each tick starts exactly one run.

    Args:
        reactors: Only these reactors' schedules (default: every reactor declared in this
            process).

    Returns:
        The snapshots of the runs this call started (status `running`: dispatched).

    Raises:
        StorageError: The storage failed (`StorageConnectionError`: it cannot be reached).
    """
    storage = config.current_storage()
    started: list[Run] = []
    for entry in list(entries(reactors)):
        started += await _handle(storage, entry, now())
    return started


async def _handle(storage: Storage, entry: Entry, at: float) -> list[Run]:
    now_ms = round(at * 1000)
    state = await storage.schedule_load(entry.key, now_ms)
    assert state is not None
    started = await _finish_lapsed(storage, entry, state, now_ms)
    if state.paused or state.cursor >= now_ms:
        return started
    policy = entry.schedule.catch_up
    due = deque(entry.schedule.ticks(_at(state.cursor), _at(now_ms)),
                maxlen=MAX_CATCH_UP if policy is CatchUp.ALL else 1)
    if not due:
        return started
    if policy is not CatchUp.ALL:
        last = _ms(due[-1])
        # "none": a tick missed while no scheduler ran is claimed (skipped), not fired
        fire = policy is CatchUp.LATEST or now_ms - last <= MISSED_AFTER * 1000
        if await storage.schedule_advance(entry.key, state.cursor, last,
                                          _lease() if fire else 0) and fire:
            started += await _fire(storage, entry, due[-1])
        return started
    expected = state.cursor
    for tick in due:
        if not await storage.schedule_advance(entry.key, expected, _ms(tick), _lease()):
            break  # another scheduler claimed it: it goes on from here
        expected = _ms(tick)
        started += await _fire(storage, entry, tick)
    return started


def _lease() -> int:
    """The lease expiry (ms) of a tick claimed now: `lock_ttl` seconds from now."""
    return round((now() + config.settings().lock_ttl) * 1000)


async def _finish_lapsed(storage: Storage, entry: Entry, state: ScheduleState,
                         now_ms: int) -> list[Run]:
    """Finish the pending ticks whose lease expired: their claimer died before recording."""
    started: list[Run] = []
    for tick, lease in state.pending:
        if lease > now_ms or not await storage.schedule_relet(entry.key, tick, lease,
                                                              _lease()):
            continue  # its claimer may still finish it, or another scheduler took it over
        log.warning("reactorflow.schedule.recovered schedule=%s tick=%s (claimed by a scheduler "
                    "that did not finish it)", entry.key, _at(tick).isoformat())
        started += await _fire(storage, entry, _at(tick))
    return started


async def _fire(storage: Storage, entry: Entry, tick: datetime) -> list[Run]:
    """Start the run of one claimed (pending) tick and clear it; refused inputs are logged
    and recorded."""
    try:
        run = await start_tick(entry, tick)
    except StorageError:
        log.error("reactorflow.schedule.pending schedule=%s tick=%s (claimed, but the run could "
                  "not be started: a scheduler starts it when the claim's lease expires)",
                  entry.key, tick.isoformat())
        raise
    except GateBusy as exc:  # the reactor's gate is busy (its last run still holds it, say)
        reason = f"GateBusy: {exc}"
        log.warning("reactorflow.schedule.busy schedule=%s tick=%s error=%s", entry.key,
                    tick.isoformat(), reason)
        await storage.schedule_record(entry.key, error=reason, tick=_ms(tick))
        return []
    except Exception as exc:  # the user's inputs or callable: recorded, never a crash
        reason = f"{type(exc).__name__}: {exc}"
        log.warning("reactorflow.schedule.invalid_inputs schedule=%s tick=%s error=%s",
                    entry.key, tick.isoformat(), reason)
        await storage.schedule_record(entry.key, error=reason, tick=_ms(tick))
        return []
    await storage.schedule_record(entry.key, last_run=run.id, tick=_ms(tick))
    log.info("reactorflow.schedule.started schedule=%s tick=%s run_id=%s%s", entry.key,
             tick.isoformat(), run.id, " (replayed)" if run.replayed else "")
    return [] if run.replayed else [run]


async def start_tick(entry: Entry, tick: datetime, *, keyed: bool = True) -> Run:
    """Dispatch the run of `tick` of a schedule, with the inputs the schedule gives that tick,
    under the tick's idempotency key (`schedule:<reactor>:<name or index>:<tick ISO time>`): a
    tick already started (by a scheduler or an earlier call) returns its run, `replayed`.
    Touches nothing of the schedule's own record (cursor, last run, error).

    Args:
        entry: The schedule (see `find`).
        tick: The tick, an aware datetime.
        keyed: False to start a run with no idempotency key (`schedules run-now`: each call
            starts one).

    Raises:
        ReactorflowError: The inputs are refused (`InputValidationError`), or a gate of the
            reactor is busy (`GateBusy`).
        StorageError: The storage failed.
    """
    key = entry.idempotency_key(tick) if keyed else None
    inputs = tick_inputs(entry.schedule, tick)
    if isinstance(inputs, Mapping):
        return await entry.reactor.dispatch(idempotency_key=key, **inputs)
    return await entry.reactor.dispatch(inputs, idempotency_key=key)


def next_due(after: float, reactors: Sequence[Reactor] | None = None) -> float | None:
    """The time of the next tick of any schedule of `reactors` (default: all) after `after`
    (None: no schedule)."""
    moment = _at(round(after * 1000))
    ticks = [e.schedule.next_tick(moment) for e in entries(reactors)]
    return min((tick.timestamp() for tick in ticks if tick is not None), default=None)


async def set_paused(target: str, paused: bool) -> Entry:
    """Pause or resume the schedule `REACTOR[:NAME_OR_INDEX]`; resuming skips the ticks of
    the paused time (the next one fires).

    Args:
        target: The reactor's name, with `:` and the schedule's name or index if it has more
            than one.
        paused: Pause (True) or resume (False).

    Raises:
        ReactorflowError: No declared schedule matches `target`.
        StorageError: The storage failed.
    """
    entry = find(target)
    await config.current_storage().schedule_pause(entry.key, paused, round(now() * 1000))
    log.info("reactorflow.schedule.%s schedule=%s", "paused" if paused else "resumed",
             entry.key)
    return entry


async def state_of(entry: Entry) -> ScheduleState | None:
    """The stored state of a schedule (None: no scheduler has seen it yet)."""
    return await config.current_storage().schedule_load(entry.key, None)


async def run_forever(*, reactors: Sequence[Reactor] | None = None,
                      on_started: Callable[[list[Run]], object] | None = None,
                      max_sleep: float = MAX_SLEEP, backoff: float = BACKOFF_FIRST,
                      backoff_cap: float = BACKOFF_CAP) -> NoReturn:
    """Start due runs, then sleep until the next tick, until cancelled; survives outages.

    1. `schedule_once`; hand the started runs to `on_started`.
    2. Sleep until the next tick of any schedule (at most `max_sleep` seconds), then repeat.
    3. A pass that raises is logged (`reactorflow.schedule.failed`) and tried again after
       `backoff` seconds, doubling up to `backoff_cap`; the first pass that succeeds again
       logs `reactorflow.schedule.resumed`.

    Any number of copies may run: each tick still starts one run.

    Args:
        reactors: Only these reactors' schedules (default: every reactor declared in this
            process, as it is at each pass).
        on_started: Called with the runs each pass started.
        max_sleep: The longest sleep between passes.
        backoff: Seconds to wait after the first failed pass.
        backoff_cap: The longest wait between failed passes.
    """
    failures = 0
    while True:
        try:
            started = await schedule_once(reactors=reactors)
        except Exception as exc:
            failures += 1
            delay = min(backoff * 2 ** min(failures - 1, 30), backoff_cap)
            log.warning("reactorflow.schedule.failed attempt=%d retry_in=%.1fs error=%s: %s",
                        failures, delay, type(exc).__name__, exc,
                        exc_info=not isinstance(exc, StorageConnectionError))
            await sleep(delay)
            continue
        if failures:
            log.warning("reactorflow.schedule.resumed after=%d failed passes", failures)
            failures = 0
        if on_started is not None and started:
            on_started(started)
        current = now()
        due = next_due(current, reactors)
        wait = max_sleep if due is None else min(max(due - current, 0.0), max_sleep)
        await sleep(wait + 0.001)  # just past the tick: it is due when we wake


async def listing() -> list[dict[str, object]]:
    """Every declared schedule as shown by `reactorflow schedules list` and the HTTP API: key,
    cron, timezone, catch-up policy, next fire time (ISO, in the schedule's timezone), paused,
    last run and last error.

    Raises:
        StorageError: The storage failed.
    """
    storage = config.current_storage()
    moment = _at(round(now() * 1000))
    found: list[dict[str, object]] = []
    for entry in entries():
        state = await storage.schedule_load(entry.key, None)
        after = max(moment, _at(state.cursor)) if state else moment
        following = entry.schedule.next_tick(after)
        found.append({
            "schedule": entry.key, "reactor": entry.reactor.name, "name": entry.label,
            "cron": entry.schedule.cron, "timezone": entry.schedule.timezone,
            "catch_up": entry.schedule.catch_up.value,
            "next": "" if following is None else following.astimezone(
                entry.schedule.zone).isoformat(),
            "paused": bool(state and state.paused),
            "last_run": state.last_run if state else "",
            "error": state.error if state else "",
        })
    return found


