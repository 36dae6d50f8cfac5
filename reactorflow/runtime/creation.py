"""Storing a new run: its meta and first state, with its lock taken (or a child run of an
`async_reactor` step, stored once and released for a worker)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from reactorflow import clock, config, records
from reactorflow.definition.graph import Plan, plan_for
from reactorflow.errors import RunExists
from reactorflow.records import Event, RunMeta, RunState
from reactorflow.runtime.execution import event, new_state
from reactorflow.runtime.ownership import new_owner
from reactorflow.status import Status
from reactorflow.storage.base import Storage

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

log = logging.getLogger("reactorflow.run")


async def create_run(storage: Storage, reactor: Reactor, plan: Plan, run_id: str, value: Any,
                     owner: str, *, idempotency_key: str | None = None, handed_off: bool = False,
                     parent: tuple[str, str] | None = None,
                     retried_from: str | None = None,
                     parent_gates: tuple[str, list[str]] | None = None,
                     ) -> tuple[RunMeta, RunState, Event]:
    """Store a new run and take its lock for `owner` (`RunExists` if the id is taken)."""
    now = clock.now()
    meta = RunMeta(records.SCHEMA_VERSION, run_id, reactor.name, now, records.raw(value),
                   plan.fingerprint, idempotency_key, parent[0] if parent else None,
                   parent[1] if parent else None, retried_from,
                   redacted_inputs=plan.redactions.inputs,
                   redacted_results=plan.redactions.results,
                   parent_reactor=parent_gates[0] if parent_gates else None,
                   parent_gates=parent_gates[1] if parent_gates else [])
    state = new_state(Status.RUNNING)
    state.handed_off = handed_off
    started = event("run.started")
    created = await storage.create_run(
        run_id, reactor=reactor.name, status=Status.RUNNING, meta=records.encode(meta),
        state=records.encode(state), created_at=now, owner=owner,
        lock_ttl=config.settings().lock_ttl, events=[records.encode(started)],
    )
    if not created:
        raise RunExists(run_id)
    if log.isEnabledFor(logging.INFO):
        log.info("reactorflow.run.started run_id=%s reactor=%s", run_id, reactor.name)
    return meta, state, started


async def release(storage: Storage, run_id: str, owner: str) -> None:
    await storage.release_lock(run_id, owner)


async def create_child_run(child: Reactor, inputs: Any, run_id: str, *,
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
