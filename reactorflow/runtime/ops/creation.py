"""Storing a new run: its meta and first state, with its lock taken (or a child run of an
`async_reactor` step, stored once and released for a worker)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import msgspec

from reactorflow import audit, clock, config, records
from reactorflow.definition.graph import Plan, plan_for
from reactorflow.errors import RunExists
from reactorflow.protection import fields
from reactorflow.protection.keys import RunKeys
from reactorflow.protection.resolve import run_keys
from reactorflow.records import Event, RunMeta, RunState
from reactorflow.runtime.engine.execution import event, new_state
from reactorflow.runtime.engine.ownership import new_owner
from reactorflow.runtime.subjects.data_keys import new_run_keys
from reactorflow.runtime.subjects.digests import run_subject
from reactorflow.status import EventKind, Status
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import RunCreation

if TYPE_CHECKING:
    from reactorflow.definition.table import Declared

log = logging.getLogger("reactorflow.run")


@dataclass(slots=True)
class NewRun:
    """A run about to be stored: its records, and what `Storage.create_run` takes
    (`creation`, which a gate hand-over may store first: `creation.stored`)."""

    meta: RunMeta
    state: RunState
    started: Event
    creation: RunCreation
    keys: RunKeys


async def new_run(storage: Storage, reactor: Declared, plan: Plan, run_id: str, value: Any,
                  owner: str, *, idempotency_key: str | None = None, handed_off: bool = False,
                  parent: tuple[str, str] | None = None, retried_from: str | None = None,
                  parent_gates: tuple[str, list[str]] | None = None) -> NewRun:
    """The records of a new run, encoded for storage (nothing stored yet), and its keys: the
    resolver (`protection.resolve.run_keys`) is given the new meta with its inputs still
    clear, and the inputs are sealed with the keys it returns. A run of a subject (the
    reactor's `subject=`) stores the subject's digest in its meta, and enters the subject's
    index with its data key first (`subjects.data_keys.new_run_keys`, which creates the key).

    Raises:
        TypeError: the inputs cannot be encoded.
        InputValidationError: the subject template cannot be rendered over the inputs.
        ConfigurationError: the reactor has a subject and no codec is configured.
    """
    now = clock.now()
    meta = RunMeta(records.SCHEMA_VERSION, run_id, reactor.name, now, records.raw(value),
                   plan.fingerprint, idempotency_key, parent[0] if parent else None,
                   parent[1] if parent else None, retried_from,
                   redacted_inputs=plan.redactions.inputs,
                   redacted_results=plan.redactions.results,
                   parent_reactor=parent_gates[0] if parent_gates else None,
                   parent_gates=parent_gates[1] if parent_gates else [],
                   version=reactor.version, subject=run_subject(reactor, value))
    keys = await (run_keys(storage, meta, run_id) if meta.subject is None
                  else new_run_keys(storage, config.settings().codec, meta))
    if keys.seals:
        meta = msgspec.structs.replace(meta, inputs=keys.seal_raw(fields.INPUTS, meta.inputs))
    state = new_state(Status.RUNNING)
    state.handed_off = handed_off
    # a retry's new run: its first event names who retried (reactorflow.audit)
    started = event(EventKind.RUN_STARTED,
                    actor=audit.who() if retried_from is not None else "")
    creation = RunCreation(run_id, reactor.name, Status.RUNNING, records.encode(meta),
                           records.encode(state), now, owner, config.settings().lock_ttl,
                           [records.encode(started)], idempotency_key)
    return NewRun(meta, state, started, creation, keys)


async def store_run(storage: Storage, run: NewRun) -> None:
    """Store `run` and take its lock for its owner, unless a gate hand-over stored it already
    (`RunExists` if the id is taken)."""
    creation = run.creation
    if not creation.stored:
        if not await storage.create_run(
                creation.run_id, reactor=creation.reactor, status=creation.status,
                meta=creation.meta, state=creation.state, created_at=creation.created_at,
                owner=creation.owner, lock_ttl=creation.lock_ttl, events=creation.events,
                idempotency_key=creation.idempotency_key):
            raise RunExists(creation.run_id)
        creation.stored = True
    if log.isEnabledFor(logging.INFO):
        log.info("reactorflow.run.started run_id=%s reactor=%s", creation.run_id,
                 creation.reactor)


async def create_run(storage: Storage, reactor: Declared, plan: Plan, run_id: str, value: Any,
                     owner: str, *, parent: tuple[str, str] | None = None,
                     parent_gates: tuple[str, list[str]] | None = None,
                     ) -> tuple[RunMeta, RunState, Event]:
    """Store a new run and take its lock for `owner` (`RunExists` if the id is taken)."""
    run = await new_run(storage, reactor, plan, run_id, value, owner, parent=parent,
                        parent_gates=parent_gates)
    await store_run(storage, run)
    return run.meta, run.state, run.started


async def release(storage: Storage, run_id: str, owner: str) -> None:
    await storage.release_lock(run_id, owner)


async def release_and_send(storage: Storage, run_id: str, owner: str,
                           send: Callable[[], None]) -> None:
    """Release the lock of a stored run and hand its job to the queue (`send`), the job sent
    while the release's reply is on its way: one round trip less on the way to the worker.

    1. The release is sent first (its task runs up to its read of the reply), so it reaches
       the storage before the job can reach any worker: the worker that takes the job finds
       the lock free (if it ever came first, it would wait for the lock, as for any holder).
    2. The job is sent (`send`: a broker's enqueue, blocking on its own round trip).
    3. The release's reply is awaited (its errors raise here, as an awaited release's).

    The run is stored before either (checkpoint before enqueue; save before release). An
    error of either raises as itself (never wrapped in an exception group), once the release
    has ended: the send's first (`BrokerError`: the run is stored, its job is not), else the
    release's.
    """
    failed: list[Exception] = []

    async def releasing() -> None:
        try:
            await release(storage, run_id, owner)
        except Exception as exc:  # raised below, once the send was tried too
            failed.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(releasing)
        await anyio.lowlevel.checkpoint()  # the release task sends its command
        try:
            send()
        except Exception as exc:
            failed.insert(0, exc)
    if failed:
        raise failed[0]


async def create_child_run(child: Declared, inputs: Any, run_id: str, *,
                           parent: tuple[str, str],
                           parent_gates: tuple[str, list[str]] | None = None) -> None:
    """Store the child run of an async_reactor step (once: a repeat finds it stored), with the
    keys of the step's own gates (`parent_gates`: the parent's reactor, the keys), which the
    child run takes with its own."""
    storage = config.current_storage()
    owner = new_owner()
    try:
        await create_run(storage, child, plan_for(child), run_id, inputs, owner, parent=parent,
                         parent_gates=parent_gates)
    except RunExists:
        return
    await release(storage, run_id, owner)
