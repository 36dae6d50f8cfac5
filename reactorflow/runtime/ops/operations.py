"""The run operations behind `Reactor.run/get/wait/undo/cancel/list_runs`."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from reactorflow import audit, clock, config, records
from reactorflow.definition import registry
from reactorflow.definition.graph import Plan, plan_for
from reactorflow.errors import (
    GateBusy,
    GateKeyError,
    LockTimeout,
    ReactorflowError,
    RunExists,
    RunNotFound,
    RunStateError,
    StorageConnectionError,
    WaitTimeout,
)
from reactorflow.protection import sealing
from reactorflow.protection.keys import RunKeys
from reactorflow.protection.resolve import run_keys, stored_keys
from reactorflow.records import Control, PausedBy, RunError, RunState
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.async_units import report_child_end
from reactorflow.runtime.engine.driver import drive, hold_due
from reactorflow.runtime.engine.execution import Execution, event, hooks_for
from reactorflow.runtime.engine.inputs import validate_inputs
from reactorflow.runtime.engine.map_reads import with_map_value
from reactorflow.runtime.engine.mode import CALLER, WAITS_FOR_THROWS, DriveMode
from reactorflow.runtime.engine.ownership import (
    acquire,
    held_by_operator,
    keep_alive,
    new_owner,
)
from reactorflow.runtime.engine.parking import after_park, due, is_parked, sleeping
from reactorflow.runtime.engine.pausing import requester, take_up
from reactorflow.runtime.gates import run_gates
from reactorflow.runtime.gates.parked import release_stopped
from reactorflow.runtime.gates.scope import Entry, GateHolds
from reactorflow.runtime.maps.fanout import parks_on_map, untaken_map
from reactorflow.runtime.ops import idempotency, lookup, migrations
from reactorflow.runtime.ops.creation import NewRun, new_run, release_and_send, store_run
from reactorflow.runtime.ops.snapshots import (
    assemble,
    build_run,
    decode_history,
    read_head,
    run_status,
)
from reactorflow.snapshot import Run, RunPage
from reactorflow.status import TERMINAL, ControlKind, EventKind, RollbackTrigger, Status
from reactorflow.storage.contract.decoding import reading
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import RunHead, StoredRun

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

log = logging.getLogger("reactorflow.run")


def new_run_id() -> str:
    """Time-ordered: 12 hex digits of milliseconds, then 12 random ones."""
    return f"{int(clock.now() * 1000):012x}{secrets.token_hex(6)}"


# -- starting ------------------------------------------------------------------------------------


async def start(reactor: Reactor, inputs: Any, fields: Mapping[str, Any], *,
                idempotency_key: str | None = None, dispatch: bool = False,
                retried_from: str | None = None) -> Run:
    reactor = registry.newest(reactor)  # new runs start on the newest version declared
    if inputs is not None and fields:
        raise ReactorflowError(
            f"reactor {reactor.name!r}: pass the inputs either as one {_inputs_name(reactor)} or "
            "as keyword arguments, not both"
        )
    if idempotency_key is not None:
        check_text(idempotency_key, f"reactor {reactor.name!r}: idempotency_key")
    value = validate_inputs(reactor, inputs if inputs is not None else dict(fields))
    progress = _Progress(new_run_id())
    try:
        return await _start(reactor, value, progress, idempotency_key=idempotency_key,
                            dispatch=dispatch or reactor.always_dispatch,
                            retried_from=retried_from)
    except StorageConnectionError as exc:
        if exc.run_id is not None:
            raise
        raise exc.starting(progress.run_id, stored=progress.stored) from exc


@dataclass(slots=True)
class _Progress:
    """How far a start got: the run it is about, and whether that run is stored (None while
    its store is in flight: a lost answer leaves it unknown)."""

    run_id: str
    stored: bool | None = False


async def _start(reactor: Reactor, value: Any, progress: _Progress, *,
                 idempotency_key: str | None, dispatch: bool,
                 retried_from: str | None) -> Run:
    plan = plan_for(reactor)
    storage = config.current_storage()
    run_id = progress.run_id
    owner = new_owner()
    hooks = hooks_for(reactor)
    holds = GateHolds(storage, run_id, hooks=hooks, reactor=reactor.name)
    entry = None
    run = await new_run(storage, reactor, plan, run_id, value, owner,
                        idempotency_key=idempotency_key, handed_off=dispatch,
                        retried_from=retried_from)
    while True:
        if idempotency_key is not None:
            winner = await idempotency.claim(storage, reactor.name, idempotency_key, run_id,
                                             owner)
            if winner is not None:
                progress.run_id, progress.stored = winner, True
                await idempotency.repair(storage, reactor.name, winner)
                return msgspec.structs.replace(await get(reactor, winner), replayed=True)
        if entry is None:
            entry = await _gates_at_start(storage, holds, reactor, value, idempotency_key,
                                          dispatch=dispatch, run=run)
        progress.stored = None
        try:
            await store_run(storage, run)
        except RunExists:
            if idempotency_key is None:
                await run_gates.abandon(holds, entry)
                raise
            continue  # this start stalled and its claim was taken over: replay the new one
        except BaseException:
            with anyio.CancelScope(shield=True):
                await run_gates.abandon(holds, entry)
            raise
        progress.stored = True
        break
    meta, state, started = run.meta, run.state, run.started
    if dispatch:
        # save before release, checkpoint before enqueue: the run is stored; its job goes
        # out while the release's reply comes back
        await release_and_send(storage, run_id, owner, lambda: queue.enqueue_run(
            run_id, reactor.name, version=reactor.version))
        return assemble(plan, run_id, reactor.name, Status.RUNNING, meta, state, {},
                        [started], meta.created_at, keys=run.keys)  # as handed over
    ex = Execution(plan=plan, storage=storage, owner=owner, meta=meta, state=state, steps={},
                   claims={}, hooks=hooks, gates=holds,
                   history=[started], keys=run.keys)  # a fresh run: it sees every event
    ex.run_entry = entry  # taken above (with `holds`), held until this execution stops
    return await snapshot(await run_owned(reactor, storage, run_id, owner, ex))


async def _gates_at_start(storage: Storage, holds: GateHolds, reactor: Reactor, value: Any,
                          idempotency_key: str | None, *, dispatch: bool,
                          run: NewRun) -> Entry | None:
    """The reactor's gates for a run about to be stored (`gates.runs.at_start`, which may
    store it: `run.creation.stored`); a refused start gives back the idempotency claim it took
    (nothing of the run is stored). A start interrupted after a hand-over stored its run
    (cancelled as the place was handed over) ends that run `aborted`, as an interruption
    ends a run it drives, and gives back the places it took."""
    try:
        return await run_gates.at_start(holds, reactor, value, dispatch=dispatch,
                                        creates=run.creation)
    except (GateBusy, GateKeyError):
        if idempotency_key is not None:
            await storage.release_idempotency(reactor.name, idempotency_key, holds.run_id)
        raise
    except BaseException as exc:
        if run.creation.stored:
            with anyio.CancelScope(shield=True):
                await _abort_stored(storage, holds, run, exc)
        raise


async def _abort_stored(storage: Storage, holds: GateHolds, run: NewRun,
                        cause: BaseException) -> None:
    """Save `aborted` a run a hand-over stored for a start that was interrupted before it
    drove the run, releasing its lock and the places the start holds; never raises."""
    state = msgspec.structs.replace(run.state, status=Status.ABORTED, updated_at=clock.now())
    try:
        await storage.save_state(
            run.creation.run_id, run.creation.owner, status=Status.ABORTED,
            previous_status=Status.RUNNING, state=records.encode(state),
            events=[records.encode(event(EventKind.RUN_ABORTED, detail=type(cause).__name__))],
            publish=True, release=True, gates=holds.places_to_release())
        log.warning("reactorflow.run.aborted run_id=%s reactor=%s cause=%s cut_off=-",
                    run.creation.run_id, run.creation.reactor, type(cause).__name__)
    except Exception:
        log.exception("reactorflow.run.abort_save_failed run_id=%s", run.creation.run_id)


async def mark_unrecoverable(storage: Storage, run_id: str, kind: str, reason: str) -> bool:
    """Mark a run that can never continue `failed` with the reason, and publish it. False when
    another execution held the run for `lock_wait` (nothing written: the caller may try again
    later); True when it is marked, or gone, or already ended."""
    settings = config.settings()
    owner = new_owner()
    head = await storage.load_head(run_id)
    if head is None or head.status in TERMINAL:  # (an unknown status is marked too)
        return True
    if not await acquire(storage, run_id, owner, settings.lock_ttl, settings.lock_wait):
        return False
    async with keep_alive(storage, run_id, owner, settings.lock_ttl):
        # (from the head read: a meta that cannot be read, often why it is marked, gets the
        # codec's keys without a data key, never a second failing read)
        keys = await stored_keys(storage, run_id, head.meta)
        state = RunState(status=Status.FAILED, updated_at=clock.now(),
                         error=RunError(None, kind, reason))
        await storage.save_state(run_id, owner, status=Status.FAILED,
                                 previous_status=head.status,
                                 state=records.encode(sealing.state(keys, state)),
                                 events=[records.encode(sealing.event(keys, event(
                                     EventKind.RUN_FAILED, detail=reason)))],
                                 clear_control=True, publish=True)
    log.error("reactorflow.run.unrecoverable run_id=%s kind=%s reason=%s", run_id, kind, reason)
    return True


def _inputs_name(reactor: Reactor) -> str:
    return reactor.inputs.__name__ if reactor.inputs is not None else "mapping"


# -- executing an owned run ----------------------------------------------------------------------


def runnable_claims(ex: Execution) -> bool:
    return any(key in ex.claims for key in ex.state.waiting_on)


async def load_owned(reactor: Reactor, storage: Storage, run_id: str, owner: str,
                     stored: StoredRun | None = None) -> Execution:
    """Lock, then load: read the run (with its claims) only while holding its lock (`stored`:
    as the caller read it when it took the lock, `Storage.lock_and_load`); a run on another
    version of the reactor is executed by that version's reactor, or migrated first when this
    process does not declare it (`migrations.on_version`).

    Raises:
        RunNotFound: no such run of the reactor.
        DefinitionChanged: the run's version is not declared here, with no migration from it.
        MigrationError: its migration was refused (nothing was written).
    """
    if stored is None:
        stored = await storage.load_run(run_id, history=True, claims=True)
    own_head(reactor, run_id, None if stored is None else stored.head)  # storage is the truth
    assert stored is not None
    reactor, stored = await migrations.on_version(reactor, storage, stored, owner)
    return await owned_execution(reactor, storage, stored, owner)


async def owned_execution(reactor: Reactor, storage: Storage, stored: StoredRun, owner: str, *,
                          check_graph: bool = True, plan: Plan | None = None,
                          keys: RunKeys | None = None) -> Execution:
    """The execution of a run read (with its history and claims) while `owner` held its lock;
    `check_graph=False` when the caller compared the run's graph with the reactor's already
    (a resume does, before it claims: a run's graph never changes); `plan`, the reactor's
    when the caller has it at hand; `keys`, the run's keys when the caller resolved them
    (else resolved here, once: `protection.resolve.run_keys`).

    Raises:
        CorruptRecord: a record or a sealed value of it cannot be read (nothing written).
        KeyUnavailable: a value of it is sealed under a key this process does not hold.
        DefinitionChanged: `check_graph` and the run's graph is not the reactor's.
    """
    if keys is None:
        with reading(stored.head.run_id, "meta"):
            meta = records.decode_meta(stored.head.meta)
        keys = await run_keys(storage, meta, stored.head.run_id)
    return Execution.from_stored(stored, plan=plan if plan is not None else plan_for(reactor),
                                 storage=storage, owner=owner, claims=stored.claims or {},
                                 hooks=hooks_for(reactor), check_graph=check_graph, keys=keys)


def needs_execution(ex: Execution) -> bool:
    status = ex.state.status
    if status is Status.RUNNING:
        # else an early or duplicate signal (a run parked at a map is always looked at)
        return not is_parked(ex) or due(ex) or parks_on_map(ex)
    if status is Status.ROLLING_BACK:
        return True
    if status is Status.HELD:  # only once its hold_timeout passed: it rolls back by itself
        return hold_due(ex.state, clock.now())
    return status == Status.PAUSED and (runnable_claims(ex) or ex.writer.control is not None)


async def run_owned(reactor: Reactor, storage: Storage, run_id: str, owner: str,
                    ex: Execution | None = None, *, mode: DriveMode = CALLER,
                    loaded: bool = False, stored: StoredRun | None = None) -> Execution:
    """Drive a run whose lock `owner` holds (count 1) until it settles, then release; returns
    the execution as it ended. `mode`, how it waits (`mode.DriveMode`): `WORKER`, a step
    waiting for an async unit parks the run instead of holding it (see `driver.park`);
    `WAITS_FOR_THROWS` (an in-process recovery), a fanned-out map's undo throws are waited for
    here instead of parking the run at them (see `maps.undo_throws`). `ex` is the run as this owner
    created it, or, with `loaded=True`, as it read it under the lock (it is then checked like
    a run this call loads: one that needs no execution is only released); `stored`, the run
    as the caller read it when it took the lock (`Storage.lock_and_load`: not read again).

    After releasing a paused run, check for a claim that arrived while the lock was held: its
    `continue_` could not take the lock, so the holder applies it (an accepted resume is never
    stranded); likewise a pause request its last write read back without stopping at it
    (`pause_left`) is settled under the lock taken again.
    """
    ttl = config.settings().lock_ttl
    while True:
        async with keep_alive(storage, run_id, owner, ttl) as hold:
            if ex is None or loaded:
                ex = ex or await load_owned(reactor, storage, run_id, owner, stored)
                loaded, stored = False, None
                if not needs_execution(ex):
                    return ex
            ex.writer.hold = ex.lease = hold  # its final save releases the lock in the same write
            await drive(ex, mode)
            ex.writer.hold = ex.lease = None
            waiting = list(ex.state.waiting_on) if ex.state.status == Status.PAUSED else []
        await after_release(reactor, storage, ex)
        paused_by = pause_left(ex)
        if paused_by is not None:
            return await _take_up_left(reactor, storage, ex, paused_by)
        if not waiting:
            return ex
        claims = await storage.claims(run_id)
        if not any(key in claims for key in waiting):
            return ex
        if not await storage.acquire_lock(run_id, owner, ttl):
            return ex  # another execution holds it and will apply the claim
        ex = None


def pause_left(ex: Execution) -> PausedBy | None:
    """Who asked for the pause request the execution's last write read back without stopping
    at it (it parked, handed off, snoozed, paused at an interrupt or halted), else None."""
    control = ex.writer.control
    if control is None or control.kind is not ControlKind.PAUSE:
        return None
    return requester(control)


async def _take_up_left(reactor: Reactor, storage: Storage, ex: Execution,
                        paused_by: PausedBy) -> Execution:
    """Settle a pause request the execution's last write read back (`pausing.take_up`),
    under the lock taken again: never stranded. Another execution that took the run
    meanwhile reads the request back itself."""
    ttl = config.settings().lock_ttl
    if not await storage.acquire_lock(ex.run_id, ex.owner, ttl):
        return ex
    async with keep_alive(storage, ex.run_id, ex.owner, ttl):
        fresh = await load_owned(reactor, storage, ex.run_id, ex.owner)
        await take_up(fresh, paused_by)
    return fresh


async def snapshot(ex: Execution) -> Run:
    """The run as the execution that just drove it left it (no need to read it back; only
    the history is read when the execution does not know exactly what storage kept)."""
    writer = ex.writer
    if writer.history is not None:
        history = decode_history(ex.run_id, writer.loaded_history or ()) + writer.history
    else:
        history = decode_history(ex.run_id, await ex.storage.history(ex.run_id))
    run = assemble(ex.plan, ex.run_id, ex.reactor, Status(ex.state.status), ex.meta, ex.state,
                   ex.records, history, ex.meta.created_at, values=ex.values, keys=ex.keys)
    if not ex.plan.map_keys:  # (no map: its value is no map's)
        return run
    return await with_map_value(run, ex.plan, ex.storage, keys=ex.keys)


async def after_release(reactor: Reactor, storage: Storage, ex: Execution) -> None:
    """What an execution does once it let go of its run: hand it to a worker after a
    background hand-off (checkpoint, release, then enqueue); after parking, enqueue it for when
    it is due (`parking.after_park`); for the child run of an async_reactor step that just
    ended, report to the parent."""
    if ex.enqueue_after_release:
        ex.enqueue_after_release = False
        delay, ex.enqueue_delay = ex.enqueue_delay, None
        queue.enqueue_run(ex.run_id, reactor.name, version=ex.meta.version, delay=delay)
    if is_parked(ex):
        await after_park(ex)
    if ex.meta.parent_run is not None:
        await report_child_end(storage, ex)


# -- reading -------------------------------------------------------------------------------------


async def head_of(reactor: Reactor, storage: Storage, run_id: str) -> RunHead:
    return own_head(reactor, run_id, await storage.load_head(run_id))


def own_head(reactor: Reactor, run_id: str, head: RunHead | None) -> RunHead:
    """`head`, the run's as read, when it is a run of `reactor`; else `RunNotFound`."""
    if head is None:
        raise RunNotFound(run_id, reactor.name)
    if head.reactor != reactor.name:
        raise RunNotFound(run_id, reactor.name, other_reactor=head.reactor)
    return head


async def get(reactor: Reactor, run_id: str) -> Run:
    if not isinstance(run_id, str) or not run_id:
        raise RunNotFound(str(run_id), reactor.name)
    storage = config.current_storage()
    stored = await storage.load_run(run_id, history=True)
    if stored is None:
        raise RunNotFound(run_id, reactor.name)
    if stored.head.reactor != reactor.name:
        raise RunNotFound(run_id, reactor.name, other_reactor=stored.head.reactor)
    plan = lookup.plan_or_none(migrations.declared_for(reactor, stored.head.meta))
    keys = await stored_keys(storage, run_id, stored.head.meta)
    return await with_map_value(build_run(plan, stored, stored.history or [], keys=keys), plan,
                                storage, keys=keys)


def recheck_interval(timeout: float | None) -> float:
    """How often a waiter re-reads the record in case a notification was lost."""
    if timeout is None:
        return 5.0
    return min(5.0, max(1.0, timeout / 10))


async def wait(reactor: Reactor, run_id: str, *, timeout: float | None = None) -> Run:
    storage = config.current_storage()
    deadline = None if timeout is None else clock.monotonic() + timeout
    interval = recheck_interval(timeout)
    async with storage.subscribe(run_id) as subscription:
        while True:
            run = await get(reactor, run_id)
            if run.status.is_settled:
                return run
            if deadline is None:
                await subscription.wait(interval)
                continue
            remaining = deadline - clock.monotonic()
            if remaining <= 0:
                assert timeout is not None
                untaken = await untaken_elements(reactor, storage, run)
                raise WaitTimeout(run_id, timeout, run.status, map=untaken,
                                  unclaimed=untaken is not None or await unclaimed(storage,
                                                                                    run))
            await clock.wait_signal(subscription.wait, min(remaining, interval),
                                    why=f"run {run_id} to settle")


HANDED_OVER = frozenset({EventKind.RUN_STARTED, EventKind.RUN_HANDED_OFF, EventKind.RUN_RESUMED,
                         EventKind.INTERRUPT_ACCEPTED})
"""The last event of a run that waits for a worker (a dispatch, a hand-off, a background
resume, a payload accepted for another execution to apply). An execution that takes the run
on holds its lock, and its steps add events."""


async def unclaimed(storage: Storage, run: Run) -> bool:
    """The run is running, its last event handed it over, and no execution holds it."""
    if run.status is not Status.RUNNING or not run.history:
        return False
    if run.history[-1].kind not in HANDED_OVER:
        return False
    return await storage.lock_owner(run.id) is None


async def untaken_elements(reactor: Reactor, storage: Storage, run: Run) -> str | None:
    """The fanned-out map a running run without an owner is parked at, when no worker has
    taken any of its elements (see `fanout.untaken_map`); else None."""
    if run.status is not Status.RUNNING or await storage.lock_owner(run.id) is not None:
        return None
    head = await storage.load_head(run.id)
    plan = lookup.plan_or_none(reactor)
    if head is None or plan is None:
        return None
    _, _, state = read_head(head)
    return await untaken_map(storage, run.id, plan, state.parked_on)


async def list_runs(reactor: Reactor, *, status: str | None, limit: int,
                    cursor: str | None, since: datetime | None = None,
                    until: datetime | None = None, correlation_id: str | None = None,
                    idempotency_key: str | None = None, version: int | None = None,
                    error_type: str | None = None) -> RunPage:
    return await lookup.list_runs(reactor=reactor.name, status=status, limit=limit,
                                  cursor=cursor, since=since, until=until,
                                  correlation_id=correlation_id,
                                  idempotency_key=idempotency_key, version=version,
                                  error_type=error_type)


# -- undo and cancel -----------------------------------------------------------------------------

_UNDOABLE = frozenset({Status.COMPLETED, Status.PAUSED, Status.ABORTED, Status.CANCELLED,
                       Status.HALTED, Status.HELD})


async def undo(reactor: Reactor, run_id: str) -> Run:
    storage = config.current_storage()
    settings = config.settings()
    head = await head_of(reactor, storage, run_id)
    if head.status not in _UNDOABLE and head.status != Status.RUNNING:
        raise RunStateError(run_id, head.status, "undo")  # waiting for its lock cannot help
    owner = new_owner()
    if not await acquire(storage, run_id, owner, settings.lock_ttl, settings.lock_wait):
        raise LockTimeout(run_id, settings.lock_wait, "undo")
    async with keep_alive(storage, run_id, owner, settings.lock_ttl) as hold:
        ex = await load_owned(reactor, storage, run_id, owner)
        ex.lease = hold  # losing the lock stops the undo from starting anything more
        status = ex.state.status
        if status not in _UNDOABLE and not only_sleeping(ex):
            raise RunStateError(run_id, status, "undo")
        if status is Status.HELD:  # the usual rollback of its failure (`drive`), to failed
            await storage.disarm_timer(run_id)  # a hold_timeout's: void
            with audit.acting(audit.who()):  # (its run.undo_requested names who asked)
                await drive(ex, WAITS_FOR_THROWS)
            return await get(reactor, run_id)
        await ex.writer.save_state(Status.ROLLING_BACK,
                                   events=[event(EventKind.RUN_UNDO_REQUESTED, actor=audit.who())],
                                   steps=ex.close_waiting(), rollback_trigger=RollbackTrigger.UNDO,
                                   cancel_reason="undone", waiting_on=[], deadlines={},
                                   timeout_at=None, parked_on={}, wake_at=None)
        await drive(ex, WAITS_FOR_THROWS)  # undo() returns the run as it ended
    await storage.disarm_timer(run_id)  # a sleep's timer is void
    return await get(reactor, run_id)


def only_sleeping(ex: Execution) -> bool:
    """A `running` run parked at sleeps alone (no async unit or map out, no retry due): an
    `undo` acts on it at once, as on a paused run."""
    return (ex.state.status is Status.RUNNING and is_parked(ex) and bool(sleeping(ex))
            and not ex.state.parked_on)


def check_text(value: object, what: str) -> None:
    """Refuse a non-`str` argument that would be stored as text (nothing is stored)."""
    if not isinstance(value, str):
        raise ReactorflowError(
            f"{what} must be a str, not {type(value).__name__}: pass text (for example "
            "str(value)); nothing was changed")


async def _cancel_turn(storage: Storage, run_id: str, owner: str, requested: bool) -> bool:
    """Take the run's lock for a cancel, or leave it to whoever holds it: an execution that
    drives the run honours the cancel's request at its next step boundary (no wait); an
    operator's action (pause, resume) reads no request back, and its turn ends in moments (wait
    for it, up to `lock_wait`); so does another request's turn (`requested` False). Looked at
    again when the lock was taken between the first look and the take: a pause that got there
    first must not leave the cancel pending until the run is resumed."""
    settings = config.settings()
    if not requested:
        return await acquire(storage, run_id, owner, settings.lock_ttl, settings.lock_wait)
    if held_by_operator(await storage.lock_owner(run_id)):
        return await acquire(storage, run_id, owner, settings.lock_ttl, settings.lock_wait)
    if await acquire(storage, run_id, owner, settings.lock_ttl, 0.0):
        return True
    holder = await storage.lock_owner(run_id)  # taken meanwhile: by whom (or let go since)?
    if holder is None or held_by_operator(holder):
        return await acquire(storage, run_id, owner, settings.lock_ttl, settings.lock_wait)
    return False


async def cancel(reactor: Reactor, run_id: str, *, reason: str = "") -> Run:
    check_text(reason, f"cancel(run {run_id!r}): reason")
    storage = config.current_storage()
    settings = config.settings()
    head = await head_of(reactor, storage, run_id)
    status = run_status(head)
    if status is Status.CANCELLED:
        return await get(reactor, run_id)
    if status.is_terminal or status is Status.ROLLING_BACK:
        raise RunStateError(run_id, status, "cancel")
    requested = await storage.request_control(run_id,
                                              records.encode(Control(ControlKind.CANCEL, reason,
                                                                     actor=audit.who())))
    owner = new_owner()
    if await _cancel_turn(storage, run_id, owner, requested):
        async with keep_alive(storage, run_id, owner, settings.lock_ttl):
            ex = await load_owned(reactor, storage, run_id, owner)
            if ex.state.status in (Status.PAUSED, Status.RUNNING, Status.HELD):
                retrying, failed = ex.close_retrying("the run was cancelled")
                await ex.writer.save_state(Status.CANCELLED,
                                           events=[*failed, event(EventKind.RUN_CANCELLED,
                                                                  detail=reason,
                                                                  actor=audit.who())],
                                           steps=ex.close_waiting() + retrying, publish=True,
                                           clear_control=True, wake_at=None,
                                           cancel_reason=reason, waiting_on=[], deadlines={},
                                           timeout_at=None, hold_until=None)
                await release_stopped(ex)  # what a parked run kept, a paused run's turn
                await storage.disarm_timer(run_id)  # a sleep's or a deadline's: void
                log.info("reactorflow.run.cancelled run_id=%s reactor=%s", run_id, reactor.name)
            else:
                await ex.writer.save_state(Status(ex.state.status), clear_control=True)
    elif not requested:  # its request was not left, and the run is still held
        raise LockTimeout(run_id, settings.lock_wait, "cancel")
    return await get(reactor, run_id)
