"""`rewind(run_id, to=step, inputs=None)` (api.md §15): undo a step and every step that depends
on it, newest first, with their undo handlers, then run them again, in the same run.

The protocol, in order:

1. Read the run's head: only a run whose work is in effect can be rewound (`completed`,
   `paused`, `held`, `cancelled`, `aborted`); else `rf.RunStateError`, nothing written.
2. Take the run's lock (waiting up to `lock_wait`) and read the run under it (a run of a
   version this process does not declare is migrated first).
3. Check, before anything is written: `to` is a step of the run's own graph
   (`rf.StepNotFound` lists them); `inputs` is a partial mapping of input fields, merged into
   the run's inputs and validated (`rf.InputValidationError`).
4. One write: `rolling_back` with trigger `REWIND` and the rewind's plan
   (`RunState.rewind`), event `run.rewinding`; a paused run's deadline timer and a held run's
   hold timer are disarmed.
5. Drive the run: the rollback undoes the plan's steps only, newest first, then the steps run
   again (`engine.rewinding.finish_rewind`), here, or in a worker for an `always_dispatch`
   reactor. Steps that do not depend on `to` keep their results and do not run again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow import audit, config, records
from reactorflow.definition import registry
from reactorflow.definition.graph import SEP, Plan
from reactorflow.errors import InputValidationError, LockTimeout, RunStateError, StepNotFound
from reactorflow.protection import fields
from reactorflow.records import NIL, RewindPlan
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.execution import Execution, event
from reactorflow.runtime.engine.inputs import validate_inputs
from reactorflow.runtime.engine.ownership import acquire, keep_alive, new_owner
from reactorflow.runtime.ops import operations
from reactorflow.runtime.ops.snapshots import run_status
from reactorflow.snapshot import Run
from reactorflow.status import EventKind, RollbackTrigger, Status

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

log = logging.getLogger("reactorflow.run")

REWINDABLE = frozenset({Status.COMPLETED, Status.PAUSED, Status.HELD, Status.CANCELLED,
                        Status.ABORTED})
"""The statuses of a run whose work is in effect: the runs a rewind takes back."""


async def rewind(reactor: Reactor, run_id: str, *, to: str,
                 inputs: Mapping[str, Any] | None = None) -> Run:
    """Rewind run `run_id` to step `to` (see the module)."""
    storage = config.current_storage()
    settings = config.settings()
    head = await operations.head_of(reactor, storage, run_id)
    status = run_status(head)
    if status not in REWINDABLE:
        raise RunStateError(run_id, status, "rewind")
    if inputs is not None and not isinstance(inputs, Mapping):
        raise InputValidationError(reactor.name, "(inputs)", "rewind takes the changed input "
                                   f"fields as a mapping, not a {type(inputs).__name__}")
    owner = new_owner()
    if not await acquire(storage, run_id, owner, settings.lock_ttl, settings.lock_wait):
        raise LockTimeout(run_id, settings.lock_wait, "rewind")
    try:
        async with keep_alive(storage, run_id, owner, settings.lock_ttl, release=False):
            ex = await operations.load_owned(reactor, storage, run_id, owner)
            if ex.state.status not in REWINDABLE:  # another operator acted first
                raise RunStateError(run_id, ex.state.status, "rewind")
            plan = _planned(ex, to, inputs)
            rewound = set(plan.steps)  # waits outside the rewind go on waiting afterwards
            await ex.writer.save_state(
                Status.ROLLING_BACK, rollback_trigger=RollbackTrigger.REWIND, rewind=plan,
                events=[event(EventKind.RUN_REWINDING, to, detail=", ".join(plan.steps),
                             actor=audit.who())],
                waiting_on=[k for k in ex.state.waiting_on if k not in rewound],
                deadlines={k: d for k, d in ex.state.deadlines.items() if k not in rewound},
                timeout_at=None, hold_until=None, wake_at=None, parked_on={})
            await storage.disarm_timer(run_id)  # a deadline's or a hold's: void
    except BaseException:
        await storage.release_lock(run_id, owner)
        raise
    own = registry.lookup(reactor.name, ex.meta.version) or reactor
    log.info("reactorflow.run.rewinding run_id=%s reactor=%s to=%s steps=%s", run_id,
             reactor.name, to, ",".join(plan.steps))
    if own.always_dispatch:
        await storage.release_lock(run_id, owner)
        queue.enqueue_run(run_id, own.name, version=own.version)
    else:
        await operations.run_owned(own, storage, run_id, owner, ex, loaded=True)
    return await operations.get(own, run_id)


def _planned(ex: Execution, to: str, inputs: Mapping[str, Any] | None) -> RewindPlan:
    """Step 3 of the module: the rewind's plan, or the refusal.

    Raises:
        StepNotFound: `to` is not a step of the run's own graph.
        InputValidationError: the merged inputs do not fit the inputs type.
    """
    plan = ex.plan
    node = plan.nodes.get(to) if isinstance(to, str) else None
    if node is None or SEP in to:
        raise StepNotFound(ex.run_id, str(to), [k for k in plan.nodes if SEP not in k])
    steps = _with_dependents(plan, to)
    encoded = NIL
    if inputs:
        merged = {**(msgspec.msgpack.decode(ex.keys.open(fields.INPUTS, ex.meta.inputs))
                     or {}), **inputs}
        encoded = ex.keys.seal_raw(fields.INPUTS,
                                   records.encode(validate_inputs(plan.reactor, merged)))
    return RewindPlan(to, steps, encoded)


def _with_dependents(plan: Plan, key: str) -> list[str]:
    """`key` and every root step that depends on it (directly or not), in graph order."""
    found = {key}
    for candidate in plan.levels[""].node_keys:  # (declaration order: dependencies first)
        if any(dep in found for dep in plan.nodes[candidate].deps):
            found.add(candidate)
    return [k for k in plan.levels[""].node_keys if k in found]
